//! DeepSeek-V4-Flash in its real upstream layout at tiny dimensions: 43 layers (SWA layers 0–1,
//! then CSA ratio 4 on even and HCA ratio 128 on odd layers), hash-gated layers 0–2 with
//! `tid2eid`, MXFP4 routed experts (`I8` + `F8_E8M0` per 32), FP8 `F8_E4M3` linears with
//! `F8_E8M0` 128×128 block `.scale`, F32 mHC tensors, the MTP block, one shard per layer.
//!
//! Spec: `../shared/design/models.md` §1.2 (config keys), §1.3 (dtypes), §1.4 (names and shape
//! formulas), §1.5 (shard mapping), §1.6 (tokenizer files); tiny dimensions follow
//! `oracles.md` (every FP8-blocked dimension a multiple of 128, 64 indexer heads).

use super::write::{
    isqrt_f32, push_fp8, write_bytes, write_shard, FileDigest, Fill, IndexBuilder, Part, Planned,
};
use super::{tokenizer, SynthError};
use artifact::dtype::Dtype;
use artifact::safetensors::TensorSpec;
use serde_json::json;
use std::path::Path;

/// The tiny V4 dimensions; `scale` grows the routed experts (count and width).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct V4Dims {
    /// `hidden_size`.
    pub hidden: u64,
    /// `num_hidden_layers` (43 as upstream).
    pub layers: u64,
    /// `num_attention_heads`.
    pub heads: u64,
    /// `head_dim`.
    pub head_dim: u64,
    /// `qk_rope_head_dim`.
    pub rope_dim: u64,
    /// `q_lora_rank`.
    pub q_lora: u64,
    /// `o_groups`.
    pub o_groups: u64,
    /// `o_lora_rank`.
    pub o_lora: u64,
    /// `n_routed_experts`.
    pub experts: u64,
    /// `num_experts_per_tok`.
    pub top_k: u64,
    /// `moe_intermediate_size`.
    pub moe_inter: u64,
    /// `vocab_size` (= the embedding rows; the BPE tokenizer is trained to this size).
    pub vocab: u64,
    /// `hc_mult`.
    pub hc: u64,
    /// `index_n_heads`.
    pub index_heads: u64,
    /// `index_head_dim`.
    pub index_head_dim: u64,
    /// `index_topk`.
    pub index_topk: u64,
    /// `sliding_window`.
    pub window: u64,
    /// `num_hash_layers`.
    pub hash_layers: u64,
}

impl V4Dims {
    /// Dimensions at `scale` (1 = the default, a few tens of MB).
    pub fn at_scale(scale: u64) -> Self {
        let experts = 4 * scale;
        V4Dims {
            hidden: 256,
            layers: 43,
            heads: 4,
            head_dim: 128,
            rope_dim: 64,
            q_lora: 128,
            o_groups: 2,
            o_lora: 128,
            experts,
            top_k: if experts >= 12 { 6 } else { 2 },
            moe_inter: 128 * (scale / 16).max(1),
            vocab: 512,
            hc: 4,
            index_heads: 64,
            index_head_dim: 128,
            index_topk: 4,
            window: 8,
            hash_layers: 3,
        }
    }

    /// Benchmark dimensions with real-sized routed experts: hidden 1024 and
    /// `moe_intermediate_size` 2048 (upstream: 4096 and 2048), so each expert matrix is 1 MiB of
    /// e2m1 + 64 KiB of scales, and `experts` of them per layer. The tiny dimensions' experts
    /// (64 KiB at scale 64) make a release dominated by per-file costs and 16 KiB alignment
    /// padding that the real checkpoint does not have (docs/bench/repack-gate.md).
    pub fn wide(experts: u64) -> Self {
        let experts = experts.max(2);
        V4Dims {
            hidden: 1024,
            moe_inter: 2048,
            experts,
            top_k: if experts >= 12 { 6 } else { 2 },
            ..Self::at_scale(1)
        }
    }

