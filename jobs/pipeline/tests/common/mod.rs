//! Synthetic upstream tensor lists built from the names, dtypes and shapes of
//! `../shared/design/models.md` (§1 DeepSeek V4 Flash, §4 Kimi K3, §5 MiniMax H3).
#![allow(dead_code, clippy::type_complexity)]

use pipeline::plan::UpstreamTensor;
use std::path::PathBuf;

pub fn plans_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../plans")
}

fn t(v: &mut Vec<UpstreamTensor>, name: String, dtype: &str, shape: &[u64], file: &str) {
    v.push(UpstreamTensor::new(&name, dtype, shape, file));
}

/// One FP8 weight + its 128×128 e8m0 grid.
fn fp8(v: &mut Vec<UpstreamTensor>, stem: &str, rows: u64, cols: u64, file: &str) {
    t(v, format!("{stem}.weight"), "F8_E4M3", &[rows, cols], file);
    t(
        v,
        format!("{stem}.scale"),
        "F8_E8M0",
        &[rows.div_ceil(128), cols.div_ceil(128)],
        file,
    );
}

/// The per-layer set shared by every V4 block (models.md §1.4 "Every layer").
fn v4_block(v: &mut Vec<UpstreamTensor>, p: &str, hash_gate: bool, experts: u64, file: &str) {
    for n in ["attn_norm.weight", "ffn_norm.weight"] {
        t(v, format!("{p}{n}"), "BF16", &[4096], file);
    }
    for n in ["hc_attn", "hc_ffn"] {
        t(v, format!("{p}{n}_fn"), "F32", &[24, 16384], file);
        t(v, format!("{p}{n}_base"), "F32", &[24], file);
        t(v, format!("{p}{n}_scale"), "F32", &[3], file);
    }
    t(v, format!("{p}attn.attn_sink"), "F32", &[64], file);
    fp8(v, &format!("{p}attn.wq_a"), 1024, 4096, file);
    t(v, format!("{p}attn.q_norm.weight"), "BF16", &[1024], file);
    fp8(v, &format!("{p}attn.wq_b"), 32768, 1024, file);
    fp8(v, &format!("{p}attn.wkv"), 512, 4096, file);
    t(v, format!("{p}attn.kv_norm.weight"), "BF16", &[512], file);
    fp8(v, &format!("{p}attn.wo_a"), 8192, 4096, file);
    fp8(v, &format!("{p}attn.wo_b"), 4096, 8192, file);
    t(v, format!("{p}ffn.gate.weight"), "BF16", &[256, 4096], file);
    if hash_gate {
        t(v, format!("{p}ffn.gate.tid2eid"), "I64", &[129280, 6], file);
    } else {
        t(v, format!("{p}ffn.gate.bias"), "F32", &[256], file);
    }
    fp8(v, &format!("{p}ffn.shared_experts.w1"), 2048, 4096, file);
    fp8(v, &format!("{p}ffn.shared_experts.w3"), 2048, 4096, file);
    fp8(v, &format!("{p}ffn.shared_experts.w2"), 4096, 2048, file);
    for e in 0..experts {
        for (w, rows, cols) in [("w1", 2048, 4096), ("w3", 2048, 4096), ("w2", 4096, 2048)] {
            let s = format!("{p}ffn.experts.{e}.{w}");
            t(v, format!("{s}.weight"), "I8", &[rows, cols / 2], file);
            t(v, format!("{s}.scale"), "F8_E8M0", &[rows, cols / 32], file);
        }
    }
}

