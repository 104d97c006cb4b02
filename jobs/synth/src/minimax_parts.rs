//! The MiniMax H3 components besides the transformer, in the official repository's diffusers
//! layout: the Qwen3-VL `text_encoder/` (two shards and an index), the stereo `audio_vae/`, the
//! `tokenizer/tokenizer.json`, `model_index.json` naming every component, and the licence files
//! of both repositories. `plans/tests/minimax-h3-style.toml` claims them like the draft
//! `plans/minimax-h3.toml` does.
//!
//! Spec: `../shared/design/models.md` §5 (components, `hidden_states[50]`, the F32 VAE encoder,
//! the third-party reading of `text_encoder/model.safetensors.index.json` with
//! `model.language_model.layers.*`). Guessed (docs/synth.md): the Qwen3-VL per-layer and vision
//! key names beyond that prefix, the audio VAE's tensor names, and the licence texts.

use super::deepseek::{pretty, sorted};
use super::write::{isqrt_f32, write_bytes, write_shard, FileDigest, IndexBuilder, Planned};
use super::{tokenizer, SynthError};
use artifact::dtype::Dtype;
use serde_json::json;
use std::path::Path;

/// Text encoder hidden size (= the transformer's `text_dim`).
const TE_H: u64 = 256;
/// Text encoder decoder layers (upstream 64; H3 reads an intermediate layer, so the last ones
/// and the head never run).
pub const TE_LAYERS: u64 = 4;
const TE_HEADS: u64 = 2;
const TE_KV_HEADS: u64 = 1;
const TE_HEAD_DIM: u64 = 128;
const TE_FFN: u64 = 512;
const TE_VOCAB: u64 = 512;
const VIS: u64 = 128;

fn lin(t: &mut Vec<Planned>, name: String, out: u64, inp: u64) {
    t.push(Planned::gauss(
        name,
        Dtype::BF16,
        &[out, inp],
        0.0,
        isqrt_f32(inp),
    ));
}
fn norm(t: &mut Vec<Planned>, name: String, n: u64) {
    t.push(Planned::gauss(name, Dtype::BF16, &[n], 1.0, 0.05));
}
fn bias(t: &mut Vec<Planned>, name: String, n: u64, dtype: Dtype) {
    t.push(Planned::gauss(name, dtype, &[n], 0.0, 0.01));
}

fn te_layer(t: &mut Vec<Planned>, l: u64) {
    let p = format!("model.language_model.layers.{l}.");
    norm(t, format!("{p}input_layernorm.weight"), TE_H);
    norm(t, format!("{p}post_attention_layernorm.weight"), TE_H);
    let a = format!("{p}self_attn.");
    lin(t, format!("{a}q_proj.weight"), TE_HEADS * TE_HEAD_DIM, TE_H);
    lin(
        t,
        format!("{a}k_proj.weight"),
        TE_KV_HEADS * TE_HEAD_DIM,
        TE_H,
    );
    lin(
        t,
        format!("{a}v_proj.weight"),
        TE_KV_HEADS * TE_HEAD_DIM,
        TE_H,
    );
    lin(t, format!("{a}o_proj.weight"), TE_H, TE_HEADS * TE_HEAD_DIM);
    norm(t, format!("{a}q_norm.weight"), TE_HEAD_DIM);
    norm(t, format!("{a}k_norm.weight"), TE_HEAD_DIM);
    let m = format!("{p}mlp.");
    lin(t, format!("{m}gate_proj.weight"), TE_FFN, TE_H);
    lin(t, format!("{m}up_proj.weight"), TE_FFN, TE_H);
    lin(t, format!("{m}down_proj.weight"), TE_H, TE_FFN);
}

