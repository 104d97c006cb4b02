//! Fault injection for reliability tests (docs/hub.md §5): a spec such as
//! `5xx:0.2,reset:x1,delay:1@1500` names modes, each firing with a probability (`0.2`) or for the
//! next N eligible requests (`x1`), with an optional parameter after `@` (milliseconds for `delay`,
//! seconds for `ratelimit`, the bit to flip for the `flip-*` modes) and an optional request-path
//! filter after `=` (`flip-header:x1@9003=model-00003-of-00046.safetensors`).

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// What a fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultMode {
    /// `5xx`: answer 503 before handling (any request).
    ServerError,
    /// `ratelimit`: answer 429 with `RateLimit`/`Retry-After` (any request).
    RateLimit,
    /// `delay`: sleep `@ms` before handling (any request).
    Delay,
    /// `reset`: file bodies stop half-way with a connection error.
    Reset,
    /// `ignore-range`: a ranged file request gets 200 and the whole body.
    IgnoreRange,
    /// `whole-206`: a ranged request gets a correct-looking 206 header but the whole object.
    Whole206,
    /// `truncate`: a file body is cut in half with a matching (short) `Content-Length`.
    Truncate,
    /// `drop-after-commit`: a commit is applied, then its response is lost mid-body.
    DropAfterCommit,
    /// `corrupt-upload`: one byte of an LFS upload body (basic or part) is flipped on arrival, as
    /// a corrupting link would; the hub then rejects the object (400, digest mismatch).
    CorruptUpload,
    /// `truncate-upload`: an LFS upload body loses its second half on arrival; the hub then
    /// rejects the object (400, size mismatch).
    TruncateUpload,
    /// `reset-request`: a request with a body (POST, PUT) is read half-way, then its connection
    /// is dropped without an answer; nothing of it is applied.
    ResetRequest,
    /// `flip-<kind>`: one bit of one request kind's answer (reads) or body (uploads) inverted in
    /// transit, as a link, proxy or mirror without end-to-end integrity would (`server::flips`).
    Flip(FlipKind),
    /// `redirect-307`: an LFS file's redirect to the CDN is a 307 whose `Content-Length` is that
    /// of its own short body, not the file's (as some Hub answers are; needs `--cdn-addr`).
    Redirect307,
    /// `xet-hash`: resolve answers carry `X-Xet-Hash` and tree / paths-info entries of LFS files
    /// `xetHash` (the Hub's Xet-backed answers).
    XetHash,
    /// `commit-504`: a commit is answered 504 after `@ms` (the Hub's 60 s timeout), and lands
    /// only after the client has next asked the branch (its refs or revision).
    Commit504,
    /// `binary-inline`: a commit's inline `file` whose content is binary (a NUL byte) is refused,
    /// as the Hub refuses it (binary content goes through LFS, as preupload says).
    BinaryInline,
    /// `preupload-256`: `/preupload` takes at most 256 paths a call (the Hub's cap).
    PreuploadCap,
}

/// The request kinds a `flip-*` fault can corrupt: the answers fetch and pull read, and the
/// bodies the upload stages send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FlipKind {
    /// `flip-revision`: the JSON answer of `GET /api/{type}s/{repo}[/revision/{rev}]`.
    Revision,
    /// `flip-tree`: the JSON answer of a tree page.
    Tree,
    /// `flip-paths-info`: the JSON answer of `POST …/paths-info/{rev}`.
    PathsInfo,
    /// `flip-resolve`: one header value of a `HEAD …/resolve/…` answer (commit, etag, linked
    /// etag and size, location).
    Resolve,
    /// `flip-header`: a ranged file answer that lies inside a safetensors header `[0, 8+N)`
    /// (what reads of a header ask for).
    Header,
    /// `flip-payload`: any other ranged file answer (a unit's chunks, a negative control's read).
    Payload,
    /// `flip-root`: a whole-file (range-less) GET answer.
    Root,
    /// `flip-lfs-batch`: the body of a `POST {repo}.git/info/lfs/objects/batch`.
    LfsBatch,
    /// `flip-put`: the body of an LFS upload (basic `PUT` or a part).
    Put,
    /// `flip-verify`: the body of an LFS verify `POST`.
    Verify,
    /// `flip-preupload`: the body of `POST …/preupload/{rev}`.
    Preupload,
    /// `flip-commit`: the NDJSON body of `POST …/commit/{rev}`.
    Commit,
}

