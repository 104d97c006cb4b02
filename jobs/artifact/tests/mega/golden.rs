//! Golden files: the writer's output for fixed inputs is frozen byte for byte under
//! `tests/golden/mega/` (docs/mega.md §10). Regenerate deliberately with
//! `MEGA_BLESS=1 cargo test -p artifact --test integration mega::golden_files_are_byte_identical` and review
//! the diff (only that test: the others read the goldens while it rewrites them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use artifact::mega::metadata::{Metadata, Value};
use artifact::mega::writer::append_footer;
use artifact::mega::{write_release, ReleaseOptions, TensorData, TensorOrder};
use sha2::{Digest, Sha256};

use crate::mega::common::{fixture_tensors, golden_metadata, golden_tokenizer};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/mega")
}

/// Write the golden release set into `root` (`single/`, `sharded/`, `expected.json`).
pub fn write_goldens(root: &Path) {
    let t = fixture_tensors();
    let data: Vec<TensorData<'_>> = t
        .iter()
        .map(|(n, d, s, b)| TensorData {
            name: n.clone(),
            dtype: d.clone(),
            shape: s.clone(),
            bytes: b,
        })
        .collect();
    let single = ReleaseOptions {
        alignment: 64,
        max_shard_size: None,
        order: TensorOrder::Source,
        metadata: golden_metadata(),
        first_shard_metadata: golden_tokenizer(),
        base_name: "model".into(),
    };
    let out = write_release(&root.join("single"), &data, &single).unwrap();
    let sha = out.shards[0].sha256.clone();
    let mut trust = Metadata::new();
    for (k, v) in [
        ("mega.trust.scheme", "ed25519"),
        ("mega.trust.signer", "golden-test-key"),
        (
            "mega.trust.public_key",
            "AAAAC3RoaXMtaXMtbm90LWEtcmVhbC1rZXk",
        ),
        (
            "mega.trust.signature",
            "dGhpcyBpcyBub3QgYSByZWFsIHNpZ25hdHVyZQ",
        ),
        ("mega.trust.timestamp", "2026-01-01T00:00:00Z"),
    ] {
        trust.insert(k.into(), Value::Str(v.into()));
    }
    trust.insert(
        "mega.trust.signed_digest".into(),
        Value::Str(format!("sha256:{sha}")),
    );
    trust.insert("acme.note".into(), Value::Str("footer overlay".into()));
    append_footer(&root.join("single/model.mega"), &trust).unwrap();

    let sharded = ReleaseOptions {
        max_shard_size: Some(128),
        order: TensorOrder::Name,
        ..single
    };
    let out = write_release(&root.join("sharded"), &data, &sharded).unwrap();
    assert_eq!(out.shards.len(), 4, "the golden release has four shards");

    let expected: Vec<serde_json::Value> = t
        .iter()
        .map(|(n, d, s, b)| {
            serde_json::json!({
                "name": n, "dtype": d, "shape": s, "sha256": hex::encode(Sha256::digest(b)),
            })
        })
        .collect();
    let text = serde_json::to_string_pretty(&serde_json::json!({ "tensors": expected })).unwrap();
    std::fs::write(root.join("expected.json"), text + "\n").unwrap();
}

fn files_under(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn golden_files_are_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    write_goldens(tmp.path());
    let fresh = files_under(tmp.path());
    if std::env::var_os("MEGA_BLESS").is_some() {
        let g = golden_dir();
        let _ = std::fs::remove_dir_all(&g);
        for (rel, bytes) in &fresh {
            let p = g.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, bytes).unwrap();
        }
    }
    let golden = files_under(&golden_dir());
    assert_eq!(
        golden.keys().collect::<Vec<_>>(),
        fresh.keys().collect::<Vec<_>>(),
        "golden file set differs (bless with MEGA_BLESS=1 after reviewing docs/mega.md)"
    );
    for (rel, bytes) in &fresh {
        let g = &golden[rel];
        let first = g.iter().zip(bytes).position(|(a, b)| a != b);
        assert!(
            g == bytes,
            "`{rel}` differs from the golden file (len {} vs {}, first difference at {first:?})",
            g.len(),
            bytes.len()
        );
    }
}

#[test]
fn golden_single_header_fields() {
    let bytes = std::fs::read(golden_dir().join("single/model.mega")).unwrap();
    // Fixed header (docs/mega.md §2.1), checked field by field from the raw bytes.
    assert_eq!(&bytes[0..8], b"MEGA\0\r\n\x1a");
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 1);
    assert_eq!(
        u32::from_le_bytes(bytes[12..16].try_into().unwrap()),
        1,
        "footer flag"
    );
    assert_eq!(u64_at(0x10), 64, "alignment");
    assert_eq!(u64_at(0x20), 8, "tensor count");
    assert_eq!(u64_at(0x28), 128, "metadata offset");
    let payload_offset = u64_at(0x48);
    assert_eq!(payload_offset % 64, 0);
    let file_len = u64_at(0x58) + u64_at(0x60);
    assert_eq!(file_len, bytes.len() as u64);
    let mut zeroed = bytes[..payload_offset as usize].to_vec();
    zeroed[0x68..0x6c].fill(0);
    assert_eq!(
        crc32fast::hash(&zeroed),
        u32::from_le_bytes(bytes[0x68..0x6c].try_into().unwrap())
    );
}
