//! Kimi K3 style (text MoE part plus a small vision tower): compressed-tensors MXFP4 experts as
//! `U8` `weight_packed` (two e2m1 per byte, low nibble first) + `U8` `weight_scale` (E8M0 per
//! 32), everything else BF16 (F32 for KDA `A_log`/`dt_bias` and the router bias), experts
//! ordered by name (0, 1, 10, …) on disk, shards named `model-000NN-of-0000NN` (6-digit total),
//! and the root files `config.json`, `tiktoken.model` and `LICENSE`.
//!
//! Spec: `../shared/design/models.md` §4. Pinned there: the name prefixes, the per-layer module
//! names, the expert tensor names/dtypes/shape formulas, the shard naming and layer→shard rule.
//! Guessed here (docs/synth.md): KDA/MLA/AttnRes shapes, the vision tower's names, where the
//! embedding and head go, config key names beyond those listed, and the nibble order.

use super::deepseek::{pretty, sorted};
use super::write::{
    isqrt_f32, write_bytes, write_shard, FileDigest, Fill, IndexBuilder, Part, Planned,
};
use super::SynthError;
use artifact::dtype::Dtype;
use artifact::safetensors::TensorSpec;
use serde_json::json;
use std::path::Path;

/// Kimi K3 dimensions: the tiny test shape ([`KimiDims::at_scale`]) or the real per-layer shape
/// with fewer layers ([`KimiDims::real`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KimiDims {
    /// `hidden_size`.
    pub hidden: u64,
    /// `num_hidden_layers` (layer 0 dense, the last MLA).
    pub layers: u64,
    /// `vocab_size` (= the embedding rows; the tiktoken ranks are trained to this size).
    pub vocab: u64,
    /// `num_attention_heads`.
    pub heads: u64,
    /// `head_dim`.
    pub head_dim: u64,
    /// Stored length of the KDA `A_log` (zero-padded past `heads`).
    pub a_log_pad: u64,
    /// MLA `q_lora_rank`.
    pub q_lora: u64,
    /// MLA `kv_lora_rank`.
    pub kv_lora: u64,
    /// `qk_nope_head_dim`.
    pub nope: u64,
    /// `qk_rope_head_dim`.
    pub rope: u64,
    /// `v_head_dim`.
    pub v_dim: u64,
    /// `moe_intermediate_size`.
    pub moe_inter: u64,
    /// `routed_expert_hidden_size` (the latent space the routed experts run in).
    pub latent: u64,
    /// Layer 0's dense `intermediate_size`.
    pub dense_inter: u64,
    /// `num_experts` (routed, per MoE layer).
    pub experts: u64,
    /// `num_experts_per_token`.
    pub top_k: u64,
}

impl KimiDims {
    /// The tiny test dimensions; `scale` multiplies the routed experts (8 per MoE layer at 1).
    /// Experts are 256 × 128: a 256-row tile of `weight_packed` is 16 KiB, so each is a container
    /// (a 128 × 128 expert would be 8 KiB per tile, which the container refuses).
    pub fn at_scale(scale: u64) -> Self {
        KimiDims {
            hidden: 256,
            layers: 4,
            vocab: 512,
            heads: 2,
            head_dim: 128,
            a_log_pad: 8,
            q_lora: 128,
            kv_lora: 128,
            nope: 128,
            rope: 64,
            v_dim: 128,
            moe_inter: 256,
            latent: 128,
            dense_inter: 512,
            experts: 8 * scale,
            top_k: 4,
        }
    }

    /// The real per-layer dimensions of models.md §4 (hidden 7168, 96 heads, MLA ranks
    /// 1536/512, experts 3072 × 3584 in the latent space: 17,547,264 B each, dense layer 0 of
    /// 33,792) with `experts` routed experts per MoE layer and two layers (layer 0 dense, layer 1
    /// MoE with MLA attention), for real-size runs; the vocabulary stays tiny (docs/synth.md).
    pub fn real(experts: u64) -> Self {
        KimiDims {
            hidden: 7168,
            layers: 2,
            heads: 96,
            a_log_pad: 128,
            q_lora: 1536,
            kv_lora: 512,
            moe_inter: 3072,
            latent: 3584,
            dense_inter: 33792,
            experts: experts.max(1),
            top_k: 16.min(experts.max(1)),
            ..Self::at_scale(1)
        }
    }

    /// MLA layers: every 4th (1-based) and the last, as upstream's 4, 8, …, 92, 93.
    pub fn is_mla(&self, l: u64) -> bool {
        (l + 1) % 4 == 0 || l + 1 == self.layers
    }
}

