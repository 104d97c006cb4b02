//! The streamed routed experts on the device (docs/runner-deepseek-v4.md "Expert cache").
//!
//! An expert's matrices (gate, up, down) are loaded, cached and evicted together, into a *slot*:
//! the matrices' device buffers, their prepared one-token products (bind groups, output
//! buffers) and the SwiGLU between gate and up. A slot outlives its expert: an evicted expert's
//! slot is parked with its products and op, and the next expert of the same shapes is written
//! over its bytes (queue writes) and takes them under its own names. Once the slots a run needs
//! exist, a miss reads the expert's tiles and writes them; it creates no buffer and no bind
//! group (issue 16: nothing allocated per step after warm-up).
//!
//! Admission is hotness first: uses are counted per expert for the whole run; a newcomer evicts
//! cached experts used fewer times than itself (the least recently used of equals first), and
//! one that is not hotter than what it would displace is held in a *transient* slot outside the
//! budget until a later load needs the slot. The experts of one call (a token's picks in a
//! layer) are pinned: none evicts another, so their chain can run on the device in one submit.

use std::collections::HashMap;

use super::super::error::V4Error;
use super::super::linear::{load_matrix, tensor_err, ExpertCacheStats};
use super::super::prepared::Prepared;
use super::chain::SwigluOp;
use super::GpuLinears;
use crate::engine::ResidentMatrix;

/// One expert's matrices on the device, or a parked slot (`expert` empty).
struct Slot {
    expert: String,
    /// The matrices by stem (`{expert}.w1` …), in declaration order.
    mats: Vec<(String, ResidentMatrix)>,
    /// The slot's products and SwiGLU ops while it is parked, keyed by the suffix after the
    /// expert's stem.
    products: Vec<(String, Option<Prepared>)>,
    swiglus: Vec<((String, String), SwigluOp)>,
    bytes: u64,
    cached: bool,
    /// The tick of its last use (least recently used first among equals).
    last: u64,
}

impl Slot {
    fn shapes(&self) -> Vec<(kernels::WeightFormat, usize, usize)> {
        self.mats
            .iter()
            .map(|(_, m)| (m.format, m.rows, m.k))
            .collect()
    }
}

/// Every expert slot made so far, and which expert each holds.
pub(super) struct ExpertSlots {
    slots: Vec<Slot>,
    held: HashMap<String, usize>,
    parked: Vec<usize>,
    /// Uses per expert (kept after its eviction).
    uses: HashMap<String, u64>,
    /// Each streamed expert's matrix stems, in declaration order.
    members: HashMap<String, Vec<String>>,
    tick: u64,
    pub(super) stats: ExpertCacheStats,
}

/// The expert stem (`layers.L.ffn.experts.E`) of one of its matrices (`….w1`).
fn expert_of(stem: &str) -> Option<&str> {
    stem.rsplit_once('.').map(|(e, _)| e)
}

impl ExpertSlots {
    pub(super) fn new(budget_bytes: u64) -> Self {
        Self {
            slots: Vec::new(),
            held: HashMap::new(),
            parked: Vec::new(),
            uses: HashMap::new(),
            members: HashMap::new(),
            tick: 0,
            stats: ExpertCacheStats {
                budget_bytes,
                ..ExpertCacheStats::default()
            },
        }
    }

    /// Streamed routed-expert matrix `stem`, declared: it is loaded with its expert.
    pub(super) fn declare(&mut self, stem: &str) {
        if let Some(e) = expert_of(stem) {
            let list = self.members.entry(e.to_owned()).or_default();
            if !list.iter().any(|s| s == stem) {
                list.push(stem.to_owned());
            }
        }
    }

