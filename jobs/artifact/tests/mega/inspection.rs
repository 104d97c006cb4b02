//! The hub card's inspection rules (seed `004`, "Hub repository metadata card"): entry point,
//! fields and fallbacks, "verified" only after the contract validated, bounded reads.

use std::path::{Path, PathBuf};

use artifact::mega::inspect::{inspect, inspect_with, resolve, EntryPoint, TrustState};
use artifact::mega::ShardHeader;

use crate::mega::common::RecordingOpener;

fn golden(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/mega")
        .join(sub)
}

#[test]
fn single_file_card() {
    let card = inspect(&golden("single"), Some("acme/golden-0.1M")).unwrap();
    assert_eq!(card.entry, EntryPoint::Single("model.mega".into()));
    assert!(card.verified, "{:?}", card.failure);
    assert_eq!(card.parameter_count, Some(136));
    assert_eq!(card.tensor_count, Some(8));
    assert_eq!(card.files(), 1);
    assert_eq!(
        card.tensor_type(),
        "BF16 (2), F32 (2), F16 (1), F4 (1), F64 (1), U8 (1)"
    );
    assert!(matches!(
        card.trust,
        Some(TrustState::SignedUnverified { .. })
    ));
    let text = card.render();
    assert!(text.contains("model size: 136 params (136)\n"), "{text}");
    assert!(
        text.contains("tensors: 8\n") && text.contains("\nverified: "),
        "{text}"
    );
    assert!(text.contains("trust: signed-unverified"), "{text}");
}

#[test]
fn index_card_and_entry_through_the_index_file() {
    let card = inspect(&golden("sharded"), Some("acme/golden")).unwrap();
    assert_eq!(
        card.entry,
        EntryPoint::Index("model.mega.index.json".into())
    );
    assert!(card.verified, "{:?}", card.failure);
    assert_eq!(card.files(), 4);
    assert_eq!(card.tensor_count, Some(8));
    assert_eq!(card.parameter_count, Some(136));
    assert_eq!(card.trust, Some(TrustState::Unsigned));
    let via_file = inspect(&golden("sharded/model.mega.index.json"), Some("x")).unwrap();
    assert!(via_file.verified);
    // A shard of several, opened directly, is not a valid single-file entry.
    let shard = inspect(&golden("sharded/model-00002-of-00004.mega"), Some("x")).unwrap();
    assert!(!shard.verified);
    assert!(shard.failure.unwrap().contains("one shard of several"));
}

#[test]
fn shards_without_index_use_fallbacks() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("Qwen3.5-0.8B");
    std::fs::create_dir(&dir).unwrap();
    for i in 1..=4 {
        let n = format!("model-{i:05}-of-00004.mega");
        std::fs::copy(golden("sharded").join(&n), dir.join(&n)).unwrap();
    }
    let (_, entry, megas) = resolve(&dir).unwrap();
    assert!(matches!(entry, EntryPoint::Unindexed(ref v) if v.len() == 4));
    assert_eq!(megas.len(), 4);
    let card = inspect(&dir, None).unwrap();
    assert!(!card.verified);
    assert_eq!(card.tensor_count, None);
    assert_eq!(card.model_size(), "0.8B (from repository name)");
    assert_eq!(card.tensor_type(), "Mixed");
    assert_eq!(card.files(), 4);
    let text = card.render();
    assert!(
        !text.contains("verified:") && !text.contains("tensors:"),
        "{text}"
    );
    assert!(text.contains("without an index"), "{text}");
    assert!(
        card.failure.is_none() && text.contains("inspection: unavailable"),
        "{text}"
    );
    let card = inspect(&dir, Some("acme/thing-BF16")).unwrap();
    assert_eq!(card.tensor_type(), "BF16");
    let stored: u64 = megas
        .iter()
        .map(|m| std::fs::metadata(dir.join(m)).unwrap().len())
        .sum();
    assert!(
        card.model_size().ends_with("stored"),
        "{}",
        card.model_size()
    );
    assert_eq!(card.stored_bytes, stored);
}

#[test]
fn failed_inspection_hides_fields() {
    let tmp = tempfile::tempdir().unwrap();
    let mut b = std::fs::read(golden("single/model.mega")).unwrap();
    b[200] ^= 0xff;
    std::fs::write(tmp.path().join("model.mega"), &b).unwrap();
    let card = inspect(tmp.path(), Some("org/Model-7B-fp16")).unwrap();
    assert!(!card.verified);
    assert!(card.failure.as_deref().unwrap().contains("checksum"));
    assert_eq!(card.model_size(), "7B (from repository name)");
    assert_eq!(card.tensor_type(), "FP16");
    assert_eq!(card.files(), 1);
    let text = card.render();
    assert!(
        !text.contains("verified:") && !text.contains("tensors:"),
        "{text}"
    );
    assert!(text.contains("inspection: failed"), "{text}");
}

