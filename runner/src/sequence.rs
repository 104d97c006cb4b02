//! Sequences (docs/runner.md "Sequences"): one stream of tokens — a request, a chat — whose decode
//! state a model keeps for it while it is live. A [`crate::adapter::Model`] hands out
//! [`Sequence`] handles ([`Slots`]), a step feeds a list of them ([`Feed`]), and each one's state
//! is saved and restored on its own ([`SavedState`]) for prefix reuse. What the state is differs
//! by family ([`StateKind`]); the runtime only asks how far it can be cut back. Names no family.

use artifact::mega::kv::KvLayout;

use crate::error::RunError;

/// What a sequence's decode state is, as far as prefix reuse cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKind {
    /// Keys and values per position (an attention KV cache): any prefix can be kept, saved and
    /// restored.
    Positions,
    /// A whole state that cannot be cut at an arbitrary position (a sliding window with
    /// compressor state): kept and saved at the position it holds or at snapshots the model took
    /// of it (the last token before a prefill's end).
    Snapshots,
    /// A state of fixed size whatever the position count (a recurrent state such as linear
    /// attention's): like [`StateKind::Snapshots`], cut back only to snapshots, but a snapshot's
    /// size does not grow with the sequence.
    Fixed,
}

/// A live sequence of a model: the slot of the model's state it owns. Obtained from
/// [`crate::adapter::Model::begin`], given back with [`crate::adapter::Model::end`]; a handle of
/// a sequence that ended is refused.
#[derive(Debug, PartialEq, Eq)]
pub struct Sequence {
    id: u64,
    slot: usize,
}

impl Sequence {
    /// The slot of the model's state this sequence owns (0 while a model holds one sequence).
    pub fn slot(&self) -> usize {
        self.slot
    }
}

/// What a step feeds one sequence.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// Token ids at the sequence's next positions (a prefill when several, a decode step when
    /// one).
    Ids(&'a [u32]),
    /// The id the previous greedy step picked for this sequence: a model that picked it on the
    /// device feeds it from there (nothing uploaded); any other feeds it as one id.
    Picked(u32),
}

impl Input<'_> {
    /// How many positions the input takes.
    pub fn len(&self) -> usize {
        match self {
            Input::Ids(ids) => ids.len(),
            Input::Picked(_) => 1,
        }
    }

    /// Whether it feeds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ids as a slice (`Picked`'s one id in `buf`).
    pub fn ids<'b>(&'b self, buf: &'b mut [u32; 1]) -> &'b [u32] {
        match self {
            Input::Ids(ids) => ids,
            Input::Picked(id) => {
                buf[0] = *id;
                &buf[..]
            }
        }
    }
}

/// One sequence of a step and what it is fed.
#[derive(Debug, Clone, Copy)]
pub struct Feed<'a> {
    pub seq: &'a Sequence,
    pub input: Input<'a>,
}

/// A sequence's decode state after `positions` positions, as a `.megakv` payload laid out as
/// `layout` (docs/mega.md §12): what `--prompt-cache` writes and a later run restores.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedState {
    pub positions: usize,
    pub layout: KvLayout,
    pub payload: Vec<u8>,
}

/// The live sequences of a model with a fixed number of state slots: hands out free slots and
/// refuses handles that are not live. A family embeds one and answers the sequence half of
/// [`crate::adapter::Model`] through it.
#[derive(Debug)]
pub struct Slots {
    live: Vec<Option<u64>>,
}

/// Sequence ids, unique in the process: a handle of one model is never another's.
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Slots {
    /// `n` slots (at least one), all free.
    pub fn new(n: usize) -> Self {
        Self {
            live: vec![None; n.max(1)],
        }
    }

    /// How many sequences may be live at once.
    pub fn capacity(&self) -> usize {
        self.live.len()
    }

    /// A new sequence in a free slot, refused when every slot is taken.
    pub fn begin(&mut self) -> Result<Sequence, RunError> {
        let n = self.live.len();
        let slot = self.live.iter().position(Option::is_none).ok_or_else(|| {
            RunError::Usage(format!(
                "this model holds {n} live sequence(s) at once and all are in use: end one first"
            ))
        })?;
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.live[slot] = Some(id);
        Ok(Sequence { id, slot })
    }

    /// Frees the slot of `seq` (a handle that is not live frees nothing).
    pub fn end(&mut self, seq: Sequence) {
        if let Some(s) = self.live.get_mut(seq.slot).filter(|s| **s == Some(seq.id)) {
            *s = None;
        }
    }

    /// The slot of `seq`, refused when it is not a live sequence of this model.
    pub fn slot(&self, seq: &Sequence) -> Result<usize, RunError> {
        match self.live.get(seq.slot) {
            Some(Some(id)) if *id == seq.id => Ok(seq.slot),
            _ => Err(RunError::Usage(format!(
                "sequence {} is not live in this model (it ended, or belongs to another model)",
                seq.id
            ))),
        }
    }

    /// The one feed of a step of a family that steps one sequence at a time, with its slot;
    /// a list of any other length is refused.
    pub fn one<'f, 'a>(&self, feeds: &'f [Feed<'a>]) -> Result<(usize, &'f Feed<'a>), RunError> {
        match feeds {
            [f] => Ok((self.slot(f.seq)?, f)),
            _ => Err(RunError::Usage(format!(
                "this model steps one sequence at a time, not {}",
                feeds.len()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_hand_out_free_slots_and_refuse_dead_handles() {
        let mut s = Slots::new(1);
        let a = s.begin().unwrap();
        assert_eq!(s.slot(&a).unwrap(), 0);
        assert!(s.begin().unwrap_err().to_string().contains("end one first"));
        let stale = Sequence { id: a.id, slot: 0 };
        s.end(a);
        assert!(s.slot(&stale).is_err(), "an ended handle is refused");
        let b = s.begin().unwrap();
        assert_eq!(b.slot(), 0);
        assert!(
            s.slot(&stale).is_err(),
            "a reused slot refuses the old handle"
        );
        let ids = [1u32, 2];
        let feeds = [
            Feed {
                seq: &b,
                input: Input::Ids(&ids),
            },
            Feed {
                seq: &b,
                input: Input::Picked(3),
            },
        ];
        assert_eq!(s.one(&feeds[..1]).unwrap().0, 0);
        assert!(s.one(&feeds).unwrap_err().to_string().contains("not 2"));
        assert!(s.one(&[]).is_err());
    }

    #[test]
    fn slots_with_room_for_two_keep_them_apart() {
        let mut s = Slots::new(2);
        let a = s.begin().unwrap();
        let b = s.begin().unwrap();
        assert_ne!(a.slot(), b.slot());
        assert!(s.begin().is_err());
        s.end(a);
        let c = s.begin().unwrap();
        assert_eq!(c.slot(), 0);
        assert_eq!(s.slot(&b).unwrap(), 1);
        let other = Slots::new(2).begin().unwrap();
        assert!(s.slot(&other).is_err(), "another model's handle is refused");
    }

    #[test]
    fn a_picked_input_is_one_id() {
        let mut buf = [0u32; 1];
        let p = Input::Picked(7);
        assert_eq!((p.len(), p.ids(&mut buf)), (1, &[7u32][..]));
        let ids = [4u32, 5, 6];
        let i = Input::Ids(&ids);
        assert_eq!(i.ids(&mut buf), &ids[..]);
        assert!(Input::Ids(&[]).is_empty());
    }
}
