//! Fault injection for reliability tests (docs/hub.md §5): a spec such as
//! `5xx:0.2,reset:x1,delay:1@1500` names modes, each firing with a probability (`0.2`) or for the
//! next N eligible requests (`x1`), with an optional parameter after `@` (milliseconds for `delay`,
//! seconds for `ratelimit`).

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
}

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
            _ => return None,
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
}

/// One rule of a spec.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRule {
    /// The mode.
    pub mode: FaultMode,
    /// When it fires.
    pub trigger: Trigger,
    /// `@param` (delay ms, ratelimit seconds).
    pub param: u64,
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
            let (head, param) = match item.split_once('@') {
                Some((h, p)) => (
                    h,
                    p.parse::<u64>()
                        .map_err(|_| format!("fault `{item}`: `@{p}` is not an integer"))?,
                ),
                None => (item, 0),
            };
            let (mode, trig) = head.split_once(':').unwrap_or((head, "1"));
            let mode = FaultMode::parse(mode).ok_or_else(|| {
                format!("unknown fault mode `{mode}` (known: 5xx, ratelimit, delay, reset, ignore-range, whole-206, truncate, drop-after-commit, corrupt-upload, truncate-upload, reset-request)")
            })?;
            let trigger = if let Some(n) = trig.strip_prefix('x') {
                Trigger::Count(
                    n.parse()
                        .map_err(|_| format!("fault `{item}`: `x{n}` is not a count"))?,
                )
            } else {
                let p: f64 = trig
                    .parse()
                    .map_err(|_| format!("fault `{item}`: `{trig}` is not a probability"))?;
                if !(0.0..=1.0).contains(&p) {
                    return Err(format!("fault `{item}`: probability {p} is outside 0..=1"));
                }
                Trigger::Probability(p)
            };
            let param = if param == 0 && mode == FaultMode::Delay {
                1000
            } else {
                param
            };
            rules.push(FaultRule {
                mode,
                trigger,
                param,
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
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        for r in rules.iter_mut().filter(|r| r.mode == mode) {
            match &mut r.trigger {
                Trigger::Count(n) if *n > 0 => *n -= 1,
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
        assert!("5xx:2.0".parse::<FaultSpec>().is_err());
    }
}
