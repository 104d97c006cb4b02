//! A deterministic tiny Qwen2 (or Qwen3) GGUF, the input of the whole-file parity check against
//! `llama-quantize --pure` (ci/oracles/llama_quantize.sh records llama.cpp's outputs for it;
//! `tests/gguf_llama_quantize.rs` regenerates it and compares our outputs' SHA-256).
//!
//! Built so that every rule of `quantize --pure` fires: rows that are multiples of 256 (every
//! target encodes), an `ffn_down` row of 544 (the K-quant fallback), a 48-wide 2-D tensor (the
//! F16 fallback), biases and norms (kept), a 2-D expert gate (kept by name), a `[256, 1]` norm
//! (written back with `ggml_n_dims` = 1), a tied embedding (no `output.weight`), layers 0…11 (the
//! loader's numeric layer order puts `blk.10` after `blk.2`), a zero row and a constant block.
//! Values come from a splitmix64 stream through IEEE basic operations only, so the bytes are the
//! same on every platform. Spec: docs/gguf.md "quantize --pure".

use std::borrow::Cow;
use std::path::Path;

use artifact::gguf::types::{GgmlType, Value};
use artifact::gguf::writer::{write_file, TensorSpec, DEFAULT_ALIGNMENT};
use artifact::gguf::{GgufError, Metadata};

/// Hidden size, feed-forward size, vocabulary, layers (of which the first two carry weights).
const HIDDEN: u64 = 256;
const FFN: u64 = 544;
const VOCAB: u64 = 320;
const LAYERS: u64 = 12;
const HEAD_DIM: u64 = 64;

/// splitmix64: exact integer arithmetic, the same values everywhere (also `super::like`'s).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1) with 53 bits.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Irwin–Hall(4), centred and scaled to unit variance: close to a normal, exact arithmetic.
    pub(crate) fn normal(&mut self) -> f64 {
        (self.unit() + self.unit() + self.unit() + self.unit() - 2.0) * 1.732_050_807_568_877_2
    }
}

/// Which tiny model: Qwen2 (q/k/v biases) or Qwen3 (no biases, per-head q/k norms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// `qwen2`.
    Qwen2,
    /// `qwen3`.
    Qwen3,
}

impl Arch {
    /// The `general.architecture` value and key prefix.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
        }
    }
}

/// The tensors: name, `ne`, whether it is a weight matrix (2-D payload at the source type).
fn shapes(arch: Arch) -> Vec<(String, Vec<u64>)> {
    let mut v: Vec<(String, Vec<u64>)> = vec![("token_embd.weight".into(), vec![HIDDEN, VOCAB])];
    for l in 0..LAYERS {
        let b = |s: &str| format!("blk.{l}.{s}");
        v.push((b("attn_norm.weight"), vec![HIDDEN]));
        if l < 2 {
            for (p, rows) in [("attn_q", HIDDEN), ("attn_k", 128), ("attn_v", 128)] {
                v.push((b(&format!("{p}.weight")), vec![HIDDEN, rows]));
                if arch == Arch::Qwen2 {
                    v.push((b(&format!("{p}.bias")), vec![rows]));
                }
            }
            if arch == Arch::Qwen3 {
                v.push((b("attn_q_norm.weight"), vec![HEAD_DIM]));
                v.push((b("attn_k_norm.weight"), vec![HEAD_DIM]));
            }
            v.push((b("attn_output.weight"), vec![HIDDEN, HIDDEN]));
            v.push((b("ffn_gate.weight"), vec![HIDDEN, FFN]));
            v.push((b("ffn_up.weight"), vec![HIDDEN, FFN]));
            v.push((b("ffn_down.weight"), vec![FFN, HIDDEN]));
        }
        if l == 0 {
            v.push((b("ffn_gate_inp.weight"), vec![HIDDEN, 8]));
        }
        if l == 1 {
            v.push((b("ffn_extra.weight"), vec![48, 64]));
            v.push((b("ffn_norm.weight"), vec![HIDDEN, 1]));
        } else {
            v.push((b("ffn_norm.weight"), vec![HIDDEN]));
        }
        if l == 10 {
            v.push((b("attn_output.weight"), vec![HIDDEN, 16]));
        }
    }
    v.push(("output_norm.weight".into(), vec![HIDDEN]));
    v
}

