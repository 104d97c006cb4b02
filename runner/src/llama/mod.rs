//! The Llama-family forward on the wgpu engine (docs/runner.md "Adapter" and "Engine"): embedding
//! lookup, per layer RMSNorm → Q/K/V (K and V written straight into the KV cache) → RoPE (in
//! place, in the cache) → causal GQA attention → output projection with the residual add fused
//! into its epilogue → RMSNorm → SwiGLU FFN → down projection with the residual add fused, then the
//! final norm, the (tied) output head and the argmax.
//!
//! Everything stays on the device. The buffers are a static plan made when the model opens
//! (weights, a KV cache for the requested context, activations for a prefill chunk of
//! [`PREFILL_CHUNK`] tokens, one uniform block); the operations and their bind groups are made
//! once (`plan::Op`), and a forward only records them into one command encoder and submits it. A
//! resident greedy decode step is one submit whose only read-back is the 4-byte token id; logits
//! are read back only by [`Runner::forward`]. Weights are either resident (each matrix uploaded
//! once) or streamed from the GGUF tile by tile through a ring of device slots that a reader
//! thread fills ahead of the kernels (`tiles::TileReader`); both give bit-identical logits
//! (docs/kernels.md, accumulation-order invariant).

mod build;
mod plan;
mod profile;
mod tiles;

use artifact::mega::kv::KvLayout;
use kernels::gpu::GpuStats;

use crate::engine::{Engine, ResidentMatrix};
use crate::error::RunError;
use crate::model::LlamaConfig;
use crate::sequence::{Feed, Input, SavedState, Sequence, StateKind};
use plan::{Op, ParamBlock, Shapes};
use tiles::TileReader;

pub use profile::{DecodeProfile, OpTime};

/// Tokens one prefill submit covers (activation buffers are sized for it).
pub const PREFILL_CHUNK: usize = 64;

/// Device tile slots in the streaming ring (the runtime's default, `--ring-slots`).
pub const DEFAULT_RING: usize = crate::adapter::DEFAULT_RING_SLOTS;

/// How weight matrices reach the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightMode {
    /// Every matrix uploaded once.
    Resident,
    /// Every matrix read from the file per use, in row tiles of at most `tile_bytes`, through a
    /// ring of `ring` device slots (at least 1) that a reader thread fills that many tiles ahead.
    Streamed { tile_bytes: usize, ring: usize },
}

pub use crate::generate::Logits;

impl crate::adapter::GgufWeights for crate::model::LlamaModel {
    fn metadata(&self) -> &artifact::gguf::Metadata {
        self.gguf.metadata()
    }

    fn context(&self) -> usize {
        self.config.context
    }

    fn vocab(&self) -> usize {
        self.config.vocab
    }

    /// Streamed with the options' tile and ring, or resident.
    fn load<'s>(
        &'s self,
        opts: &crate::adapter::ModelOptions<'s>,
    ) -> Result<Box<dyn crate::adapter::Model + 's>, RunError> {
        let mode = match opts.residency {
            crate::adapter::Residency::Resident => WeightMode::Resident,
            crate::adapter::Residency::Streamed => WeightMode::Streamed {
                tile_bytes: opts.tile_bytes,
                ring: opts.ring_slots,
            },
        };
        Ok(Box::new(Runner::new(
            opts.engine,
            self,
            mode,
            opts.capacity,
        )?))
    }
}

/// The registry's `open` of a Llama-family GGUF architecture (llama, qwen2, qwen3): every tensor
/// the adapter needs checked.
pub fn open_gguf(
    gguf: artifact::gguf::GgufModel,
    path: &std::path::Path,
) -> Result<Box<dyn crate::adapter::GgufWeights>, RunError> {
    Ok(Box::new(crate::model::LlamaModel::from_gguf(gguf, path)?))
}

/// The activation buffers of the plan.
pub(crate) struct Activations {
    chunk: usize,
    x: wgpu::Buffer,
    x_last: wgpu::Buffer,
    h: wgpu::Buffer,
    q: wgpu::Buffer,
    attn: wgpu::Buffer,
    gate: wgpu::Buffer,
    up: wgpu::Buffer,
    act: wgpu::Buffer,
    scores: wgpu::Buffer,
    /// Σ e_s per head of the one-token decode attention.
    totals: wgpu::Buffer,
    logits: wgpu::Buffer,
    ids: wgpu::Buffer,
    rope: wgpu::Buffer,
    id_staging: wgpu::Buffer,
    logits_staging: wgpu::Buffer,
}

/// What a chunk's submit ends with.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tail {
    /// No head (a prefill chunk before the last).
    None,
    /// The last position's logits and argmax; `read_logits` maps the logits row back.
    Last { read_logits: bool },
    /// Every position's logits, mapped back.
    All,
}

