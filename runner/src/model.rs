//! The Llama-family model description read from a GGUF file through `artifact::gguf::GgufModel`
//! (docs/gguf.md, docs/runner.md "Adapter"): hyper-parameters from `{arch}.*` metadata, tensor
//! names `token_embd`, `blk.N.{attn_norm,attn_q,attn_k,attn_v,attn_output,ffn_norm,ffn_gate,
//! ffn_up,ffn_down}`, `output_norm` and `output` (absent = tied to `token_embd`), and the RoPE
//! pairing each architecture needs.

use std::path::Path;

use artifact::gguf::{GgmlType, GgufModel, TensorInfo};
use kernels::{Dtype, EmbeddingFormat, RopeMode, WeightFormat};

use crate::error::RunError;

/// Hyper-parameters of a Llama / SmolLM2 / Qwen2-style decoder.
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    pub arch: String,
    pub n_layers: usize,
    pub dim: usize,
    pub ffn: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub rot_dim: usize,
    pub rope_base: f64,
    pub eps: f32,
    pub vocab: usize,
    pub context: usize,
    /// llama.cpp converts Llama checkpoints with Q/K rows permuted so that GGUF `llama` uses the
    /// adjacent pairing (`LLAMA_ROPE_TYPE_NORM` = [`RopeMode::Interleaved`]); `qwen2`/`qwen3` keep
    /// the Hugging Face half-split (`NEOX` = [`RopeMode::HalfSplit`]).
    pub rope_mode: RopeMode,
}

/// One weight matrix [rows, k] inside the file.
#[derive(Debug, Clone)]
pub struct MatrixRef {
    pub name: String,
    pub format: WeightFormat,
    pub rows: usize,
    pub k: usize,
}

/// The tensors of one decoder layer.
#[derive(Debug, Clone)]
pub struct LayerRefs {
    pub attn_norm: String,
    pub q: MatrixRef,
    pub k: MatrixRef,
    pub v: MatrixRef,
    pub o: MatrixRef,
    pub ffn_norm: String,
    pub gate: MatrixRef,
    pub up: MatrixRef,
    pub down: MatrixRef,
}

/// An opened model: the GGUF, its configuration and tensor references.
pub struct LlamaModel {
    pub path: String,
    pub gguf: GgufModel,
    pub config: LlamaConfig,
    pub embedding: MatrixRef,
    pub embedding_format: EmbeddingFormat,
    pub layers: Vec<LayerRefs>,
    pub output_norm: String,
    /// `output.weight`, or `token_embd.weight` when the embeddings are tied.
    pub output: MatrixRef,
}

/// The GGUF file at `path`, its header and tensor table read.
pub fn read_gguf(path: &Path) -> Result<GgufModel, RunError> {
    GgufModel::open(path).map_err(|source| RunError::Gguf {
        path: path.display().to_string(),
        source,
    })
}

/// `general.architecture` of `gguf` (opened from `path`).
pub fn architecture<'g>(gguf: &'g GgufModel, path: &Path) -> Result<&'g str, RunError> {
    gguf.metadata()
        .get_str("general.architecture")
        .map_err(|source| RunError::Meta {
            path: path.display().to_string(),
            source,
        })
}

fn weight_format(name: &str, t: GgmlType) -> Result<WeightFormat, RunError> {
    Ok(match t {
        GgmlType::Q4_1 => WeightFormat::Q4_1,
        GgmlType::Q8_0 => WeightFormat::Q8_0,
        GgmlType::Q4_0 => WeightFormat::Q4_0,
        GgmlType::Q5_0 => WeightFormat::Q5_0,
        GgmlType::Q5_1 => WeightFormat::Q5_1,
        GgmlType::Q4_K => WeightFormat::Q4K,
        GgmlType::Q5_K => WeightFormat::Q5K,
        GgmlType::Q6_K => WeightFormat::Q6K,
        GgmlType::F32 => WeightFormat::Plain(Dtype::F32),
        GgmlType::F16 => WeightFormat::Plain(Dtype::F16),
        GgmlType::BF16 => WeightFormat::Plain(Dtype::Bf16),
        other => {
            return Err(RunError::Tensor {
                name: name.to_string(),
                detail: format!(
                    "type {other:?} has no kernel (supported: q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K, f32, f16, bf16; requantize with `minirun-gguf quantize`)"
                ),
            })
        }
    })
}

