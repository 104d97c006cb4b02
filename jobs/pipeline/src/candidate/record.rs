//! The release record for a plan (the type is `artifact::release_record`) and the candidate branch name (`docs/publish.md`
//! §2–§3). Both are pure functions of `(path, size, hub oid)` triples, so the name can be
//! recomputed from a remote tree alone: the oid is the one the hub reports — the LFS SHA-256 for
//! LFS files, the git blob SHA-1 for regular files.

use hub::protocol::TreeEntry;
use sha2::Digest as _;

use crate::plan::Plan;

pub use artifact::release_record::{
    Inventory, InventoryEntry, RecordError, ReleaseRecord, RECORD_PATH,
};

/// The platform-managed attributes file, the one path allowed to differ.
pub const GITATTRIBUTES: &str = ".gitattributes";
/// Branch prefix of candidates.
pub const PREFIX: &str = "candidate-";

/// The record for `plan` over `files`.
pub fn for_plan(plan: &Plan, files: &Inventory) -> ReleaseRecord {
    ReleaseRecord {
        v: 1,
        plan: plan.name.clone(),
        family: plan.family.as_str().to_owned(),
        target_repo: plan.target.repo.as_str().to_owned(),
        target_branch: plan.target.branch.as_str().to_owned(),
        sources: plan
            .sources
            .iter()
            .map(|s| format!("{}@{}", s.repo.as_str(), s.revision.as_str()))
            .collect(),
        files: files.values().cloned().collect(),
    }
}

/// Whether `rec` belongs to `plan` (same plan name, family, target and sources).
pub fn matches_plan(rec: &ReleaseRecord, plan: &Plan) -> bool {
    let mine = for_plan(plan, &Inventory::new());
    rec.plan == mine.plan
        && rec.family == mine.family
        && rec.target_repo == mine.target_repo
        && rec.target_branch == mine.target_branch
        && rec.sources == mine.sources
}

/// `candidate-<sha256>` over the sorted `path\0size\0oid\n` lines of `inv` (the record
/// included, `.gitattributes` never).
pub fn candidate_name(inv: &Inventory) -> String {
    let mut h = sha2::Sha256::new();
    for e in inv.values().filter(|e| e.path != GITATTRIBUTES) {
        h.update(e.path.as_bytes());
        h.update([0]);
        h.update(e.size.to_string().as_bytes());
        h.update([0]);
        h.update(e.oid.as_bytes());
        h.update(b"\n");
    }
    format!("{PREFIX}{}", hex::encode(h.finalize()))
}

/// The inventory of a remote tree (files only, `.gitattributes` left out).
pub fn tree_inventory(tree: &[TreeEntry]) -> Inventory {
    tree.iter()
        .filter(|e| e.is_file() && e.path != GITATTRIBUTES)
        .map(|e| {
            let (oid, lfs) = match &e.lfs {
                Some(l) => (l.oid.clone(), true),
                None => (e.oid.clone(), false),
            };
            (
                e.path.clone(),
                InventoryEntry {
                    path: e.path.clone(),
                    size: e.size,
                    oid,
                    lfs,
                },
            )
        })
        .collect()
}

/// The first differences between `want` and `got` (path and what differs), at most `max`.
pub fn differences(want: &Inventory, got: &Inventory, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    for (p, w) in want {
        match got.get(p) {
            None => out.push(format!("`{p}` missing")),
            Some(g) if g.size != w.size => {
                out.push(format!("`{p}` is {} bytes, expected {}", g.size, w.size))
            }
            Some(g) if g.oid != w.oid => {
                out.push(format!("`{p}` has oid {}, expected {}", g.oid, w.oid))
            }
            _ => {}
        }
    }
    for p in got.keys().filter(|p| !want.contains_key(*p)) {
        out.push(format!("`{p}` is not in the release"));
    }
    out.truncate(max);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(path: &str, size: u64, oid: &str) -> InventoryEntry {
        InventoryEntry {
            path: path.into(),
            size,
            oid: oid.into(),
            lfs: false,
        }
    }

    #[test]
    fn name_changes_with_any_oid_and_ignores_gitattributes() {
        let mut inv = Inventory::new();
        inv.insert("a".into(), e("a", 3, "aa"));
        inv.insert("b/c".into(), e("b/c", 5, "bb"));
        let n1 = candidate_name(&inv);
        assert!(n1.starts_with(PREFIX) && !n1.contains('/') && n1.len() == PREFIX.len() + 64);
        inv.insert(GITATTRIBUTES.into(), e(GITATTRIBUTES, 9, "cc"));
        assert_eq!(candidate_name(&inv), n1);
        inv.insert("a".into(), e("a", 3, "ab"));
        assert_ne!(candidate_name(&inv), n1);
    }

    #[test]
    fn differences_name_the_path() {
        let mut a = Inventory::new();
        a.insert("x".into(), e("x", 1, "o"));
        let mut b = a.clone();
        assert!(differences(&a, &b, 5).is_empty());
        b.insert("y".into(), e("y", 1, "o"));
        b.insert("x".into(), e("x", 2, "o"));
        let d = differences(&a, &b, 5);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].contains("`x`") && d[1].contains("`y`"));
    }
}