impl FlipKind {
    /// Every kind, answers first (the order of the campaign's table).
    pub const ALL: [FlipKind; 12] = [
        FlipKind::Revision,
        FlipKind::Tree,
        FlipKind::PathsInfo,
        FlipKind::Resolve,
        FlipKind::Header,
        FlipKind::Payload,
        FlipKind::Root,
        FlipKind::LfsBatch,
        FlipKind::Put,
        FlipKind::Verify,
        FlipKind::Preupload,
        FlipKind::Commit,
    ];

    /// The spec name after `flip-`.
    pub fn name(self) -> &'static str {
        match self {
            FlipKind::Revision => "revision",
            FlipKind::Tree => "tree",
            FlipKind::PathsInfo => "paths-info",
            FlipKind::Resolve => "resolve",
            FlipKind::Header => "header",
            FlipKind::Payload => "payload",
            FlipKind::Root => "root",
            FlipKind::LfsBatch => "lfs-batch",
            FlipKind::Put => "put",
            FlipKind::Verify => "verify",
            FlipKind::Preupload => "preupload",
            FlipKind::Commit => "commit",
        }
    }

    /// True for the kinds that corrupt what the client sends (uploads), false for answers.
    pub fn request_side(self) -> bool {
        matches!(
            self,
            FlipKind::LfsBatch
                | FlipKind::Put
                | FlipKind::Verify
                | FlipKind::Preupload
                | FlipKind::Commit
        )
    }
}

/// The `@param` of a `flip-*` rule given none: a bit chosen at random where the fault fires.
pub const RANDOM_BIT: u64 = u64::MAX;

impl FaultMode {
    fn parse(s: &str) -> Option<FaultMode> {
        Some(match s {
            "5xx" => FaultMode::ServerError,
            "ratelimit" => FaultMode::RateLimit,
            "delay" => FaultMode::Delay,
            "reset" => FaultMode::Reset,
            "ignore-range" => FaultMode::IgnoreRange,
            "whole-206" => FaultMode::Whole206,
            "truncate" => FaultMode::Truncate,
            "drop-after-commit" => FaultMode::DropAfterCommit,
            "corrupt-upload" => FaultMode::CorruptUpload,
            "truncate-upload" => FaultMode::TruncateUpload,
            "reset-request" => FaultMode::ResetRequest,
            "redirect-307" => FaultMode::Redirect307,
            "xet-hash" => FaultMode::XetHash,
            "commit-504" => FaultMode::Commit504,
            "binary-inline" => FaultMode::BinaryInline,
            "preupload-256" => FaultMode::PreuploadCap,
            other => {
                let kind = other.strip_prefix("flip-")?;
                FaultMode::Flip(FlipKind::ALL.into_iter().find(|k| k.name() == kind)?)
            }
        })
    }
}

/// When a rule fires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trigger {
    /// With this probability on each eligible request.
    Probability(f64),
    /// On the next N eligible requests.
    Count(u64),
    /// `xN+K`: on N eligible requests after letting the next K through.
    After {
        /// Eligible requests still let through.
        skip: u64,
        /// Then fired on this many.
        count: u64,
    },
}

/// One rule of a spec.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRule {
    /// The mode.
    pub mode: FaultMode,
    /// When it fires.
    pub trigger: Trigger,
    /// `@param` (delay ms, ratelimit seconds, the bit a `flip-*` rule inverts: of the file for
    /// ranged file answers, of the body otherwise; [`RANDOM_BIT`] when none was given).
    pub param: u64,
    /// `=PATH`: the rule applies only to requests whose path contains this text.
    pub path: Option<String>,
}