impl LlamaModel {
    /// Opens `path` and checks every tensor the adapter needs, with its shape.
    pub fn open(path: &Path) -> Result<Self, RunError> {
        Self::from_gguf(read_gguf(path)?, path)
    }

    /// The model of `gguf` (opened from `path`), every tensor the adapter needs checked.
    pub fn from_gguf(gguf: GgufModel, path: &Path) -> Result<Self, RunError> {
        let label = path.display().to_string();
        let config = read_config(&gguf, &label)?;
        let c = &config;
        let matrix = |name: String, rows: usize, k: usize| -> Result<MatrixRef, RunError> {
            let t = gguf.tensor(&name).ok_or_else(|| RunError::Tensor {
                name: name.clone(),
                detail: format!("missing from `{label}`"),
            })?;
            check_shape(t, rows, k)?;
            Ok(MatrixRef {
                format: weight_format(&name, t.ggml_type)?,
                name,
                rows,
                k,
            })
        };
        let kv = c.n_kv_heads * c.head_dim;
        let q_rows = c.n_heads * c.head_dim;
        let mut layers = Vec::with_capacity(c.n_layers);
        for i in 0..c.n_layers {
            let n = |s: &str| format!("blk.{i}.{s}.weight");
            layers.push(LayerRefs {
                attn_norm: n("attn_norm"),
                q: matrix(n("attn_q"), q_rows, c.dim)?,
                k: matrix(n("attn_k"), kv, c.dim)?,
                v: matrix(n("attn_v"), kv, c.dim)?,
                o: matrix(n("attn_output"), c.dim, q_rows)?,
                ffn_norm: n("ffn_norm"),
                gate: matrix(n("ffn_gate"), c.ffn, c.dim)?,
                up: matrix(n("ffn_up"), c.ffn, c.dim)?,
                down: matrix(n("ffn_down"), c.dim, c.ffn)?,
            });
        }
        let embedding = matrix("token_embd.weight".to_string(), c.vocab, c.dim)?;
        let embedding_format = match embedding.format {
            WeightFormat::Q4_1 => EmbeddingFormat::Q4_1,
            WeightFormat::Q8_0 => EmbeddingFormat::Q8_0,
            WeightFormat::Q4_0 => EmbeddingFormat::Q4_0,
            WeightFormat::Q5_0 => EmbeddingFormat::Q5_0,
            WeightFormat::Q5_1 => EmbeddingFormat::Q5_1,
            WeightFormat::Q4K => EmbeddingFormat::Q4K,
            WeightFormat::Q5K => EmbeddingFormat::Q5K,
            WeightFormat::Q6K => EmbeddingFormat::Q6K,
            WeightFormat::Plain(Dtype::F32) => EmbeddingFormat::F32,
            WeightFormat::Plain(Dtype::F16) => EmbeddingFormat::F16,
            _ => EmbeddingFormat::Bf16,
        };
        let output = if gguf.tensor("output.weight").is_some() {
            matrix("output.weight".to_string(), c.vocab, c.dim)?
        } else {
            embedding.clone()
        };
        let model = Self {
            path: label,
            gguf,
            config,
            embedding,
            embedding_format,
            layers,
            output_norm: "output_norm.weight".to_string(),
            output,
        };
        for l in &model.layers {
            model.norm(&l.attn_norm)?;
            model.norm(&l.ffn_norm)?;
        }
        model.norm(&model.output_norm)?;
        Ok(model)
    }

    /// The bytes of a tensor (zero-copy from the mapping).
    pub fn bytes(&self, name: &str) -> Result<&[u8], RunError> {
        self.gguf
            .tensor_bytes(name)
            .map_err(|source| RunError::Gguf {
                path: self.path.clone(),
                source,
            })
    }

