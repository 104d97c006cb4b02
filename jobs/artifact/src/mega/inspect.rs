//! `mega::inspect`: the hub card's deterministic inspection (seed `004`, "Hub repository metadata
//! card") and hash/trust verification ("Integrity"). Inspection is bounded: it reads shard headers
//! and the index, never payload bytes. Hash verification streams payloads; trust verification only
//! interprets `mega.trust.*` (signature checking is not implemented yet, so a signed release is
//! reported as `signed-unverified`). Rules and output: docs/mega.md §8-§9.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::index::{Release, ReleaseEntry};
use super::reader::{DirOpener, Opener, ShardHeader, ShardReader};
use super::MegaError;

/// Which artifact a release is inspected through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryPoint {
    /// Exactly one `.mega` file: inspected directly.
    Single(String),
    /// Several shards (or an index alone): the first `.mega.index.json` in lexical order.
    Index(String),
    /// Several shards and no index: identifiable as MEGA, no aggregate metadata.
    Unindexed(Vec<String>),
}

/// Apply the card's entry-point rules to the file names of a release directory.
pub fn choose_entry(dir: &str, names: &[String]) -> Result<EntryPoint, MegaError> {
    let mut megas: Vec<&String> = names.iter().filter(|n| n.ends_with(".mega")).collect();
    let mut indexes: Vec<&String> = names
        .iter()
        .filter(|n| n.ends_with(".mega.index.json"))
        .collect();
    megas.sort();
    indexes.sort();
    match (megas.as_slice(), indexes.first()) {
        ([one], _) => Ok(EntryPoint::Single((*one).clone())),
        ([], Some(idx)) | ([_, _, ..], Some(idx)) => Ok(EntryPoint::Index((*idx).clone())),
        ([_, _, ..], None) => Ok(EntryPoint::Unindexed(
            megas.iter().map(|s| (*s).clone()).collect(),
        )),
        ([], None) => Err(MegaError::NotMega {
            path: dir.into(),
            reason: "no `.mega` file and no `.mega.index.json`".into(),
        }),
    }
}

/// Resolve a path (a release directory, a `.mega` file or a `.mega.index.json`) to the release
/// directory, the entry point and the `.mega` files selected (for the fallbacks).
pub fn resolve(path: &Path) -> Result<(PathBuf, EntryPoint, Vec<String>), MegaError> {
    let label = path.display().to_string();
    if !path.exists() {
        return Err(MegaError::NotMega {
            path: label,
            reason: "the path does not exist".into(),
        });
    }
    if path.is_dir() {
        let mut names = Vec::new();
        let rd = std::fs::read_dir(path).map_err(|e| MegaError::io("list", &label, e))?;
        for e in rd {
            let e = e.map_err(|e| MegaError::io("list", &label, e))?;
            if e.file_type().map(|t| t.is_file()).unwrap_or(false) {
                names.push(e.file_name().to_string_lossy().into_owned());
            }
        }
        let entry = choose_entry(&label, &names)?;
        let mut megas: Vec<String> = names.into_iter().filter(|n| n.ends_with(".mega")).collect();
        megas.sort();
        return Ok((path.to_path_buf(), entry, megas));
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    if name.ends_with(".mega.index.json") {
        let mut megas: Vec<String> = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".mega"))
                    .collect()
            })
            .unwrap_or_default();
        megas.sort();
        Ok((dir, EntryPoint::Index(name), megas))
    } else if name.ends_with(".mega") {
        Ok((dir, EntryPoint::Single(name.clone()), vec![name]))
    } else {
        Err(MegaError::NotMega {
            path: label,
            reason: "expected a directory, a `.mega` file or a `.mega.index.json`".into(),
        })
    }
}

