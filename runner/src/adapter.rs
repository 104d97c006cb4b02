//! What a model family's adapter implements for the runtime (docs/runner.md "Registry"): the
//! [`ArtifactModel`] trait, the [`ModelOptions`] it is opened with, and [`ArtifactDecoder`], which
//! drives any adapter in the shared generation loop and the prompt cache. Names no family.

use artifact::mega::kv::KvLayout;

use crate::engine::Engine;
use crate::error::RunError;
use crate::generate::{Decoder, Logits};
use crate::step_stats::ExpertCacheStats;

/// Where an adapter keeps its matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residency {
    /// Every matrix uploaded once ([`crate::artifact::stream::upload_resident`]).
    Resident,
    /// Every matrix loaded and streamed tile by tile per forward
    /// ([`crate::artifact::stream::ContainerStreamer`]); each load rechecks identity and length.
    Streamed,
}

/// Default streamed tile: 1 MiB of rows (docs/runner.md "The streaming target": SmolLM2 decodes
/// 1.24× faster streamed than with 256 KiB, for 12 MiB more memory).
pub const DEFAULT_TILE_BYTES: usize = 1024 * 1024;

/// Device tile slots in a streamed run's ring, and tiles the reader thread reads ahead, unless
/// `--ring-slots` says otherwise.
pub const DEFAULT_RING_SLOTS: usize = 8;

/// What an adapter is opened with.
pub struct ModelOptions<'a> {
    pub engine: &'a Engine,
    pub residency: Residency,
    /// A streamed GGUF matrix's tile (`--tile-bytes`) and the tiles in flight (`--ring-slots`).
    pub tile_bytes: usize,
    pub ring_slots: usize,
    /// Positions the KV cache must hold (prompt + generated tokens).
    pub capacity: usize,
    /// Device bytes a streamed run may keep of routed experts (`--expert-cache-mib`).
    pub expert_cache_bytes: u64,
}

impl<'a> ModelOptions<'a> {
    /// The options the commands build from their flags: `--stream` (routed experts streamed
    /// where the family streams), the positions to hold, and `--expert-cache-mib`.
    pub fn from_flags(
        engine: &'a Engine,
        stream: bool,
        capacity: usize,
        expert_cache_mib: u64,
    ) -> Self {
        Self {
            engine,
            residency: if stream {
                Residency::Streamed
            } else {
                Residency::Resident
            },
            tile_bytes: DEFAULT_TILE_BYTES,
            ring_slots: DEFAULT_RING_SLOTS,
            capacity,
            expert_cache_bytes: expert_cache_mib.saturating_mul(1 << 20),
        }
    }
}

/// A model running from a verified artifact.
pub trait ArtifactModel {
    /// Length of one logits row.
    fn vocab(&self) -> usize;
    /// Feeds `ids` at the next positions (a prefill when several, a decode step when one) and
    /// returns logits rows: one per id with [`Logits::All`], only the last with [`Logits::Last`].
    fn forward(&mut self, ids: &[u32], logits: Logits) -> Result<Vec<Vec<f32>>, RunError>;
    /// Feeds `ids` as [`ArtifactModel::forward`] does and returns the argmax of the last
    /// position's logits where the adapter picks it on the device (only the id is read back);
    /// `None` (nothing fed) where it does not, and the caller reads the logits.
    fn argmax(&mut self, _ids: &[u32]) -> Result<Option<u32>, RunError> {
        Ok(None)
    }
    /// Tile reads so far (0 for a resident model).
    fn tile_reads(&self) -> u64 {
        0
    }
    /// The streamed-expert cache's counters, where the adapter has one.
    /// The device's counters so far (`None`: the adapter runs on no device).
    fn stats(&self) -> Option<kernels::gpu::GpuStats> {
        None
    }
    fn expert_cache(&self) -> Option<ExpertCacheStats> {
        None
    }
    /// Keeps at most the first `n` positions fed so far and forgets the rest; returns how many
    /// it kept (an adapter whose state cannot be cut anywhere goes back to a snapshot it holds at
    /// or before `n`, or to 0); `None` when it cannot even start a new sequence.
    fn rewind(&mut self, n: usize) -> Option<usize>;
    /// The `.megakv` layout of the decode state after `positions` positions; `None` when the
    /// adapter cannot save its state (docs/runner.md "Prompt cache").
    fn state_layout(&self, _positions: usize) -> Option<KvLayout> {
        None
    }
    /// Positions fed so far.
    fn position(&self) -> usize {
        0
    }
    /// The longest prefix of at most `n` positions [`ArtifactModel::save_state`] can give (an
    /// adapter whose state cannot be cut anywhere: its position or a snapshot's at or before
    /// `n`, else 0).
    fn savable(&self, n: usize) -> usize {
        n.min(self.position())
    }
    /// The decode state of the first `n` positions as a `.megakv` payload.
    fn save_state(&self, _n: usize) -> Result<Vec<u8>, RunError> {
        Err(no_state())
    }
    /// Replaces the decode state with `positions` positions laid out as `layout`.
    fn load_state(
        &mut self,
        _positions: usize,
        _layout: &KvLayout,
        _payload: &[u8],
    ) -> Result<(), RunError> {
        Err(no_state())
    }
}