/// A model on the engine with its KV cache.
pub struct Runner {
    engine: Engine,
    shapes: Shapes,
    params: ParamBlock,
    body: Vec<Op>,
    /// Final norm of `x` (a one-token chunk), head, argmax.
    tail_one: Vec<Op>,
    /// Final norm of `x_last` (the last row of a longer chunk), head, argmax.
    tail_last: Vec<Op>,
    /// Final norm of every row, head over every row.
    tail_all: Vec<Op>,
    a: Activations,
    ring: Vec<wgpu::Buffer>,
    reader: TileReader,
    // owned so they live as long as the bind groups that name them
    #[allow(dead_code)]
    weights: Vec<ResidentMatrix>,
    /// Interleaved copies of resident matrices, read by the one-token kernels on a CPU adapter
    /// (held so they live as long as the runner).
    #[allow(dead_code)]
    interleaved: Vec<wgpu::Buffer>,
    #[allow(dead_code)]
    norms: Vec<wgpu::Buffer>,
    /// Per layer K then V, `[capacity, n_kv_heads, head_dim]` f32.
    kv: Vec<wgpu::Buffer>,
    #[allow(dead_code)]
    embed: wgpu::Buffer,
    capacity: usize,
    pos: usize,
    /// Read-back scratch (host side, reused).
    host: Vec<u8>,
    /// The one sequence the KV cache holds (`adapter::Model`).
    slots: crate::sequence::Slots,
    /// The id the last greedy step picked, while it is still the device's input.
    picked: Option<u32>,
}

impl Runner {
    pub fn config(&self) -> &LlamaConfig {
        &self.shapes.c
    }

    /// Positions already in the KV cache.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Positions the KV cache holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Tile reads so far (0 for a resident run).
    pub fn tile_reads(&self) -> u64 {
        self.reader.reads
    }

    /// What crossed the wgpu API on this engine so far (subtract two snapshots for one step).
    pub fn stats(&self) -> GpuStats {
        self.engine.gpu().stats()
    }

    /// Forgets the KV cache (the buffers are overwritten from position 0).
    pub fn reset(&mut self) {
        self.pos = 0;
    }

    /// Keeps the first `n` positions of the KV cache and forgets the rest (what follows is
    /// overwritten; attention reads only positions below the current one). The next token must
    /// come through [`Runner::forward`] or [`Runner::forward_argmax`].
    pub fn rewind(&mut self, n: usize) {
        self.pos = self.pos.min(n);
    }

    /// The keys and values of the first `n` positions (at most [`Runner::position`]): per layer,
    /// K then V, each `[n, n_kv_heads, head_dim]` f32 — the `.megakv` payload (docs/mega.md §12).
    pub fn kv_payload(&self, n: usize) -> Result<Vec<u8>, RunError> {
        let n = n.min(self.pos);
        let c = &self.shapes.c;
        let bytes = (n * c.n_kv_heads * c.head_dim * 4) as u64;
        let mut out = Vec::with_capacity(bytes as usize * self.kv.len());
        for buffer in &self.kv {
            out.extend_from_slice(&self.engine.gpu().read_bytes(buffer, bytes)?);
        }
        Ok(out)
    }

    /// Puts a [`Runner::kv_payload`] of `n` positions back: the cache then holds those positions
    /// and the next token must come through [`Runner::forward`] or [`Runner::forward_argmax`].
    pub fn kv_restore(&mut self, n: usize, payload: &[u8]) -> Result<(), RunError> {
        let c = &self.shapes.c;
        let bytes = n * c.n_kv_heads * c.head_dim * 4;
        if n > self.capacity || payload.len() != bytes * self.kv.len() {
            return Err(RunError::Model {
                path: String::new(),
                detail: format!(
                    "a KV state of {} bytes for {n} positions does not fit this cache ({} layers, {} positions)",
                    payload.len(),
                    self.kv.len() / 2,
                    self.capacity
                ),
            });
        }
        for (buffer, chunk) in self.kv.iter().zip(payload.chunks_exact(bytes.max(1))) {
            self.engine.gpu().write(buffer, 0, chunk);
        }
        self.pos = n;
        Ok(())
    }

    fn check(&self, ids: &[u32]) -> Result<(), RunError> {
        if self.pos + ids.len() > self.capacity {
            return Err(RunError::ContextFull {
                capacity: self.capacity,
            });
        }
        let vocab = self.shapes.c.vocab;
        if let Some((position, &id)) = ids.iter().enumerate().find(|(_, &id)| id as usize >= vocab)
        {
            return Err(RunError::Kernel(kernels::KernelError::TokenId {
                id,
                position,
                vocab,
            }));
        }
        Ok(())
    }

