//! safetensors → MEGA → every tensor byte-identical to the source (single and multi-shard), index
//! resolution opening only the needed shards, and on-demand hash verification.

use artifact::mega::index::Release;
use artifact::mega::inspect::{verify, TrustState};
use artifact::mega::metadata::Value;
use artifact::mega::{DirOpener, ShardReader};
use tooling::mega::convert::{convert, source_tensors, ConvertOptions};

use crate::mega_common::{
    fixture_tensors, write_safetensors, write_sharded_source, write_side_files, RecordingOpener,
};

fn assert_release_matches_source(src: &std::path::Path, out: &std::path::Path, entry: &str) {
    let want = source_tensors(src).unwrap();
    assert_eq!(want.len(), fixture_tensors().len());
    let opener = DirOpener {
        dir: out.to_path_buf(),
    };
    let mut rel = if entry.ends_with(".json") {
        Release::open_index(opener, entry).unwrap()
    } else {
        Release::open_single(opener, entry).unwrap()
    };
    for (name, (dtype, shape, bytes)) in &want {
        let got = rel.read_tensor(name).unwrap();
        assert!(
            got == *bytes,
            "tensor `{name}` bytes differ from the source"
        );
        let file = rel.shard_of(name).unwrap();
        let e = rel
            .shard(&file)
            .unwrap()
            .header
            .tensor(name)
            .unwrap()
            .clone();
        assert_eq!((&e.dtype, &e.shape), (dtype, shape), "tensor `{name}`");
    }
}

#[test]
fn single_file_round_trip_is_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    write_safetensors(&src.join("model.safetensors"), &fixture_tensors());
    write_side_files(&src);
    let out = tmp.path().join("out");
    let summary = convert(&src, &out, &ConvertOptions::default()).unwrap();
    assert_eq!(summary.shards.len(), 1);
    assert!(summary.index_file.is_none());
    assert_release_matches_source(&src, &out, "model.mega");

    let r = ShardReader::open(&DirOpener { dir: out.clone() }, "model.mega").unwrap();
    let h = &r.header;
    assert_eq!(h.fixed.alignment, 4096);
    assert_eq!(h.fixed.payload_offset % 4096, 0);
    for t in &h.tensors {
        assert_eq!(t.offset % 4096, 0, "tensor `{}` is aligned", t.name);
    }
    let s = |k: &str| h.get_str(k).map(str::to_string);
    assert_eq!(s("general.architecture").as_deref(), Some("llama"));
    assert_eq!(s("model.class").as_deref(), Some("LlamaForCausalLM"));
    assert_eq!(s("model.dtype").as_deref(), Some("bfloat16"));
    assert_eq!(s("tokenizer.model").as_deref(), Some("bpe"));
    assert_eq!(s("tokenizer.bos_token").as_deref(), Some("<s>"));
    assert_eq!(s("safetensors.format").as_deref(), Some("pt"));
    assert_eq!(s("mega.layout.tensor_order").as_deref(), Some("source"));
    let init: serde_json::Value = serde_json::from_str(&s("model.init_args").unwrap()).unwrap();
    assert_eq!(init["hidden_size"], 6);
    let tokens = h.metadata.get("tokenizer.tokens").unwrap();
    assert_eq!(
        tokens,
        &Value::Array(
            ["<s>", "a", "b", "ab"]
                .iter()
                .map(|t| Value::Str(t.to_string()))
                .collect()
        )
    );
    assert_eq!(
        h.metadata.get("tokenizer.merges"),
        Some(&Value::Array(vec![Value::Str("a b".into())]))
    );
    assert_eq!(h.get_u64("mega.tensor.count"), Some(8));
    assert_eq!(h.get_u64("mega.shard.count"), Some(1));

    let report = verify(&out).unwrap();
    assert!(report.hashes_ok());
    assert_eq!(report.trust, TrustState::Unsigned);
    assert!(report.render().contains("hashes: ok\ntrust: unsigned\n"));
}

#[test]
fn sharded_round_trip_and_index() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    write_sharded_source(&src);
    let out = tmp.path().join("out");
    let opts = ConvertOptions {
        alignment: 64,
        max_shard_size: Some(100),
        name: None,
    };
    let summary = convert(&src.join("model.safetensors.index.json"), &out, &opts).unwrap();
    assert!(summary.shards.len() >= 3, "{} shards", summary.shards.len());
    let index = summary.index_file.clone().unwrap();
    assert_eq!(index, "model.mega.index.json");
    assert_release_matches_source(&src, &out, &index);
    // Tokenizer metadata only in the first shard; general/model in every shard.
    let o = DirOpener { dir: out.clone() };
    let first = ShardReader::open(&o, &summary.shards[0].file).unwrap();
    let last = ShardReader::open(&o, &summary.shards.last().unwrap().file).unwrap();
    assert!(first.header.metadata.contains_key("tokenizer.tokens"));
    assert!(!last.header.metadata.contains_key("tokenizer.tokens"));
    assert_eq!(last.header.get_str("general.architecture"), Some("llama"));
    assert!(verify(&out).unwrap().hashes_ok());
}

