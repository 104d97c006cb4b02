//! MiniMax H3 style, as two repositories side by side under the output directory:
//! `MiniMaxAI--MiniMax-H3/` (diffusers layout: `model_index.json`, a sharded BF16/F32
//! `transformer/`, a single-file `vae/`, and from `minimax_parts`: `text_encoder/`, `audio_vae/`,
//! `tokenizer/tokenizer.json`, `LICENSE`) and `pipenetwork--MiniMax-H3-MLX-8bit/` (the community
//! MLX port: the same transformer with every BF16 linear as MLX affine 8-bit — `weight` U32
//! codes, BF16 `scales`/`biases` per 64 inputs — written the way `mx.save_safetensors` writes,
//! name order, `{"format":"mlx"}`, unpadded header — and its own `LICENSE`).
//!
//! Spec: `../shared/design/models.md` §5 (diffusers key names, F32 modules, the MLX port),
//! `formats.md` §3 (MLX affine). Guessed (docs/synth.md): block norm/AdaLN names, VAE tensor
//! names, the MLX port's key names, file names and group size.

use super::deepseek::{pretty, sorted};
use super::write::{
    isqrt_f32, write_bytes, write_shard, write_shard_styled, FileDigest, Fill, IndexBuilder, Part,
    Planned, ShardStyle,
};
use super::SynthError;
use artifact::dtype::Dtype;
use artifact::safetensors::TensorSpec;
use serde_json::json;
use std::path::Path;

const H: u64 = 256;
const HEADS: u64 = 2;
const HEAD_DIM: u64 = 128;
const FFN: u64 = 512;
const VIDEO_IN: u64 = 24 * 2 * 2;
const AUDIO_IN: u64 = 32;
const TEXT_DIM: u64 = 256;
const TIME_DIM: u64 = 256;
/// `num_refiner_layers` (upstream 2).
pub const REFINER_BLOCKS: u64 = 2;
/// MLX affine group size used by the 8-bit port (MLX's default).
pub const MLX_GROUP: u64 = 64;
/// Upstream repo directory.
pub const UPSTREAM_DIR: &str = "MiniMaxAI--MiniMax-H3";
/// MLX port directory.
pub const MLX_DIR: &str = "pipenetwork--MiniMax-H3-MLX-8bit";

/// One module of the transformer.
#[derive(Debug, Clone)]
enum Module {
    /// A linear `[out, in]` (+ bias when `bias`), F32 when `f32`.
    Linear {
        name: String,
        out: u64,
        inp: u64,
        f32: bool,
        bias: bool,
    },
    /// A norm weight `[n]`.
    Norm { name: String, n: u64 },
}

fn modules(blocks: u64) -> Vec<Module> {
    let lin = |name: String, out, inp, f32, bias| Module::Linear {
        name,
        out,
        inp,
        f32,
        bias,
    };
    let mut m = vec![
        lin("proj_in".into(), H, VIDEO_IN, true, true),
        lin("audio_proj_in".into(), H, AUDIO_IN, true, true),
        lin("context_embedder".into(), H, TEXT_DIM, false, true),
        lin("time_embedder.linear_1".into(), H, TIME_DIM, true, true),
        lin("time_embedder.linear_2".into(), H, H, true, true),
    ];
    // The 2-block text token refiner (models.md §5), in the transformer blocks' key style.
    for r in 0..REFINER_BLOCKS {
        let b = format!("token_refiner.blocks.{r}.");
        for x in ["to_q", "to_k", "to_v", "to_out.0"] {
            m.push(lin(format!("{b}attn.{x}"), H, H, false, x == "to_out.0"));
        }
        m.push(Module::Norm {
            name: format!("{b}norm1.weight"),
            n: H,
        });
        m.push(Module::Norm {
            name: format!("{b}norm2.weight"),
            n: H,
        });
        m.push(lin(format!("{b}ff.net.0.proj"), 2 * FFN, H, false, false));
        m.push(lin(format!("{b}ff.net.2"), H, FFN, false, false));
    }
    for i in 0..blocks {
        let b = format!("transformer_blocks.{i}.");
        for x in ["to_q", "to_k", "to_v", "to_out.0"] {
            m.push(lin(format!("{b}attn.{x}"), H, H, false, x == "to_out.0"));
        }
        m.push(Module::Norm {
            name: format!("{b}attn.norm_q.weight"),
            n: HEAD_DIM,
        });
        m.push(Module::Norm {
            name: format!("{b}attn.norm_k.weight"),
            n: HEAD_DIM,
        });
        m.push(lin(format!("{b}ff.net.0.proj"), 2 * FFN, H, false, false));
        m.push(lin(format!("{b}ff.net.2"), H, FFN, false, false));
        // AdaLN per (timestep, modality): 3 modalities × 6 modulation vectors.
        m.push(lin(
            format!("{b}norm1.linear"),
            3 * 6 * H,
            TIME_DIM,
            false,
            true,
        ));
    }
    m.push(lin("norm_out.linear".into(), 2 * H, TIME_DIM, true, true));
    m.push(lin("proj_out".into(), VIDEO_IN, H, true, true));
    m.push(lin("audio_proj_out".into(), AUDIO_IN, H, true, true));
    m
}

