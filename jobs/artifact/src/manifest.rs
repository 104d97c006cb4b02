//! The unit manifest: every file of one unit with its size and SHA-256, so an artifact can be
//! verified offline against itself.
//!
//! The seed (`../shared/seeds/000_…txt`, "What the format does not yet do") names per-file
//! digests in the manifests as the recommended next revision of the format; Minirun ships it.
//! One `manifest.json` sits in each unit directory. Its bytes are canonical (sorted keys, sorted
//! files, two-space indent, trailing newline), so the same unit always gives the same manifest
//! bytes. Schema and rules: `docs/manifest.md`.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::names::{check_repo_id, check_root_file_name, check_sha256_lower, NameError};

/// The manifest's file name inside its unit directory.
pub const MANIFEST_FILE_NAME: &str = "manifest.json";
/// The schema version this build reads and writes (`"v"`).
pub const MANIFEST_VERSION: u32 = 1;
/// Largest manifest read, in bytes: a unit lists at most a few thousand files.
pub const MANIFEST_MAX_BYTES: u64 = 16 << 20;
/// Deepest path inside a unit (components separated by `/`).
pub const MAX_PATH_DEPTH: usize = 8;
/// Longest path, upstream file name or tensor name, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;
/// The tile container's magic; a file starting with it is kind `container`.
const CONTAINER_MAGIC: &[u8; 8] = b"MNRNTIL1";

/// What a manifest entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    /// A tile container (`MNRNTIL1`, `docs/container.md`).
    Container,
    /// A plain stream: upstream bytes verbatim.
    Plain,
}

/// Where an entry's bytes came from upstream.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceRef {
    /// The upstream repository, for artifacts assembled from several (`multiSourceUnits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// The upstream file, relative to its repository root (`model-00001-of-00046.safetensors`).
    pub file: String,
    /// The tensor inside it, when the file is a safetensors file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor: Option<String>,
}

/// One file of a unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestEntry {
    /// Path relative to the unit directory (`/`-separated canonical names).
    pub path: String,
    /// Length in bytes.
    pub size: u64,
    /// SHA-256 of the whole file, 64 lower-case hex characters.
    pub sha256: String,
    /// Container or plain stream.
    pub kind: FileKind,
    /// The upstream tensors or files the bytes came from (omitted when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceRef>,
}

/// The manifest of one unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Schema version, [`MANIFEST_VERSION`].
    pub v: u32,
    /// The unit (its directory name).
    pub unit: String,
    /// Every file of the unit except the manifest itself, sorted by path.
    pub files: Vec<ManifestEntry>,
}

/// A manifest that cannot be read, or a unit that cannot be walked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// An I/O operation on a named file failed.
    #[error("failed to {action} `{path}`")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A manifest file is invalid; the cause says how.
    #[error("manifest `{path}` is invalid")]
    InFile {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: Box<ManifestError>,
    },
    /// The manifest is larger than [`MANIFEST_MAX_BYTES`].
    #[error("the manifest is {len} bytes, larger than the limit of {max} bytes")]
    TooLarge {
        /// Its length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// The bytes are not a version-1 manifest.
    #[error("not a version-1 manifest: {reason}")]
    Schema {
        /// The JSON or schema error.
        reason: String,
    },
    /// The manifest has another schema version.
    #[error(
        "the manifest has schema version {found}, this build reads version {MANIFEST_VERSION}"
    )]
    Version {
        /// The `v` found.
        found: u64,
    },
    /// The unit name is not canonical.
    #[error("unit name `{unit}` is not canonical: {reason}")]
    Unit {
        /// The name.
        unit: String,
        /// The rule it breaks.
        reason: NameError,
    },
    /// An entry breaks a rule.
    #[error("entry `{path}`: {reason}")]
    Entry {
        /// The entry's path (truncated to 256 bytes if longer).
        path: String,
        /// The rule it breaks.
        reason: String,
    },
}

fn io<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> ManifestError + 'a {
    move |source| ManifestError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