fn no_state() -> RunError {
    RunError::Usage(
        "this model's adapter cannot save or load its decode state (--prompt-cache)".into(),
    )
}

/// An [`ArtifactModel`] as the generation loop's [`Decoder`] (logits read back each step), with
/// the context it was opened for.
pub struct ArtifactDecoder<'a>(pub Box<dyn ArtifactModel + 'a>, pub usize);

impl Decoder for ArtifactDecoder<'_> {
    fn logits(&mut self, ids: &[u32]) -> Result<Vec<f32>, RunError> {
        let mut rows = self.0.forward(ids, Logits::Last)?;
        rows.pop().ok_or_else(|| RunError::Model {
            path: String::new(),
            detail: "the adapter returned no logits row".into(),
        })
    }

    fn argmax(&mut self, ids: &[u32]) -> Result<u32, RunError> {
        if let Some(id) = self.0.argmax(ids)? {
            return Ok(id);
        }
        let last = self.logits(ids)?;
        Ok(kernels::reference::argmax(&last, last.len())
            .first()
            .copied()
            .unwrap_or(0))
    }

    fn rewind(&mut self, n: usize) -> Option<usize> {
        self.0.rewind(n)
    }

    fn stats(&self) -> Option<kernels::gpu::GpuStats> {
        self.0.stats()
    }

    fn tile_reads(&self) -> u64 {
        self.0.tile_reads()
    }

    fn expert_cache(&self) -> Option<ExpertCacheStats> {
        self.0.expert_cache()
    }
}

impl crate::prompt_cache::KvState for ArtifactDecoder<'_> {
    fn kv_layout(&self, positions: usize) -> Result<KvLayout, RunError> {
        self.0.state_layout(positions).ok_or_else(no_state)
    }

    fn kv_position(&self) -> usize {
        self.0.position()
    }

    fn kv_capacity(&self) -> usize {
        self.1
    }

    fn kv_payload(&self, n: usize) -> Result<Vec<u8>, RunError> {
        self.0.save_state(n)
    }

    fn kv_restore(
        &mut self,
        positions: usize,
        layout: &KvLayout,
        payload: &[u8],
    ) -> Result<(), RunError> {
        self.0.load_state(positions, layout, payload)
    }

    fn kv_rewind(&mut self, n: usize) -> usize {
        self.0.rewind(n).unwrap_or(0)
    }

    fn kv_savable(&self, n: usize) -> usize {
        self.0.savable(n)
    }
}

/// A GGUF file opened by the family its architecture's registry row names
/// ([`crate::registry::GGUF_ENTRIES`]): what a front-end sizes a run by, and how it goes on the
/// device.
pub trait GgufWeights {
    /// The file's metadata (its vocabulary and chat template).
    fn metadata(&self) -> &artifact::gguf::Metadata;
    /// Positions the model was trained for.
    fn context(&self) -> usize;
    /// Ids the model's embedding holds.
    fn vocab(&self) -> usize;
    /// The model on `opts.engine` with `opts.capacity` positions, resident or streamed.
    fn load<'s>(&'s self, opts: &ModelOptions<'s>) -> Result<Box<dyn Model + 's>, RunError>;
}

/// What every front-end drives, whatever the family: the generation loop's [`Decoder`] whose
/// decode state the prompt cache can hold ([`crate::prompt_cache::KvState`]).
pub trait Model: Decoder + crate::prompt_cache::KvState {}

impl<T: Decoder + crate::prompt_cache::KvState> Model for T {}