fn bias(name: String, n: u64, f32: bool) -> Planned {
    Planned::gauss(
        name,
        if f32 { Dtype::F32 } else { Dtype::BF16 },
        &[n],
        0.0,
        0.01,
    )
}

/// Tensors of `mods` in the diffusers (unquantized) layout.
fn plain(mods: &[Module]) -> Vec<Planned> {
    let mut t = Vec::new();
    for m in mods {
        match m {
            Module::Linear {
                name,
                out,
                inp,
                f32,
                bias: b,
            } => {
                let dt = if *f32 { Dtype::F32 } else { Dtype::BF16 };
                t.push(Planned::gauss(
                    format!("{name}.weight"),
                    dt,
                    &[*out, *inp],
                    0.0,
                    isqrt_f32(*inp),
                ));
                if *b {
                    t.push(bias(format!("{name}.bias"), *out, *f32));
                }
            }
            Module::Norm { name, n } => {
                t.push(Planned::gauss(name.clone(), Dtype::BF16, &[*n], 1.0, 0.05))
            }
        }
    }
    t
}

/// The same modules with BF16 linears as MLX affine 8-bit.
fn mlx8(mods: &[Module]) -> Vec<Planned> {
    let mut t = Vec::new();
    for m in mods {
        match m {
            Module::Linear {
                name,
                out,
                inp,
                f32: false,
                bias: b,
            } if inp % MLX_GROUP == 0 => {
                let (r, c) = (*out as usize, *inp as usize);
                let std = isqrt_f32(*inp);
                let fill = |part| Fill::Mlx8 {
                    label: name.clone(),
                    rows: r,
                    cols: c,
                    group: MLX_GROUP as usize,
                    std,
                    scale_dtype: Dtype::BF16,
                    part,
                };
                let groups = inp / MLX_GROUP;
                t.push(Planned {
                    spec: TensorSpec::new(format!("{name}.weight"), Dtype::U32, &[*out, inp / 4]),
                    fill: fill(Part::Codes),
                });
                t.push(Planned {
                    spec: TensorSpec::new(format!("{name}.scales"), Dtype::BF16, &[*out, groups]),
                    fill: fill(Part::Scales),
                });
                t.push(Planned {
                    spec: TensorSpec::new(format!("{name}.biases"), Dtype::BF16, &[*out, groups]),
                    fill: fill(Part::Biases),
                });
                if *b {
                    t.push(bias(format!("{name}.bias"), *out, false));
                }
            }
            other => t.extend(plain(std::slice::from_ref(other))),
        }
    }
    t
}

fn vae_tensors() -> Vec<Planned> {
    let mut t = Vec::new();
    let f = |t: &mut Vec<Planned>, n: &str, dt, shape: &[u64]| {
        let fan: u64 = shape.iter().skip(1).product();
        t.push(Planned::gauss(n, dt, shape, 0.0, isqrt_f32(fan)));
    };
    f(
        &mut t,
        "encoder.conv_in.weight",
        Dtype::F32,
        &[64, 3, 3, 3, 3],
    );
    t.push(bias("encoder.conv_in.bias".into(), 64, true));
    t.push(Planned::gauss(
        "encoder.norm_out.weight",
        Dtype::F32,
        &[64],
        1.0,
        0.05,
    ));
    f(
        &mut t,
        "encoder.conv_out.weight",
        Dtype::F32,
        &[48, 64, 3, 3, 3],
    );
    f(&mut t, "decoder.proj_in.weight", Dtype::BF16, &[128, 24]);
    for i in 0..2 {
        f(
            &mut t,
            &format!("decoder.layers.{i}.attn.qkv.weight"),
            Dtype::BF16,
            &[384, 128],
        );
        f(
            &mut t,
            &format!("decoder.layers.{i}.mlp.fc1.weight"),
            Dtype::BF16,
            &[512, 128],
        );
        f(
            &mut t,
            &format!("decoder.layers.{i}.mlp.fc2.weight"),
            Dtype::BF16,
            &[128, 512],
        );
        t.push(Planned::gauss(
            format!("decoder.layers.{i}.norm1.weight"),
            Dtype::F32,
            &[128],
            1.0,
            0.05,
        ));
    }
    f(
        &mut t,
        "decoder.proj_out.weight",
        Dtype::BF16,
        &[3 * 2 * 8 * 8, 128],
    );
    t
}