/// Checks a path inside a unit: 1 to [`MAX_PATH_DEPTH`] components separated by `/`, each a
/// canonical root file name, at most [`MAX_PATH_BYTES`] bytes; `manifest.json` at the top level
/// is reserved.
pub fn check_unit_path(path: &str) -> Result<(), String> {
    if path.len() > MAX_PATH_BYTES {
        return Err(format!("a path is at most {MAX_PATH_BYTES} bytes"));
    }
    if path == MANIFEST_FILE_NAME {
        return Err("`manifest.json` is the manifest itself and is never listed".to_owned());
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts.len() > MAX_PATH_DEPTH {
        return Err(format!("a path has at most {MAX_PATH_DEPTH} components"));
    }
    for part in parts {
        check_root_file_name(part).map_err(|e| format!("component `{part}`: {e}"))?;
    }
    Ok(())
}

fn check_upstream_path(path: &str) -> Result<(), String> {
    if path.len() > MAX_PATH_BYTES {
        return Err(format!(
            "an upstream path is at most {MAX_PATH_BYTES} bytes"
        ));
    }
    for part in path.split('/') {
        check_root_file_name(part).map_err(|e| format!("upstream component `{part}`: {e}"))?;
    }
    Ok(())
}

fn short(path: &str) -> String {
    path.chars().take(256).collect()
}

/// The canonical JSON bytes Minirun writes for its own documents (manifests, `index.json`):
/// object keys sorted by byte order at every level, two-space indent, `": "` between key and
/// value, a trailing newline. Equal values always give equal bytes.
pub fn canonical_json_bytes(value: &serde_json::Value) -> Vec<u8> {
    fn sorted(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut out = serde_json::Map::new();
                for k in keys {
                    if let Some(x) = m.get(k) {
                        out.insert(k.clone(), sorted(x));
                    }
                }
                serde_json::Value::Object(out)
            }
            serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    // Serializing a `Value` to memory cannot fail (its keys are strings).
    let mut out = serde_json::to_vec_pretty(&sorted(value)).unwrap_or_default();
    out.push(b'\n');
    out
}

impl Manifest {
    /// An empty manifest for `unit` (checked as a canonical name).
    pub fn new(unit: &str) -> Result<Self, ManifestError> {
        check_root_file_name(unit).map_err(|reason| ManifestError::Unit {
            unit: short(unit),
            reason,
        })?;
        Ok(Manifest {
            v: MANIFEST_VERSION,
            unit: unit.to_owned(),
            files: Vec::new(),
        })
    }

    /// Adds or replaces an entry (kept sorted by path); the entry is validated.
    pub fn insert(&mut self, entry: ManifestEntry) -> Result<(), ManifestError> {
        validate_entry(&entry)?;
        match self.files.binary_search_by(|e| e.path.cmp(&entry.path)) {
            Ok(i) => {
                if let Some(slot) = self.files.get_mut(i) {
                    *slot = entry;
                }
            }
            Err(i) => self.files.insert(i, entry),
        }
        Ok(())
    }

    /// Hashes every regular file under `dir` (except `manifest.json`) into a manifest for `unit`.
    /// Kind is `container` for files starting with `MNRNTIL1`, else `plain`; attach `sources`
    /// afterwards. Symbolic links and other non-regular files are refused.
    pub fn scan(dir: &Path, unit: &str) -> Result<Self, ManifestError> {
        let mut m = Manifest::new(unit)?;
        for rel in walk(dir)? {
            let path = dir.join(&rel);
            let (size, sha256, head) = hash_file(&path)?;
            let kind = if head == *CONTAINER_MAGIC {
                FileKind::Container
            } else {
                FileKind::Plain
            };
            m.insert(ManifestEntry {
                path: rel,
                size,
                sha256,
                kind,
                sources: Vec::new(),
            })?;
        }
        Ok(m)
    }

    /// The canonical bytes of this manifest ([`canonical_json_bytes`]); files sorted by path.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut sorted = self.clone();
        sorted.files.sort_by(|a, b| a.path.cmp(&b.path));
        for e in &mut sorted.files {
            e.sources.sort();
        }
        let value = serde_json::to_value(&sorted).unwrap_or(serde_json::Value::Null);
        canonical_json_bytes(&value)
    }

    /// Parses and validates manifest bytes: version 1, no unknown field, canonical unit name,
    /// canonical paths in strictly increasing byte order (so no duplicates), each entry's sources
    /// in sorted order, lower-case digests.
    pub fn parse(bytes: &[u8]) -> Result<Self, ManifestError> {
        if bytes.len() as u64 > MANIFEST_MAX_BYTES {
            return Err(ManifestError::TooLarge {
                len: bytes.len() as u64,
                max: MANIFEST_MAX_BYTES,
            });
        }
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| ManifestError::Schema {
                reason: e.to_string(),
            })?;
        match value.get("v").map(|v| v.as_u64()) {
            Some(Some(v)) if v == u64::from(MANIFEST_VERSION) => {}
            Some(Some(found)) => return Err(ManifestError::Version { found }),
            Some(None) => {
                return Err(ManifestError::Schema {
                    reason: "`v` is not a non-negative integer".to_owned(),
                })
            }
            None => {
                return Err(ManifestError::Schema {
                    reason: "no `v` field".to_owned(),
                })
            }
        }
        let m: Manifest = serde_json::from_value(value).map_err(|e| ManifestError::Schema {
            reason: e.to_string(),
        })?;
        check_root_file_name(&m.unit).map_err(|reason| ManifestError::Unit {
            unit: short(&m.unit),
            reason,
        })?;
        let mut prev: Option<&str> = None;
        for e in &m.files {
            validate_entry(e)?;
            // The written form sorts each entry's sources; accepting another order would let two
            // byte strings stand for one manifest (found by the unit_manifest fuzz target).
            if e.sources.windows(2).any(|w| w[0] > w[1]) {
                return Err(ManifestError::Entry {
                    path: short(&e.path),
                    reason: "sources must be sorted (by repo, file, tensor), as the written form has them"
                        .to_owned(),
                });
            }
            if prev.is_some_and(|p| p >= e.path.as_str()) {
                return Err(ManifestError::Entry {
                    path: short(&e.path),
                    reason: "entries must be sorted by path with no duplicates".to_owned(),
                });
            }
            prev = Some(&e.path);
        }
        Ok(m)
    }

    /// Reads and parses `<unit dir>/manifest.json`; errors name the file.
    pub fn read(unit_dir: &Path) -> Result<Self, ManifestError> {
        let path = unit_dir.join(MANIFEST_FILE_NAME);
        let file = std::fs::File::open(&path).map_err(io("open manifest", &path))?;
        let mut bytes = Vec::new();
        file.take(MANIFEST_MAX_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io("read manifest", &path))?;
        Manifest::parse(&bytes).map_err(|e| ManifestError::InFile {
            path,
            source: Box::new(e),
        })
    }

    /// Total bytes of the listed files (saturating).
    pub fn total_bytes(&self) -> u64 {
        self.files
            .iter()
            .fold(0u64, |a, e| a.saturating_add(e.size))
    }

    /// Checks every listed file under `unit_dir` (size, then SHA-256 read back from disk) and
    /// reports files present but not listed. Mismatches are problems in the report; only I/O
    /// failures other than a missing file are errors.
    pub fn verify(&self, unit_dir: &Path) -> Result<VerifyReport, ManifestError> {
        let mut report = VerifyReport::default();
        for e in &self.files {
            let path = unit_dir.join(&e.path);
            let meta = match std::fs::symlink_metadata(&path) {
                Ok(m) => m,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                    report.problems.push(Problem::Missing {
                        path: e.path.clone(),
                    });
                    continue;
                }
                Err(err) => return Err(io("stat", &path)(err)),
            };
            if !meta.file_type().is_file() {
                report.problems.push(Problem::NotRegularFile {
                    path: e.path.clone(),
                });
                continue;
            }
            if meta.len() != e.size {
                report.problems.push(Problem::SizeMismatch {
                    path: e.path.clone(),
                    expected: e.size,
                    found: meta.len(),
                });
                continue;
            }
            let (size, sha256, _) = hash_file(&path)?;
            report.files_checked += 1;
            report.bytes_checked = report.bytes_checked.saturating_add(size);
            if size != e.size {
                report.problems.push(Problem::SizeMismatch {
                    path: e.path.clone(),
                    expected: e.size,
                    found: size,
                });
            } else if sha256 != e.sha256 {
                report.problems.push(Problem::DigestMismatch {
                    path: e.path.clone(),
                    expected: e.sha256.clone(),
                    found: sha256,
                });
            }
        }
        let listed: BTreeSet<&str> = self.files.iter().map(|e| e.path.as_str()).collect();
        let (files, odd) = walk_lenient(unit_dir)?;
        let mut unlisted: Vec<String> = files
            .into_iter()
            .filter(|rel| !listed.contains(rel.as_str()))
            .chain(odd)
            .collect();
        unlisted.sort();
        report
            .problems
            .extend(unlisted.into_iter().map(|path| Problem::Unlisted { path }));
        Ok(report)
    }
}

