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
use super::write::{isqrt_f32, write_bytes, write_shard, FileDigest, Fill, Part, Planned};
use super::SynthError;
use artifact::dtype::Dtype;
use artifact::safetensors::{index::ShardIndex, TensorSpec};
use serde_json::json;
use std::path::Path;

const H: u64 = 256;
const LAYERS: u64 = 4;
const VOCAB: u64 = 512;
const HEADS: u64 = 2;
const HEAD_DIM: u64 = 128;
const A_LOG_PAD: u64 = 8;
const Q_LORA: u64 = 128;
const KV_LORA: u64 = 128;
const NOPE: u64 = 128;
const ROPE: u64 = 64;
const V_DIM: u64 = 128;
/// 256 × 128 experts: a 256-row tile of `weight_packed` is 16 KiB, so each is a container (a
/// 128 × 128 expert would be 8 KiB per tile, which the container refuses).
const MOE_INTER: u64 = 256;
const LATENT: u64 = 128;
const DENSE_INTER: u64 = 512;
const TOP_K: u64 = 4;

/// MLA layers: every 4th (1-based) and the last, as upstream's 4, 8, …, 92, 93.
pub fn is_mla(l: u64) -> bool {
    (l + 1) % 4 == 0 || l + 1 == LAYERS
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

/// Tensors of text layer `l` with `experts` routed experts.
pub fn layer_tensors(l: u64, experts: u64) -> Vec<Planned> {
    let p = format!("language_model.model.layers.{l}.");
    let mut t = Vec::new();
    norm(&mut t, format!("{p}input_layernorm.weight"), H);
    norm(&mut t, format!("{p}post_attention_layernorm.weight"), H);
    for r in ["self_attention_res", "mlp_res"] {
        norm(&mut t, format!("{p}{r}_norm.weight"), H);
        w(&mut t, format!("{p}{r}_proj.weight"), &[1, H]);
    }
    let a = format!("{p}self_attn.");
    if is_mla(l) {
        w(&mut t, format!("{a}q_a_proj.weight"), &[Q_LORA, H]);
        norm(&mut t, format!("{a}q_a_layernorm.weight"), Q_LORA);
        w(
            &mut t,
            format!("{a}q_b_proj.weight"),
            &[HEADS * (NOPE + ROPE), Q_LORA],
        );
        w(
            &mut t,
            format!("{a}kv_a_proj_with_mqa.weight"),
            &[KV_LORA + ROPE, H],
        );
        norm(&mut t, format!("{a}kv_a_layernorm.weight"), KV_LORA);
        w(
            &mut t,
            format!("{a}kv_b_proj.weight"),
            &[HEADS * (NOPE + V_DIM), KV_LORA],
        );
        w(&mut t, format!("{a}g_proj.weight"), &[HEADS * V_DIM, H]);
        w(&mut t, format!("{a}o_proj.weight"), &[H, HEADS * V_DIM]);
    } else {
        let d = HEADS * HEAD_DIM;
        for x in ["q", "k", "v"] {
            w(&mut t, format!("{a}{x}_proj.weight"), &[d, H]);
            w(&mut t, format!("{a}{x}_conv1d.weight"), &[d, 1, 4]);
        }
        // Stored padded past the real head count with exact zeros (models.md §4).
        t.push(Planned {
            spec: TensorSpec::new(format!("{a}A_log"), Dtype::F32, &[A_LOG_PAD]),
            fill: Fill::ZeroTail {
                live: HEADS,
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
        w(&mut t, format!("{a}f_a_proj.weight"), &[HEAD_DIM, H]);
        w(&mut t, format!("{a}f_b_proj.weight"), &[d, HEAD_DIM]);
        w(&mut t, format!("{a}b_proj.weight"), &[HEADS, H]);
        w(&mut t, format!("{a}g_proj.weight"), &[d, H]);
        norm(&mut t, format!("{a}o_norm.weight"), HEAD_DIM);
        w(&mut t, format!("{a}o_proj.weight"), &[H, d]);
    }
    if l == 0 {
        let m = format!("{p}mlp.");
        w(&mut t, format!("{m}gate_proj.weight"), &[DENSE_INTER, H]);
        w(&mut t, format!("{m}up_proj.weight"), &[DENSE_INTER, H]);
        w(&mut t, format!("{m}down_proj.weight"), &[H, DENSE_INTER]);
        return t;
    }
    let m = format!("{p}block_sparse_moe.");
    w(&mut t, format!("{m}gate.weight"), &[experts, H]);
    t.push(Planned::gauss(
        format!("{m}gate.e_score_correction_bias"),
        Dtype::F32,
        &[experts],
        0.0,
        0.01,
    ));
    let shared = 2 * MOE_INTER;
    w(
        &mut t,
        format!("{m}shared_experts.gate_proj.weight"),
        &[shared, H],
    );
    w(
        &mut t,
        format!("{m}shared_experts.up_proj.weight"),
        &[shared, H],
    );
    w(
        &mut t,
        format!("{m}shared_experts.down_proj.weight"),
        &[H, shared],
    );
    w(
        &mut t,
        format!("{m}routed_expert_down_proj.weight"),
        &[LATENT, H],
    );
    w(
        &mut t,
        format!("{m}routed_expert_up_proj.weight"),
        &[H, LATENT],
    );
    norm(&mut t, format!("{m}routed_expert_norm.weight"), LATENT);
    for e in 0..experts {
        let x = format!("{m}experts.{e}.");
        push_mx(&mut t, &format!("{x}w1"), MOE_INTER, LATENT);
        push_mx(&mut t, &format!("{x}w3"), MOE_INTER, LATENT);
        push_mx(&mut t, &format!("{x}w2"), LATENT, MOE_INTER);
    }
    t
}

fn vision_tensors() -> Vec<Planned> {
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
    w(&mut t, "mm_projector.proj.0.weight".into(), &[H, vd]);
    t.push(Planned::gauss(
        "mm_projector.proj.0.bias",
        Dtype::BF16,
        &[H],
        0.0,
        0.01,
    ));
    w(&mut t, "mm_projector.proj.2.weight".into(), &[H, H]);
    t.push(Planned::gauss(
        "mm_projector.proj.2.bias",
        Dtype::BF16,
        &[H],
        0.0,
        0.01,
    ));
    t
}

/// Write the checkpoint; `scale` multiplies the routed experts (8 per MoE layer at scale 1).
pub fn generate(out: &Path, seed: u64, scale: u64) -> Result<(Vec<FileDigest>, usize), SynthError> {
    let experts = 8 * scale;
    let n = LAYERS + 3;
    let name = |i: u64| format!("model-{i:05}-of-{n:06}.safetensors");
    let mut shards: Vec<(String, Vec<Planned>)> = (0..LAYERS)
        .map(|l| (name(l + 1), layer_tensors(l, experts)))
        .collect();
    let mut embed = Vec::new();
    t_embed(&mut embed);
    shards.push((name(LAYERS + 1), embed));
    let mut head = Vec::new();
    w(
        &mut head,
        "language_model.lm_head.weight".into(),
        &[VOCAB, H],
    );
    norm(&mut head, "language_model.model.norm.weight".into(), H);
    norm(
        &mut head,
        "language_model.model.output_attn_res_norm.weight".into(),
        H,
    );
    w(
        &mut head,
        "language_model.model.output_attn_res_proj.weight".into(),
        &[1, H],
    );
    shards.push((name(LAYERS + 2), head));
    shards.push((name(LAYERS + 3), vision_tensors()));
    let mut files = Vec::new();
    let mut index = ShardIndex {
        total_size: 0,
        extra_metadata: vec![],
        weight_map: vec![],
    };
    let mut count = 0;
    for (file, tensors) in shards {
        let (digest, data_len, names) = write_shard(out, &file, tensors, seed)?;
        index.total_size += data_len;
        count += names.len();
        index
            .weight_map
            .extend(names.into_iter().map(|t| (t, file.clone())));
        files.push(digest);
    }
    files.push(write_bytes(
        out,
        "model.safetensors.index.json",
        &index.to_json(),
    )?);
    files.push(write_bytes(
        out,
        "config.json",
        &pretty(&config_json(experts)),
    )?);
    // Root files the plan's identities point at (models.md §4 leaves their names unconfirmed;
    // `plans/kimi-k3.toml` assumes these two).
    let ranks = super::tiktoken::train(super::tokenizer::CORPUS, (VOCAB - 256) as usize);
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

fn t_embed(t: &mut Vec<Planned>) {
    t.push(Planned::gauss(
        "language_model.model.embed_tokens.weight",
        Dtype::BF16,
        &[VOCAB, H],
        0.0,
        0.02,
    ));
}

/// `config.json`: `kimi_k3` wrapping a `kimi_linear` text config with compressed-tensors MXFP4.
pub fn config_json(experts: u64) -> serde_json::Value {
    let mla: Vec<u64> = (0..LAYERS).filter(|l| is_mla(*l)).map(|l| l + 1).collect();
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
        "hidden_size": H,
        "num_hidden_layers": LAYERS,
        "vocab_size": VOCAB,
        "num_attention_heads": HEADS,
        "head_dim": HEAD_DIM,
        "max_position_embeddings": 1048576,
        "num_experts": experts,
        "num_experts_per_token": TOP_K,
        "num_shared_experts": 2,
        "moe_intermediate_size": MOE_INTER,
        "routed_expert_hidden_size": LATENT,
        "intermediate_size": DENSE_INTER,
        "first_k_dense_replace": 1,
    });
    let more = json!({
        "hidden_act": "situ",
        "moe_renormalize": true,
        "routed_scaling_factor": 1.0,
        "q_lora_rank": Q_LORA,
        "kv_lora_rank": KV_LORA,
        "qk_nope_head_dim": NOPE,
        "qk_rope_head_dim": ROPE,
        "v_head_dim": V_DIM,
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