    /// The tiny dimensions with exactly `experts` routed experts per layer (top-6 from 12 on) and
    /// four main layers: sliding-window 0–1, CSA 2, HCA 3, hash-routed 0–2; the MTP block as
    /// always. At `experts` = 256, upstream's count, in ~70 MB.
    pub fn experts(experts: u64) -> Self {
        let experts = experts.max(2);
        V4Dims {
            layers: 4,
            experts,
            top_k: if experts >= 12 { 6 } else { 2 },
            ..Self::at_scale(1)
        }
    }

    /// The real per-layer dimensions of models.md §1.2 (hidden 4096, 64 heads of 512, q/o LoRA
    /// ranks 1024, 8 output groups, 2048-wide experts of 4 MiB + 256 KiB scales each, sliding
    /// window 128, index top-k 512) with `experts` routed experts per layer and one main layer
    /// (sliding-window, hash-routed) plus the MTP block, for real-size runs: at upstream's 256
    /// experts each of the two is a 3.5 GB shard. The vocabulary stays tiny (docs/synth.md).
    pub fn real(experts: u64) -> Self {
        let experts = experts.max(2);
        V4Dims {
            hidden: 4096,
            layers: 1,
            heads: 64,
            head_dim: 512,
            q_lora: 1024,
            o_groups: 8,
            o_lora: 1024,
            experts,
            top_k: 6.min(experts),
            moe_inter: 2048,
            index_topk: 512,
            window: 128,
            hash_layers: 1,
            ..Self::at_scale(1)
        }
    }

    /// `compress_ratios`: `[0,0] + [4,128]·20 + [4, 0]` for 43 layers (last entry = MTP).
    pub fn compress_ratios(&self) -> Vec<u64> {
        let mut r: Vec<u64> = (0..self.layers).map(ratio_of).collect();
        r.push(0);
        r
    }
}

/// Compression ratio of main layer `l`: 0 for layers 0–1, 4 (CSA) on even, 128 (HCA) on odd.
pub fn ratio_of(l: u64) -> u64 {
    if l < 2 {
        0
    } else if l % 2 == 0 {
        4
    } else {
        128
    }
}

fn bf16(out: &mut Vec<Planned>, name: String, shape: &[u64], std: f32) {
    out.push(Planned::gauss(name, Dtype::BF16, shape, 0.0, std));
}
fn norm(out: &mut Vec<Planned>, name: String, n: u64) {
    out.push(Planned::gauss(name, Dtype::BF16, &[n], 1.0, 0.05));
}
fn f32t(out: &mut Vec<Planned>, name: String, shape: &[u64], mean: f32, std: f32) {
    out.push(Planned::gauss(name, Dtype::F32, shape, mean, std));
}

fn push_mxfp4(out: &mut Vec<Planned>, base: &str, rows: u64, cols: u64) {
    let std = isqrt_f32(cols);
    let (r, c) = (rows as usize, cols as usize);
    out.push(Planned {
        spec: TensorSpec::new(format!("{base}.weight"), Dtype::I8, &[rows, cols / 2]),
        fill: Fill::Mxfp4 {
            label: base.into(),
            rows: r,
            cols: c,
            std,
            part: Part::Codes,
        },
    });
    out.push(Planned {
        spec: TensorSpec::new(format!("{base}.scale"), Dtype::F8E8M0, &[rows, cols / 32]),
        fill: Fill::Mxfp4 {
            label: base.into(),
            rows: r,
            cols: c,
            std,
            part: Part::Scales,
        },
    });
}