/// A parsed fault spec (empty: no faults).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultSpec {
    /// The rules, checked in order.
    pub rules: Vec<FaultRule>,
}

impl FromStr for FaultSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<FaultSpec, String> {
        let mut rules = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (item_rest, path) = match item.split_once('=') {
                Some((r, p)) if !p.is_empty() => (r, Some(p.to_owned())),
                Some(_) => return Err(format!("fault `{item}`: `=` names no path")),
                None => (item, None),
            };
            let (head, param) = match item_rest.split_once('@') {
                Some((h, p)) => (
                    h,
                    Some(
                        p.parse::<u64>()
                            .map_err(|_| format!("fault `{item}`: `@{p}` is not an integer"))?,
                    ),
                ),
                None => (item_rest, None),
            };
            let (mode, trig) = head.split_once(':').unwrap_or((head, "1"));
            let mode = FaultMode::parse(mode).ok_or_else(|| {
                format!("unknown fault mode `{mode}` (known: 5xx, ratelimit, delay, reset, ignore-range, whole-206, truncate, drop-after-commit, corrupt-upload, truncate-upload, reset-request, flip-{{revision, tree, paths-info, resolve, header, payload, root, lfs-batch, put, verify, preupload, commit}}, redirect-307, xet-hash, commit-504, binary-inline, preupload-256)")
            })?;
            let count = |n: &str| -> Result<u64, String> {
                n.parse()
                    .map_err(|_| format!("fault `{item}`: `{n}` is not a count"))
            };
            let trigger = if let Some(n) = trig.strip_prefix('x') {
                match n.split_once('+') {
                    Some((n, k)) => Trigger::After {
                        skip: count(k)?,
                        count: count(n)?,
                    },
                    None => Trigger::Count(count(n)?),
                }
            } else {
                let p: f64 = trig
                    .parse()
                    .map_err(|_| format!("fault `{item}`: `{trig}` is not a probability"))?;
                if !(0.0..=1.0).contains(&p) {
                    return Err(format!("fault `{item}`: probability {p} is outside 0..=1"));
                }
                Trigger::Probability(p)
            };
            let param = match (param, mode) {
                (Some(p), _) => p,
                (None, FaultMode::Delay) => 1000,
                (None, FaultMode::Flip(_)) => RANDOM_BIT,
                (None, _) => 0,
            };
            rules.push(FaultRule {
                mode,
                trigger,
                param,
                path,
            });
        }
        Ok(FaultSpec { rules })
    }
}

/// Live fault state of a running server (counts decrement as rules fire).
#[derive(Debug, Default)]
pub struct Faults {
    rules: Mutex<Vec<FaultRule>>,
    fired: AtomicU64,
}

impl Faults {
    /// Replace the active spec.
    pub fn set(&self, spec: FaultSpec) {
        *self.rules.lock().unwrap_or_else(|e| e.into_inner()) = spec.rules;
    }

    /// If a rule for `mode` fires now, its parameter.
    pub fn fire(&self, mode: FaultMode) -> Option<u64> {
        self.fire_where(mode, "", |_| true)
    }

