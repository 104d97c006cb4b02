//! The Llama-family forward on the wgpu engine (docs/runner.md "Adapter"): embedding lookup,
//! per layer RMSNorm → Q/K/V → RoPE → KV cache → causal GQA attention → output projection →
//! residual → RMSNorm → SwiGLU FFN → residual, then the final norm and the (tied) output head.
//! Weights are either resident (each matrix uploaded once, `Engine::matmul`) or streamed from the
//! GGUF tile by tile (`stream::Streamer`); both give bit-identical logits. The residual stream is
//! kept on the host in f32 (the kernel set has no add kernel; one read-back per sub-block).

use kernels::reference::rope_table;
use kernels::AttentionParams;

use crate::engine::{Engine, ResidentMatrix};
use crate::error::RunError;
use crate::model::{LlamaConfig, LlamaModel, MatrixRef};
use crate::stream::{StreamedMatrix, Streamer};

/// How weight matrices reach the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightMode {
    /// Every matrix uploaded once and multiplied in one dispatch per part.
    Resident,
    /// Every matrix read from the file per use, in row tiles of at most `tile_bytes`.
    Streamed { tile_bytes: usize },
}

/// Which positions' logits a forward computes (the output head is the costliest matvec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    Last,
    All,
}

enum Weights {
    Resident(ResidentMatrix),
    Streamed(StreamedMatrix),
}

struct GpuLayer {
    attn_norm: wgpu::Buffer,
    ffn_norm: wgpu::Buffer,
    q: Weights,
    k: Weights,
    v: Weights,
    o: Weights,
    gate: Weights,
    up: Weights,
    down: Weights,
    k_cache: wgpu::Buffer,
    v_cache: wgpu::Buffer,
}

/// A model on the engine with its KV cache.
pub struct Runner<'e> {
    engine: &'e Engine,
    config: LlamaConfig,
    embedding_format: kernels::EmbeddingFormat,
    embed_table: wgpu::Buffer,
    output_norm: wgpu::Buffer,
    output: Weights,
    layers: Vec<GpuLayer>,
    streamer: Option<Streamer>,
    capacity: usize,
    pos: usize,
}

fn weights(
    engine: &Engine,
    model: &LlamaModel,
    streamer: &mut Option<Streamer>,
    m: &MatrixRef,
) -> Result<Weights, RunError> {
    match streamer {
        Some(s) => {
            let (path, offset, _) = model.location(&m.name)?;
            Ok(Weights::Streamed(s.add(m, path, offset)?))
        }
        None => {
            let bytes = model.bytes(&m.name)?;
            Ok(Weights::Resident(engine.upload_matrix(
                &m.name,
                m.format,
                m.rows,
                m.k,
                [bytes, &[], &[]],
                None,
            )?))
        }
    }
}

fn mm(
    engine: &Engine,
    streamer: &mut Option<Streamer>,
    w: &Weights,
    x: &wgpu::Buffer,
    y: &wgpu::Buffer,
    tokens: usize,
) -> Result<(), RunError> {
    match (w, streamer) {
        (Weights::Resident(m), _) => Ok(engine.matmul(m, x, y, tokens)?),
        (Weights::Streamed(s), Some(st)) => st.matmul(engine, s, x, y, tokens),
        (Weights::Streamed(s), None) => Err(RunError::Tensor {
            name: s.m.name.clone(),
            detail: "streamed matrix without a streamer".to_string(),
        }),
    }
}

impl<'e> Runner<'e> {
    /// Loads `model` onto `engine` with a KV cache of `capacity` positions.
    pub fn new(
        engine: &'e Engine,
        model: &LlamaModel,
        mode: WeightMode,
        capacity: usize,
    ) -> Result<Self, RunError> {
        let c = model.config.clone();
        let capacity = capacity.clamp(1, c.context.max(1));
        let g = engine.gpu();
        let mut streamer = match mode {
            WeightMode::Resident => None,
            WeightMode::Streamed { tile_bytes } => Some(Streamer::new(engine, tile_bytes)?),
        };
        let norm = |name: &str| -> Result<wgpu::Buffer, RunError> {
            Ok(g.upload_f32(name, &model.norm(name)?)?)
        };
        let kv_bytes = (capacity * c.n_kv_heads * c.head_dim * 4) as u64;
        let mut layers = Vec::with_capacity(model.layers.len());
        for l in &model.layers {
            layers.push(GpuLayer {
                attn_norm: norm(&l.attn_norm)?,
                ffn_norm: norm(&l.ffn_norm)?,
                q: weights(engine, model, &mut streamer, &l.q)?,
                k: weights(engine, model, &mut streamer, &l.k)?,
                v: weights(engine, model, &mut streamer, &l.v)?,
                o: weights(engine, model, &mut streamer, &l.o)?,
                gate: weights(engine, model, &mut streamer, &l.gate)?,
                up: weights(engine, model, &mut streamer, &l.up)?,
                down: weights(engine, model, &mut streamer, &l.down)?,
                k_cache: g.zeros("k cache", kv_bytes)?,
                v_cache: g.zeros("v cache", kv_bytes)?,
            });
        }
        Ok(Self {
            engine,
            embedding_format: model.embedding_format,
            embed_table: g.upload("token_embd", model.bytes(&model.embedding.name)?)?,
            output_norm: norm(&model.output_norm)?,
            output: weights(engine, model, &mut streamer, &model.output)?,
            layers,
            streamer,
            capacity,
            pos: 0,
            config: c,
        })
    }

    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// Positions already in the KV cache.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Tile reads so far (0 for a resident run).
    pub fn tile_reads(&self) -> u64 {
        self.streamer.as_ref().map_or(0, |s| s.reads)
    }