fn w(t: &mut Vec<Planned>, name: String, shape: &[u64]) {
    let fan_in = shape.last().copied().unwrap_or(1);
    t.push(Planned::gauss(
        name,
        Dtype::BF16,
        shape,
        0.0,
        isqrt_f32(fan_in),
    ));
}
fn norm(t: &mut Vec<Planned>, name: String, n: u64) {
    t.push(Planned::gauss(name, Dtype::BF16, &[n], 1.0, 0.05));
}

fn push_mx(t: &mut Vec<Planned>, base: &str, rows: u64, cols: u64) {
    let std = isqrt_f32(cols);
    let (r, c) = (rows as usize, cols as usize);
    t.push(Planned {
        spec: TensorSpec::new(
            format!("{base}.weight_packed"),
            Dtype::U8,
            &[rows, cols / 2],
        ),
        fill: Fill::Mxfp4 {
            label: base.into(),
            rows: r,
            cols: c,
            std,
            part: Part::Codes,
        },
    });
    t.push(Planned {
        spec: TensorSpec::new(
            format!("{base}.weight_scale"),
            Dtype::U8,
            &[rows, cols / 32],
        ),
        fill: Fill::Mxfp4 {
            label: base.into(),
            rows: r,
            cols: c,
            std,
            part: Part::Scales,
        },
    });
}

/// Tensors of text layer `l`.
pub fn layer_tensors(k: &KimiDims, l: u64) -> Vec<Planned> {
    let experts = k.experts;
    let p = format!("language_model.model.layers.{l}.");
    let mut t = Vec::new();
    norm(&mut t, format!("{p}input_layernorm.weight"), k.hidden);
    norm(
        &mut t,
        format!("{p}post_attention_layernorm.weight"),
        k.hidden,
    );
    for r in ["self_attention_res", "mlp_res"] {
        norm(&mut t, format!("{p}{r}_norm.weight"), k.hidden);
        w(&mut t, format!("{p}{r}_proj.weight"), &[1, k.hidden]);
    }
    let a = format!("{p}self_attn.");
    if k.is_mla(l) {
        w(&mut t, format!("{a}q_a_proj.weight"), &[k.q_lora, k.hidden]);
        norm(&mut t, format!("{a}q_a_layernorm.weight"), k.q_lora);
        w(
            &mut t,
            format!("{a}q_b_proj.weight"),
            &[k.heads * (k.nope + k.rope), k.q_lora],
        );
        w(
            &mut t,
            format!("{a}kv_a_proj_with_mqa.weight"),
            &[k.kv_lora + k.rope, k.hidden],
        );
        norm(&mut t, format!("{a}kv_a_layernorm.weight"), k.kv_lora);
        w(
            &mut t,
            format!("{a}kv_b_proj.weight"),
            &[k.heads * (k.nope + k.v_dim), k.kv_lora],
        );
        w(
            &mut t,
            format!("{a}g_proj.weight"),
            &[k.heads * k.v_dim, k.hidden],
        );
        w(
            &mut t,
            format!("{a}o_proj.weight"),
            &[k.hidden, k.heads * k.v_dim],
        );
    } else {
        let d = k.heads * k.head_dim;
        for x in ["q", "k", "v"] {
            w(&mut t, format!("{a}{x}_proj.weight"), &[d, k.hidden]);
            w(&mut t, format!("{a}{x}_conv1d.weight"), &[d, 1, 4]);
        }
        // Stored padded past the real head count with exact zeros (models.md §4).
        t.push(Planned {
            spec: TensorSpec::new(format!("{a}A_log"), Dtype::F32, &[k.a_log_pad]),
            fill: Fill::ZeroTail {
                live: k.heads,
                mean: 0.5,
                std: 0.3,
            },
        });
        t.push(Planned::gauss(
            format!("{a}dt_bias"),
            Dtype::F32,
            &[d],
            0.0,
            0.5,
        ));
        w(
            &mut t,
            format!("{a}f_a_proj.weight"),
            &[k.head_dim, k.hidden],
        );
        w(&mut t, format!("{a}f_b_proj.weight"), &[d, k.head_dim]);
        w(&mut t, format!("{a}b_proj.weight"), &[k.heads, k.hidden]);
        w(&mut t, format!("{a}g_proj.weight"), &[d, k.hidden]);
        norm(&mut t, format!("{a}o_norm.weight"), k.head_dim);
        w(&mut t, format!("{a}o_proj.weight"), &[k.hidden, d]);
    }
    if l == 0 {
        let m = format!("{p}mlp.");
        w(
            &mut t,
            format!("{m}gate_proj.weight"),
            &[k.dense_inter, k.hidden],
        );
        w(
            &mut t,
            format!("{m}up_proj.weight"),
            &[k.dense_inter, k.hidden],
        );
        w(
            &mut t,
            format!("{m}down_proj.weight"),
            &[k.hidden, k.dense_inter],
        );
        return t;
    }
    let m = format!("{p}block_sparse_moe.");
    w(&mut t, format!("{m}gate.weight"), &[experts, k.hidden]);
    t.push(Planned::gauss(
        format!("{m}gate.e_score_correction_bias"),
        Dtype::F32,
        &[experts],
        0.0,
        0.01,
    ));
    let shared = 2 * k.moe_inter;
    w(
        &mut t,
        format!("{m}shared_experts.gate_proj.weight"),
        &[shared, k.hidden],
    );
    w(
        &mut t,
        format!("{m}shared_experts.up_proj.weight"),
        &[shared, k.hidden],
    );
    w(
        &mut t,
        format!("{m}shared_experts.down_proj.weight"),
        &[k.hidden, shared],
    );
    w(
        &mut t,
        format!("{m}routed_expert_down_proj.weight"),
        &[k.latent, k.hidden],
    );
    w(
        &mut t,
        format!("{m}routed_expert_up_proj.weight"),
        &[k.hidden, k.latent],
    );
    norm(&mut t, format!("{m}routed_expert_norm.weight"), k.latent);
    for e in 0..experts {
        let x = format!("{m}experts.{e}.");
        push_mx(&mut t, &format!("{x}w1"), k.moe_inter, k.latent);
        push_mx(&mut t, &format!("{x}w3"), k.moe_inter, k.latent);
        push_mx(&mut t, &format!("{x}w2"), k.latent, k.moe_inter);
    }
    t
}

