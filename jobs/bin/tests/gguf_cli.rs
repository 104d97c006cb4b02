//! `minirun-gguf` end to end: exit codes (0 success, 1 refusal, 64 usage), the seed's refusal
//! texts with our program name, split/quantize/convert on files built in the test.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::borrow::Cow;
use std::path::Path;
use std::process::Command;

use artifact::gguf::writer::{write_file, TensorSpec};
use artifact::gguf::{GgmlType, GgufModel, Metadata, Value};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_minirun-gguf"))
}

fn run(args: &[&str]) -> (i32, String, String) {
    let o = bin().args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A small tied f32 model: token_embd [256 × 4], a 2-D [96 × 2] (K-demoted), a 1-D norm.
fn tiny(path: &Path, with_output: bool) {
    let mut md = Metadata::default();
    md.set("general.architecture", Value::str("llama"));
    md.set("general.file_type", Value::U32(0));
    let mut specs = vec![
        TensorSpec {
            name: "token_embd.weight".into(),
            dims: vec![256, 4],
            ggml_type: GgmlType::F32,
        },
        TensorSpec {
            name: "blk.0.attn_q.weight".into(),
            dims: vec![96, 2],
            ggml_type: GgmlType::F32,
        },
        TensorSpec {
            name: "blk.0.attn_norm.weight".into(),
            dims: vec![256],
            ggml_type: GgmlType::F32,
        },
    ];
    if with_output {
        specs.push(TensorSpec {
            name: "output.weight".into(),
            dims: vec![256, 2],
            ggml_type: GgmlType::F32,
        });
    }
    write_file(path, &md, &specs, 32, |i| {
        let n = specs[i].dims.iter().product::<u64>() as usize;
        Ok(Cow::Owned(f32_bytes(
            &(0..n)
                .map(|j| ((j * 37 % 101) as f32 - 50.0) / 17.0)
                .collect::<Vec<_>>(),
        )))
    })
    .unwrap();
}

#[test]
fn required_flags_are_our_refusals_with_exit_1() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("m.gguf");
    tiny(&src, false);
    let s = src.to_str().unwrap();
    let (c, _, e) = run(&["quantize", s, "/tmp/never.gguf"]);
    assert_eq!(c, 1);
    assert!(e.contains("minirun-gguf quantize: --type is required (no silent default: a wrong target would write wrong weights); supported: q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K, f16, f32"), "{e}");
    let (c, _, e) = run(&["split", s, d.path().to_str().unwrap()]);
    assert_eq!(c, 1);
    assert!(
        e.contains("minirun-gguf split: --max-size is required (no silent default part size)"),
        "{e}"
    );
    let (c, _, e) = run(&["quantize", s, "/tmp/never.gguf", "--type", "iq4_nl"]);
    assert_eq!(c, 1);
    assert!(
        e.contains(
            "target \"iq4_nl\" is a known GGUF type but minirun-gguf has no weight encoder for it"
        ),
        "{e}"
    );
    let (c, _, e) = run(&["quantize", s, "/tmp/never.gguf", "--type", "banana"]);
    assert_eq!(c, 1);
    assert!(
        e.contains("minirun-gguf quantize: unknown quant target \"banana\"; supported:"),
        "{e}"
    );
    // genuine usage errors stay 64
    assert_eq!(run(&["quantize", s, "--bogus"]).0, 64);
    assert_eq!(run(&["split", s, "x", "--max-size", "12Q"]).0, 64);
}

