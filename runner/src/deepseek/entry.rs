//! The `deepseek-v4` entry of the product registry (docs/runner.md "Registry",
//! docs/runner-deepseek-v4.md): the adapter opened over a verified artifact through
//! [`VerifiedSource`] (every tensor load under the artifact's load policy), and the family's
//! input pipeline — the verified `tokenizer.json` through the `tokenizers` crate with the
//! configuration's `bos_token_id` prepended, as DeepSeek's encoding starts every sequence — and
//! its chat format: the verified `tokenizer_config.json`'s `chat_template` if it has one, else
//! DeepSeek's own encoding in chat mode ([`super::chat`]).

use std::sync::Arc;

use artifact::mega::kv::KvLayout;

use super::model::{Mode, V4Model};
use super::state::Snapshot;
use super::verified::VerifiedSource;
use crate::adapter::{Model, ModelOptions, Residency};
use crate::artifact::VerifiedArtifact;
use crate::error::RunError;
use crate::generate::Logits;
use crate::sequence::{Feed, SavedState, Sequence, Slots, StateKind};
use crate::tokenizer::Tokenizer;

/// Snapshots of the decode state an adapter keeps (each is a copy of every layer's window and
/// compressor state; a session needs the latest prompt's).
const SNAPSHOTS: usize = 2;

/// The adapter behind the registry's [`Model`].
pub struct V4Artifact {
    model: V4Model,
    /// Positions a sequence may hold (`ModelOptions::capacity`).
    capacity: usize,
    /// The one sequence whose state `model` holds.
    slots: Slots,
    /// Copies of the state taken during prefills, oldest first: where a chat session or the
    /// server can go back to (the state cannot be cut at an arbitrary position).
    snapshots: Vec<Snapshot>,
}

impl V4Artifact {
    /// Refuses feeding `n` positions past the capacity the model was opened for.
    fn check(&self, n: usize) -> Result<(), RunError> {
        if self.model.position() + n > self.capacity {
            return Err(RunError::ContextFull {
                capacity: self.capacity,
            });
        }
        Ok(())
    }

    fn snapshot(&mut self) -> Result<(), RunError> {
        let s = self.model.snapshot()?;
        if self.snapshots.len() == SNAPSHOTS {
            self.snapshots.remove(0);
        }
        self.snapshots.push(s);
        Ok(())
    }

    /// Feeds a prefill as all but its last token, a snapshot there, then the last token (bit for
    /// bit the logits of feeding them at once): the snapshot is where the next turn of a chat
    /// parts from this one at the latest (its rendering of this turn's answer may differ from
    /// what was generated, as thinking mode's does, from the first token after the prompt).
    fn prefill(&mut self, ids: &[u32]) -> Result<Vec<f32>, RunError> {
        let last = self.prefill_head(ids)?;
        Ok(self.model.forward(&[last])?)
    }

    /// [`V4Artifact::prefill`] up to its last token, which it returns.
    fn prefill_head(&mut self, ids: &[u32]) -> Result<u32, RunError> {
        let (last, head) = ids
            .split_last()
            .ok_or_else(|| RunError::Usage("no token ids to run".into()))?;
        if !head.is_empty() {
            self.model.forward(head)?;
            self.snapshot()?;
        }
        Ok(*last)
    }
}