/// The per-block tensors (models.md §1.4 "Every layer") under `p` (`layers.L.` or `mtp.0.`).
pub fn block_tensors(d: &V4Dims, p: &str, ratio: u64, hash: bool) -> Vec<Planned> {
    let h = d.hidden;
    let mut t = Vec::new();
    norm(&mut t, format!("{p}attn_norm.weight"), h);
    norm(&mut t, format!("{p}ffn_norm.weight"), h);
    let mix = (2 + d.hc) * d.hc;
    for k in ["attn", "ffn"] {
        f32t(&mut t, format!("{p}hc_{k}_fn"), &[mix, d.hc * h], 0.0, 0.01);
        f32t(&mut t, format!("{p}hc_{k}_base"), &[mix], 0.0, 0.5);
        f32t(&mut t, format!("{p}hc_{k}_scale"), &[3], 0.1, 0.02);
    }
    f32t(&mut t, format!("{p}attn.attn_sink"), &[d.heads], 0.0, 1.0);
    push_fp8(&mut t, &format!("{p}attn.wq_a"), d.q_lora, h);
    norm(&mut t, format!("{p}attn.q_norm.weight"), d.q_lora);
    push_fp8(
        &mut t,
        &format!("{p}attn.wq_b"),
        d.heads * d.head_dim,
        d.q_lora,
    );
    push_fp8(&mut t, &format!("{p}attn.wkv"), d.head_dim, h);
    norm(&mut t, format!("{p}attn.kv_norm.weight"), d.head_dim);
    push_fp8(
        &mut t,
        &format!("{p}attn.wo_a"),
        d.o_groups * d.o_lora,
        d.heads * d.head_dim / d.o_groups,
    );
    push_fp8(&mut t, &format!("{p}attn.wo_b"), h, d.o_groups * d.o_lora);
    if ratio > 0 {
        // ratio 4 overlaps windows (coff = 2): twice the channels in ape/wkv/wgate.
        let coff = if ratio == 4 { 2 } else { 1 };
        let c = format!("{p}attn.compressor.");
        f32t(
            &mut t,
            format!("{c}ape"),
            &[ratio, coff * d.head_dim],
            0.0,
            0.02,
        );
        bf16(
            &mut t,
            format!("{c}wkv.weight"),
            &[coff * d.head_dim, h],
            isqrt_f32(h),
        );
        bf16(
            &mut t,
            format!("{c}wgate.weight"),
            &[coff * d.head_dim, h],
            isqrt_f32(h),
        );
        norm(&mut t, format!("{c}norm.weight"), d.head_dim);
    }
    if ratio == 4 {
        let i = format!("{p}attn.indexer.");
        push_fp8(
            &mut t,
            &format!("{i}wq_b"),
            d.index_heads * d.index_head_dim,
            d.q_lora,
        );
        bf16(
            &mut t,
            format!("{i}weights_proj.weight"),
            &[d.index_heads, h],
            isqrt_f32(h),
        );
        f32t(
            &mut t,
            format!("{i}compressor.ape"),
            &[4, 2 * d.index_head_dim],
            0.0,
            0.02,
        );
        bf16(
            &mut t,
            format!("{i}compressor.wkv.weight"),
            &[2 * d.index_head_dim, h],
            isqrt_f32(h),
        );
        bf16(
            &mut t,
            format!("{i}compressor.wgate.weight"),
            &[2 * d.index_head_dim, h],
            isqrt_f32(h),
        );
        norm(
            &mut t,
            format!("{i}compressor.norm.weight"),
            d.index_head_dim,
        );
    }
    bf16(
        &mut t,
        format!("{p}ffn.gate.weight"),
        &[d.experts, h],
        isqrt_f32(h),
    );
    if hash {
        t.push(Planned {
            spec: TensorSpec::new(
                format!("{p}ffn.gate.tid2eid"),
                Dtype::I64,
                &[d.vocab, d.top_k],
            ),
            fill: Fill::Tid2eid {
                n_experts: d.experts,
            },
        });
    } else {
        f32t(&mut t, format!("{p}ffn.gate.bias"), &[d.experts], 0.0, 0.01);
    }
    let se = format!("{p}ffn.shared_experts.");
    push_fp8(&mut t, &format!("{se}w1"), d.moe_inter, h);
    push_fp8(&mut t, &format!("{se}w3"), d.moe_inter, h);
    push_fp8(&mut t, &format!("{se}w2"), h, d.moe_inter);
    for e in 0..d.experts {
        let x = format!("{p}ffn.experts.{e}.");
        push_mxfp4(&mut t, &format!("{x}w1"), d.moe_inter, h);
        push_mxfp4(&mut t, &format!("{x}w3"), d.moe_inter, h);
        push_mxfp4(&mut t, &format!("{x}w2"), h, d.moe_inter);
    }
    t
}

