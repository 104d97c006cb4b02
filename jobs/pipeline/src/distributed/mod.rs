//! Distributed publication that moves only metadata (`docs/publish.md` §9, issue 19): each worker
//! fetches, repacks, gates and stages its own units, uploads their LFS objects straight to the hub
//! (content-addressed, so workers never conflict) and writes one small **unit record** per unit;
//! the join builds the release-wide files from the records and commits the candidate from objects
//! already on the hub, so no payload byte travels to the join or is uploaded twice.
//!
//! A unit record (`<records>/<unit>.json`, pretty JSON, replaced atomically) names the plan, the
//! target and the sources it was made for, the unit's gate verdict (PASS, exit 0 — anything else
//! blocks the join), its totals and container format version (what `index.json` needs), and every
//! file of the unit with its size, SHA-256, hub oid and whether the hub stores it as LFS; regular
//! files (the manifest, small streams) carry their bytes, base64.

mod join;
pub mod reclaim;
mod worker;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::plan::{Plan, PlanError};

pub use join::{finalize_from_records, join_items, JoinItem};
pub use worker::{publish_units, WorkerOpts, WorkerReport};

/// The schema of a unit record.
pub const RECORD_SCHEMA: &str = "minirun.unit-record/1";
/// The largest record read (a unit's regular files are small by the hub's rule).
pub const RECORD_MAX_BYTES: u64 = 64 << 20;

/// The gate's word on the unit, as its report said it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateWord {
    /// `PASS` is the only verdict the join accepts.
    pub verdict: String,
    /// The gate's exit code (0 for PASS; 2 or 77 block the join).
    pub exit_code: u8,
}

/// One file of a unit, as the hub will hold it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordFile {
    /// Path in the release (`<unit>/<name>`).
    pub path: String,
    /// Bytes.
    pub size: u64,
    /// SHA-256 of the bytes.
    pub sha256: String,
    /// The hub's oid: the SHA-256 for LFS files, the git blob SHA-1 for regular files.
    pub oid: String,
    /// Stored as LFS (the hub's preupload answer).
    pub lfs: bool,
    /// The bytes of a regular file, base64 (`None` for LFS files: they are on the hub).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// What one worker hands the join for one unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnitRecord {
    /// [`RECORD_SCHEMA`].
    pub schema: String,
    /// The plan's name.
    pub plan: String,
    /// The target repository.
    pub target_repo: String,
    /// The upstream sources, `repo@revision`.
    pub sources: Vec<String>,
    /// The unit.
    pub unit: String,
    /// The unit's gate verdict.
    pub gate: GateWord,
    /// Files in the unit including its manifest (the unit's `index.json` totals).
    pub files_total: u64,
    /// Bytes in the unit including its manifest.
    pub bytes_total: u64,
    /// The highest container format version in the unit (0 when it has no container).
    pub format_version: u64,
    /// Every file of the unit, sorted by path.
    pub files: Vec<RecordFile>,
}