    /// The expert whose matrix `stem` is, if `stem` is a streamed expert's matrix.
    pub(super) fn expert<'a>(&self, stem: &'a str) -> Option<&'a str> {
        expert_of(stem).filter(|e| {
            self.members
                .get(*e)
                .is_some_and(|l| l.iter().any(|s| s == stem))
        })
    }

    /// Matrix `stem` of an expert on the device.
    pub(super) fn matrix(&self, stem: &str) -> Option<&ResidentMatrix> {
        let slot = &self.slots[*self.held.get(expert_of(stem)?)?];
        slot.mats.iter().find(|(n, _)| n == stem).map(|(_, m)| m)
    }

    pub(super) fn holds(&self, stem: &str) -> bool {
        self.matrix(stem).is_some()
    }

    fn uses(&self, expert: &str) -> u64 {
        self.uses.get(expert).copied().unwrap_or(0)
    }

    /// The cached, unpinned expert with the fewest uses (the least recently used of those).
    fn coldest(&self, pins: &[&str]) -> Option<usize> {
        self.held
            .iter()
            .filter(|(e, &i)| self.slots[i].cached && !pins.contains(&e.as_str()))
            .min_by_key(|(e, &i)| (self.uses(e), self.slots[i].last))
            .map(|(_, &i)| i)
    }
}

impl GpuLinears {
    /// Makes every expert of `experts` (expert stems) available on the device at once, one use
    /// each: the hits and misses of the cache are counted here.
    pub(super) fn ensure_loaded(&mut self, experts: &[String]) -> Result<(), V4Error> {
        let pins: Vec<&str> = experts.iter().map(String::as_str).collect();
        for e in experts {
            if self.slots.members.contains_key(e) {
                self.acquire(e, &pins, true)?;
            }
        }
        Ok(())
    }

    /// Makes the expert of matrix `stem` available for a product outside
    /// [`GpuLinears::ensure_loaded`] (a use is not counted again; a load is a miss).
    pub(super) fn load_for_product(&mut self, stem: &str) -> Result<(), V4Error> {
        let Some(e) = self.slots.expert(stem).map(str::to_owned) else {
            return Err(tensor_err(stem, "used before it was declared".into()));
        };
        self.acquire(&e, &[e.as_str()], false)
    }

    /// Makes `expert` available (cached or transient), `pins` kept on the device meanwhile.
    fn acquire(&mut self, expert: &str, pins: &[&str], count_use: bool) -> Result<(), V4Error> {
        let s = &mut self.slots;
        s.tick += 1;
        if count_use {
            *s.uses.entry(expert.to_owned()).or_default() += 1;
        }
        if let Some(&i) = s.held.get(expert) {
            if count_use {
                s.stats.hits += 1;
            }
            s.slots[i].last = s.tick;
            let bytes = s.slots[i].bytes;
            if !s.slots[i].cached && self.make_room(expert, bytes, pins) {
                self.admit(i);
            }
            return Ok(());
        }
        let names = s.members.get(expert).cloned().unwrap_or_default();
        let mut qs = Vec::with_capacity(names.len());
        for stem in &names {
            let &(rows, k, _) = self
                .shapes
                .get(stem)
                .ok_or_else(|| tensor_err(stem, "used before it was declared".into()))?;
            qs.push(load_matrix(self.src.as_ref(), stem, rows, k)?);
        }
        let bytes: u64 = qs
            .iter()
            .map(|q| (q.packed.len() + q.scales.len()) as u64)
            .sum();
        self.slots.stats.misses += 1;
        self.slots.stats.loaded_bytes += bytes;
        let cached = self.make_room(expert, bytes, pins);
        if !cached {
            // transient slots of experts not pinned now are free again
            let idle: Vec<usize> = (self.slots.held.iter())
                .filter(|(e, &i)| !self.slots.slots[i].cached && !pins.contains(&e.as_str()))
                .map(|(_, &i)| i)
                .collect();
            for i in idle {
                self.park(i);
            }
        }
        // the open step may read a parked slot: it runs before the slot is written
        self.submit_open();
        let shapes: Vec<_> = qs.iter().map(|q| (q.format, q.rows, q.k)).collect();
        let shell = (self
            .slots
            .parked
            .iter()
            .position(|&i| self.slots.slots[i].shapes() == shapes))
        .map(|p| self.slots.parked.swap_remove(p));
        let i = match shell {
            Some(i) => {
                for ((stem, m), q) in self.slots.slots[i].mats.iter_mut().zip(&qs) {
                    self.engine
                        .rewrite_matrix(m, &q.name, [&q.packed, &q.scales, &[]])?;
                    stem.clone_from(&q.name);
                }
                i
            }
            None => {
                let mut mats = Vec::with_capacity(qs.len());
                for q in &qs {
                    mats.push((
                        q.name.clone(),
                        self.upload_rows(&q.name, q, q.rows, &q.packed, &q.scales)?,
                    ));
                }
                self.slots.slots.push(Slot {
                    expert: String::new(),
                    mats,
                    products: Vec::new(),
                    swiglus: Vec::new(),
                    bytes,
                    cached: false,
                    last: 0,
                });
                self.slots.slots.len() - 1
            }
        };
        self.unpark(i, expert, bytes);
        if cached {
            self.admit(i);
        }
        Ok(())
    }