fn vision_tensors(k: &KimiDims) -> Vec<Planned> {
    let mut t = Vec::new();
    let v = "vision_tower.";
    let vd = 128;
    w(
        &mut t,
        format!("{v}patch_embed.proj.weight"),
        &[vd, 3 * 2 * 14 * 14],
    );
    for i in 0..2 {
        let b = format!("{v}encoder.blocks.{i}.");
        for n in ["norm0", "norm1"] {
            norm(&mut t, format!("{b}{n}.weight"), vd);
            t.push(Planned::gauss(
                format!("{b}{n}.bias"),
                Dtype::BF16,
                &[vd],
                0.0,
                0.01,
            ));
        }
        w(&mut t, format!("{b}wqkv.weight"), &[3 * vd, vd]);
        w(&mut t, format!("{b}wo.weight"), &[vd, vd]);
        w(&mut t, format!("{b}mlp.fc0.weight"), &[4 * vd, vd]);
        w(&mut t, format!("{b}mlp.fc1.weight"), &[vd, 4 * vd]);
    }
    norm(&mut t, format!("{v}encoder.final_layernorm.weight"), vd);
    norm(&mut t, "mm_projector.pre_norm.weight".into(), vd);
    w(&mut t, "mm_projector.proj.0.weight".into(), &[k.hidden, vd]);
    t.push(Planned::gauss(
        "mm_projector.proj.0.bias",
        Dtype::BF16,
        &[k.hidden],
        0.0,
        0.01,
    ));
    w(
        &mut t,
        "mm_projector.proj.2.weight".into(),
        &[k.hidden, k.hidden],
    );
    t.push(Planned::gauss(
        "mm_projector.proj.2.bias",
        Dtype::BF16,
        &[k.hidden],
        0.0,
        0.01,
    ));
    t
}

/// Write the tiny checkpoint; `scale` multiplies the routed experts (8 per MoE layer at scale 1).
pub fn generate(out: &Path, seed: u64, scale: u64) -> Result<(Vec<FileDigest>, usize), SynthError> {
    generate_dims(out, seed, &KimiDims::at_scale(scale))
}

/// The shard plan: (file name, tensors), in shard order (layer L in shard L + 1, then the
/// embedding, the head and the vision tower; models.md §4).
pub fn shard_plan(k: &KimiDims) -> Vec<(String, Vec<Planned>)> {
    let n = k.layers + 3;
    let name = |i: u64| format!("model-{i:05}-of-{n:06}.safetensors");
    let mut shards: Vec<(String, Vec<Planned>)> = (0..k.layers)
        .map(|l| (name(l + 1), layer_tensors(k, l)))
        .collect();
    let mut embed = Vec::new();
    t_embed(&mut embed, k);
    shards.push((name(k.layers + 1), embed));
    let mut head = Vec::new();
    w(
        &mut head,
        "language_model.lm_head.weight".into(),
        &[k.vocab, k.hidden],
    );
    norm(
        &mut head,
        "language_model.model.norm.weight".into(),
        k.hidden,
    );
    norm(
        &mut head,
        "language_model.model.output_attn_res_norm.weight".into(),
        k.hidden,
    );
    w(
        &mut head,
        "language_model.model.output_attn_res_proj.weight".into(),
        &[1, k.hidden],
    );
    shards.push((name(k.layers + 2), head));
    shards.push((name(k.layers + 3), vision_tensors(k)));
    shards
}