fn values(name: &str, dims: &[u64], rng: &mut Rng) -> Vec<f32> {
    let row = dims.first().copied().unwrap_or(1) as usize;
    let n = dims.iter().product::<u64>() as usize;
    let one_d = dims.iter().skip(1).all(|&d| d == 1);
    let mut x = Vec::with_capacity(n);
    for r in 0..n / row.max(1) {
        // Row scales from 1/64 to 4: K-quant scales and mins of different magnitudes.
        let scale = if one_d {
            1.0
        } else {
            f64::from(1u32 << (r % 9)) / 64.0
        };
        for c in 0..row {
            let mut v = rng.normal() * scale;
            if (r * row + c) % 97 == 0 {
                v *= 8.0; // outliers
            }
            if one_d {
                v = 1.0 + 0.25 * v; // norm-like
            }
            x.push(v as f32);
        }
    }
    if name == "blk.0.attn_q.weight" {
        x[3 * row..4 * row].iter_mut().for_each(|v| *v = 0.0);
    }
    if name == "blk.0.attn_k.weight" {
        x[5 * row..5 * row + 32].iter_mut().for_each(|v| *v = 0.75);
    }
    x
}

/// Metadata of the test model (a loadable Qwen2/Qwen3 header for llama.cpp's model loader).
fn metadata(source: GgmlType, arch: Arch) -> Metadata {
    let mut md = Metadata::default();
    let s = |v: &str| Value::String(v.as_bytes().to_vec());
    let tokens = (0..VOCAB).map(|i| format!("t{i}").into_bytes()).collect();
    let a = arch.name();
    let arch_kv = [
        ("block_count", Value::U32(LAYERS as u32)),
        ("context_length", Value::U32(512)),
        ("embedding_length", Value::U32(HIDDEN as u32)),
        ("feed_forward_length", Value::U32(FFN as u32)),
        ("attention.head_count", Value::U32(4)),
        ("attention.head_count_kv", Value::U32(2)),
        ("rope.freq_base", Value::F32(1_000_000.0)),
        ("attention.layer_norm_rms_epsilon", Value::F32(1e-6)),
    ];
    let mut kv: Vec<(String, Value)> = vec![
        ("general.architecture".into(), s(a)),
        ("general.type".into(), s("model")),
        (
            "general.name".into(),
            s("minirun llama-quantize parity model"),
        ),
        (
            "general.file_type".into(),
            Value::U32(if source == GgmlType::F16 { 1 } else { 0 }),
        ),
        ("general.quantization_version".into(), Value::U32(2)),
    ];
    kv.extend(arch_kv.into_iter().map(|(k, v)| (format!("{a}.{k}"), v)));
    kv.extend([
        ("tokenizer.ggml.model".into(), s("gpt2")),
        ("tokenizer.ggml.tokens".into(), Value::StringArray(tokens)),
        ("tokenizer.ggml.add_bos_token".into(), Value::Bool(false)),
    ]);
    md.kv = kv;
    md
}

/// Write the Qwen2 test model with 2-D weights at `source` (F32, F16 or BF16; 1-D always F32)
/// to `path`. The same `source` always gives the same bytes.
pub fn write_test_model(path: &Path, source: GgmlType) -> Result<u64, GgufError> {
    write_test_model_arch(path, source, Arch::Qwen2)
}

/// [`write_test_model`] for either architecture.
pub fn write_test_model_arch(path: &Path, source: GgmlType, arch: Arch) -> Result<u64, GgufError> {
    if !matches!(source, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) {
        return Err(GgufError::Write(format!(
            "test model source type {source} is not f32, f16 or bf16"
        )));
    }
    let mut rng = Rng(20_261_130);
    let shapes = shapes(arch);
    let mut specs = Vec::with_capacity(shapes.len());
    let mut payloads = Vec::with_capacity(shapes.len());
    for (name, dims) in shapes {
        let x = values(&name, &dims, &mut rng);
        let two_d = dims.iter().skip(1).any(|&d| d != 1);
        let ty = if two_d { source } else { GgmlType::F32 };
        let mut bytes = Vec::new();
        artifact::gguf::quant::encode(
            ty,
            &x,
            x.len(),
            &mut bytes,
            artifact::gguf::quant::FmaContract::Off,
        )
        .map_err(|e| GgufError::Write(format!("test model tensor `{name}`: {e}")))?;
        specs.push(TensorSpec {
            name,
            dims,
            ggml_type: ty,
        });
        payloads.push(bytes);
    }
    write_file(
        path,
        &metadata(source, arch),
        &specs,
        DEFAULT_ALIGNMENT,
        |i| match payloads.get(i) {
            Some(b) => Ok(Cow::Borrowed(b.as_slice())),
            None => Err(GgufError::Write(format!("test model has no tensor {i}"))),
        },
    )
}
