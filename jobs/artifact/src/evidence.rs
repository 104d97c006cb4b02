//! Verification evidence files (`docs/verify.md` §4): `<dir>/.minirun-evidence/<commit>.json`,
//! written by `minirun-verify` after a complete `VERIFIED` pass over one commit, read by the
//! runner before it loads a byte (`docs/runner.md` "Verified-only execution"). One file per
//! commit: evidence never carries over to another commit. The filesystem identities inside are
//! [`crate::fsid::Identity`]; whether one still holds is [`crate::fsid::still_holds`].

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fsid::Identity;

/// The evidence directory inside a local copy (not part of any published tree).
pub const EVIDENCE_DIR: &str = ".minirun-evidence";

/// The largest evidence file read (a real artifact lists ~1000 files of ~300 bytes each).
pub const EVIDENCE_MAX_BYTES: u64 = 64 << 20;

/// One verified file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceFile {
    /// Repo path.
    pub path: String,
    /// `sha256` (LFS) or `git-sha1` (regular).
    pub check: String,
    /// The digest that agreed.
    pub digest: String,
    /// The filesystem object it was computed over.
    pub identity: Identity,
}

/// The evidence of one complete verification of one commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// Schema version (1).
    pub v: u32,
    /// The repository.
    pub repo: String,
    /// The commit.
    pub commit: String,
    /// Every file of the tree.
    pub files: Vec<EvidenceFile>,
}

/// Where the evidence for `commit` lives under `dir`.
pub fn evidence_path(dir: &Path, commit: &str) -> PathBuf {
    dir.join(EVIDENCE_DIR).join(format!("{commit}.json"))
}

/// Why an evidence file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    /// The file could not be opened or read.
    #[error("cannot read evidence `{path}`")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not evidence of schema 1 for the commit its name says.
    #[error("evidence `{path}` is malformed: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl Evidence {
    /// Reads the evidence for `commit` under `dir` (strict: unknown fields, another schema
    /// version, or a `commit` field that is not the file's own commit are refused).
    pub fn read(dir: &Path, commit: &str) -> Result<Evidence, EvidenceError> {
        use std::io::Read;
        let path = evidence_path(dir, commit);
        let io = |source| EvidenceError::Io {
            path: path.clone(),
            source,
        };
        let mut bytes = Vec::new();
        std::fs::File::open(&path)
            .map_err(io)?
            .take(EVIDENCE_MAX_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        let bad = |reason: String| EvidenceError::Malformed {
            path: path.clone(),
            reason,
        };
        if bytes.len() as u64 > EVIDENCE_MAX_BYTES {
            return Err(bad(format!("longer than {EVIDENCE_MAX_BYTES} bytes")));
        }
        let ev: Evidence = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        if ev.v != 1 {
            return Err(bad(format!("schema version {} (this build reads 1)", ev.v)));
        }
        if ev.commit != commit {
            return Err(bad(format!(
                "it names commit `{}`, not `{commit}`",
                ev.commit
            )));
        }
        Ok(ev)
    }

    /// The commits that have an evidence file under `dir`, sorted (names `<40 hex>.json` only).
    pub fn commits(dir: &Path) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(dir.join(EVIDENCE_DIR))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let stem = name.strip_suffix(".json")?;
                crate::names::check_revision(stem).ok()?;
                Some(stem.to_owned())
            })
            .collect();
        out.sort();
        out
    }

    /// The entry for repository path `path`.
    pub fn file(&self, path: &str) -> Option<&EvidenceFile> {
        self.files.iter().find(|f| f.path == path)
    }
}