/// Trust state of a release, separate from hash state (seed `004`, "Integrity").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustState {
    /// No `mega.trust.*` metadata.
    Unsigned,
    /// Complete signing metadata bound to the payload SHA-256; the signature itself is not checked
    /// (no verifier for the scheme yet).
    SignedUnverified {
        /// `mega.trust.scheme`
        scheme: String,
        /// `mega.trust.signer`
        signer: String,
    },
    /// Signing metadata present but incomplete, or bound to a different digest.
    Invalid(String),
}

impl std::fmt::Display for TrustState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TrustState::Unsigned => f.write_str("unsigned"),
            TrustState::SignedUnverified { scheme, signer } => write!(
                f,
                "signed-unverified (scheme `{scheme}`, signer `{signer}`; signature not checked)"
            ),
            TrustState::Invalid(r) => write!(f, "invalid ({r})"),
        }
    }
}

/// Trust state of one shard from its `mega.trust.*` footer keys.
pub fn shard_trust(h: &ShardHeader) -> TrustState {
    let trust: BTreeMap<&str, &str> = h
        .footer
        .iter()
        .filter(|(k, _)| k.starts_with("mega.trust."))
        .filter_map(|(k, v)| v.as_str().map(|s| (k.as_str(), s)))
        .collect();
    if trust.is_empty() {
        return TrustState::Unsigned;
    }
    for k in [
        "mega.trust.scheme",
        "mega.trust.signer",
        "mega.trust.signature",
        "mega.trust.signed_digest",
    ] {
        if trust.get(k).is_none_or(|v| v.is_empty()) {
            return TrustState::Invalid(format!("`{}`: `{k}` is missing", h.file));
        }
    }
    let sha = h.get_str("mega.hash.payload.sha256").unwrap_or("");
    let digest = trust.get("mega.trust.signed_digest").copied().unwrap_or("");
    if digest != format!("sha256:{sha}") {
        return TrustState::Invalid(format!(
            "`{}`: signed digest `{digest}` is not the payload sha256",
            h.file
        ));
    }
    TrustState::SignedUnverified {
        scheme: trust.get("mega.trust.scheme").copied().unwrap_or("").into(),
        signer: trust.get("mega.trust.signer").copied().unwrap_or("").into(),
    }
}

/// Combine per-shard trust: a release is signed only when every shard is signed alike.
pub fn combine_trust(states: &[TrustState]) -> TrustState {
    if let Some(bad) = states.iter().find(|s| matches!(s, TrustState::Invalid(_))) {
        return bad.clone();
    }
    match states.first() {
        None => TrustState::Unsigned,
        Some(first) if states.iter().all(|s| s == first) => first.clone(),
        Some(_) => TrustState::Invalid("shards disagree on signing".into()),
    }
}

/// The card: what inspection established, and the rendered fields with their fallbacks.
#[derive(Debug, Clone)]
pub struct Card {
    /// The entry point used.
    pub entry: EntryPoint,
    /// Repository identity used for fallbacks (directory names unless given).
    pub identity: String,
    /// True only when the header/index contract was parsed and validated.
    pub verified: bool,
    /// Why inspection failed, when it did.
    pub failure: Option<String>,
    /// `summary.parameter_count`.
    pub parameter_count: Option<u64>,
    /// `summary.tensor_count`.
    pub tensor_count: Option<u64>,
    /// `summary.shard_count` (index) or 1 (single file).
    pub shard_count: Option<u64>,
    /// Dtype counts ordered by tensor count (descending), then dtype name.
    pub dtype_counts: Vec<(String, u64)>,
    /// Number of selected weight artifacts (`.mega` files) — the files fallback.
    pub artifact_files: u64,
    /// Bytes of the selected `.mega` files — the model-size fallback.
    pub stored_bytes: u64,
    /// Trust state read from the inspected headers.
    pub trust: Option<TrustState>,
    /// Reserved keys from a newer minor version that this reader does not know.
    pub unknown_reserved: Vec<String>,
}

struct Summary {
    params: u64,
    tensors: u64,
    shards: u64,
    dtypes: BTreeMap<String, u64>,
    trust: Vec<TrustState>,
    unknown: Vec<String>,
}