#[test]
fn quantize_prints_kept_demoted_and_tied_lists() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("m.gguf");
    tiny(&src, false);
    let out = d.path().join("q.gguf");
    let (c, o, e) = run(&[
        "quantize",
        src.to_str().unwrap(),
        out.to_str().unwrap(),
        "--type",
        "q4_0",
    ]);
    assert_eq!(c, 0, "{e}");
    assert!(
        o.contains("1 1-D tensor(s) keep their source type")
            && o.contains("blk.0.attn_norm.weight"),
        "{o}"
    );
    assert!(
        o.contains("tied embedding token_embd.weight (no output.weight) written at q8_0"),
        "{o}"
    );
    let m = GgufModel::open(&out).unwrap();
    let ty = |n: &str| m.tensor(n).unwrap().ggml_type;
    assert_eq!(ty("token_embd.weight"), GgmlType::Q8_0);
    assert_eq!(ty("blk.0.attn_q.weight"), GgmlType::Q4_0);
    assert_eq!(ty("blk.0.attn_norm.weight"), GgmlType::F32);
    assert_eq!(m.metadata().get_u32("general.file_type"), Ok(2));
    assert_eq!(m.metadata().get_u32("general.quantization_version"), Ok(2));

    let out = d.path().join("k.gguf");
    let (c, o, e) = run(&[
        "quantize",
        src.to_str().unwrap(),
        out.to_str().unwrap(),
        "--type",
        "q6_K",
    ]);
    assert_eq!(c, 0, "{e}");
    assert!(o.contains("1 tensor(s) demoted from q6_K (row length not a multiple of 256; llama.cpp's tensor_type_fallback): blk.0.attn_q.weight → q8_0"), "{o}");
    let m = GgufModel::open(&out).unwrap();
    assert_eq!(
        m.tensor("token_embd.weight").unwrap().ggml_type,
        GgmlType::Q6_K
    );
    assert_eq!(
        m.tensor("blk.0.attn_q.weight").unwrap().ggml_type,
        GgmlType::Q8_0
    );
    assert_eq!(m.metadata().get_u32("general.file_type"), Ok(18));

    // K-quant sources are refused by name
    let (c, _, e) = run(&[
        "quantize",
        out.to_str().unwrap(),
        d.path().join("x.gguf").to_str().unwrap(),
        "--type",
        "q8_0",
    ]);
    assert_eq!(c, 1);
    assert!(e.contains("minirun-gguf quantize: tensor 'token_embd.weight' has type q6_K, which minirun-gguf cannot decode (no dequantizer for it); re-quantizing a K-quant/I-quant source is unsupported — start from an f16 or f32 GGUF"), "{e}");
}

#[test]
fn split_refusals_and_multi_part_quantize_refusal() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("m.gguf");
    tiny(&src, true);
    let parts = d.path().join("parts");
    let (c, o, e) = run(&[
        "split",
        src.to_str().unwrap(),
        parts.to_str().unwrap(),
        "--max-size",
        "4K",
    ]);
    assert_eq!(c, 0, "{e}");
    assert!(o.contains("m-00002-of-00002.gguf"), "{o}");
    let p1 = parts.join("m-00001-of-00002.gguf");
    let (c, _, e) = run(&[
        "split",
        p1.to_str().unwrap(),
        d.path().to_str().unwrap(),
        "--max-size",
        "1G",
    ]);
    assert_eq!(c, 1);
    assert!(
        e.contains("is already a multi-part split (2 parts); point at a single-file GGUF"),
        "{e}"
    );
    let (c, _, e) = run(&[
        "quantize",
        p1.to_str().unwrap(),
        d.path().join("q.gguf").to_str().unwrap(),
        "--type",
        "q8_0",
    ]);
    assert_eq!(c, 1);
    assert!(
        e.contains(
            "is a multi-part split (2 parts); quantize a single-file GGUF, then split the result"
        ),
        "{e}"
    );
    let (c, _, e) = run(&[
        "split",
        src.to_str().unwrap(),
        parts.to_str().unwrap(),
        "--max-size",
        "100",
    ]);
    assert_eq!(c, 1);
    assert!(
        e.contains("tensor 'token_embd.weight' is 4096 bytes, larger than the 100-byte part cap")
            && e.contains("raise --max-size (at least 4096 bytes)"),
        "{e}"
    );
    // single part: plain file, bitwise identical to the source
    let whole = d.path().join("whole");
    let (c, _, e) = run(&[
        "split",
        src.to_str().unwrap(),
        whole.to_str().unwrap(),
        "--max-size",
        "2G",
        "--stem",
        "w",
    ]);
    assert_eq!(c, 0, "{e}");
    assert_eq!(
        std::fs::read(whole.join("w.gguf")).unwrap(),
        std::fs::read(&src).unwrap()
    );
    // quantize with --split-max-size writes parts beside the output
    let q = d.path().join("qs.gguf");
    let (c, _, e) = run(&[
        "quantize",
        src.to_str().unwrap(),
        q.to_str().unwrap(),
        "--type",
        "f16",
        "--split-max-size",
        "2K",
    ]);
    assert_eq!(c, 0, "{e}");
    let m = GgufModel::open(&d.path().join("qs-00001-of-00003.gguf")).unwrap();
    assert_eq!(m.tensors.len(), 4);
    assert_eq!(
        m.tensor("blk.0.attn_norm.weight").unwrap().ggml_type,
        GgmlType::F32
    );
    assert_eq!(m.tensor("output.weight").unwrap().ggml_type, GgmlType::F16);
}