/// The V4 adapter as the runtime's model: one sequence, whose state is every layer's window and
/// compressor state, kept and saved at its position or at a prefill's snapshot.
impl Model for V4Artifact {
    fn vocab(&self) -> usize {
        self.model.config.vocab
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn state_kind(&self) -> StateKind {
        StateKind::Snapshots
    }

    fn begin(&mut self) -> Result<Sequence, RunError> {
        let seq = self.slots.begin()?;
        self.model.reset();
        self.snapshots.clear();
        Ok(seq)
    }

    fn end(&mut self, seq: Sequence) {
        self.slots.end(seq);
    }

    fn step(&mut self, feeds: &[Feed<'_>], logits: Logits) -> Result<Vec<Vec<f32>>, RunError> {
        let (_, f) = self.slots.one(feeds)?;
        let mut buf = [0u32; 1];
        let ids = f.input.ids(&mut buf);
        self.check(ids.len())?;
        match logits {
            Logits::Last => Ok(vec![self.prefill(ids)?]),
            // One row per id: decode steps give the prefill's logits bit for bit (tested in
            // runner/tests/deepseek_reference.rs), so feeding them one at a time is exact.
            Logits::All => {
                let mut rows = Vec::with_capacity(ids.len() * self.model.config.vocab);
                for &id in ids {
                    rows.extend(self.model.forward(&[id])?);
                }
                Ok(vec![rows])
            }
        }
    }

    /// The last token (a decode step, or a prefill's last) picks its argmax on the device
    /// where the model keeps the residual there ([`V4Model::forward_argmax`]).
    fn step_argmax(&mut self, feeds: &[Feed<'_>]) -> Result<Option<Vec<u32>>, RunError> {
        let (_, f) = self.slots.one(feeds)?;
        let mut buf = [0u32; 1];
        let ids = f.input.ids(&mut buf);
        self.check(ids.len())?;
        let last = self.prefill_head(ids)?;
        Ok(Some(vec![self.model.forward_argmax(&[last])?]))
    }

    fn position(&self, seq: &Sequence) -> Result<usize, RunError> {
        self.slots.slot(seq)?;
        Ok(self.model.position())
    }

    /// The whole state when `n` covers it, else the latest snapshot at or before `n`, else a
    /// new sequence: the window and compressor state cannot be cut at an arbitrary position.
    fn rewind(&mut self, seq: &Sequence, n: usize) -> Result<usize, RunError> {
        self.slots.slot(seq)?;
        if n >= self.model.position() {
            return Ok(self.model.position());
        }
        self.snapshots.retain(|s| s.position() <= n);
        match self.snapshots.last() {
            Some(s) if s.position() > 0 => self.model.restore(s),
            _ => self.model.reset(),
        }
        Ok(self.model.position())
    }

    /// The whole state when `n` covers it, else the latest snapshot at or before `n`.
    fn savable(&self, seq: &Sequence, n: usize) -> usize {
        if self.slots.slot(seq).is_err() {
            return 0;
        }
        let now = self.model.position();
        if n >= now {
            return now;
        }
        self.snapshots
            .iter()
            .map(Snapshot::position)
            .filter(|&p| p <= n)
            .max()
            .unwrap_or(0)
    }

    fn state_layout(&self, positions: usize) -> Option<KvLayout> {
        Some(KvLayout::Sections(self.model.state_layout(positions)))
    }

    /// The state at the current position or at a snapshot's.
    fn save(&self, seq: &Sequence, n: usize) -> Result<SavedState, RunError> {
        self.slots.slot(seq)?;
        let (sections, payload) = if n == self.model.position() {
            self.model.save_state()?
        } else {
            let snap = self
                .snapshots
                .iter()
                .find(|s| s.position() == n)
                .ok_or_else(|| {
                    RunError::Usage(format!(
                        "the DeepSeek V4 state can be saved at position {} or at a prefill's last prompt token, not at {n}",
                        self.model.position()
                    ))
                })?;
            self.model.save_state_of(snap)?
        };
        Ok(SavedState {
            positions: n,
            layout: KvLayout::Sections(sections),
            payload,
        })
    }

    fn restore(&mut self, seq: &Sequence, state: &SavedState) -> Result<(), RunError> {
        self.slots.slot(seq)?;
        let KvLayout::Sections(sections) = &state.layout else {
            return Err(RunError::Usage(
                "a per-position KV layout is not a DeepSeek V4 decode state".into(),
            ));
        };
        self.model
            .load_state(state.positions, sections, &state.payload)?;
        // the loaded state is where a prompt that parts from the file's tokens after them, or
        // a chat whose first answer re-renders differently, goes back to
        self.snapshots.clear();
        self.snapshot()
    }

    fn stats(&self) -> Option<kernels::gpu::GpuStats> {
        self.model.gpu_stats()
    }

    fn tile_reads(&self) -> u64 {
        self.model.tile_reads()
    }

    fn expert_cache(&self) -> Option<crate::deepseek::linear::ExpertCacheStats> {
        self.model.expert_cache()
    }
}

/// Opens the V4 adapter over `artifact` on the wgpu kernels, resident or with routed experts
/// streamed on demand.
pub fn open_artifact<'a>(
    artifact: &'a VerifiedArtifact,
    opts: &ModelOptions<'a>,
) -> Result<Box<dyn Model + 'a>, RunError> {
    let mode = Mode::Gpu {
        engine: opts.engine.clone(),
        streamed: opts.residency == Residency::Streamed,
        expert_cache_bytes: opts.expert_cache_bytes,
    };
    let model = V4Model::open(Arc::new(VerifiedSource::new(artifact)), mode)?;
    Ok(Box::new(V4Artifact {
        model,
        capacity: opts.capacity,
        slots: Slots::new(1),
        snapshots: Vec::new(),
    }))
}

/// The family's text pipeline: the verified tokenizer with BOS prepended.
pub fn tokenizer(artifact: &VerifiedArtifact) -> Result<Tokenizer, RunError> {
    let mut tok = crate::artifact::tokenizer_of(artifact)?;
    tok.add_bos = tok.bos.is_some();
    Ok(tok)
}

/// The family's chat format: a `chat_template` in the verified `tokenizer_config.json` (none
/// upstream today), else DeepSeek V4's published encoding in chat mode.
pub fn chat(artifact: &VerifiedArtifact) -> Result<crate::chat::ChatFormat, RunError> {
    crate::artifact::chat::from_tokenizer_config(artifact)
        .map(|t| t.unwrap_or_else(|| super::chat::format(super::chat::Mode::Chat)))
}
