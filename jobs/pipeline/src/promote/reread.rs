//! Promote's metadata re-read: before the public branch moves, the candidate's `index.json` and
//! every unit manifest are reopened from the hub through the production readers
//! ([`IndexDocument::read`], [`Manifest::parse`]) and checked against the candidate's tree —
//! without downloading a payload byte that the hub stores as LFS (docs/publish.md §4).
//!
//! A unit is a top-level directory holding `manifest.json`. Each must hold exactly its manifest's
//! files plus the manifest (the gate's file-set rule), each the size the manifest says; an LFS
//! file's oid is its SHA-256 and must equal the manifest's; a regular (non-LFS) file is small by
//! the repository's own rule and is downloaded and hashed. A tree with no unit is refused: zero
//! evidence is never a release. The after-commit inventory then proves the public tree holds
//! these same objects.

use std::collections::{BTreeMap, BTreeSet};

use artifact::index_json::{IndexDocument, Shape};
use artifact::manifest::{Manifest, MANIFEST_FILE_NAME};
use serde::Serialize;
use sha2::Digest as _;

use crate::candidate::record::Inventory;

/// The release's root index.
pub const INDEX_PATH: &str = "index.json";

/// What the re-read established (in promote's report).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reread {
    /// The index's shape as the reader named it.
    pub index_shape: String,
    /// Units whose manifest was read.
    pub units: usize,
    /// Unit files checked against their manifests (LFS oid or downloaded bytes).
    pub files: usize,
    /// Their bytes: vouched for by the manifests without downloading the LFS ones.
    pub bytes_vouched: u64,
    /// Bytes the re-read downloaded (the index, the manifests, small regular files).
    pub bytes_downloaded: u64,
}

/// The paths the re-read downloads first: the index and every unit manifest, in tree order.
pub fn metadata_paths(tree: &Inventory) -> Vec<String> {
    let mut out: Vec<String> = tree
        .keys()
        .filter(|p| unit_of_manifest(p).is_some())
        .cloned()
        .collect();
    if tree.contains_key(INDEX_PATH) {
        out.insert(0, INDEX_PATH.to_owned());
    }
    out
}

/// The regular (non-LFS) unit files the manifests name, which must be downloaded to be hashed.
pub fn regular_unit_files(tree: &Inventory, manifests: &BTreeMap<String, Manifest>) -> Vec<String> {
    manifests
        .iter()
        .flat_map(|(unit, m)| m.files.iter().map(move |e| format!("{unit}/{}", e.path)))
        .filter(|p| tree.get(p).is_some_and(|e| !e.lfs))
        .collect()
}

/// Parses the downloaded manifests (`<unit>/manifest.json` → bytes); a manifest that does not
/// parse, or names another unit, is a problem.
pub fn parse_manifests(
    downloaded: &BTreeMap<String, Vec<u8>>,
    problems: &mut Vec<String>,
) -> BTreeMap<String, Manifest> {
    let mut out = BTreeMap::new();
    for (path, bytes) in downloaded {
        let Some(unit) = unit_of_manifest(path) else {
            continue;
        };
        match Manifest::parse(bytes) {
            Ok(m) if m.unit == unit => {
                out.insert(unit.to_owned(), m);
            }
            Ok(m) => problems.push(format!("`{path}` is the manifest of unit `{}`", m.unit)),
            Err(e) => problems.push(format!("`{path}`: {e}")),
        }
    }
    out
}

/// The manifests as [`parse_manifests`] read them, with the problems it found.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Unit → its manifest.
    pub manifests: BTreeMap<String, Manifest>,
    /// Manifests that did not parse or name another unit.
    pub problems: Vec<String>,
}

impl Parsed {
    /// Parse the manifests among `downloaded` once, for both the download of the regular files
    /// they name and [`check`].
    pub fn of(downloaded: &BTreeMap<String, Vec<u8>>) -> Parsed {
        let mut problems = Vec::new();
        let manifests = parse_manifests(downloaded, &mut problems);
        Parsed {
            manifests,
            problems,
        }
    }
}