fn write_hf(dir: &Path, model_type: &str, arch: &str, extra_tensor: Option<&str>) {
    let cfg = serde_json::json!({
        "model_type": model_type, "architectures": [arch], "num_hidden_layers": 1,
        "max_position_embeddings": 64, "hidden_size": 8, "intermediate_size": 16,
        "num_attention_heads": 2, "num_key_value_heads": 1, "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6, "vocab_size": 6, "head_dim": 4, "eos_token_id": 5
    });
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    let tok = serde_json::json!({
        "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3}, "merges": ["a b"]},
        "added_tokens": [{"id": 4, "content": "<|im_end|>", "special": true}]
    });
    std::fs::write(dir.join("tokenizer.json"), tok.to_string()).unwrap();
    std::fs::write(
        dir.join("tokenizer_config.json"),
        serde_json::json!({"chat_template": "{{ messages }}", "eos_token": "<|im_end|>", "add_bos_token": false}).to_string(),
    )
    .unwrap();
    let bf = |n: usize| -> Vec<u8> {
        (0..n)
            .flat_map(|i| half::bf16::from_f32(i as f32 * 0.5 - 3.0).to_le_bytes())
            .collect()
    };
    let mut owned: Vec<(String, Vec<usize>, Vec<u8>)> = vec![
        ("model.embed_tokens.weight".into(), vec![6, 8], bf(48)),
        ("model.norm.weight".into(), vec![8], bf(8)),
        (
            "model.layers.0.input_layernorm.weight".into(),
            vec![8],
            bf(8),
        ),
        (
            "model.layers.0.self_attn.q_proj.weight".into(),
            vec![8, 8],
            bf(64),
        ),
        (
            "model.layers.0.self_attn.q_proj.bias".into(),
            vec![8],
            bf(8),
        ),
        (
            "model.layers.0.mlp.down_proj.weight".into(),
            vec![8, 16],
            bf(128),
        ),
    ];
    if let Some(x) = extra_tensor {
        owned.push((x.into(), vec![8], bf(8)));
    }
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = owned
        .iter()
        .map(|(n, s, d)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::BF16, s.clone(), d)
                    .unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, &dir.join("model.safetensors")).unwrap();
}

#[test]
fn convert_qwen2_and_refusals() {
    let d = tempfile::tempdir().unwrap();
    let hf = d.path().join("hf");
    std::fs::create_dir(&hf).unwrap();
    write_hf(&hf, "qwen2", "Qwen2ForCausalLM", None);
    let out = d.path().join("o.gguf");
    let (c, _, e) = run(&[
        "convert",
        hf.to_str().unwrap(),
        out.to_str().unwrap(),
        "--outtype",
        "f16",
    ]);
    assert_eq!(c, 0, "{e}");
    let m = GgufModel::open(&out).unwrap();
    let md = m.metadata();
    assert_eq!(md.get_str("general.architecture"), Ok("qwen2"));
    assert_eq!(md.get_u32("qwen2.block_count"), Ok(1));
    assert_eq!(
        md.get_str_array("tokenizer.ggml.tokens").unwrap(),
        vec!["a", "b", "ab", "c", "<|im_end|>", "[PAD5]"]
    );
    assert_eq!(
        md.get_i32_array("tokenizer.ggml.token_type").unwrap(),
        vec![1, 1, 1, 1, 3, 5]
    );
    assert_eq!(md.get_u32("tokenizer.ggml.eos_token_id"), Ok(4));
    let q = m.tensor("blk.0.attn_q.weight").unwrap();
    assert_eq!((q.dims.clone(), q.ggml_type), (vec![8, 8], GgmlType::F16));
    assert_eq!(
        m.tensor("blk.0.attn_q.bias").unwrap().ggml_type,
        GgmlType::F32
    );
    assert_eq!(m.tensor("blk.0.ffn_down.weight").unwrap().dims, vec![16, 8]);
    // bf16 → f16 of exactly representable values is exact
    let b = m.tensor_bytes("token_embd.weight").unwrap();
    assert_eq!(half::f16::from_le_bytes([b[2], b[3]]).to_f32(), -2.5);

    let (c, _, e) = run(&[
        "convert",
        hf.to_str().unwrap(),
        out.to_str().unwrap(),
        "--outtype",
        "q4_0",
    ]);
    assert_eq!(c, 1);
    assert!(
        e.contains("minirun-gguf convert: unknown --outtype \"q4_0\"; supported: f16, bf16, f32"),
        "{e}"
    );
    write_hf(
        &hf,
        "qwen2",
        "Qwen2ForCausalLM",
        Some("model.layers.0.mlp.gate_up_proj.weight"),
    );
    let (c, _, e) = run(&["convert", hf.to_str().unwrap(), out.to_str().unwrap()]);
    assert_eq!(c, 1);
    assert!(
        e.contains(
            "HuggingFace tensor 'model.layers.0.mlp.gate_up_proj.weight' has no GGUF mapping"
        ),
        "{e}"
    );
    write_hf(&hf, "llama", "LlamaForCausalLM", None);
    let (c, _, e) = run(&["convert", hf.to_str().unwrap(), out.to_str().unwrap()]);
    assert_eq!(c, 1);
    assert!(e.contains("unsupported architecture (model_type = \"llama\", architectures = [\"LlamaForCausalLM\"])"), "{e}");
    write_hf(
        &hf,
        "qwen3",
        "Qwen3ForCausalLM",
        Some("model.layers.0.self_attn.q_norm.weight"),
    );
    let (c, _, e) = run(&[
        "convert",
        hf.to_str().unwrap(),
        out.to_str().unwrap(),
        "--outtype",
        "bf16",
    ]);
    assert_eq!(c, 0, "{e}");
    let m = GgufModel::open(&out).unwrap();
    assert_eq!(m.metadata().get_str("general.architecture"), Ok("qwen3"));
    assert_eq!(m.metadata().get_u32("qwen3.attention.key_length"), Ok(4));
    assert_eq!(m.metadata().get_u32("general.file_type"), Ok(32));
    assert_eq!(
        m.tensor("blk.0.attn_q_norm.weight").unwrap().ggml_type,
        GgmlType::F32
    );
    assert_eq!(
        m.tensor("blk.0.attn_q.weight").unwrap().ggml_type,
        GgmlType::BF16
    );
    // bf16 → f32 → bf16 is the identity: the source value comes back
    let b = m.tensor_bytes("blk.0.attn_q.weight").unwrap();
    assert_eq!(half::bf16::from_le_bytes([b[2], b[3]]).to_f32(), -2.5);
    std::fs::write(hf.join("tokenizer_config.json"), "{}").unwrap();
    let (c, _, e) = run(&["convert", hf.to_str().unwrap(), out.to_str().unwrap()]);
    assert_eq!(c, 1);
    assert!(
        e.contains("tokenizer_config.json has no 'chat_template'"),
        "{e}"
    );
}