fn te_visual(t: &mut Vec<Planned>) {
    let v = "model.visual.";
    lin(
        t,
        format!("{v}patch_embed.proj.weight"),
        VIS,
        3 * 2 * 16 * 16,
    );
    for i in 0..2 {
        let b = format!("{v}blocks.{i}.");
        for n in ["norm1", "norm2"] {
            norm(t, format!("{b}{n}.weight"), VIS);
            bias(t, format!("{b}{n}.bias"), VIS, Dtype::BF16);
        }
        lin(t, format!("{b}attn.qkv.weight"), 3 * VIS, VIS);
        bias(t, format!("{b}attn.qkv.bias"), 3 * VIS, Dtype::BF16);
        lin(t, format!("{b}attn.proj.weight"), VIS, VIS);
        lin(t, format!("{b}mlp.linear_fc1.weight"), 4 * VIS, VIS);
        lin(t, format!("{b}mlp.linear_fc2.weight"), VIS, 4 * VIS);
    }
    norm(t, format!("{v}merger.norm.weight"), VIS);
    lin(t, format!("{v}merger.linear_fc1.weight"), 4 * VIS, 4 * VIS);
    lin(t, format!("{v}merger.linear_fc2.weight"), TE_H, 4 * VIS);
}

/// The text encoder's two shards: embeddings and the first half of the layers; the rest, the
/// final norm, the LM head and the vision tower.
fn te_shards() -> [Vec<Planned>; 2] {
    let mut a = Vec::new();
    t_embed(&mut a);
    let mut b = Vec::new();
    for l in 0..TE_LAYERS {
        te_layer(if l < TE_LAYERS / 2 { &mut a } else { &mut b }, l);
    }
    norm(&mut b, "model.language_model.norm.weight".into(), TE_H);
    lin(&mut b, "lm_head.weight".into(), TE_VOCAB, TE_H);
    te_visual(&mut b);
    [a, b]
}

fn t_embed(t: &mut Vec<Planned>) {
    t.push(Planned::gauss(
        "model.language_model.embed_tokens.weight",
        Dtype::BF16,
        &[TE_VOCAB, TE_H],
        0.0,
        0.02,
    ));
}

/// The audio VAE: 1-D convolutions over stereo audio, F32 encoder, BF16 decoder. Its names
/// overlap the video VAE's (`encoder.*`, `decoder.*`), as upstream's components do.
fn audio_vae_tensors() -> Vec<Planned> {
    let mut t = Vec::new();
    let conv = |t: &mut Vec<Planned>, n: &str, dt, shape: &[u64]| {
        let fan: u64 = shape.iter().skip(1).product();
        t.push(Planned::gauss(n, dt, shape, 0.0, isqrt_f32(fan)));
    };
    conv(&mut t, "encoder.conv_in.weight", Dtype::F32, &[64, 2, 7]);
    bias(&mut t, "encoder.conv_in.bias".into(), 64, Dtype::F32);
    t.push(Planned::gauss(
        "encoder.blocks.0.snake1.alpha",
        Dtype::F32,
        &[1, 64, 1],
        1.0,
        0.05,
    ));
    conv(
        &mut t,
        "encoder.blocks.0.conv1.weight",
        Dtype::F32,
        &[64, 64, 7],
    );
    conv(&mut t, "encoder.conv_out.weight", Dtype::F32, &[80, 64, 3]);
    conv(&mut t, "decoder.conv_in.weight", Dtype::BF16, &[64, 40, 7]);
    t.push(Planned::gauss(
        "decoder.blocks.0.snake1.alpha",
        Dtype::BF16,
        &[1, 64, 1],
        1.0,
        0.05,
    ));
    conv(&mut t, "decoder.conv_out.weight", Dtype::BF16, &[2, 64, 7]);
    bias(&mut t, "decoder.conv_out.bias".into(), 2, Dtype::BF16);
    t
}

/// Licence of the official repository (a notice for the synthetic bytes; upstream's "MiniMax H3
/// Community License" text is not reproduced).
pub const LICENSE: &str =
    "Synthetic weights in the MiniMaxAI/MiniMax-H3 diffusers layout, written by
`minirun-synth minimax-h3` for tests. Not a trained model and not MiniMax's licence text.