fn summarize_headers(headers: &[&ShardHeader]) -> Summary {
    let mut s = Summary {
        params: 0,
        tensors: 0,
        shards: headers.len() as u64,
        dtypes: BTreeMap::new(),
        trust: Vec::new(),
        unknown: Vec::new(),
    };
    for h in headers {
        s.params = s.params.saturating_add(h.parameter_count());
        s.tensors += h.fixed.tensor_count;
        for (d, n) in h.dtype_counts() {
            *s.dtypes.entry(d).or_insert(0) += n;
        }
        s.trust.push(shard_trust(h));
        s.unknown.extend(h.unknown_reserved.iter().cloned());
    }
    s
}

/// Bounded inspection of the header or index contract through `opener` (headers only).
fn inspect_contract<O: Opener>(opener: O, entry: &EntryPoint) -> Result<Summary, MegaError> {
    match entry {
        EntryPoint::Single(f) => {
            let r = ShardReader::open(&opener, f)?;
            if r.header.get_u64("mega.shard.count") != Some(1) {
                return Err(MegaError::ShardMismatch {
                    shard: f.clone(),
                    reason: "opened directly but it is one shard of several; use the index".into(),
                });
            }
            Ok(summarize_headers(&[&r.header]))
        }
        EntryPoint::Index(idx) => {
            let mut rel = Release::open_index(opener, idx)?;
            let files = rel.shard_files();
            let mut headers = Vec::with_capacity(files.len());
            for f in &files {
                headers.push(rel.shard(f)?.header.clone());
            }
            let s = summarize_headers(&headers.iter().collect::<Vec<_>>());
            if let ReleaseEntry::Indexed(_, index) = &rel.entry {
                let declared = index.metadata.get("mega.parameter.count");
                if declared != Some(&s.params.to_string()) {
                    return Err(MegaError::BadIndex {
                        file: idx.clone(),
                        reason: format!(
                            "`mega.parameter.count` is {declared:?}, the shards hold {}",
                            s.params
                        ),
                    });
                }
            }
            Ok(s)
        }
        EntryPoint::Unindexed(files) => Err(MegaError::NotMega {
            path: files.join(", "),
            reason: "several shards without a `.mega.index.json`: aggregate metadata cannot be \
                     validated"
                .into(),
        }),
    }
}

/// Inspect a release through `opener` (bounded: headers and index only). `identity` is the
/// repository identity for the fallbacks; `artifacts` the selected `.mega` files and their sizes.
pub fn inspect_with<O: Opener>(
    opener: O,
    entry: EntryPoint,
    identity: &str,
    artifacts: &[(String, u64)],
) -> Card {
    let mut card = Card {
        entry: entry.clone(),
        identity: identity.into(),
        verified: false,
        failure: None,
        parameter_count: None,
        tensor_count: None,
        shard_count: None,
        dtype_counts: Vec::new(),
        artifact_files: artifacts.len() as u64,
        stored_bytes: artifacts.iter().map(|(_, n)| n).sum(),
        trust: None,
        unknown_reserved: Vec::new(),
    };
    match inspect_contract(opener, &entry) {
        Ok(s) => {
            card.verified = true;
            card.parameter_count = Some(s.params);
            card.tensor_count = Some(s.tensors);
            card.shard_count = Some(s.shards);
            let mut d: Vec<(String, u64)> = s.dtypes.into_iter().collect();
            d.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            card.dtype_counts = d;
            card.trust = Some(combine_trust(&s.trust));
            card.unknown_reserved = s.unknown;
        }
        // Unindexed shards are a legitimate state, not a failed inspection (seed: "remains
        // identifiable as MEGA").
        Err(_) if matches!(entry, EntryPoint::Unindexed(_)) => {}
        Err(e) => card.failure = Some(e.to_string()),
    }
    card
}

