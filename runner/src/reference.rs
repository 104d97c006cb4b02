//! The exact CPU reference forward (docs/runner.md "Exact reference"): the kernels' CPU references
//! composed over dequantized weights (`kernels::reference::WeightMatrix::dequantize`, the exact
//! f32 value of every quantized element), every sum, norm, rotation and softmax in f64
//! (`rmsnorm_f64`, `rope_f64`, `attention_f64`, `swiglu_f64`, f64 dot products). Decodes one token
//! at a time with an f64 KV cache. It judges the f32 wgpu runner; it is slow (seconds per token at
//! opt-level 1) and holds every weight as f32.

use kernels::reference::{self, attention_f64, rmsnorm_f64, rope_f64, swiglu_f64, AttentionShape};

use crate::error::RunError;
use crate::model::{LlamaModel, MatrixRef};

struct Dense {
    rows: usize,
    k: usize,
    w: Vec<f32>,
}

impl Dense {
    fn load(model: &LlamaModel, m: &MatrixRef) -> Result<Self, RunError> {
        let bytes = model.bytes(&m.name)?;
        let wm = reference::WeightMatrix::new(m.format, m.rows, m.k, bytes, &[], &[])?;
        Ok(Self {
            rows: m.rows,
            k: m.k,
            w: wm.dequantize(),
        })
    }

    /// y = W · x, each row a sequential f64 sum.
    fn matvec(&self, x: &[f64]) -> Vec<f64> {
        self.w
            .chunks_exact(self.k)
            .take(self.rows)
            .map(|row| row.iter().zip(x).map(|(w, v)| f64::from(*w) * v).sum())
            .collect()
    }
}

struct Layer {
    attn_norm: Vec<f64>,
    q: Dense,
    k: Dense,
    v: Dense,
    o: Dense,
    ffn_norm: Vec<f64>,
    gate: Dense,
    up: Dense,
    down: Dense,
    k_cache: Vec<f64>,
    v_cache: Vec<f64>,
}

/// The f64 reference model with its KV cache.
pub struct Reference {
    config: crate::model::LlamaConfig,
    embedding: Dense,
    output: Option<Dense>,
    output_norm: Vec<f64>,
    layers: Vec<Layer>,
    pos: usize,
}

fn wide(v: Vec<f32>) -> Vec<f64> {
    v.into_iter().map(f64::from).collect()
}

impl Reference {
    pub fn new(model: &LlamaModel) -> Result<Self, RunError> {
        let mut layers = Vec::with_capacity(model.layers.len());
        for l in &model.layers {
            layers.push(Layer {
                attn_norm: wide(model.norm(&l.attn_norm)?),
                q: Dense::load(model, &l.q)?,
                k: Dense::load(model, &l.k)?,
                v: Dense::load(model, &l.v)?,
                o: Dense::load(model, &l.o)?,
                ffn_norm: wide(model.norm(&l.ffn_norm)?),
                gate: Dense::load(model, &l.gate)?,
                up: Dense::load(model, &l.up)?,
                down: Dense::load(model, &l.down)?,
                k_cache: Vec::new(),
                v_cache: Vec::new(),
            });
        }
        let tied = model.output.name == model.embedding.name;
        Ok(Self {
            config: model.config.clone(),
            embedding: Dense::load(model, &model.embedding)?,
            output: if tied {
                None
            } else {
                Some(Dense::load(model, &model.output)?)
            },
            output_norm: wide(model.norm(&model.output_norm)?),
            layers,
            pos: 0,
        })
    }

    /// Forgets the KV cache.
    pub fn reset(&mut self) {
        self.pos = 0;
        for l in &mut self.layers {
            l.k_cache.clear();
            l.v_cache.clear();
        }
    }

    /// Feeds one token at the next position and returns the logits after it.
    pub fn step(&mut self, token: u32) -> Result<Vec<f64>, RunError> {
        let c = &self.config;
        let id = token as usize;
        if id >= c.vocab {
            return Err(RunError::Model {
                path: String::new(),
                detail: format!("token id {id} is outside the vocabulary of {}", c.vocab),
            });
        }
        let mut x: Vec<f64> = self
            .embedding
            .w
            .get(id * c.dim..(id + 1) * c.dim)
            .map(|r| r.iter().map(|v| f64::from(*v)).collect())
            .unwrap_or_default();
        let pos = self.pos;
        let positions = [u32::try_from(pos).unwrap_or(u32::MAX)];
        let kv = c.n_kv_heads * c.head_dim;
        let shape = AttentionShape {
            n_heads: c.n_heads,
            n_kv_heads: c.n_kv_heads,
            head_dim: c.head_dim,
            tokens: 1,
            pos0: pos,
            capacity: pos + 1,
            scale: 1.0 / (c.head_dim as f32).sqrt(),
        };
        for l in &mut self.layers {
            let h = rmsnorm_f64(&x, &l.attn_norm, f64::from(c.eps))?;
            let mut q = l.q.matvec(&h);
            let mut k = l.k.matvec(&h);
            let v = l.v.matvec(&h);
            rope_f64(
                &mut q,
                &positions,
                c.n_heads,
                c.head_dim,
                c.rot_dim,
                c.rope_base,
                c.rope_mode,
            )?;
            rope_f64(
                &mut k,
                &positions,
                c.n_kv_heads,
                c.head_dim,
                c.rot_dim,
                c.rope_base,
                c.rope_mode,
            )?;
            l.k_cache.extend_from_slice(&k);
            l.v_cache.extend_from_slice(&v);
            debug_assert_eq!(l.k_cache.len(), (pos + 1) * kv);
            let a = attention_f64(&shape, &q, &l.k_cache, &l.v_cache)?;
            let o = l.o.matvec(&a);
            x.iter_mut().zip(&o).for_each(|(x, o)| *x += o);
            let h = rmsnorm_f64(&x, &l.ffn_norm, f64::from(c.eps))?;
            let s = swiglu_f64(&l.gate.matvec(&h), &l.up.matvec(&h));
            let d = l.down.matvec(&s);
            x.iter_mut().zip(&d).for_each(|(x, d)| *x += d);
        }
        self.pos += 1;
        let h = rmsnorm_f64(&x, &self.output_norm, f64::from(c.eps))?;
        Ok(self.output.as_ref().unwrap_or(&self.embedding).matvec(&h))
    }
}