    /// True when some rule of `mode` is set (so a caller can skip work to classify a request).
    pub fn armed(&self, mode: FaultMode) -> bool {
        self.rules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|r| r.mode == mode)
    }

    /// If a rule for `mode` fires now on a request to `path`, its parameter. A rule whose path
    /// filter `path` does not contain, or whose parameter `eligible` refuses (a bit this answer
    /// does not carry), is not eligible: its count is not spent.
    pub fn fire_where(
        &self,
        mode: FaultMode,
        path: &str,
        eligible: impl Fn(u64) -> bool,
    ) -> Option<u64> {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        let applies = |r: &FaultRule| {
            r.mode == mode
                && r.path.as_deref().is_none_or(|p| path.contains(p))
                && eligible(r.param)
        };
        for r in rules.iter_mut().filter(|r| applies(r)) {
            match &mut r.trigger {
                Trigger::Count(n) if *n > 0 => *n -= 1,
                Trigger::After { skip, .. } if *skip > 0 => {
                    *skip -= 1;
                    continue;
                }
                Trigger::After { count, .. } if *count > 0 => *count -= 1,
                Trigger::Probability(p) if rand::random::<f64>() < *p => {}
                _ => continue,
            }
            self.fired.fetch_add(1, Ordering::Relaxed);
            return Some(r.param);
        }
        None
    }

    /// How many faults have fired since the server started.
    pub fn fired(&self) -> u64 {
        self.fired.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_fire_counts() {
        let spec: FaultSpec = "5xx:x2, delay:1@50, reset:0".parse().unwrap();
        assert_eq!(spec.rules.len(), 3);
        let f = Faults::default();
        f.set(spec);
        assert_eq!(f.fire(FaultMode::ServerError), Some(0));
        assert_eq!(f.fire(FaultMode::ServerError), Some(0));
        assert_eq!(f.fire(FaultMode::ServerError), None);
        assert_eq!(f.fire(FaultMode::Delay), Some(50));
        assert_eq!(f.fire(FaultMode::Reset), None);
        assert_eq!(f.fired(), 3);
        let spec: FaultSpec = "corrupt-upload:x1,truncate-upload:1,reset-request:0"
            .parse()
            .unwrap();
        f.set(spec);
        assert_eq!(f.fire(FaultMode::CorruptUpload), Some(0));
        assert_eq!(f.fire(FaultMode::CorruptUpload), None);
        assert_eq!(f.fire(FaultMode::TruncateUpload), Some(0));
        assert_eq!(f.fire(FaultMode::ResetRequest), None);
        assert_eq!(f.fired(), 5);
        assert!("bogus:1".parse::<FaultSpec>().is_err());
        assert!("flip-bogus:1".parse::<FaultSpec>().is_err());
        // `xN+K`: K eligible requests let through, then N faulted.
        f.set("ratelimit:x1+2@600".parse().unwrap());
        let fired: Vec<Option<u64>> = (0..4).map(|_| f.fire(FaultMode::RateLimit)).collect();
        assert_eq!(fired, [None, None, Some(600), None]);
        assert!("flip-header:x1=".parse::<FaultSpec>().is_err());
        assert!("5xx:2.0".parse::<FaultSpec>().is_err());
    }

    #[test]
    fn flip_rules_parse_with_bit_and_path_and_fire_only_where_eligible() {
        for k in FlipKind::ALL {
            let spec: FaultSpec = format!("flip-{}:0.5", k.name()).parse().unwrap();
            assert_eq!(spec.rules[0].mode, FaultMode::Flip(k));
            assert_eq!(spec.rules[0].param, RANDOM_BIT);
        }
        let spec: FaultSpec = "flip-header:x1@9003=model-00003-of-00046.safetensors"
            .parse()
            .unwrap();
        let r = &spec.rules[0];
        assert_eq!(r.param, 9003);
        assert_eq!(r.path.as_deref(), Some("model-00003-of-00046.safetensors"));
        let f = Faults::default();
        f.set(spec);
        let mode = FaultMode::Flip(FlipKind::Header);
        assert!(f.armed(mode));
        // Another file, or an answer without that bit: not eligible, the count is kept.
        assert_eq!(
            f.fire_where(
                mode,
                "/r/resolve/main/model-00004-of-00046.safetensors",
                |_| true
            ),
            None
        );
        assert_eq!(
            f.fire_where(
                mode,
                "/r/resolve/main/model-00003-of-00046.safetensors",
                |b| b < 64
            ),
            None
        );
        assert_eq!(
            f.fire_where(
                mode,
                "/r/resolve/main/model-00003-of-00046.safetensors",
                |_| true
            ),
            Some(9003)
        );
        assert_eq!(
            f.fire_where(
                mode,
                "/r/resolve/main/model-00003-of-00046.safetensors",
                |_| true
            ),
            None
        );
        assert_eq!(f.fired(), 1);
    }
}