/// As [`generate`], with explicit dimensions ([`KimiDims::real`] for real-size runs).
pub fn generate_dims(
    out: &Path,
    seed: u64,
    k: &KimiDims,
) -> Result<(Vec<FileDigest>, usize), SynthError> {
    let shards = shard_plan(k);
    let mut files = Vec::new();
    let mut index = IndexBuilder::default();
    let mut count = 0;
    for (file, tensors) in shards {
        let written = write_shard(out, &file, tensors, seed)?;
        index.add(&file, written, &mut files, &mut count);
    }
    files.push(write_bytes(
        out,
        "model.safetensors.index.json",
        &index.to_json(),
    )?);
    files.push(write_bytes(out, "config.json", &pretty(&config_json(k)))?);
    // Root files the plan's identities point at (models.md §4 leaves their names unconfirmed;
    // `plans/kimi-k3.toml` assumes these two).
    let ranks = super::tiktoken::train(super::tokenizer::CORPUS, (k.vocab - 256) as usize);
    files.push(write_bytes(
        out,
        "tiktoken.model",
        &super::tiktoken::to_rank_file(&ranks),
    )?);
    files.push(write_bytes(out, "LICENSE", LICENSE.as_bytes())?);
    Ok((files, count))
}

/// The licence file: a notice for the synthetic weights (upstream's licence text is not
/// reproduced; its file name is assumed to be `LICENSE`).
pub const LICENSE: &str = "Synthetic weights in the moonshotai/Kimi-K3 layout, written by
`minirun-synth kimi-k3` for tests. Not a trained model and not Moonshot AI's licence text.

Permission is granted to use, copy, modify and distribute these generated bytes for any
purpose, without warranty of any kind.
";

fn t_embed(t: &mut Vec<Planned>, k: &KimiDims) {
    t.push(Planned::gauss(
        "language_model.model.embed_tokens.weight",
        Dtype::BF16,
        &[k.vocab, k.hidden],
        0.0,
        0.02,
    ));
}

/// `config.json`: `kimi_k3` wrapping a `kimi_linear` text config with compressed-tensors MXFP4.
pub fn config_json(k: &KimiDims) -> serde_json::Value {
    let mla: Vec<u64> = (0..k.layers)
        .filter(|l| k.is_mla(*l))
        .map(|l| l + 1)
        .collect();
    let quant = json!({
        "quant_method": "compressed-tensors",
        "format": "mxfp4-pack-quantized",
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "format": "mxfp4-pack-quantized",
            "weights": {"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32,
                        "symmetric": true, "dynamic": false, "scale_dtype": "torch.uint8"},
            "input_activations": null
        }},
        "ignore": ["re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\..*", "lm_head",
                   "re:vision_tower.*", "re:mm_projector.*"]
    });
    let mut text = json!({
        "model_type": "kimi_linear",
        "hidden_size": k.hidden,
        "num_hidden_layers": k.layers,
        "vocab_size": k.vocab,
        "num_attention_heads": k.heads,
        "head_dim": k.head_dim,
        "max_position_embeddings": 1048576,
        "num_experts": k.experts,
        "num_experts_per_token": k.top_k,
        "num_shared_experts": 2,
        "moe_intermediate_size": k.moe_inter,
        "routed_expert_hidden_size": k.latent,
        "intermediate_size": k.dense_inter,
        "first_k_dense_replace": 1,
    });
    let more = json!({
        "hidden_act": "situ",
        "moe_renormalize": true,
        "routed_scaling_factor": 1.0,
        "q_lora_rank": k.q_lora,
        "kv_lora_rank": k.kv_lora,
        "qk_nope_head_dim": k.nope,
        "qk_rope_head_dim": k.rope,
        "v_head_dim": k.v_dim,
        "mla_use_nope": true,
        "mla_use_output_gate": true,
        "mla_layers": mla,
        "attn_res_block_size": 2,
        "quantization_config": quant,
    });
    if let (Some(t), serde_json::Value::Object(m)) = (text.as_object_mut(), more) {
        t.extend(m);
    }
    sorted(json!({
        "architectures": ["KimiK3ForConditionalGeneration"],
        "model_type": "kimi_k3",
        "torch_dtype": "bfloat16",
        "text_config": text,
    }))
}