/// The checks, on what was downloaded: `downloaded` holds the index, the manifests (parsed in
/// `parsed`) and the regular unit files by path. Returns the counts, or every problem found (at
/// most `max`).
pub fn check(
    tree: &Inventory,
    downloaded: &BTreeMap<String, Vec<u8>>,
    parsed: Parsed,
    max: usize,
) -> Result<Reread, Vec<String>> {
    let Parsed {
        manifests,
        problems: parse_problems,
    } = parsed;
    let mut problems = Vec::new();
    let mut out = Reread {
        bytes_downloaded: downloaded.values().map(|b| b.len() as u64).sum(),
        ..Reread::default()
    };
    match downloaded.get(INDEX_PATH) {
        None => problems.push(format!("the tree has no `{INDEX_PATH}`")),
        Some(bytes) => {
            let doc = IndexDocument::read(bytes);
            out.index_shape = doc.shape.name().to_owned();
            match &doc.shape {
                Shape::Unrecognized { reason, .. } | Shape::Unreadable { reason } => problems.push(
                    format!("`{INDEX_PATH}` reads as {}: {reason}", doc.shape.name()),
                ),
                _ => {}
            }
        }
    }
    problems.extend(parse_problems);
    if manifests.is_empty() {
        problems.push(format!(
            "no unit manifest (`<unit>/{MANIFEST_FILE_NAME}`) reads back: zero evidence is not a release"
        ));
    }
    for (unit, m) in &manifests {
        check_unit(tree, downloaded, unit, m, &mut out, &mut problems);
    }
    out.units = manifests.len();
    problems.truncate(max);
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// One unit: its directory holds exactly the manifest's files plus the manifest, each as the
/// manifest describes it.
fn check_unit(
    tree: &Inventory,
    downloaded: &BTreeMap<String, Vec<u8>>,
    unit: &str,
    m: &Manifest,
    out: &mut Reread,
    problems: &mut Vec<String>,
) {
    let prefix = format!("{unit}/");
    let in_tree: BTreeSet<&str> = tree
        .keys()
        .filter_map(|p| p.strip_prefix(&prefix))
        .filter(|p| *p != MANIFEST_FILE_NAME)
        .collect();
    let listed: BTreeSet<&str> = m.files.iter().map(|e| e.path.as_str()).collect();
    for extra in in_tree.difference(&listed) {
        problems.push(format!("`{prefix}{extra}` is not in its unit's manifest"));
    }
    for e in &m.files {
        let path = format!("{prefix}{}", e.path);
        let Some(t) = tree.get(&path) else {
            problems.push(format!("`{path}` (in the manifest) is not in the tree"));
            continue;
        };
        if t.size != e.size {
            problems.push(format!(
                "`{path}` is {} bytes in the tree, {} in the manifest",
                t.size, e.size
            ));
            continue;
        }
        let sha256 = if t.lfs {
            t.oid.clone()
        } else {
            match downloaded.get(&path) {
                Some(bytes) => hex::encode(sha2::Sha256::digest(bytes)),
                None => {
                    problems.push(format!("`{path}` was not downloaded to be hashed"));
                    continue;
                }
            }
        };
        if sha256 != e.sha256 {
            problems.push(format!(
                "`{path}` has SHA-256 {sha256}, its manifest says {}",
                e.sha256
            ));
            continue;
        }
        out.files += 1;
        out.bytes_vouched += e.size;
    }
}

/// `<unit>/manifest.json` → `unit` (top-level, non-hidden directories only).
fn unit_of_manifest(path: &str) -> Option<&str> {
    let unit = path.strip_suffix(MANIFEST_FILE_NAME)?.strip_suffix('/')?;
    (!unit.is_empty() && !unit.contains('/') && !unit.starts_with('.')).then_some(unit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use artifact::manifest::{FileKind, ManifestEntry};
    use artifact::release_record::InventoryEntry;

    fn sha(b: &[u8]) -> String {
        hex::encode(sha2::Sha256::digest(b))
    }

    fn entry(path: &str, size: u64, oid: &str, lfs: bool) -> (String, InventoryEntry) {
        let e = InventoryEntry {
            path: path.into(),
            size,
            oid: oid.into(),
            lfs,
        };
        (path.into(), e)
    }

    /// A one-unit release: a 4 MiB LFS container and a small regular plain stream.
    fn release() -> (Inventory, BTreeMap<String, Vec<u8>>) {
        let small = b"norm bytes".to_vec();
        let big_sha = "ab".repeat(32);
        let m = Manifest {
            v: 1,
            unit: "layers00".into(),
            files: vec![
                ManifestEntry {
                    path: "a.til".into(),
                    size: 4 << 20,
                    sha256: big_sha.clone(),
                    kind: FileKind::Container,
                    sources: vec![],
                },
                ManifestEntry {
                    path: "norm.bin".into(),
                    size: small.len() as u64,
                    sha256: sha(&small),
                    kind: FileKind::Plain,
                    sources: vec![],
                },
            ],
        };
        let mbytes = m.to_bytes();
        // A real index shape (the artifact crate's golden of V4's shape).
        let index = include_bytes!("../../../artifact/tests/golden/index-single-source-units.json")
            .to_vec();
        let tree: Inventory = [
            entry(INDEX_PATH, index.len() as u64, "1", false),
            entry("layers00/manifest.json", mbytes.len() as u64, "2", false),
            entry("layers00/a.til", 4 << 20, &big_sha, true),
            entry("layers00/norm.bin", small.len() as u64, "3", false),
            entry("config.json", 2, "4", false),
        ]
        .into_iter()
        .collect();
        let downloaded = [
            (INDEX_PATH.to_owned(), index),
            ("layers00/manifest.json".to_owned(), mbytes),
            ("layers00/norm.bin".to_owned(), small),
        ]
        .into_iter()
        .collect();
        (tree, downloaded)
    }

    #[test]
    fn a_consistent_release_reads_back_without_its_lfs_bytes() {
        let (tree, dl) = release();
        assert_eq!(
            metadata_paths(&tree),
            vec![INDEX_PATH.to_owned(), "layers00/manifest.json".to_owned()]
        );
        let mut problems = Vec::new();
        let ms = parse_manifests(&dl, &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            regular_unit_files(&tree, &ms),
            vec!["layers00/norm.bin".to_owned()]
        );
        let r = check(&tree, &dl, Parsed::of(&dl), 10);
        let Ok(r) = r else {
            panic!("{r:?}");
        };
        assert_eq!((r.units, r.files), (1, 2));
        assert_eq!(r.bytes_vouched, (4 << 20) + 10);
        assert!(r.bytes_downloaded < 4096, "{}", r.bytes_downloaded);
    }

    #[test]
    fn every_disagreement_is_named() {
        let problems = |tree: &Inventory, dl: &BTreeMap<String, Vec<u8>>| {
            check(tree, dl, Parsed::of(dl), 10)
                .err()
                .unwrap_or_default()
                .join("\n")
        };
        // An LFS oid that is not the manifest's digest.
        let (mut tree, dl) = release();
        if let Some(e) = tree.get_mut("layers00/a.til") {
            e.oid = "cd".repeat(32);
        }
        assert!(problems(&tree, &dl).contains("`layers00/a.til` has SHA-256 cdcd"));
        // A regular file whose bytes are not the manifest's.
        let (tree, mut dl) = release();
        dl.insert("layers00/norm.bin".into(), b"norm bytez".to_vec());
        assert!(problems(&tree, &dl).contains("`layers00/norm.bin` has SHA-256"));
        // A size that differs, a stray file, a missing file.
        let (mut tree, dl) = release();
        if let Some(e) = tree.get_mut("layers00/a.til") {
            e.size += 1;
        }
        tree.extend([entry("layers00/stray.bin", 1, "5", false)]);
        tree.remove("layers00/norm.bin");
        let p = problems(&tree, &dl);
        assert!(
            p.contains("`layers00/a.til` is 4194305 bytes in the tree"),
            "{p}"
        );
        assert!(
            p.contains("`layers00/stray.bin` is not in its unit's manifest"),
            "{p}"
        );
        assert!(
            p.contains("`layers00/norm.bin` (in the manifest) is not in the tree"),
            "{p}"
        );
        // An index no reader recognises.
        let (tree, mut dl) = release();
        dl.insert(INDEX_PATH.into(), b"{\"hello\": 1}".to_vec());
        assert!(problems(&tree, &dl).contains("`index.json` reads as unrecognized"));
        // A manifest filed under another unit's name.
        let (tree, mut dl) = release();
        let m = dl.remove("layers00/manifest.json").unwrap_or_default();
        dl.insert("layers01/manifest.json".into(), m);
        assert!(problems(&tree, &dl).contains("is the manifest of unit `layers00`"));
    }

    #[test]
    fn zero_units_is_zero_evidence() {
        let (mut tree, mut dl) = release();
        tree.retain(|p, _| !p.starts_with("layers00/"));
        dl.retain(|p, _| p == INDEX_PATH);
        assert!(metadata_paths(&tree) == vec![INDEX_PATH.to_owned()]);
        let p = check(&tree, &dl, Parsed::of(&dl), 10)
            .err()
            .unwrap_or_default()
            .join("\n");
        assert!(p.contains("zero evidence is not a release"), "{p}");
    }
}