    /// Feeds `ids` at the next positions (prefill when several, decode when one) and returns the
    /// logits [n, vocab] of the last position or of every position.
    pub fn forward(&mut self, ids: &[u32], which: Logits) -> Result<Vec<f32>, RunError> {
        self.check(ids)?;
        let chunks = ids.chunks(self.a.chunk).count();
        let mut out = Vec::new();
        for (i, chunk) in ids.chunks(self.a.chunk).enumerate() {
            let tail = match which {
                Logits::All => Tail::All,
                Logits::Last if i + 1 == chunks => Tail::Last { read_logits: true },
                Logits::Last => Tail::None,
            };
            self.engine
                .gpu()
                .write(&self.a.ids, 0, bytemuck::cast_slice(chunk));
            self.chunk(chunk.len(), tail)?;
            out.extend(
                self.host
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
        }
        Ok(out)
    }

    /// Feeds `ids` and returns the argmax of the last position's logits; only the 4-byte id is
    /// read back.
    pub fn forward_argmax(&mut self, ids: &[u32]) -> Result<u32, RunError> {
        self.check(ids)?;
        let chunks = ids.chunks(self.a.chunk).count();
        for (i, chunk) in ids.chunks(self.a.chunk).enumerate() {
            self.engine
                .gpu()
                .write(&self.a.ids, 0, bytemuck::cast_slice(chunk));
            let last = i + 1 == chunks;
            let tail = if last {
                Tail::Last { read_logits: false }
            } else {
                Tail::None
            };
            self.chunk(chunk.len(), tail)?;
        }
        self.chosen_id()
    }

    /// One greedy decode step fed by the token the previous argmax chose, which never left the
    /// device: one submit, nothing uploaded but the position-dependent parameters, 4 bytes read.
    pub fn step_argmax(&mut self) -> Result<u32, RunError> {
        if self.pos + 1 > self.capacity {
            return Err(RunError::ContextFull {
                capacity: self.capacity,
            });
        }
        self.chunk(1, Tail::Last { read_logits: false })?;
        self.chosen_id()
    }

    fn chosen_id(&self) -> Result<u32, RunError> {
        let id = self
            .host
            .get(..4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .unwrap_or(kernels::ARGMAX_NONE);
        if id as usize >= self.shapes.c.vocab {
            return Err(RunError::Tensor {
                name: "logits".into(),
                detail: "no comparable logit (all NaN): the argmax has no token".into(),
            });
        }
        Ok(id)
    }

    /// Records and submits one chunk of `t` tokens whose ids are already in `ids`, then reads
    /// back what `tail` asks for into `self.host`.
    fn chunk(&mut self, t: usize, tail: Tail) -> Result<(), RunError> {
        let pos = self.pos;
        self.params
            .update(self.engine.gpu(), &self.shapes, t, pos)?;
        let mut enc = self.engine.gpu().encoder("forward");
        self.record(&mut enc, Part::Body, t, pos)?;
        let dim4 = (self.shapes.c.dim * 4) as u64;
        let vocab4 = (self.shapes.c.vocab * 4) as u64;
        let read = match tail {
            Tail::None => 0,
            Tail::All => {
                self.record(&mut enc, Part::All, t, pos)?;
                vocab4 * t as u64
            }
            Tail::Last { read_logits } => {
                if t == 1 {
                    self.record(&mut enc, Part::One, t, pos)?;
                } else {
                    let from = dim4 * (t as u64 - 1);
                    enc.copy_buffer_to_buffer(&self.a.x, from, &self.a.x_last, 0, dim4);
                    self.record(&mut enc, Part::Last, t, pos)?;
                }
                if read_logits {
                    vocab4
                } else {
                    enc.copy_buffer_to_buffer(&self.a.ids, 0, &self.a.id_staging, 0, 4);
                    4
                }
            }
        };
        let staging = match tail {
            Tail::Last { read_logits: false } => &self.a.id_staging,
            _ => {
                if read > 0 {
                    enc.copy_buffer_to_buffer(&self.a.logits, 0, &self.a.logits_staging, 0, read);
                }
                &self.a.logits_staging
            }
        };
        self.engine.gpu().submit(enc.finish());
        self.pos += t;
        self.host.clear();
        if read > 0 {
            self.engine
                .gpu()
                .read_staging(staging, read, &mut self.host)?;
        }
        Ok(())
    }

    /// Records the operations of `part` into `enc` in one compute pass. A streamed tile whose ring
    /// slot recorded work still reads first submits that work (and opens a new encoder).
    fn record(
        &mut self,
        enc: &mut wgpu::CommandEncoder,
        part: Part,
        t: usize,
        pos: usize,
    ) -> Result<(), RunError> {
        let g = self.engine.gpu();
        let (reader, ring, shapes) = (&mut self.reader, &self.ring, &self.shapes);
        let ops = match part {
            Part::Body => &self.body,
            Part::One => &self.tail_one,
            Part::Last => &self.tail_last,
            Part::All => &self.tail_all,
        };
        let desc = wgpu::ComputePassDescriptor {
            label: Some("forward"),
            timestamp_writes: None,
        };
        let mut pass = enc.begin_compute_pass(&desc).forget_lifetime();
        for op in ops {
            if !op.when.serves(t) {
                continue;
            }
            if let Some(tile) = op.tile {
                if tile.slot == 0 && tile.index > 0 {
                    drop(pass);
                    let full = std::mem::replace(enc, g.encoder("forward"));
                    g.submit(full.finish());
                    pass = enc.begin_compute_pass(&desc).forget_lifetime();
                }
                let bytes = reader.take(tile.index)?;
                let slot = ring.get(tile.slot).ok_or_else(|| RunError::Tensor {
                    name: "tile ring".into(),
                    detail: format!("no slot {}", tile.slot),
                })?;
                g.write(slot, 0, &bytes.bytes);
                reader.give_back(bytes.bytes);
            }
            op.record(g, shapes, &mut pass, t, pos)?;
        }
        Ok(())
    }
}

#[derive(Clone, Copy)]
enum Part {
    Body,
    One,
    Last,
    All,
}

/// The Llama-family runner as the runtime's model: one sequence, whose state is the KV cache
/// (any prefix kept, saved and restored); a greedy step fed the id the device just picked
/// uploads nothing.
impl crate::adapter::Model for Runner {
    fn vocab(&self) -> usize {
        self.shapes.c.vocab
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn state_kind(&self) -> StateKind {
        StateKind::Positions
    }

    fn begin(&mut self) -> Result<Sequence, RunError> {
        let seq = self.slots.begin()?;
        self.reset();
        self.picked = None;
        Ok(seq)
    }

    fn end(&mut self, seq: Sequence) {
        self.slots.end(seq);
    }

    fn step(&mut self, feeds: &[Feed<'_>], logits: Logits) -> Result<Vec<Vec<f32>>, RunError> {
        let (_, f) = self.slots.one(feeds)?;
        self.picked = None;
        let mut buf = [0u32; 1];
        Ok(vec![self.forward(f.input.ids(&mut buf), logits)?])
    }

    fn step_argmax(&mut self, feeds: &[Feed<'_>]) -> Result<Option<Vec<u32>>, RunError> {
        let (_, f) = self.slots.one(feeds)?;
        let id = match f.input {
            Input::Picked(prev) if self.picked == Some(prev) => self.step_argmax()?,
            input => {
                self.picked = None;
                let mut buf = [0u32; 1];
                self.forward_argmax(input.ids(&mut buf))?
            }
        };
        self.picked = Some(id);
        Ok(Some(vec![id]))
    }

    fn position(&self, seq: &Sequence) -> Result<usize, RunError> {
        self.slots.slot(seq)?;
        Ok(self.pos)
    }

    fn rewind(&mut self, seq: &Sequence, n: usize) -> Result<usize, RunError> {
        self.slots.slot(seq)?;
        self.picked = None;
        Runner::rewind(self, n);
        Ok(self.pos)
    }

    fn savable(&self, seq: &Sequence, n: usize) -> usize {
        self.slots.slot(seq).map_or(0, |_| n.min(self.pos))
    }

    fn state_layout(&self, _positions: usize) -> Option<KvLayout> {
        let c = self.config();
        Some(KvLayout::Heads(artifact::mega::kv::KvHeads {
            layers: c.n_layers as u32,
            kv_heads: c.n_kv_heads as u32,
            head_dim: c.head_dim as u32,
            dtype: "f32".into(),
        }))
    }

    fn save(&self, seq: &Sequence, n: usize) -> Result<SavedState, RunError> {
        self.slots.slot(seq)?;
        let n = n.min(self.pos);
        Ok(SavedState {
            positions: n,
            layout: self.state_layout(n).ok_or_else(crate::adapter::no_state)?,
            payload: self.kv_payload(n)?,
        })
    }

    fn restore(&mut self, seq: &Sequence, state: &SavedState) -> Result<(), RunError> {
        self.slots.slot(seq)?;
        self.picked = None;
        self.kv_restore(state.positions, &state.payload)
    }

    fn stats(&self) -> Option<GpuStats> {
        Some(Runner::stats(self))
    }

    fn tile_reads(&self) -> u64 {
        Runner::tile_reads(self)
    }
}
