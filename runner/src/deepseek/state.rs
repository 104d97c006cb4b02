//! The V4 adapter's decode state, saved to and loaded from `.megakv` sections (docs/mega.md
//! §12.2) and copied in memory as [`Snapshot`]s (a session's turn boundaries).
//!
//! Unlike a Llama-family KV cache, V4's state is not one row per position: each layer keeps the
//! keys of its sliding window (the last `window - 1` positions), and a compressing layer keeps its
//! compressor's (and a CSA layer its indexer's) buffered rows, the previous window's first series
//! and the entries emitted so far. Every array's shape is a function of the layer and the position
//! count alone, so [`V4Model::state_layout`] says exactly what a state of n positions looks like,
//! and a file of any other model, count or shape is refused before a byte of it is used. The
//! state cannot be cut back to an earlier position (the window has forgotten what fell out of it),
//! so it is saved at the position it holds.

use artifact::mega::kv::{KvSection, KvSections};

use super::attention::AttnCache;
use super::compress::{state_shapes, CompCache, CompParams};
use super::error::V4Error;
use super::model::V4Model;

/// The family name a V4 state's layout carries.
pub const FAMILY: &str = "deepseek-v4";

/// A copy of the decode state at one position.
#[derive(Clone)]
pub struct Snapshot {
    cache: Vec<AttnCache>,
    pos: usize,
}

impl Snapshot {
    /// Positions the snapshot holds.
    pub fn position(&self) -> usize {
        self.pos
    }
}

fn section(name: String, rows: usize, cols: usize) -> KvSection {
    KvSection {
        name,
        rows: rows as u64,
        cols: cols as u64,
    }
}

fn comp_sections(out: &mut Vec<KvSection>, stem: &str, p: &CompParams, positions: usize) {
    for (name, rows, cols) in state_shapes(p, positions) {
        out.push(section(format!("{stem}.{name}"), rows, cols));
    }
}

fn put_rows(payload: &mut Vec<u8>, s: &KvSection, rows: &[Vec<f32>]) -> Result<(), V4Error> {
    let fits = rows.len() as u64 == s.rows && rows.iter().all(|r| r.len() as u64 == s.cols);
    if !fits {
        return Err(V4Error::Input(format!(
            "decode state `{}` holds {} rows, not the {} × {} its position count implies",
            s.name,
            rows.len(),
            s.rows,
            s.cols
        )));
    }
    for v in rows.iter().flatten() {
        payload.extend_from_slice(&v.to_le_bytes());
    }
    Ok(())
}

/// Hands out a payload's sections in order as rows of f32.
struct Rows<'a> {
    payload: &'a [u8],
    at: usize,
}

impl Rows<'_> {
    fn take(&mut self, s: &KvSection) -> Result<Vec<Vec<f32>>, V4Error> {
        let (rows, cols) = (s.rows as usize, s.cols as usize);
        let end = self.at + rows * cols * 4;
        let bytes = self.payload.get(self.at..end).ok_or_else(|| {
            V4Error::Input(format!("decode state `{}` runs past the payload", s.name))
        })?;
        self.at = end;
        let values: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok(values.chunks(cols.max(1)).map(<[f32]>::to_vec).collect())
    }
}

impl V4Model {
    /// A copy of the decode state (the weights are not copied; a state the device attention
    /// holds is read back).
    pub fn snapshot(&self) -> Result<Snapshot, V4Error> {
        Ok(Snapshot {
            cache: self.host_caches()?.into_owned(),
            pos: self.pos,
        })
    }

    /// Puts a [`V4Model::snapshot`] back.
    pub fn restore(&mut self, s: &Snapshot) {
        self.cache = s.cache.clone();
        self.pos = s.pos;
        self.host_state = true;
        self.device_state = false;
    }