fn validate_entry(e: &ManifestEntry) -> Result<(), ManifestError> {
    let err = |reason: String| ManifestError::Entry {
        path: short(&e.path),
        reason,
    };
    check_unit_path(&e.path).map_err(err)?;
    check_sha256_lower(&e.sha256).map_err(|r| err(format!("sha256: {r} (lower case)")))?;
    for s in &e.sources {
        check_upstream_path(&s.file).map_err(err)?;
        if let Some(repo) = &s.repo {
            check_repo_id(repo).map_err(|r| err(format!("source repo `{}`: {r}", short(repo))))?;
        }
        if let Some(t) = &s.tensor {
            if t.is_empty() || t.len() > MAX_PATH_BYTES || t.chars().any(char::is_control) {
                return Err(err(format!(
                    "tensor name is empty, longer than {MAX_PATH_BYTES} bytes or has control characters"
                )));
            }
        }
    }
    Ok(())
}

/// One thing [`Manifest::verify`] found wrong, naming the file relative to the unit directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A listed file is not there.
    Missing {
        /// The file.
        path: String,
    },
    /// A listed path is a directory, a symbolic link or another non-regular file.
    NotRegularFile {
        /// The path.
        path: String,
    },
    /// A listed file has another size.
    SizeMismatch {
        /// The file.
        path: String,
        /// The manifest's size.
        expected: u64,
        /// The size on disk.
        found: u64,
    },
    /// A listed file has another SHA-256.
    DigestMismatch {
        /// The file.
        path: String,
        /// The manifest's digest.
        expected: String,
        /// The digest of the bytes on disk.
        found: String,
    },
    /// A file (or link, or other object) is in the unit directory but not in the manifest.
    Unlisted {
        /// The path.
        path: String,
    },
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Missing { path } => write!(f, "`{path}` is listed but missing"),
            Problem::NotRegularFile { path } => write!(f, "`{path}` is not a regular file"),
            Problem::SizeMismatch {
                path,
                expected,
                found,
            } => write!(f, "`{path}` is {found} bytes, the manifest says {expected}"),
            Problem::DigestMismatch {
                path,
                expected,
                found,
            } => write!(
                f,
                "`{path}` has sha256 {found}, the manifest says {expected}"
            ),
            Problem::Unlisted { path } => write!(f, "`{path}` is not listed in the manifest"),
        }
    }
}