Permission is granted to use, copy, modify and distribute these generated bytes for any
purpose, without warranty of any kind.
";

/// Licence of the MLX port (a different file from the official one, so the artifact keeps both).
pub const LICENSE_MLX: &str =
    "Synthetic MLX affine 8-bit port of the synthetic MiniMax H3 transformer,
written by `minirun-synth minimax-h3` for tests. Not a trained model and not the port's licence.

Permission is granted to use, copy, modify and distribute these generated bytes for any
purpose, without warranty of any kind.
";

/// Write the official repository's components besides the transformer and the video VAE under
/// `out/<upstream>/`. Returns the files and the tensor count.
pub fn write_components(
    out: &Path,
    upstream: &str,
    seed: u64,
) -> Result<(Vec<FileDigest>, usize), SynthError> {
    let mut files = Vec::new();
    let mut count = 0;
    let mut index = IndexBuilder::default();
    for (i, part) in te_shards().into_iter().enumerate() {
        let file = format!("model-{:05}-of-00002.safetensors", i + 1);
        let written = write_shard(out, &format!("{upstream}/text_encoder/{file}"), part, seed)?;
        index.add(&file, written, &mut files, &mut count);
    }
    files.push(write_bytes(
        out,
        &format!("{upstream}/text_encoder/model.safetensors.index.json"),
        &index.to_json(),
    )?);
    let te_cfg = sorted(json!({
        "architectures": ["Qwen3VLForConditionalGeneration"],
        "model_type": "qwen3_vl",
        "text_config": sorted(json!({
            "model_type": "qwen3_vl_text",
            "hidden_size": TE_H,
            "num_hidden_layers": TE_LAYERS,
            "num_attention_heads": TE_HEADS,
            "num_key_value_heads": TE_KV_HEADS,
            "head_dim": TE_HEAD_DIM,
            "intermediate_size": TE_FFN,
            "vocab_size": TE_VOCAB,
        })),
        "vision_config": sorted(json!({"hidden_size": VIS, "depth": 2, "patch_size": 16,
            "temporal_patch_size": 2, "out_hidden_size": TE_H})),
        "torch_dtype": "bfloat16",
    }));
    files.push(write_bytes(
        out,
        &format!("{upstream}/text_encoder/config.json"),
        &pretty(&te_cfg),
    )?);
    let (digest, _, names) = write_shard(
        out,
        &format!("{upstream}/audio_vae/diffusion_pytorch_model.safetensors"),
        audio_vae_tensors(),
        seed,
    )?;
    count += names.len();
    files.push(digest);
    let audio_cfg = sorted(json!({"_class_name": "AutoencoderKLMiniMaxH3Audio",
        "_diffusers_version": "0.42.1", "audio_channels": 2, "latent_channels": 40}));
    files.push(write_bytes(
        out,
        &format!("{upstream}/audio_vae/config.json"),
        &pretty(&audio_cfg),
    )?);
    let tok = tokenizer::train_bpe(TE_VOCAB as usize)?;
    files.push(write_bytes(
        out,
        &format!("{upstream}/tokenizer/tokenizer.json"),
        tok.as_bytes(),
    )?);
    files.push(write_bytes(
        out,
        &format!("{upstream}/LICENSE"),
        LICENSE.as_bytes(),
    )?);
    Ok((files, count))
}

/// `model_index.json` of the official repository: every component with its class.
pub fn model_index() -> serde_json::Value {
    sorted(json!({
        "_class_name": "MiniMaxH3Pipeline",
        "_diffusers_version": "0.42.1",
        "transformer": ["diffusers", "MiniMaxH3Transformer3DModel"],
        "vae": ["diffusers", "AutoencoderKLMiniMaxH3"],
        "audio_vae": ["diffusers", "AutoencoderKLMiniMaxH3Audio"],
        "text_encoder": ["transformers", "Qwen3VLForConditionalGeneration"],
        "tokenizer": ["transformers", "Qwen2TokenizerFast"],
    }))
}