    /// Forgets the KV cache (the buffers are overwritten from position 0).
    pub fn reset(&mut self) {
        self.pos = 0;
    }

    /// Feeds `ids` at the next positions (prefill when several, decode when one) and returns the
    /// logits [n, vocab] of the last position or of every position.
    pub fn forward(&mut self, ids: &[u32], which: Logits) -> Result<Vec<f32>, RunError> {
        let c = self.config.clone();
        let t = ids.len();
        if t == 0 {
            return Ok(Vec::new());
        }
        if self.pos + t > self.capacity {
            return Err(RunError::ContextFull {
                capacity: self.capacity,
            });
        }
        let e = self.engine;
        let g = e.gpu();
        let f = |n: usize| (n * 4) as u64;
        let (dim, qd, kv) = (c.dim, c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim);
        let xb = g.zeros("x", f(t * dim))?;
        e.embedding(
            self.embedding_format,
            &self.embed_table,
            c.vocab,
            dim,
            ids,
            &xb,
        )?;
        let mut x = g.read_f32(&xb, t * dim)?;
        let h = g.zeros("h", f(t * dim))?;
        let q = g.zeros("q", f(t * qd))?;
        let kb = g.zeros("k", f(t * kv))?;
        let vb = g.zeros("v", f(t * kv))?;
        let a = g.zeros("attn", f(t * qd))?;
        let o = g.zeros("o", f(t * dim))?;
        let gate = g.zeros("gate", f(t * c.ffn))?;
        let up = g.zeros("up", f(t * c.ffn))?;
        let s = g.zeros("swiglu", f(t * c.ffn))?;
        let scratch = g.zeros("scores", f(t * c.n_heads * self.capacity))?;
        let positions: Vec<u32> = (self.pos..self.pos + t)
            .map(|p| u32::try_from(p).unwrap_or(u32::MAX))
            .collect();
        let table = g.upload_f32("rope", &rope_table(&positions, c.rot_dim, c.rope_base))?;
        let params = AttentionParams {
            n_heads: c.n_heads as u32,
            n_kv_heads: c.n_kv_heads as u32,
            head_dim: c.head_dim as u32,
            tokens: t as u32,
            pos0: self.pos as u32,
            capacity: self.capacity as u32,
            scale: 1.0 / (c.head_dim as f32).sqrt(),
            _pad: 0,
        };
        let st = &mut self.streamer;
        let add = |x: &mut Vec<f32>, d: Vec<f32>| x.iter_mut().zip(d).for_each(|(x, d)| *x += d);
        for l in &self.layers {
            g.queue().write_buffer(&xb, 0, bytemuck::cast_slice(&x));
            e.rmsnorm(&xb, &l.attn_norm, &h, dim, t, c.eps)?;
            mm(e, st, &l.q, &h, &q, t)?;
            mm(e, st, &l.k, &h, &kb, t)?;
            mm(e, st, &l.v, &h, &vb, t)?;
            e.rope(&q, &table, t, c.n_heads, c.head_dim, c.rot_dim, c.rope_mode)?;
            e.rope(
                &kb,
                &table,
                t,
                c.n_kv_heads,
                c.head_dim,
                c.rot_dim,
                c.rope_mode,
            )?;
            let mut enc = g.encoder("kv append");
            let at = f(self.pos * kv);
            enc.copy_buffer_to_buffer(&kb, 0, &l.k_cache, at, f(t * kv));
            enc.copy_buffer_to_buffer(&vb, 0, &l.v_cache, at, f(t * kv));
            g.queue().submit(Some(enc.finish()));
            e.attention(&params, &q, &l.k_cache, &l.v_cache, &a, &scratch)?;
            mm(e, st, &l.o, &a, &o, t)?;
            add(&mut x, g.read_f32(&o, t * dim)?);
            g.queue().write_buffer(&xb, 0, bytemuck::cast_slice(&x));
            e.rmsnorm(&xb, &l.ffn_norm, &h, dim, t, c.eps)?;
            mm(e, st, &l.gate, &h, &gate, t)?;
            mm(e, st, &l.up, &h, &up, t)?;
            e.swiglu(&gate, &up, &s, t * c.ffn)?;
            mm(e, st, &l.down, &s, &o, t)?;
            add(&mut x, g.read_f32(&o, t * dim)?);
        }
        self.pos += t;
        let (rows, from) = match which {
            Logits::Last => (1, (t - 1) * dim),
            Logits::All => (t, 0),
        };
        let xs = x.get(from..).unwrap_or_default();
        g.queue().write_buffer(&xb, 0, bytemuck::cast_slice(xs));
        e.rmsnorm(&xb, &self.output_norm, &h, dim, rows, c.eps)?;
        let logits = g.zeros("logits", f(rows * c.vocab))?;
        mm(e, st, &self.output, &h, &logits, rows)?;
        Ok(g.read_f32(&logits, rows * c.vocab)?)
    }
}