/// DeepSeek-V4-Flash at 60d8d707: 43 layers (SWA 0-1, CSA even 2-42, HCA odd 3-41), MTP, globals.
pub fn v4_tensors(experts: u64) -> Vec<UpstreamTensor> {
    let shard = |n: u64| format!("model-{n:05}-of-00046.safetensors");
    let mut v = Vec::new();
    t(
        &mut v,
        "embed.weight".into(),
        "BF16",
        &[129280, 4096],
        &shard(1),
    );
    for l in 0..43u64 {
        let f = shard(l + 2);
        let p = format!("layers.{l}.");
        v4_block(&mut v, &p, l < 3, experts, &f);
        if l >= 2 {
            let csa = l % 2 == 0;
            let (ape, w) = if csa {
                ([4, 1024], 1024)
            } else {
                ([128, 512], 512)
            };
            t(&mut v, format!("{p}attn.compressor.ape"), "F32", &ape, &f);
            t(
                &mut v,
                format!("{p}attn.compressor.wkv.weight"),
                "BF16",
                &[w, 4096],
                &f,
            );
            t(
                &mut v,
                format!("{p}attn.compressor.wgate.weight"),
                "BF16",
                &[w, 4096],
                &f,
            );
            t(
                &mut v,
                format!("{p}attn.compressor.norm.weight"),
                "BF16",
                &[512],
                &f,
            );
            if csa {
                fp8(&mut v, &format!("{p}attn.indexer.wq_b"), 8192, 1024, &f);
                t(
                    &mut v,
                    format!("{p}attn.indexer.weights_proj.weight"),
                    "BF16",
                    &[64, 4096],
                    &f,
                );
                t(
                    &mut v,
                    format!("{p}attn.indexer.compressor.ape"),
                    "F32",
                    &[4, 256],
                    &f,
                );
                t(
                    &mut v,
                    format!("{p}attn.indexer.compressor.wkv.weight"),
                    "BF16",
                    &[256, 4096],
                    &f,
                );
                t(
                    &mut v,
                    format!("{p}attn.indexer.compressor.wgate.weight"),
                    "BF16",
                    &[256, 4096],
                    &f,
                );
                t(
                    &mut v,
                    format!("{p}attn.indexer.compressor.norm.weight"),
                    "BF16",
                    &[128],
                    &f,
                );
            }
        }
    }
    let f45 = shard(45);
    t(&mut v, "head.weight".into(), "BF16", &[129280, 4096], &f45);
    t(&mut v, "norm.weight".into(), "BF16", &[4096], &f45);
    t(&mut v, "hc_head_fn".into(), "F32", &[4, 16384], &f45);
    t(&mut v, "hc_head_base".into(), "F32", &[4], &f45);
    t(&mut v, "hc_head_scale".into(), "F32", &[1], &f45);
    let f46 = shard(46);
    v4_block(&mut v, "mtp.0.", false, experts, &f46);
    fp8(&mut v, "mtp.0.e_proj", 4096, 4096, &f46);
    fp8(&mut v, "mtp.0.h_proj", 4096, 4096, &f46);
    for n in ["enorm.weight", "hnorm.weight", "norm.weight"] {
        t(&mut v, format!("mtp.0.{n}"), "BF16", &[4096], &f46);
    }
    t(&mut v, "mtp.0.hc_head_fn".into(), "F32", &[4, 16384], &f46);
    t(&mut v, "mtp.0.hc_head_base".into(), "F32", &[4], &f46);
    t(&mut v, "mtp.0.hc_head_scale".into(), "F32", &[1], &f46);
    v
}