/// Inspect the release at `path` (directory, `.mega` or `.mega.index.json`). `identity` overrides
/// the repository identity (default: the last two path components, e.g. `Qwen3.5-0.8B/mega`).
pub fn inspect(path: &Path, identity: Option<&str>) -> Result<Card, MegaError> {
    let (dir, entry, megas) = resolve(path)?;
    let artifacts: Vec<(String, u64)> = megas
        .iter()
        .map(|m| {
            let n = std::fs::metadata(dir.join(m))
                .map(|md| md.len())
                .unwrap_or(0);
            (m.clone(), n)
        })
        .collect();
    let ident = identity.map_or_else(|| default_identity(&dir), str::to_string);
    Ok(inspect_with(DirOpener { dir }, entry, &ident, &artifacts))
}

fn default_identity(dir: &Path) -> String {
    let abs = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let parts: Vec<String> = abs
        .components()
        .rev()
        .take(2)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.into_iter().rev().collect::<Vec<_>>().join("/")
}

fn identity_tokens(identity: &str) -> impl Iterator<Item = &str> {
    identity
        .split(['/', '-', '_', ' ', ','])
        .filter(|t| !t.is_empty())
}

/// A parameter-size token (`0.8B`, `135M`, `8x7B`) in the repository identity or tags.
pub fn size_token(identity: &str) -> Option<String> {
    identity_tokens(identity)
        .find(|t| {
            let Some(num) = t.strip_suffix(['B', 'b', 'M', 'm', 'K', 'k', 'T', 't']) else {
                return false;
            };
            let num = num.split_once(['x', 'X']).map_or(num, |(e, n)| {
                if e.bytes().all(|b| b.is_ascii_digit()) && !e.is_empty() {
                    n
                } else {
                    "not-a-number"
                }
            });
            !num.is_empty()
                && num.bytes().all(|b| b.is_ascii_digit() || b == b'.')
                && num.bytes().next().is_some_and(|b| b.is_ascii_digit())
                && num.matches('.').count() <= 1
        })
        .map(|t| {
            let (n, u) = t.split_at(t.len() - 1);
            format!("{n}{}", u.to_ascii_uppercase())
        })
}

/// Precision tokens recognised in a repository identity, lower-case.
const PRECISION_TOKENS: &[&str] = &[
    "bf16", "fp16", "f16", "fp32", "f32", "fp8", "fp4", "int8", "int4", "mxfp4", "nvfp4", "nf4",
    "awq", "gptq", "q8_0", "q4_0", "q4_1", "q4_k_m", "q4_k_s", "q5_k_m", "q6_k",
];

/// A precision token in the repository identity or tags.
pub fn precision_token(identity: &str) -> Option<String> {
    let lower = identity.to_ascii_lowercase();
    // `q4_k_m` contains `_`, so look for whole tokens split only on `/`, `-`, ` ` first.
    lower
        .split(['/', '-', ' ', ','])
        .find(|t| PRECISION_TOKENS.contains(t))
        .or_else(|| identity_tokens(&lower).find(|t| PRECISION_TOKENS.contains(t)))
        .map(str::to_ascii_uppercase)
}

/// Human parameter count: `135.0M`, `0.8B`.
pub fn human_params(n: u64) -> String {
    let f = n as f64;
    if f >= 1e12 {
        format!("{:.1}T", f / 1e12)
    } else if f >= 1e9 {
        format!("{:.1}B", f / 1e9)
    } else if f >= 1e6 {
        format!("{:.1}M", f / 1e6)
    } else if f >= 1e3 {
        format!("{:.1}K", f / 1e3)
    } else {
        n.to_string()
    }
}

/// Human byte count in decimal units.
pub fn human_bytes(n: u64) -> String {
    let f = n as f64;
    if f >= 1e9 {
        format!("{:.1} GB", f / 1e9)
    } else if f >= 1e6 {
        format!("{:.1} MB", f / 1e6)
    } else if f >= 1e3 {
        format!("{:.1} kB", f / 1e3)
    } else {
        format!("{n} B")
    }
}

