//! The hub card's inspection rules (seed `004`, "Hub repository metadata card"): entry point,
//! fields and fallbacks, "verified" only after the contract validated, bounded reads.

use std::path::{Path, PathBuf};

use artifact::mega::inspect::{inspect, inspect_with, resolve, EntryPoint, TrustState};
use artifact::mega::ShardHeader;

use crate::common::RecordingOpener;

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