    /// What the decode state after `positions` tokens consists of, in payload order: per layer
    /// `layers.L.window`, then `layers.L.compressor.*` and `layers.L.indexer.*` where it has them.
    pub fn state_layout(&self, positions: usize) -> KvSections {
        let c = &self.config;
        let mut sections = Vec::new();
        for (li, l) in self.layers.iter().enumerate() {
            let rows = positions.min(c.window.saturating_sub(1));
            sections.push(section(format!("layers.{li}.window"), rows, c.head_dim));
            let a = l.attn();
            if let Some(p) = &a.comp {
                comp_sections(
                    &mut sections,
                    &format!("layers.{li}.compressor"),
                    p,
                    positions,
                );
            }
            if let Some(p) = &a.indexer {
                comp_sections(&mut sections, &format!("layers.{li}.indexer"), p, positions);
            }
        }
        KvSections {
            family: FAMILY.into(),
            dtype: "f32".into(),
            sections,
        }
    }

    /// The decode state at the current position as a layout and its little-endian payload.
    pub fn save_state(&self) -> Result<(KvSections, Vec<u8>), V4Error> {
        self.encode(&self.host_caches()?, self.pos)
    }

    /// [`V4Model::save_state`] of a snapshot.
    pub fn save_state_of(&self, s: &Snapshot) -> Result<(KvSections, Vec<u8>), V4Error> {
        self.encode(&s.cache, s.pos)
    }

    fn encode(&self, caches: &[AttnCache], pos: usize) -> Result<(KvSections, Vec<u8>), V4Error> {
        let layout = self.state_layout(pos);
        let mut payload = Vec::new();
        let mut want = layout.sections.iter();
        let mut next = || {
            want.next().ok_or_else(|| {
                V4Error::Input("decode state has more arrays than its layout".into())
            })
        };
        for (l, cache) in self.layers.iter().zip(caches) {
            put_rows(&mut payload, next()?, &cache.window_keys())?;
            let a = l.attn();
            for (p, cc) in [(&a.comp, &cache.comp), (&a.indexer, &cache.idx)] {
                if let Some(p) = p {
                    for (_, rows) in cc.arrays(p) {
                        put_rows(&mut payload, next()?, rows)?;
                    }
                }
            }
        }
        Ok((layout, payload))
    }

    /// Replaces the decode state with `payload` laid out as `layout`, which must be exactly
    /// [`V4Model::state_layout`] of `positions` (refused otherwise: another model's or another
    /// count's state).
    pub fn load_state(
        &mut self,
        positions: usize,
        layout: &KvSections,
        payload: &[u8],
    ) -> Result<(), V4Error> {
        let want = self.state_layout(positions);
        if *layout != want {
            let first = layout
                .sections
                .iter()
                .zip(&want.sections)
                .find(|(a, b)| a != b)
                .map_or_else(
                    || {
                        format!(
                            "{} arrays where this model has {}",
                            layout.sections.len(),
                            want.sections.len()
                        )
                    },
                    |(a, b)| format!("`{}` is {a:?}, this model's is {b:?}", b.name),
                );
            return Err(V4Error::Input(format!(
                "the saved state is not this model's after {positions} positions: {first}"
            )));
        }
        let mut rows = Rows { payload, at: 0 };
        let mut want = want.sections.iter();
        let mut cache = Vec::with_capacity(self.layers.len());
        for l in &self.layers {
            let mut take = |rows: &mut Rows<'_>| match want.next() {
                Some(s) => rows.take(s),
                None => Err(V4Error::Input("the saved state ends early".into())),
            };
            let keys = take(&mut rows)?;
            let a = l.attn();
            let mut comps = Vec::with_capacity(2);
            for p in [&a.comp, &a.indexer] {
                comps.push(match p {
                    Some(p) => {
                        let n = state_shapes(p, positions).len();
                        let arrays = (0..n).map(|_| take(&mut rows)).collect::<Result<_, _>>()?;
                        CompCache::from_arrays(p, arrays)
                    }
                    None => CompCache::default(),
                });
            }
            let idx = comps.pop().unwrap_or_default();
            let comp = comps.pop().unwrap_or_default();
            cache.push(AttnCache::from_parts(positions, keys, comp, idx));
        }
        if rows.at != payload.len() {
            return Err(V4Error::Input(format!(
                "the saved state's payload has {} bytes past its arrays",
                payload.len() - rows.at
            )));
        }
        self.cache = cache;
        self.pos = positions;
        self.stats = Default::default();
        self.host_state = true;
        self.device_state = false;
        Ok(())
    }
}