/// llama-quantize's guard: a quantized tensor is re-encoded only with --allow-requantize; a copy
/// (same type) needs no flag.
#[test]
fn requantizing_a_quantized_source_needs_allow_requantize() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("m.gguf");
    tiny(&src, true);
    let q = d.path().join("q4.gguf");
    let p = |x: &Path| x.to_str().unwrap().to_string();
    assert_eq!(run(&["quantize", &p(&src), &p(&q), "--type", "q4_0"]).0, 0);
    let out = d.path().join("q8.gguf");
    let (c, _, e) = run(&["quantize", &p(&q), &p(&out), "--type", "q8_0"]);
    assert_eq!(c, 1, "{e}");
    assert!(e.contains("requantizing from type q4_0 is disabled: tensor 'token_embd.weight' is already q4_0-quantized") && e.contains("--allow-requantize"), "{e}");
    assert!(!out.exists(), "nothing is written on a refusal");
    let (c, _, e) = run(&[
        "quantize",
        &p(&q),
        &p(&out),
        "--type",
        "q8_0",
        "--allow-requantize",
    ]);
    assert_eq!(c, 0, "{e}");
    // Same type: every quantized tensor is a copy, so no flag is needed.
    let same = d.path().join("same.gguf");
    let (c, _, e) = run(&["quantize", &p(&q), &p(&same), "--type", "q4_0"]);
    assert_eq!(c, 0, "{e}");
}