/// Kimi K3 as far as models.md §4 names it, with `experts` routed experts per MoE layer.
pub fn k3_tensors(experts: u64) -> Vec<UpstreamTensor> {
    let shard = |n: u64| format!("model-{n:05}-of-000096.safetensors");
    let mut v = Vec::new();
    let bf = |v: &mut Vec<UpstreamTensor>, n: String, s: &[u64], f: &str| t(v, n, "BF16", s, f);
    for l in 0..93u64 {
        let f = shard(l + 1);
        let p = format!("language_model.model.layers.{l}.");
        for n in [
            "input_layernorm",
            "post_attention_layernorm",
            "self_attention_res_norm",
            "mlp_res_norm",
        ] {
            bf(&mut v, format!("{p}{n}.weight"), &[7168], &f);
        }
        bf(
            &mut v,
            format!("{p}self_attention_res_proj.weight"),
            &[1, 7168],
            &f,
        );
        bf(&mut v, format!("{p}mlp_res_proj.weight"), &[1, 7168], &f);
        // 1-based MLA layers 4, 8, …, 92, 93.
        let mla = (l + 1) % 4 == 0 || l == 92;
        if mla {
            for n in [
                "q_a_proj",
                "q_b_proj",
                "kv_a_proj_with_mqa",
                "kv_b_proj",
                "g_proj",
                "o_proj",
            ] {
                bf(
                    &mut v,
                    format!("{p}self_attn.{n}.weight"),
                    &[1536, 7168],
                    &f,
                );
            }
            for n in ["q_a_layernorm", "kv_a_layernorm"] {
                bf(&mut v, format!("{p}self_attn.{n}.weight"), &[512], &f);
            }
        } else {
            for n in [
                "q_proj", "k_proj", "v_proj", "f_a_proj", "f_b_proj", "b_proj", "g_proj", "o_proj",
            ] {
                bf(&mut v, format!("{p}self_attn.{n}.weight"), &[128, 7168], &f);
            }
            for n in ["q_conv1d", "k_conv1d", "v_conv1d"] {
                bf(
                    &mut v,
                    format!("{p}self_attn.{n}.weight"),
                    &[12288, 1, 4],
                    &f,
                );
            }
            t(&mut v, format!("{p}self_attn.A_log"), "F32", &[128], &f);
            t(&mut v, format!("{p}self_attn.dt_bias"), "F32", &[12288], &f);
            bf(&mut v, format!("{p}self_attn.o_norm.weight"), &[128], &f);
        }
        if l == 0 {
            for n in ["gate_proj", "up_proj", "down_proj"] {
                bf(&mut v, format!("{p}mlp.{n}.weight"), &[33792, 7168], &f);
            }
            continue;
        }
        let m = format!("{p}block_sparse_moe.");
        bf(&mut v, format!("{m}gate.weight"), &[896, 7168], &f);
        t(
            &mut v,
            format!("{m}gate.e_score_correction_bias"),
            "F32",
            &[896],
            &f,
        );
        for n in ["gate_proj", "up_proj", "down_proj"] {
            bf(
                &mut v,
                format!("{m}shared_experts.{n}.weight"),
                &[6144, 7168],
                &f,
            );
        }
        bf(
            &mut v,
            format!("{m}routed_expert_down_proj.weight"),
            &[3584, 7168],
            &f,
        );
        bf(
            &mut v,
            format!("{m}routed_expert_up_proj.weight"),
            &[7168, 3584],
            &f,
        );
        bf(&mut v, format!("{m}routed_expert_norm.weight"), &[3584], &f);
        for e in 0..experts {
            for (w, rows, cols) in [
                ("w1", 3072u64, 3584u64),
                ("w3", 3072, 3584),
                ("w2", 3584, 3072),
            ] {
                let s = format!("{m}experts.{e}.{w}");
                t(
                    &mut v,
                    format!("{s}.weight_packed"),
                    "U8",
                    &[rows, cols / 2],
                    &f,
                );
                t(
                    &mut v,
                    format!("{s}.weight_scale"),
                    "U8",
                    &[rows, cols / 32],
                    &f,
                );
            }
        }
    }
    bf(
        &mut v,
        "language_model.model.embed_tokens.weight".into(),
        &[163840, 7168],
        &shard(94),
    );
    bf(
        &mut v,
        "language_model.lm_head.weight".into(),
        &[163840, 7168],
        &shard(95),
    );
    bf(
        &mut v,
        "language_model.model.norm.weight".into(),
        &[7168],
        &shard(95),
    );
    bf(
        &mut v,
        "language_model.model.output_attn_res_norm.weight".into(),
        &[7168],
        &shard(95),
    );
    bf(
        &mut v,
        "language_model.model.output_attn_res_proj.weight".into(),
        &[1, 7168],
        &shard(95),
    );
    for i in 0..3 {
        bf(
            &mut v,
            format!("vision_tower.blocks.{i}.attn.qkv.weight"),
            &[3456, 1152],
            &shard(96),
        );
    }
    bf(
        &mut v,
        "mm_projector.proj.0.weight".into(),
        &[7168, 4608],
        &shard(96),
    );
    bf(
        &mut v,
        "mm_projector.proj.2.weight".into(),
        &[7168, 7168],
        &shard(96),
    );
    bf(
        &mut v,
        "mm_projector.pre_norm.weight".into(),
        &[4608],
        &shard(96),
    );
    v
}