fn assert_no_payload_reads(dir: &Path, opener: &RecordingOpener) {
    let log = opener.log.borrow();
    assert!(!log.reads.is_empty());
    for (file, at, n) in &log.reads {
        if !file.ends_with(".mega") {
            continue;
        }
        let mut f = std::fs::File::open(dir.join(file)).unwrap();
        let h = ShardHeader::read(file, &mut f).unwrap();
        let (ps, pe) = (
            h.fixed.payload_offset,
            h.fixed.payload_offset + h.fixed.payload_size,
        );
        assert!(
            at + n <= ps || *at >= pe || *n == 0,
            "inspection read {file} bytes {at}..{} inside the payload {ps}..{pe}",
            at + n
        );
    }
}

#[test]
fn inspection_is_bounded_to_headers_and_index() {
    for (sub, entry) in [
        ("single", EntryPoint::Single("model.mega".into())),
        ("sharded", EntryPoint::Index("model.mega.index.json".into())),
    ] {
        let dir = golden(sub);
        let opener = RecordingOpener::new(&dir);
        let card = inspect_with(&opener, entry, "acme/x", &[]);
        assert!(card.verified, "{sub}: {:?}", card.failure);
        assert_no_payload_reads(&dir, &opener);
    }
}

#[test]
fn trust_states_are_reported_apart_from_hashes() {
    use artifact::mega::metadata::{Metadata, Value};
    use artifact::mega::writer::append_footer;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("model.mega");
    std::fs::copy(golden("single/model.mega"), &path).unwrap();
    let r = artifact::mega::verify(tmp.path()).unwrap();
    assert!(r.hashes_ok() && r.ok());
    assert!(
        matches!(r.trust, TrustState::SignedUnverified { ref scheme, .. } if scheme == "ed25519")
    );
    // A signature bound to another digest: hashes still ok, trust invalid, overall not ok.
    let mut md = Metadata::new();
    md.insert(
        "mega.trust.signed_digest".into(),
        Value::Str(format!("sha256:{}", "0".repeat(64))),
    );
    append_footer(&path, &md).unwrap();
    let r = artifact::mega::verify(tmp.path()).unwrap();
    assert!(
        r.hashes_ok(),
        "the footer overlay never touches the payload"
    );
    assert!(matches!(r.trust, TrustState::Invalid(ref m) if m.contains("not the payload sha256")));
    assert!(!r.ok());
    let text = r.render();
    assert!(text.contains("hashes: ok\ntrust: invalid"), "{text}");
    // Incomplete signing metadata is invalid too.
    let sharded = tmp.path().join("s");
    std::fs::create_dir(&sharded).unwrap();
    let p2 = sharded.join("model.mega");
    let g = std::fs::read(golden("single/model.mega")).unwrap();
    let h = ShardHeader::read("g", &mut std::io::Cursor::new(g.clone())).unwrap();
    // Strip the footer: truncate to the payload end and clear the footer fields + CRCs.
    let end = (h.fixed.payload_offset + h.fixed.payload_size) as usize;
    let mut fixed = h.fixed.clone();
    fixed.flags = 0;
    fixed.footer_offset = 0;
    fixed.footer_size = 0;
    fixed.footer_crc32 = 0;
    fixed.header_crc32 = 0;
    let mut b = g[..end].to_vec();
    b[..128].copy_from_slice(&fixed.encode());
    let crc = crc32fast::hash(&b[..h.fixed.payload_offset as usize]);
    b[0x68..0x6c].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&p2, &b).unwrap();
    assert_eq!(
        artifact::mega::verify(&sharded).unwrap().trust,
        TrustState::Unsigned
    );
    let mut md = Metadata::new();
    md.insert("mega.trust.scheme".into(), Value::Str("ed25519".into()));
    append_footer(&p2, &md).unwrap();
    let r = artifact::mega::verify(&sharded).unwrap();
    assert!(
        matches!(r.trust, TrustState::Invalid(ref m) if m.contains("mega.trust.signer")),
        "{:?}",
        r.trust
    );
}