/// A mixture name selects llama-quantize's rules: its tensor order, its file type number, the
/// tied embedding (no output.weight) at q6_K and the attn_v bump of Q4_K_M.
#[test]
fn a_mixture_name_selects_llama_quantize_rules() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("m.gguf");
    let mut md = Metadata::default();
    md.set("general.architecture", Value::str("llama"));
    md.set("llama.block_count", Value::U32(1));
    md.set("llama.attention.head_count", Value::U32(4));
    let specs = [
        "blk.0.attn_v.weight",
        "blk.0.attn_q.weight",
        "token_embd.weight",
    ]
    .map(|n| TensorSpec {
        name: n.into(),
        dims: vec![256, 4],
        ggml_type: GgmlType::F32,
    });
    write_file(&src, &md, &specs, 32, |_| {
        Ok(Cow::Owned(f32_bytes(&[0.25; 1024])))
    })
    .unwrap();
    let out = d.path().join("m.gguf.q4km");
    let (c, o, e) = run(&[
        "quantize",
        src.to_str().unwrap(),
        out.to_str().unwrap(),
        "--type",
        "Q4_K_M",
    ]);
    assert_eq!(c, 0, "{e}");
    assert!(
        o.contains(
            "(llama-quantize's mixture): token_embd.weight → q6_K, blk.0.attn_v.weight → q6_K"
        ),
        "{o}"
    );
    let m = GgufModel::open(&out).unwrap();
    let names: Vec<&str> = m.tensors.iter().map(|(_, t)| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "token_embd.weight",
            "blk.0.attn_q.weight",
            "blk.0.attn_v.weight"
        ]
    );
    assert_eq!(
        m.tensor("blk.0.attn_q.weight").unwrap().ggml_type,
        GgmlType::Q4_K
    );
    assert_eq!(m.metadata().get_u32("general.file_type"), Ok(15));
    // Q4_K_S is 14, Q3_K_M 12 (its q3_K encoder); Q2_K_S needs an imatrix; --pure with
    // --llama-mixture is a usage error.
    let (c, _, e) = run(&[
        "quantize",
        src.to_str().unwrap(),
        out.to_str().unwrap(),
        "--type",
        "q4_k_s",
    ]);
    assert_eq!(c, 0, "{e}");
    assert_eq!(
        GgufModel::open(&out)
            .unwrap()
            .metadata()
            .get_u32("general.file_type"),
        Ok(14)
    );
    let (c, _, e) = run(&[
        "quantize",
        src.to_str().unwrap(),
        out.to_str().unwrap(),
        "--type",
        "Q3_K_M",
    ]);
    assert_eq!(c, 0, "{e}");
    let m = GgufModel::open(&out).unwrap();
    assert_eq!(m.metadata().get_u32("general.file_type"), Ok(12));
    assert_eq!(
        m.tensor("blk.0.attn_q.weight").unwrap().ggml_type,
        GgmlType::Q3_K
    );
    let (c, _, e) = run(&[
        "quantize",
        src.to_str().unwrap(),
        out.to_str().unwrap(),
        "--type",
        "Q2_K_S",
    ]);
    assert_eq!(c, 1);
    assert!(e.contains("Q2_K_S needs an importance matrix"), "{e}");
    let (c, _, _) = run(&[
        "quantize",
        src.to_str().unwrap(),
        out.to_str().unwrap(),
        "--type",
        "Q6_K",
        "--pure",
        "--llama-mixture",
    ]);
    assert_eq!(c, 64);
}

/// `info` prints typed values: strings as strings, numbers as numbers, arrays cut with a count.
#[test]
fn info_prints_typed_metadata_values() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("m.gguf");
    let mut md = Metadata::default();
    md.set("general.architecture", Value::str("llama"));
    md.set("llama.block_count", Value::U32(30));
    md.set("llama.rope.freq_base", Value::F32(10000.0));
    md.set("tokenizer.ggml.add_bos_token", Value::Bool(false));
    let toks: Vec<Vec<u8>> = (0..40).map(|i| format!("t{i}").into_bytes()).collect();
    md.set("tokenizer.ggml.tokens", Value::StringArray(toks));
    md.set("tokenizer.ggml.token_type", Value::u32_array(&[1; 40]));
    let specs = [TensorSpec {
        name: "a.weight".into(),
        dims: vec![32],
        ggml_type: GgmlType::F32,
    }];
    write_file(&src, &md, &specs, 32, |_| {
        Ok(Cow::Owned(f32_bytes(&[1.0; 32])))
    })
    .unwrap();
    let (c, o, e) = run(&["info", src.to_str().unwrap(), "--json"]);
    assert_eq!(c, 0, "{e}");
    let v: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(v["schema"], "minirun.gguf-info/1");
    let m = |k: &str| {
        v["metadata"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["key"] == k)
            .unwrap()
            .clone()
    };
    assert_eq!(m("general.architecture")["value"], "llama");
    assert_eq!(m("llama.block_count")["value"], 30);
    assert_eq!(m("llama.rope.freq_base")["value"], 10000.0);
    assert_eq!(m("tokenizer.ggml.add_bos_token")["value"], false);
    let toks = m("tokenizer.ggml.tokens");
    assert_eq!(toks["count"], 40);
    assert_eq!(
        toks["value"].as_array().unwrap().len(),
        v["array_limit"].as_u64().unwrap() as usize
    );
    assert_eq!(toks["value"][1], "t1");
    assert_eq!(m("tokenizer.ggml.token_type")["value"][0], 1);
    assert_eq!(v["tensors"][0]["type"], "f32");
}