/// MiniMax H3 across the plan's four sources (diffusers names, MLX affine 8-bit transformer).
pub fn h3_tensors() -> Vec<UpstreamTensor> {
    let mut v = Vec::new();
    let mut add = |src: &str, name: String, dtype: &str, shape: &[u64], file: &str| {
        v.push(UpstreamTensor::new(&name, dtype, shape, file).in_source(src));
    };
    let dit = "transformer/model-00001-of-00007.safetensors";
    let q8 = |add: &mut dyn FnMut(&str, String, &str, &[u64], &str),
              stem: String,
              rows: u64,
              cols: u64| {
        add(
            "dit",
            format!("{stem}.weight"),
            "U32",
            &[rows, cols / 4],
            dit,
        );
        add(
            "dit",
            format!("{stem}.scales"),
            "BF16",
            &[rows, cols / 64],
            dit,
        );
        add(
            "dit",
            format!("{stem}.biases"),
            "BF16",
            &[rows, cols / 64],
            dit,
        );
    };
    for b in 0..50 {
        let p = format!("transformer_blocks.{b}.");
        for n in ["attn.to_q", "attn.to_k", "attn.to_v", "attn.to_out.0"] {
            q8(&mut add, format!("{p}{n}"), 5376, 5376);
        }
        q8(&mut add, format!("{p}ff.net.0.proj"), 28672, 5376);
        q8(&mut add, format!("{p}ff.net.2"), 5376, 14336);
        add("dit", format!("{p}attn.norm_q.weight"), "BF16", &[128], dit);
        add("dit", format!("{p}attn.norm_k.weight"), "BF16", &[128], dit);
        add("dit", format!("{p}norm1.weight"), "BF16", &[5376], dit);
    }
    for r in 0..2 {
        q8(
            &mut add,
            format!("token_refiner.blocks.{r}.attn.qkv_proj"),
            16128,
            5376,
        );
    }
    add("dit", "proj_in.weight".into(), "F32", &[5376, 96], dit);
    add(
        "dit",
        "audio_proj_in.weight".into(),
        "F32",
        &[5376, 32],
        dit,
    );
    q8(&mut add, "context_embedder".into(), 5376, 5120);
    add(
        "dit",
        "time_embedder.linear_1.weight".into(),
        "F32",
        &[5376, 256],
        dit,
    );
    add(
        "dit",
        "norm_out.linear.weight".into(),
        "F32",
        &[10752, 5376],
        dit,
    );
    add("dit", "proj_out.weight".into(), "F32", &[96, 5376], dit);
    add(
        "dit",
        "audio_proj_out.weight".into(),
        "F32",
        &[32, 5376],
        dit,
    );
    let te = "text_encoder/model-00001-of-00002.safetensors";
    add(
        "text-encoder",
        "model.language_model.embed_tokens.weight".into(),
        "BF16",
        &[151936, 5120],
        te,
    );
    for l in 0..64 {
        for n in [
            "self_attn.q_proj.weight",
            "mlp.down_proj.weight",
            "input_layernorm.weight",
        ] {
            add(
                "text-encoder",
                format!("model.language_model.layers.{l}.{n}"),
                "BF16",
                &[5120, 5120],
                te,
            );
        }
    }
    add(
        "text-encoder",
        "model.language_model.norm.weight".into(),
        "BF16",
        &[5120],
        te,
    );
    add(
        "text-encoder",
        "lm_head.weight".into(),
        "BF16",
        &[151936, 5120],
        te,
    );
    add(
        "text-encoder",
        "model.visual.patch_embed.proj.weight".into(),
        "BF16",
        &[1152, 3, 2, 16, 16],
        te,
    );
    // The two VAEs share tensor names: the source keeps them apart.
    for src in ["vae-video", "vae-audio"] {
        let f = if src == "vae-video" {
            "vae/diffusion_pytorch_model.safetensors"
        } else {
            "audio_vae/diffusion_pytorch_model.safetensors"
        };
        add(
            src,
            "encoder.conv_in.weight".into(),
            "F32",
            &[128, 24, 3, 3, 3],
            f,
        );
        add(
            src,
            "decoder.conv_out.weight".into(),
            "F32",
            &[24, 128, 3, 3, 3],
            f,
        );
    }
    v
}
