//! The Llama-family adapter reads SmolLM2's configuration from GGUF metadata, and refuses a file
//! of another architecture or one missing a tensor with a message naming it.

#![allow(clippy::panic, clippy::unwrap_used)]

use crate::common;

use artifact::gguf::{writer, Value};
use kernels::{RopeMode, WeightFormat};
use runner::model::LlamaModel;

#[test]
fn smollm2_configuration_and_refusals() {
    let Some(path) = common::model_path("smollm2_configuration_and_refusals") else {
        return;
    };
    let model = LlamaModel::open(&path).expect("open model");
    let c = &model.config;
    assert_eq!(
        (
            c.n_layers,
            c.dim,
            c.ffn,
            c.n_heads,
            c.n_kv_heads,
            c.head_dim,
            c.rot_dim,
            c.vocab
        ),
        (30, 576, 1536, 9, 3, 64, 64, 49152)
    );
    assert_eq!(c.rope_base, 100000.0);
    assert_eq!(c.rope_mode, RopeMode::Interleaved);
    assert_eq!(model.output.name, "token_embd.weight", "tied embeddings");
    assert_eq!(model.output.format, WeightFormat::Q8_0);
    assert_eq!(model.layers[0].q.format, WeightFormat::Q4_1);

    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, meta: &artifact::gguf::Metadata| {
        let p = dir.path().join(name);
        writer::write_file(&p, meta, &[], 32, |_| unreachable!()).unwrap();
        p
    };
    let mut meta = model.gguf.metadata().clone();
    meta.set("general.architecture", Value::String(b"gpt2".to_vec()));
    let err = LlamaModel::open(&write("gpt2.gguf", &meta))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("architecture `gpt2`"), "{err}");
    let meta = model.gguf.metadata().clone();
    let err = LlamaModel::open(&write("empty.gguf", &meta))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("`blk.0.attn_q.weight`") && err.contains("missing"),
        "{err}"
    );
}