/// The result of [`Manifest::verify`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Files whose bytes were hashed.
    pub files_checked: u64,
    /// Bytes hashed.
    pub bytes_checked: u64,
    /// Everything that did not agree, in manifest order, then unlisted files.
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// True when every listed file agreed and nothing unlisted was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

fn hash_file(path: &Path) -> Result<(u64, String, [u8; 8]), ManifestError> {
    let mut f = std::fs::File::open(path).map_err(io("open for hashing", path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut head = [0u8; 8];
    let mut total: u64 = 0;
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io("read for hashing", path)(e)),
        };
        let chunk = buf.get(..n).unwrap_or(&[]);
        if total < 8 {
            for (slot, b) in head.iter_mut().skip(total as usize).zip(chunk) {
                *slot = *b;
            }
        }
        hasher.update(chunk);
        total = total.saturating_add(n as u64);
    }
    Ok((total, hex::encode(hasher.finalize()), head))
}

/// Every regular file under `dir` (relative, `/`-separated, sorted), except the top-level
/// manifest; a non-regular entry or a name that is not canonical is an error.
fn walk(dir: &Path) -> Result<Vec<String>, ManifestError> {
    let (files, odd) = walk_lenient(dir)?;
    if let Some(path) = odd.first() {
        return Err(ManifestError::Entry {
            path: short(path),
            reason: "only regular files and directories with canonical names may be in a unit \
                     directory (no symbolic links)"
                .into(),
        });
    }
    Ok(files)
}

/// Like [`walk`], but returns non-regular entries and non-canonical names (sorted) beside the
/// regular files instead of failing.
fn walk_lenient(dir: &Path) -> Result<(Vec<String>, Vec<String>), ManifestError> {
    let mut out = Vec::new();
    let mut odd = Vec::new();
    let mut stack = vec![(dir.to_owned(), String::new(), 0usize)];
    while let Some((abs, rel, depth)) = stack.pop() {
        let entries = std::fs::read_dir(&abs).map_err(io("list directory", &abs))?;
        for entry in entries {
            let entry = entry.map_err(io("list directory", &abs))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let child_rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if child_rel == MANIFEST_FILE_NAME {
                continue;
            }
            let ft = entry.file_type().map_err(io("stat", &entry.path()))?;
            if ft.is_dir() && depth + 1 < MAX_PATH_DEPTH && check_root_file_name(&name).is_ok() {
                stack.push((entry.path(), child_rel, depth + 1));
            } else if ft.is_file() && check_unit_path(&child_rel).is_ok() {
                out.push(child_rel);
            } else {
                odd.push(child_rel);
            }
        }
    }
    out.sort();
    odd.sort();
    Ok((out, odd))
}