#[test]
fn index_is_resolved_first_and_only_needed_shards_open() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    write_sharded_source(&src);
    let out = tmp.path().join("out");
    let opts = ConvertOptions {
        alignment: 64,
        max_shard_size: Some(100),
        name: None,
    };
    let summary = convert(&src, &out, &opts).unwrap();
    let n = summary.shards.len();
    let opener = RecordingOpener::new(&out);
    let mut rel = Release::open_index(&opener, "model.mega.index.json").unwrap();
    assert_eq!(
        opener.opens(),
        vec!["model.mega.index.json"],
        "only the index is read first"
    );
    let last = summary.shards.last().unwrap();
    let name = last.tensors[0].clone();
    let bytes = rel.read_tensor(&name).unwrap();
    assert_eq!(
        opener.opens(),
        vec!["model.mega.index.json".to_string(), last.file.clone()]
    );
    // A second tensor of the same shard does not open it again.
    if let Some(other) = last.tensors.get(1) {
        rel.read_tensor(other).unwrap();
        assert_eq!(opener.opens().len(), 2);
    }
    assert_eq!(rel.opened_shards(), vec![last.file.clone()]);
    assert!(n > 2, "{n} shards, only one opened");
    let want = source_tensors(&src).unwrap();
    assert_eq!(bytes, want[&name].2);
    assert!(matches!(
        rel.read_tensor("no.such.tensor"),
        Err(artifact::mega::MegaError::TensorNotFound { .. })
    ));
}

#[test]
fn corrupted_payload_fails_hashes_not_header() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    write_safetensors(&src.join("model.safetensors"), &fixture_tensors());
    let out = tmp.path().join("out");
    let opts = ConvertOptions {
        alignment: 64,
        ..Default::default()
    };
    convert(&src, &out, &opts).unwrap();
    let path = out.join("model.mega");
    let mut bytes = std::fs::read(&path).unwrap();
    let r = ShardReader::open(&DirOpener { dir: out.clone() }, "model.mega").unwrap();
    let at = r.header.fixed.payload_offset as usize + 3;
    bytes[at] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let report = verify(&out).unwrap();
    assert!(!report.hashes_ok());
    assert!(!report.ok());
    let text = report.render();
    assert!(
        text.contains("MISMATCH") && text.contains("hashes: failed"),
        "{text}"
    );
    assert!(
        text.contains("trust: unsigned"),
        "trust is reported separately: {text}"
    );
}

mod prop {
    use artifact::mega::index::Release;
    use artifact::mega::layout::tensor_nbytes;
    use artifact::mega::{write_release, DirOpener, ReleaseOptions, TensorData, TensorOrder};
    use proptest::prelude::*;

    const DTYPES: &[&str] = &["U8", "F4", "BF16", "F32", "F64"];

    fn tensors() -> impl Strategy<Value = Vec<(usize, Vec<u64>)>> {
        proptest::collection::vec(
            (0..DTYPES.len(), proptest::collection::vec(0u64..7, 0..3)),
            1..10,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Any tensor set, alignment and shard budget: every tensor reads back byte-identical.
        #[test]
        fn write_read_round_trip(
            specs in tensors(),
            align_log in 3u32..9,
            budget in proptest::option::of(1u64..600),
            by_name in any::<bool>(),
        ) {
            let mut owned = Vec::new();
            for (i, (d, shape)) in specs.iter().enumerate() {
                let mut shape = shape.clone();
                // F4 needs an even element count.
                if DTYPES[*d] == "F4" { shape.push(2); }
                let n = tensor_nbytes(DTYPES[*d], &shape).unwrap() as usize;
                owned.push((format!("t{i}"), DTYPES[*d], shape, crate::mega_common::pattern(i as u32, n)));
            }
            let data: Vec<TensorData<'_>> = owned.iter().map(|(n, d, s, b)| TensorData {
                name: n.clone(), dtype: d.to_string(), shape: s.clone(), bytes: b,
            }).collect();
            let tmp = tempfile::tempdir().unwrap();
            let opts = ReleaseOptions {
                alignment: 1 << align_log,
                max_shard_size: budget,
                order: if by_name { TensorOrder::Name } else { TensorOrder::Source },
                ..Default::default()
            };
            let out = write_release(tmp.path(), &data, &opts).unwrap();
            let opener = DirOpener { dir: tmp.path().to_path_buf() };
            let mut rel = match &out.index_file {
                Some(i) => Release::open_index(opener, i).unwrap(),
                None => Release::open_single(opener, &out.shards[0].file).unwrap(),
            };
            for (n, _, _, b) in &owned {
                prop_assert_eq!(&rel.read_tensor(n).unwrap(), b);
            }
            prop_assert!(artifact::mega::verify(tmp.path()).unwrap().ok());
        }
    }
}

#[test]
fn convert_refuses_inconsistent_sources_and_non_empty_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    write_sharded_source(&src);
    let out = tmp.path().join("out");
    convert(&src, &out, &ConvertOptions::default()).unwrap();
    let e = convert(&src, &out, &ConvertOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("already holds") && e.contains("model.mega"),
        "{e}"
    );
    // An index that places a tensor in the wrong file is refused, naming the tensor.
    let idx = src.join("model.safetensors.index.json");
    let text = std::fs::read_to_string(&idx).unwrap().replacen(
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        1,
    );
    std::fs::write(&idx, text).unwrap();
    let e = convert(&src, &tmp.path().join("out2"), &ConvertOptions::default()).unwrap_err();
    assert!(e.to_string().contains("is not mapped to this file"), "{e}");
}