/// The MTP block: a ratio-0, non-hash block plus its projections, norms and head mixer.
pub fn mtp_tensors(d: &V4Dims) -> Vec<Planned> {
    let p = "mtp.0.";
    let h = d.hidden;
    let mut t = block_tensors(d, p, 0, false);
    push_fp8(&mut t, &format!("{p}e_proj"), h, h);
    push_fp8(&mut t, &format!("{p}h_proj"), h, h);
    for n in ["enorm", "hnorm", "norm"] {
        norm(&mut t, format!("{p}{n}.weight"), h);
    }
    head_mixer(&mut t, p, d);
    t
}

fn head_mixer(t: &mut Vec<Planned>, p: &str, d: &V4Dims) {
    f32t(
        t,
        format!("{p}hc_head_fn"),
        &[d.hc, d.hc * d.hidden],
        0.0,
        0.01,
    );
    f32t(t, format!("{p}hc_head_base"), &[d.hc], 0.0, 0.5);
    f32t(t, format!("{p}hc_head_scale"), &[1], 0.1, 0.02);
}

/// The shard plan: (file name, tensors), in shard order (models.md §1.5).
pub fn shard_plan(d: &V4Dims) -> Vec<(String, Vec<Planned>)> {
    let n = d.layers + 3;
    let name = |i: u64| format!("model-{i:05}-of-{n:05}.safetensors");
    let mut shards = Vec::new();
    let mut embed = Vec::new();
    bf16(
        &mut embed,
        "embed.weight".into(),
        &[d.vocab, d.hidden],
        0.02,
    );
    shards.push((name(1), embed));
    for l in 0..d.layers {
        let t = block_tensors(d, &format!("layers.{l}."), ratio_of(l), l < d.hash_layers);
        shards.push((name(l + 2), t));
    }
    let mut head = Vec::new();
    bf16(
        &mut head,
        "head.weight".into(),
        &[d.vocab, d.hidden],
        isqrt_f32(d.hidden),
    );
    norm(&mut head, "norm.weight".into(), d.hidden);
    head_mixer(&mut head, "", d);
    shards.push((name(d.layers + 2), head));
    shards.push((name(d.layers + 3), mtp_tensors(d)));
    shards
}

/// `config.json` with the real keys (models.md §1.2), tiny values, keys sorted as transformers
/// writes them.
pub fn config_json(d: &V4Dims) -> serde_json::Value {
    let a = json!({
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "hidden_size": d.hidden,
        "num_hidden_layers": d.layers,
        "vocab_size": d.vocab,
        "max_position_embeddings": 1048576,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": false,
        "bos_token_id": 0,
        "eos_token_id": 1,
    });
    let b = json!({
        "num_attention_heads": d.heads,
        "num_key_value_heads": 1,
        "head_dim": d.head_dim,
        "qk_rope_head_dim": d.rope_dim,
        "q_lora_rank": d.q_lora,
        "o_lora_rank": d.o_lora,
        "o_groups": d.o_groups,
        "sliding_window": d.window,
        "attention_bias": false,
        "index_n_heads": d.index_heads,
        "index_head_dim": d.index_head_dim,
        "index_topk": d.index_topk,
        "n_routed_experts": d.experts,
        "n_shared_experts": 1,
    });
    let c = json!({
        "num_experts_per_tok": d.top_k,
        "moe_intermediate_size": d.moe_inter,
        "scoring_func": "sqrtsoftplus",
        "topk_method": "noaux_tc",
        "norm_topk_prob": true,
        "routed_scaling_factor": 1.5,
        "swiglu_limit": 10.0,
        "hidden_act": "silu",
        "num_hash_layers": d.hash_layers,
        "rms_norm_eps": 1e-6,
        "hc_mult": d.hc,
        "hc_sinkhorn_iters": 20,
        "hc_eps": 1e-6,
    });
    let e = json!({
        "rope_theta": 10000,
        "compress_rope_theta": 160000,
        "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536,
                         "beta_fast": 32, "beta_slow": 1},
        "num_nextn_predict_layers": 1,
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
        "compress_ratios": d.compress_ratios(),
        "transformers_version": "4.57.1",
        "use_cache": true,
        "initializer_range": 0.02,
        "attention_dropout": 0.0,
        "expert_dtype": "fp4",
    });
    let mut all = serde_json::Map::new();
    for part in [a, b, c, e] {
        if let serde_json::Value::Object(m) = part {
            all.extend(m);
        }
    }
    sorted(serde_json::Value::Object(all))
}