    /// Evicts colder unpinned cached experts until `bytes` more fit the budget, where they are
    /// colder than `expert`; whether they fit.
    fn make_room(&mut self, expert: &str, bytes: u64, pins: &[&str]) -> bool {
        let hot = self.slots.uses(expert);
        let budget = self.slots.stats.budget_bytes;
        while self.slots.stats.cached_bytes + bytes > budget {
            match self.slots.coldest(pins) {
                Some(i) if self.slots.uses(&self.slots.slots[i].expert) < hot => {
                    self.park(i);
                    self.slots.stats.evictions += 1;
                }
                _ => break,
            }
        }
        self.slots.stats.cached_bytes + bytes <= budget
    }

    /// Counts held slot `i` in the cache.
    fn admit(&mut self, i: usize) {
        let st = &mut self.slots.stats;
        self.slots.slots[i].cached = true;
        st.cached_bytes += self.slots.slots[i].bytes;
        st.peak_bytes = st.peak_bytes.max(st.cached_bytes);
    }

    /// Takes held slot `i`'s expert off the device: its products and ops are parked with it.
    fn park(&mut self, i: usize) {
        let expert = std::mem::take(&mut self.slots.slots[i].expert);
        self.slots.held.remove(&expert);
        let suffix = |stem: &str| {
            stem.strip_prefix(expert.as_str())
                .unwrap_or(stem)
                .to_owned()
        };
        let slot = &mut self.slots.slots[i];
        if slot.cached {
            self.slots.stats.cached_bytes -= slot.bytes;
            slot.cached = false;
        }
        for (stem, _) in &slot.mats {
            if let Some(p) = self.prepared.remove(stem) {
                slot.products.push((suffix(stem), p));
            }
        }
        let keys: Vec<(String, String)> = (self.swiglus.keys())
            .filter(|(g, u)| slot.mats.iter().any(|(n, _)| n == g || n == u))
            .cloned()
            .collect();
        for key in keys {
            if let Some(op) = self.swiglus.remove(&key) {
                slot.swiglus.push(((suffix(&key.0), suffix(&key.1)), op));
            }
        }
        self.slots.parked.push(i);
    }

    /// Gives slot `i` (its bytes written) to `expert`, its parked products and ops renamed.
    fn unpark(&mut self, i: usize, expert: &str, bytes: u64) {
        let slot = &mut self.slots.slots[i];
        slot.expert = expert.to_owned();
        slot.bytes = bytes;
        slot.last = self.slots.tick;
        for (suffix, p) in slot.products.drain(..) {
            self.prepared.insert(format!("{expert}{suffix}"), p);
        }
        for ((g, u), op) in slot.swiglus.drain(..) {
            self.swiglus
                .insert((format!("{expert}{g}"), format!("{expert}{u}")), op);
        }
        self.slots.held.insert(expert.to_owned(), i);
    }
}
