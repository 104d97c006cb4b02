//! The release record `.minirun/release.json` (docs/publish.md §2): what a published release
//! holds besides the record itself, and which plan made it. `minirun-stage` writes it,
//! `candidate-upload` and `promote` check a branch against it, and the runner reads the family
//! and target from it — all through this one typed reader, which refuses unknown fields and
//! versions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where the release record lives in the release and on every branch it is uploaded to.
pub const RECORD_PATH: &str = ".minirun/release.json";

/// One file of an inventory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryEntry {
    /// Repo path.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// The hub's oid: LFS SHA-256 when `lfs`, else the git blob SHA-1.
    pub oid: String,
    /// Whether the hub stores it as LFS.
    pub lfs: bool,
}

/// An inventory: path → entry.
pub type Inventory = BTreeMap<String, InventoryEntry>;

/// The release record: what the candidate must hold besides the record itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRecord {
    /// Schema version (1).
    pub v: u32,
    /// The plan's name.
    pub plan: String,
    /// The plan's family.
    pub family: String,
    /// The target repository.
    pub target_repo: String,
    /// The public branch.
    pub target_branch: String,
    /// `repo@revision` of every upstream source, in plan order.
    pub sources: Vec<String>,
    /// Every release file except the record, sorted by path.
    pub files: Vec<InventoryEntry>,
}

/// Why bytes are not a release record (the caller names the file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// Not JSON of the record's shape (a missing or unknown field, a wrong type).
    #[error("{detail}")]
    Malformed {
        /// serde_json's message (line and column).
        detail: String,
    },
    /// A version this build does not read.
    #[error("unknown version {found} (this build reads version 1; update Minirun)")]
    Version {
        /// The `v` found.
        found: u32,
    },
}

impl ReleaseRecord {
    /// Canonical bytes: pretty JSON with a trailing newline (field order fixed by the struct).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).unwrap_or_default();
        v.push(b'\n');
        v
    }

    /// Parse strictly: every field present, none unknown, version 1.
    pub fn parse(bytes: &[u8]) -> Result<ReleaseRecord, RecordError> {
        let r: ReleaseRecord =
            serde_json::from_slice(bytes).map_err(|e| RecordError::Malformed {
                detail: e.to_string(),
            })?;
        if r.v != 1 {
            return Err(RecordError::Version { found: r.v });
        }
        Ok(r)
    }

    /// The expected inventory of a branch carrying this record: its files plus the record.
    pub fn expected(&self, record_entry: InventoryEntry) -> Inventory {
        let mut inv: Inventory = self
            .files
            .iter()
            .map(|e| (e.path.clone(), e.clone()))
            .collect();
        inv.insert(record_entry.path.clone(), record_entry);
        inv
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> ReleaseRecord {
        ReleaseRecord {
            v: 1,
            plan: "p".into(),
            family: "deepseek-v4".into(),
            target_repo: "o/r-minirun".into(),
            target_branch: "main".into(),
            sources: vec!["o/r@60d8d70770c6776ff598c94bb586a859a38244f1".into()],
            files: vec![InventoryEntry {
                path: "a".into(),
                size: 3,
                oid: "aa".into(),
                lfs: false,
            }],
        }
    }

    #[test]
    fn round_trips_and_refuses_what_it_does_not_know() {
        let r = record();
        let bytes = r.to_bytes();
        assert!(bytes.ends_with(b"}\n"));
        assert_eq!(ReleaseRecord::parse(&bytes), Ok(r.clone()));
        let text = String::from_utf8(bytes).unwrap();
        let extra = text.replacen("\"v\": 1,", "\"v\": 1,\n  \"extra\": 0,", 1);
        assert!(matches!(
            ReleaseRecord::parse(extra.as_bytes()),
            Err(RecordError::Malformed { .. })
        ));
        let v2 = text.replacen("\"v\": 1,", "\"v\": 2,", 1);
        assert_eq!(
            ReleaseRecord::parse(v2.as_bytes()),
            Err(RecordError::Version { found: 2 })
        );
        let missing = text.replacen("\"family\": \"deepseek-v4\",", "", 1);
        let e = ReleaseRecord::parse(missing.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("family"), "{e}");
    }
}