/// Why records cannot be written or joined.
#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    /// The plan was refused.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A record file could not be read or written.
    #[error("cannot {what} `{path}`: {source}")]
    Io {
        /// The operation.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A record is malformed or does not belong to this plan or unit.
    #[error("unit record `{path}`: {detail}")]
    Bad {
        /// The record file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The records do not cover the plan's units exactly.
    #[error("the records in `{dir}` do not cover the plan exactly: {detail}")]
    Coverage {
        /// The records directory.
        dir: PathBuf,
        /// Missing and foreign units.
        detail: String,
    },
}

impl UnitRecord {
    /// The record's bytes: pretty JSON and a trailing newline (deterministic: fields in order,
    /// files sorted by path).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = serde_json::to_vec_pretty(self).unwrap_or_default();
        b.push(b'\n');
        b
    }

    /// The decoded bytes of a regular file of the record.
    pub fn content(&self, f: &RecordFile, path: &Path) -> Result<Vec<u8>, RecordsError> {
        let text = f.content.as_deref().ok_or_else(|| RecordsError::Bad {
            path: path.to_owned(),
            detail: format!("regular file `{}` carries no content", f.path),
        })?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| RecordsError::Bad {
                path: path.to_owned(),
                detail: format!("content of `{}` is not base64: {e}", f.path),
            })
    }

    /// Check that the record belongs to `plan` and `unit` and is internally consistent: every path
    /// under the unit, regular files' content matching size, SHA-256 and oid, LFS oids equal to the
    /// SHA-256, the gate's word PASS with exit 0, the totals equal to the files.
    pub fn check(&self, plan: &Plan, unit: &str, path: &Path) -> Result<(), RecordsError> {
        let bad = |detail: String| RecordsError::Bad {
            path: path.to_owned(),
            detail,
        };
        let mine = crate::candidate::record::for_plan(plan, &Default::default());
        if self.schema != RECORD_SCHEMA {
            return Err(bad(format!(
                "schema `{}`, expected `{RECORD_SCHEMA}`",
                self.schema
            )));
        }
        if self.plan != mine.plan
            || self.target_repo != mine.target_repo
            || self.sources != mine.sources
        {
            return Err(bad(format!(
                "made for plan `{}` → `{}` from {:?}, not this plan (`{}` → `{}` from {:?})",
                self.plan,
                self.target_repo,
                self.sources,
                mine.plan,
                mine.target_repo,
                mine.sources
            )));
        }
        if self.unit != unit {
            return Err(bad(format!(
                "names unit `{}`, its file name says `{unit}`",
                self.unit
            )));
        }
        if self.gate.verdict != "PASS" || self.gate.exit_code != 0 {
            return Err(bad(format!(
                "the unit's gate said {} (exit {}): only PASS (exit 0) is joined; re-run that worker's gate",
                self.gate.verdict, self.gate.exit_code
            )));
        }
        let prefix = format!("{unit}/");
        let mut bytes = 0u64;
        let mut last: Option<&str> = None;
        for f in &self.files {
            let rest = f.path.strip_prefix(&prefix).unwrap_or("");
            if names::check_repo_path(&f.path).is_err() || rest.is_empty() {
                return Err(bad(format!("`{}` is not a path under `{prefix}`", f.path)));
            }
            if last.is_some_and(|l| l >= f.path.as_str()) {
                return Err(bad(format!("files not sorted or repeated at `{}`", f.path)));
            }
            last = Some(&f.path);
            if f.lfs {
                if f.oid != f.sha256 || f.content.is_some() {
                    return Err(bad(format!(
                        "LFS file `{}`: oid must be its SHA-256, no content",
                        f.path
                    )));
                }
            } else {
                let data = self.content(f, path)?;
                let ok = data.len() as u64 == f.size
                    && ledger::sha256_hex(&data) == f.sha256
                    && hub::protocol::git_blob_sha1(&data) == f.oid;
                if !ok {
                    return Err(bad(format!(
                        "regular file `{}`: its content does not match its size, SHA-256 and oid",
                        f.path
                    )));
                }
            }
            bytes += f.size;
        }
        if self.files_total != self.files.len() as u64 || self.bytes_total != bytes {
            return Err(bad(format!(
                "totals {} files / {} B, the files add up to {} / {bytes} B",
                self.files_total,
                self.bytes_total,
                self.files.len()
            )));
        }
        Ok(())
    }
}

/// Where the record of `unit` lives.
pub fn record_path(dir: &Path, unit: &str) -> PathBuf {
    dir.join(format!("{unit}.json"))
}

/// Read and check every record in `dir` against `plan`: exactly one per plan unit, nothing else
/// (a record for a unit the plan does not have, or any other file, is refused).
pub fn load_all(plan: &Plan, dir: &Path) -> Result<BTreeMap<String, UnitRecord>, RecordsError> {
    let io = |what| {
        let path = dir.to_owned();
        move |source| RecordsError::Io { what, path, source }
    };
    let mut found = BTreeMap::new();
    let mut foreign = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io("list"))? {
        let entry = entry.map_err(io("list"))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if ledger::is_temp_name(&name) {
            continue; // a writer's temporary file
        }
        let unit = name.strip_suffix(".json").unwrap_or("");
        if plan.units.iter().any(|u| u.name.as_str() == unit) {
            found.insert(unit.to_owned(), entry.path());
        } else {
            foreign.push(name);
        }
    }
    let missing: Vec<&str> = plan
        .units
        .iter()
        .map(|u| u.name.as_str())
        .filter(|u| !found.contains_key(*u))
        .collect();
    if !missing.is_empty() || !foreign.is_empty() {
        return Err(RecordsError::Coverage {
            dir: dir.to_owned(),
            detail: format!(
                "missing units {} ; files that are no unit's record {}",
                crate::cli::join_limited(&missing, 8),
                crate::cli::join_limited(&foreign, 8)
            ),
        });
    }
    let mut out = BTreeMap::new();
    for (unit, path) in found {
        let (rec, _) = load_one(plan, &unit, &path)?;
        out.insert(unit, rec);
    }
    Ok(out)
}

/// Read and check the record of `unit` at `path` against `plan`; also the SHA-256 of its bytes.
pub fn load_one(
    plan: &Plan,
    unit: &str,
    path: &Path,
) -> Result<(UnitRecord, String), RecordsError> {
    let bytes = read_limited(path)?;
    let rec: UnitRecord = serde_json::from_slice(&bytes).map_err(|e| RecordsError::Bad {
        path: path.to_owned(),
        detail: e.to_string(),
    })?;
    rec.check(plan, unit, path)?;
    Ok((rec, ledger::sha256_hex(&bytes).to_string()))
}

fn read_limited(path: &Path) -> Result<Vec<u8>, RecordsError> {
    let io = |what| {
        let path = path.to_owned();
        move |source| RecordsError::Io { what, path, source }
    };
    let len = std::fs::metadata(path).map_err(io("stat"))?.len();
    if len > RECORD_MAX_BYTES {
        return Err(RecordsError::Bad {
            path: path.to_owned(),
            detail: format!("{len} bytes, more than {RECORD_MAX_BYTES}"),
        });
    }
    std::fs::read(path).map_err(io("read"))
}
