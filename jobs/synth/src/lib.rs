//! `minirun-synth`: tiny checkpoints in each family's real upstream layout, with values drawn
//! from realistic distributions and quantized by the upstream rules, byte-identical for the same
//! `(family, seed, scale)` on every machine.
//!
//! Spec: issue 4 item 1; `../shared/design/models.md` §1 (DeepSeek V4 Flash), §4 (Kimi K3), §5
//! (MiniMax H3); `formats.md` §1–4. What each family writes and what is guessed: `docs/synth.md`.

pub mod deepseek;
pub mod kimi;
pub mod minimax;
pub mod minimax_parts;
pub mod prng;
pub mod quant;
pub mod tiktoken;
pub mod tokenizer;
pub mod write;

pub use write::FileDigest;

use std::path::{Path, PathBuf};

/// Largest `--scale` accepted (scale 64 is a few GB; beyond 256 the disk fills).
pub const MAX_SCALE: u64 = 256;

/// A checkpoint family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// `deepseek-ai/DeepSeek-V4-Flash` layout.
    #[value(name = "deepseek-v4")]
    DeepseekV4,
    /// `moonshotai/Kimi-K3` layout (text MoE part).
    #[value(name = "kimi-k3")]
    KimiK3,
    /// MiniMax H3: the diffusers repo and the community MLX 8-bit port, one subdirectory each.
    #[value(name = "minimax-h3")]
    MinimaxH3,
}

/// The dimensions a family is generated at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// The tiny test dimensions; `scale` multiplies the routed experts (and, for DeepSeek V4,
    /// their width from scale 32).
    #[default]
    Tiny,
    /// DeepSeek V4 only: hidden 1024 and real-sized 2048-wide routed experts, `scale` of them
    /// per layer, all 43 layers (the pipeline benchmarks' shape).
    Wide,
    /// The family's real per-layer dimensions with few layers and `scale` routed experts per
    /// MoE layer (DeepSeek V4, Kimi K3): the real-size runs (docs/bench/real-size.md).
    Real,
    /// DeepSeek V4 only: the tiny dimensions with exactly `scale` routed experts per layer and
    /// four main layers (one of each kind after the two sliding-window ones) — at `scale` 256,
    /// upstream's expert count at a CI size (the stacked-expert publication test).
    Experts,
}

/// What was written.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    /// The family.
    pub family: Family,
    /// Output directory.
    pub out: PathBuf,
    /// Seed.
    pub seed: u64,
    /// Scale.
    pub scale: u64,
    /// Dimensions.
    pub shape: Shape,
    /// Number of tensors in all safetensors files.
    pub tensors: usize,
    /// Every file, in write order.
    pub files: Vec<FileDigest>,
}

impl Summary {
    /// Total bytes written.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }
    /// `sha256sum`-style lines (`<hex>  <path>`), sorted by path: the golden-digest format.
    pub fn sha256sum_lines(&self) -> String {
        let mut files: Vec<&FileDigest> = self.files.iter().collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files
            .iter()
            .map(|f| format!("{}  {}\n", f.sha256, f.path))
            .collect()
    }
}

/// Why generation failed.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// Filesystem.
    #[error("failed to write `{}`", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// Header encoding.
    #[error("failed to encode the safetensors header of `{}`", path.display())]
    Safetensors {
        /// The shard.
        path: PathBuf,
        /// Cause.
        #[source]
        source: artifact::safetensors::SafetensorsError,
    },
    /// Tokenizer training or serialization.
    #[error("failed to train the BPE tokenizer: {0}")]
    Tokenizer(String),
    /// An internal plan inconsistency.
    #[error("inconsistent generator plan: {0}")]
    Plan(String),
    /// `--scale` out of range.
    #[error("scale {0} is out of range: use 1..={MAX_SCALE}")]
    Scale(u64),
    /// A shape the family does not define.
    #[error(
        "shape `{}` is not defined for {}",
        value_name(shape),
        value_name(family)
    )]
    Shape {
        /// The family.
        family: Family,
        /// The shape asked for.
        shape: Shape,
    },
    /// The output directory is not empty.
    #[error("output directory `{}` is not empty; pass an empty or new directory", .0.display())]
    NotEmpty(PathBuf),
}

impl SynthError {
    /// The fix a user can apply, if any (`minirun-synth` prints it under the error).
    pub fn hint(&self) -> Option<String> {
        match self {
            SynthError::Shape { .. } => Some(
                "`wide` is defined for deepseek-v4, `real` for deepseek-v4 and kimi-k3; every family has `tiny`".into(),
            ),
            _ => None,
        }
    }
}

/// Generate `family` into `out` (created if missing; must be empty) at the tiny dimensions.
pub fn generate(family: Family, out: &Path, seed: u64, scale: u64) -> Result<Summary, SynthError> {
    generate_shaped(family, out, seed, scale, Shape::Tiny)
}

/// As [`generate`], at `shape`: [`Shape::Wide`] is [`deepseek::V4Dims::wide`] (benchmarks),
/// [`Shape::Real`] is [`deepseek::V4Dims::real`] or [`kimi::KimiDims::real`] with `scale` routed
/// experts per MoE layer.
pub fn generate_shaped(
    family: Family,
    out: &Path,
    seed: u64,
    scale: u64,
    shape: Shape,
) -> Result<Summary, SynthError> {
    let defined = match shape {
        Shape::Tiny => true,
        Shape::Wide | Shape::Experts => family == Family::DeepseekV4,
        Shape::Real => family != Family::MinimaxH3,
    };
    if !defined {
        return Err(SynthError::Shape { family, shape });
    }
    if scale == 0 || scale > MAX_SCALE {
        return Err(SynthError::Scale(scale));
    }
    empty_dir(out)?;
    let (files, tensors) = match (family, shape) {
        (Family::DeepseekV4, Shape::Wide) => {
            deepseek::generate_dims(out, seed, &deepseek::V4Dims::wide(scale))?
        }
        (Family::DeepseekV4, Shape::Real) => {
            deepseek::generate_dims(out, seed, &deepseek::V4Dims::real(scale))?
        }
        (Family::DeepseekV4, Shape::Experts) => {
            deepseek::generate_dims(out, seed, &deepseek::V4Dims::experts(scale))?
        }
        (Family::DeepseekV4, _) => deepseek::generate(out, seed, scale)?,
        (Family::KimiK3, Shape::Real) => {
            kimi::generate_dims(out, seed, &kimi::KimiDims::real(scale))?
        }
        (Family::KimiK3, _) => kimi::generate(out, seed, scale)?,
        (Family::MinimaxH3, _) => minimax::generate(out, seed, scale)?,
    };
    Ok(Summary {
        family,
        out: out.to_path_buf(),
        seed,
        scale,
        shape,
        tensors,
        files,
    })
}

/// The command-line name of a value (`real`, `kimi-k3`).
fn value_name<T: clap::ValueEnum>(v: &T) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_owned())
        .unwrap_or_default()
}

/// Create `out` if missing; refuse it unless empty.
fn empty_dir(out: &Path) -> Result<(), SynthError> {
    std::fs::create_dir_all(out).map_err(|source| SynthError::Io {
        path: out.to_path_buf(),
        source,
    })?;
    let mut entries = std::fs::read_dir(out).map_err(|source| SynthError::Io {
        path: out.to_path_buf(),
        source,
    })?;
    if entries.next().is_some() {
        return Err(SynthError::NotEmpty(out.to_path_buf()));
    }
    Ok(())
}