    /// A norm weight vector [dim] as f32 (GGUF stores norms as f32).
    pub fn norm(&self, name: &str) -> Result<Vec<f32>, RunError> {
        let t = self.gguf.tensor(name).ok_or_else(|| RunError::Tensor {
            name: name.to_string(),
            detail: format!("missing from `{}`", self.path),
        })?;
        if t.ggml_type != GgmlType::F32 || t.n_elements() != self.config.dim as u64 {
            return Err(RunError::Tensor {
                name: name.to_string(),
                detail: format!(
                    "expected f32 [{}], found {:?} {:?}",
                    self.config.dim, t.ggml_type, t.dims
                ),
            });
        }
        Ok(self
            .bytes(name)?
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    /// Where a tensor's bytes lie: (part file path, absolute offset, byte length).
    pub fn location(&self, name: &str) -> Result<(&Path, u64, u64), RunError> {
        let missing = || RunError::Tensor {
            name: name.to_string(),
            detail: format!("missing from `{}`", self.path),
        };
        let (part, t) = self
            .gguf
            .tensors
            .iter()
            .find(|(_, t)| t.name == name)
            .ok_or_else(missing)?;
        let file = self.gguf.parts.get(*part).ok_or_else(missing)?;
        let start = file
            .header
            .data_start
            .checked_add(t.offset)
            .ok_or_else(missing)?;
        Ok((file.path(), start, t.n_bytes))
    }
}

fn check_shape(t: &TensorInfo, rows: usize, k: usize) -> Result<(), RunError> {
    if t.dims.len() != 2 || t.row_len() != k as u64 || t.n_rows() != rows as u64 {
        return Err(RunError::Tensor {
            name: t.name.clone(),
            detail: format!(
                "expected [{rows} rows, {k}] (ne = [{k}, {rows}]), found ne = {:?}",
                t.dims
            ),
        });
    }
    Ok(())
}

fn read_config(gguf: &GgufModel, path: &str) -> Result<LlamaConfig, RunError> {
    let m = gguf.metadata();
    let meta = |source| RunError::Meta {
        path: path.to_string(),
        source,
    };
    let arch = m.get_str("general.architecture").map_err(meta)?.to_string();
    let rope_mode = match arch.as_str() {
        "llama" => RopeMode::Interleaved,
        "qwen2" | "qwen3" => RopeMode::HalfSplit,
        other => {
            return Err(RunError::Model {
                path: path.to_string(),
                detail: format!(
                    "architecture `{other}` is not a supported Llama-family model (llama, qwen2, qwen3)"
                ),
            })
        }
    };
    let u = |key: &str| -> Result<usize, RunError> {
        m.get_uint(&format!("{arch}.{key}"))
            .map_err(meta)
            .map(|v| usize::try_from(v).unwrap_or(usize::MAX))
    };
    let dim = u("embedding_length")?;
    let n_heads = u("attention.head_count")?;
    let n_kv_heads = u("attention.head_count_kv").unwrap_or(n_heads);
    let bad = |detail: String| RunError::Model {
        path: path.to_string(),
        detail,
    };
    if n_heads == 0 || n_kv_heads == 0 || n_heads % n_kv_heads != 0 || dim % n_heads != 0 {
        return Err(bad(format!(
            "heads {n_heads} / kv heads {n_kv_heads} / dim {dim} do not form a GQA layout"
        )));
    }
    let head_dim = dim / n_heads;
    let rot_dim = u("rope.dimension_count").unwrap_or(head_dim);
    if rot_dim > head_dim || rot_dim % 2 != 0 {
        return Err(bad(format!(
            "rope.dimension_count {rot_dim} exceeds head_dim {head_dim} or is odd"
        )));
    }
    let vocab = match u("vocab_size") {
        Ok(v) => v,
        Err(_) => m
            .get_str_array("tokenizer.ggml.tokens")
            .map_err(meta)?
            .len(),
    };
    let cap = 1 << 20;
    let context = u("context_length")?;
    let config = LlamaConfig {
        n_layers: u("block_count")?,
        dim,
        ffn: u("feed_forward_length")?,
        n_heads,
        n_kv_heads,
        head_dim,
        rot_dim,
        rope_base: f64::from(
            m.get_f32(&format!("{arch}.rope.freq_base"))
                .unwrap_or(10000.0),
        ),
        eps: m
            .get_f32(&format!("{arch}.attention.layer_norm_rms_epsilon"))
            .map_err(meta)?,
        vocab,
        context,
        rope_mode,
        arch,
    };
    if [
        config.n_layers,
        config.dim,
        config.ffn,
        config.vocab,
        context,
    ]
    .iter()
    .any(|&v| v == 0 || v > cap * 64)
    {
        return Err(bad(format!("implausible hyper-parameters {config:?}")));
    }
    Ok(config)
}
