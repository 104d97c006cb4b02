//! What a model family's adapter implements for the runtime (docs/runner.md "Registry"): the one
//! [`Model`] trait, the [`ModelOptions`] it is opened with, and [`GgufWeights`], a GGUF file a
//! family opened. Names no family.

use artifact::mega::kv::KvLayout;

use crate::engine::Engine;
use crate::error::RunError;
use crate::sequence::{Feed, SavedState, Sequence, StateKind};
use crate::step_stats::ExpertCacheStats;

/// Which positions' logits a step computes (the output head is the costliest matvec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    Last,
    All,
}

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

/// The one model trait every family implements and every front-end drives (through the
/// generation loop, the session, the server and the prompt cache): sequences begun and ended,
/// a step over a list of them, and each one's state rewound, saved and restored on its own
/// (docs/runner.md "Sequences"). A family that holds one sequence at a time says so with
/// [`Model::max_sequences`] and refuses a second ([`crate::sequence::Slots`]).
pub trait Model {
    /// Length of one logits row.
    fn vocab(&self) -> usize;
    /// Positions each sequence's state holds.
    fn capacity(&self) -> usize;
    /// What a sequence's state is (how far it can be cut back).
    fn state_kind(&self) -> StateKind;
    /// Sequences that may be live at once.
    fn max_sequences(&self) -> usize {
        1
    }
    /// A new sequence with an empty state (position 0), refused when no slot is free.
    fn begin(&mut self) -> Result<Sequence, RunError>;
    /// Ends `seq` and frees its state.
    fn end(&mut self, seq: Sequence);
    /// Feeds each sequence its input and returns, per feed, its logits rows flat
    /// (`rows × vocab`): the last position's with [`Logits::Last`], one per fed position with
    /// [`Logits::All`].
    fn step(&mut self, feeds: &[Feed<'_>], logits: Logits) -> Result<Vec<Vec<f32>>, RunError>;
    /// Feeds each sequence as [`Model::step`] does and returns, per feed, the argmax of its last
    /// position where the model picks it on the device (only the ids are read back); `None`
    /// (nothing fed) where it does not, and the caller asks for logits.
    fn step_argmax(&mut self, _feeds: &[Feed<'_>]) -> Result<Option<Vec<u32>>, RunError> {
        Ok(None)
    }
    /// Positions `seq` has been fed.
    fn position(&self, seq: &Sequence) -> Result<usize, RunError>;
    /// Keeps at most the first `n` positions of `seq`; returns how many it kept (a state that
    /// cannot be cut anywhere goes back to a snapshot at or before `n`, or to 0).
    fn rewind(&mut self, seq: &Sequence, n: usize) -> Result<usize, RunError>;
    /// The longest prefix of at most `n` positions of `seq` that [`Model::save`] can give.
    fn savable(&self, seq: &Sequence, n: usize) -> usize;
    /// The `.megakv` layout of a state of `positions` positions; `None` when the model cannot
    /// save its state (docs/runner.md "Prompt cache").
    fn state_layout(&self, _positions: usize) -> Option<KvLayout> {
        None
    }
    /// The state of the first `n` positions of `seq`.
    fn save(&self, _seq: &Sequence, _n: usize) -> Result<SavedState, RunError> {
        Err(no_state())
    }
    /// Replaces the state of `seq` with `state` (its layout already checked to be this
    /// model's).
    fn restore(&mut self, _seq: &Sequence, _state: &SavedState) -> Result<(), RunError> {
        Err(no_state())
    }
    /// The device's counters so far (`None`: the model runs on no device).
    fn stats(&self) -> Option<kernels::gpu::GpuStats> {
        None
    }
    /// Tile reads so far (0 for a resident model).
    fn tile_reads(&self) -> u64 {
        0
    }
    /// The streamed-expert cache's counters, where the model has one.
    fn expert_cache(&self) -> Option<ExpertCacheStats> {
        None
    }
}

/// The refusal of a model that cannot save or load its state.
pub(crate) fn no_state() -> RunError {
    RunError::Usage(
        "this model's adapter cannot save or load its decode state (--prompt-cache)".into(),
    )
}

/// The last row of a step's flat `rows × vocab` logits.
pub fn last_row(mut rows: Vec<f32>, vocab: usize) -> Result<Vec<f32>, RunError> {
    if vocab == 0 || rows.len() < vocab || rows.len() % vocab != 0 {
        return Err(RunError::Model {
            path: String::new(),
            detail: format!(
                "the model returned {} logits, not whole rows of {vocab}",
                rows.len()
            ),
        });
    }
    Ok(rows.split_off(rows.len() - vocab))
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