impl Card {
    /// Model size with its source.
    pub fn model_size(&self) -> String {
        match (self.parameter_count, size_token(&self.identity)) {
            (Some(p), _) => format!("{} params ({p})", human_params(p)),
            (None, Some(t)) => format!("{t} (from repository name)"),
            (None, None) => format!("{} stored", human_bytes(self.stored_bytes)),
        }
    }

    /// Tensor type field: dtype counts, else a precision token, else `Mixed`.
    pub fn tensor_type(&self) -> String {
        if !self.dtype_counts.is_empty() {
            return self
                .dtype_counts
                .iter()
                .map(|(d, n)| format!("{d} ({n})"))
                .collect::<Vec<_>>()
                .join(", ");
        }
        precision_token(&self.identity).unwrap_or_else(|| "Mixed".into())
    }

    /// Files info: one file, the shard count of an index, else the selected artifacts.
    pub fn files(&self) -> u64 {
        match (&self.entry, self.shard_count) {
            (EntryPoint::Single(_), Some(_)) => 1,
            (EntryPoint::Index(_), Some(n)) => n,
            _ => self.artifact_files,
        }
    }

    /// The card as text; hidden fields are omitted.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let entry = match &self.entry {
            EntryPoint::Single(f) => format!("single file `{f}`"),
            EntryPoint::Index(f) => format!("index `{f}`"),
            EntryPoint::Unindexed(fs) => {
                format!(
                    "{} MEGA shards without an index (no aggregate metadata)",
                    fs.len()
                )
            }
        };
        let _ = writeln!(s, "entry: {entry}");
        let _ = writeln!(s, "model size: {}", self.model_size());
        let _ = writeln!(s, "tensor type: {}", self.tensor_type());
        if let Some(n) = self.tensor_count {
            let _ = writeln!(s, "tensors: {n}");
        }
        let _ = writeln!(s, "files: {}", self.files());
        if self.verified {
            let _ = writeln!(
                s,
                "verified: header/index contract parsed and validated (not a provenance or quality claim)"
            );
        }
        if let Some(t) = &self.trust {
            let _ = writeln!(s, "trust: {t}");
        }
        for k in &self.unknown_reserved {
            let _ = writeln!(
                s,
                "warning: reserved key `{k}` is from a newer MEGA minor version"
            );
        }
        if let Some(f) = &self.failure {
            let _ = writeln!(s, "inspection: failed: {f}");
        } else if matches!(self.entry, EntryPoint::Unindexed(_)) {
            let _ = writeln!(
                s,
                "inspection: unavailable: several shards without a `.mega.index.json`, \
                 aggregate metadata cannot be validated"
            );
        }
        s
    }
}

/// One shard's hash check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardCheck {
    /// The shard file.
    pub file: String,
    /// Recorded CRC-32.
    pub crc32_recorded: String,
    /// Computed CRC-32.
    pub crc32_actual: String,
    /// Recorded SHA-256.
    pub sha256_recorded: String,
    /// Computed SHA-256.
    pub sha256_actual: String,
}

impl ShardCheck {
    /// True when both hashes match.
    pub fn ok(&self) -> bool {
        self.crc32_recorded == self.crc32_actual && self.sha256_recorded == self.sha256_actual
    }
}

/// Hash and trust verification of a release, reported separately.
#[derive(Debug, Clone)]
pub struct VerifyReport {
    /// Per-shard hash checks.
    pub shards: Vec<ShardCheck>,
    /// Trust state (independent of the hashes).
    pub trust: TrustState,
}

impl VerifyReport {
    /// True when every shard's CRC-32 and SHA-256 match.
    pub fn hashes_ok(&self) -> bool {
        self.shards.iter().all(ShardCheck::ok)
    }

    /// True when the hashes match and the trust metadata is not invalid (unsigned is fine: hash
    /// and trust verification are separate).
    pub fn ok(&self) -> bool {
        self.hashes_ok() && !matches!(self.trust, TrustState::Invalid(_))
    }