/// Sort object keys recursively (transformers' `sort_keys=True`).
pub fn sorted(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            let mut items: Vec<_> = m.into_iter().collect();
            items.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(items.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        other => other,
    }
}

/// Pretty JSON with a trailing newline.
pub fn pretty(v: &serde_json::Value) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(v).unwrap_or_default();
    out.push(b'\n');
    out
}

/// MIT licence text (upstream's licence is MIT, models.md §1.1).
pub const LICENSE: &str = "MIT License

Copyright (c) 2026 The Minirun authors (synthetic weights in the DeepSeek-V4-Flash layout)

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the \"Software\"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
";

/// Write the whole checkpoint into `out`; returns every file's digest and the tensor count.
pub fn generate(out: &Path, seed: u64, scale: u64) -> Result<(Vec<FileDigest>, usize), SynthError> {
    generate_dims(out, seed, &V4Dims::at_scale(scale))
}

/// As [`generate`], with explicit dimensions ([`V4Dims::wide`] for benchmarks).
pub fn generate_dims(
    out: &Path,
    seed: u64,
    d: &V4Dims,
) -> Result<(Vec<FileDigest>, usize), SynthError> {
    let mut files = Vec::new();
    let mut index = IndexBuilder::default();
    let mut count = 0;
    for (name, tensors) in shard_plan(d) {
        let written = write_shard(out, &name, tensors, seed)?;
        index.add(&name, written, &mut files, &mut count);
    }
    files.push(write_bytes(
        out,
        "model.safetensors.index.json",
        &index.to_json(),
    )?);
    files.push(write_bytes(out, "config.json", &pretty(&config_json(d)))?);
    // Only the keys models.md §1.2 pins.
    let gen = sorted(json!({"do_sample": true, "temperature": 1.0, "top_p": 1.0}));
    files.push(write_bytes(out, "generation_config.json", &pretty(&gen))?);
    let tok = tokenizer::train_bpe(d.vocab as usize)?;
    files.push(write_bytes(out, "tokenizer.json", tok.as_bytes())?);
    files.push(write_bytes(
        out,
        "tokenizer_config.json",
        &pretty(&tokenizer::tokenizer_config()),
    )?);
    files.push(write_bytes(out, "LICENSE", LICENSE.as_bytes())?);
    files.push(write_bytes(out, "README.md", README.as_bytes())?);
    Ok((files, count))
}

const README: &str = "# Synthetic DeepSeek-V4-Flash (tiny)

Written by `minirun-synth deepseek-v4`: the upstream tensor names, dtypes, per-layer structure
and shard mapping of `deepseek-ai/DeepSeek-V4-Flash` at tiny dimensions, with random weights
quantized by the upstream rules. Not a trained model. See `docs/synth.md` in the Minirun repository.
";