fn transformer_config(blocks: u64) -> serde_json::Value {
    sorted(json!({
        "_class_name": "MiniMaxH3Transformer3DModel",
        "_diffusers_version": "0.42.1",
        "num_layers": blocks,
        "num_refiner_layers": REFINER_BLOCKS,
        "hidden_size": H,
        "num_attention_heads": HEADS,
        "attention_head_dim": HEAD_DIM,
        "ffn_dim": FFN,
        "in_channels": 24,
        "patch_size": [1, 2, 2],
        "audio_in_channels": AUDIO_IN,
        "text_dim": TEXT_DIM,
        "rope_axes_freqs": 16,
    }))
}

/// Write both repositories; `scale` multiplies the transformer blocks (2 at scale 1).
pub fn generate(out: &Path, seed: u64, scale: u64) -> Result<(Vec<FileDigest>, usize), SynthError> {
    let blocks = 2 * scale;
    let mods = modules(blocks);
    let mut files = Vec::new();
    let mut count = 0;
    // Split the modules into two shards at the middle block.
    let cut = mods
        .iter()
        .position(|m| matches!(m, Module::Linear { name, .. } if name == &format!("transformer_blocks.{}.attn.to_q", blocks / 2)))
        .unwrap_or(mods.len() / 2);
    let (first, second) = mods.split_at(cut);
    for (dir, style, shard_name, index_name) in [
        (
            format!("{UPSTREAM_DIR}/transformer"),
            ShardStyle::Torch,
            "diffusion_pytorch_model",
            "diffusion_pytorch_model.safetensors.index.json",
        ),
        (
            format!("{MLX_DIR}/transformer"),
            ShardStyle::Mlx,
            "model",
            "model.safetensors.index.json",
        ),
    ] {
        let mut index = IndexBuilder::default();
        for (i, part) in [first, second].into_iter().enumerate() {
            let tensors = if style == ShardStyle::Mlx {
                mlx8(part)
            } else {
                plain(part)
            };
            let rel = format!("{dir}/{shard_name}-{:05}-of-00002.safetensors", i + 1);
            let written = write_shard_styled(out, &rel, tensors, seed, style)?;
            let file = rel.rsplit('/').next().unwrap_or(&rel).to_string();
            index.add(&file, written, &mut files, &mut count);
        }
        files.push(write_bytes(
            out,
            &format!("{dir}/{index_name}"),
            &index.to_json(),
        )?);
        files.push(write_bytes(
            out,
            &format!("{dir}/config.json"),
            &pretty(&transformer_config(blocks)),
        )?);
    }
    let q = sorted(json!({"group_size": MLX_GROUP, "bits": 8, "mode": "affine"}));
    files.push(write_bytes(
        out,
        &format!("{MLX_DIR}/transformer/quant_config.json"),
        &pretty(&q),
    )?);
    let (digest, _, names) = write_shard(
        out,
        &format!("{UPSTREAM_DIR}/vae/diffusion_pytorch_model.safetensors"),
        vae_tensors(),
        seed,
    )?;
    count += names.len();
    files.push(digest);
    let vae_cfg = sorted(
        json!({"_class_name": "AutoencoderKLMiniMaxH3", "_diffusers_version": "0.42.1",
        "latent_channels": 24}),
    );
    files.push(write_bytes(
        out,
        &format!("{UPSTREAM_DIR}/vae/config.json"),
        &pretty(&vae_cfg),
    )?);
    files.push(write_bytes(
        out,
        &format!("{UPSTREAM_DIR}/model_index.json"),
        &pretty(&super::minimax_parts::model_index()),
    )?);
    let (more, n) = super::minimax_parts::write_components(out, UPSTREAM_DIR, seed)?;
    files.extend(more);
    count += n;
    files.push(write_bytes(
        out,
        &format!("{MLX_DIR}/LICENSE"),
        super::minimax_parts::LICENSE_MLX.as_bytes(),
    )?);
    Ok((files, count))
}