    /// The report as text: one line per shard, then `hashes:` and `trust:`.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for c in &self.shards {
            let state = if c.ok() { "ok" } else { "MISMATCH" };
            let _ = writeln!(
                s,
                "shard {}: crc32 {} sha256 {} {state}",
                c.file, c.crc32_actual, c.sha256_actual
            );
            if !c.ok() {
                let _ = writeln!(
                    s,
                    "  recorded: crc32 {} sha256 {}",
                    c.crc32_recorded, c.sha256_recorded
                );
            }
        }
        let _ = writeln!(
            s,
            "hashes: {}",
            if self.hashes_ok() { "ok" } else { "failed" }
        );
        let _ = writeln!(s, "trust: {}", self.trust);
        s
    }
}

/// Verify payload hashes (streaming every payload) and interpret trust metadata.
pub fn verify_with<O: Opener>(opener: O, entry: &EntryPoint) -> Result<VerifyReport, MegaError> {
    let mut checks = Vec::new();
    let mut trust = Vec::new();
    let mut one = |r: &mut ShardReader| -> Result<(), MegaError> {
        let got = r.payload_hashes()?;
        let h = &r.header;
        checks.push(ShardCheck {
            file: h.file.clone(),
            crc32_recorded: h.get_str("mega.hash.payload.crc32").unwrap_or("").into(),
            crc32_actual: got.crc32,
            sha256_recorded: h.get_str("mega.hash.payload.sha256").unwrap_or("").into(),
            sha256_actual: got.sha256,
        });
        trust.push(shard_trust(h));
        Ok(())
    };
    match entry {
        EntryPoint::Single(f) => one(&mut ShardReader::open(&opener, f)?)?,
        EntryPoint::Index(idx) => {
            let mut rel = Release::open_index(opener, idx)?;
            for f in rel.shard_files() {
                one(rel.shard(&f)?)?;
            }
        }
        EntryPoint::Unindexed(files) => {
            for f in files {
                one(&mut ShardReader::open(&opener, f)?)?;
            }
        }
    }
    Ok(VerifyReport {
        shards: checks,
        trust: combine_trust(&trust),
    })
}

/// [`verify_with`] on a path (directory, `.mega` or `.mega.index.json`).
pub fn verify(path: &Path) -> Result<VerifyReport, MegaError> {
    let (dir, entry, _) = resolve(path)?;
    verify_with(DirOpener { dir }, &entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn entry_point_rules() {
        assert_eq!(
            choose_entry("d", &names(&["model.mega", "README.md"])).unwrap(),
            EntryPoint::Single("model.mega".into())
        );
        assert_eq!(
            choose_entry(
                "d",
                &names(&[
                    "b.mega.index.json",
                    "a-2.mega",
                    "a-1.mega",
                    "a.mega.index.json"
                ])
            )
            .unwrap(),
            EntryPoint::Index("a.mega.index.json".into())
        );
        assert_eq!(
            choose_entry("d", &names(&["x-2.mega", "x-1.mega"])).unwrap(),
            EntryPoint::Unindexed(names(&["x-1.mega", "x-2.mega"]))
        );
        assert!(choose_entry("d", &names(&["model.safetensors"])).is_err());
    }

    #[test]
    fn fallback_tokens() {
        assert_eq!(size_token("Qwen/Qwen3.5-0.8B"), Some("0.8B".into()));
        assert_eq!(
            size_token("mistralai/Mixtral-8x7b-v0.1"),
            Some("8x7B".into())
        );
        assert_eq!(
            size_token("HuggingFaceTB/SmolLM2-135M-Instruct"),
            Some("135M".into())
        );
        assert_eq!(size_token("acme/model-v2"), None);
        assert_eq!(precision_token("acme/Llama-3-8B-BF16"), Some("BF16".into()));
        assert_eq!(
            precision_token("x/SmolLM2-135M-Q4_K_M"),
            Some("Q4_K_M".into())
        );
        assert_eq!(precision_token("acme/model"), None);
    }
}
