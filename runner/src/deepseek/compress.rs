//! The KV compressors of CSA and HCA layers and of the CSA lightning indexer (models.md §2;
//! transformers `DeepseekV4{CSA,HCA}Compressor`, `DeepseekV4Indexer`, and the `DeepseekV4
//! {CSA,HCA}Cache` buffer / overlap / entry state).
//!
//! Each token contributes `kv = W_kv·x` and `gate = W_gate·x + ape[j]` (j = its slot in the
//! window). A full window of `ratio` tokens emits one entry: per channel, the softmax over the
//! window's gates weights the window's kv values; the result is RMS-normalised, scaled by `norm`
//! and rotated (`compress` RoPE) at the window's first position. HCA (ratio 128) uses one series.
//! CSA (ratio 4) projects two series (`coff` = 2): entry w mixes the previous window's first
//! series (Ca, kept across calls as the overlap state) with its own second series (Cb) over
//! 2·ratio slots; entry 0 has no previous window (those slots get weight 0).

use super::ops::{rmsnorm, rope};

/// One compressor's parameters.
pub struct CompParams {
    /// Weight stem prefix: `layers.L.attn.compressor` or `layers.L.attn.indexer.compressor`.
    pub stem: String,
    pub ratio: usize,
    /// 2 for ratio 4 (overlapping series), else 1.
    pub coff: usize,
    /// Entry width (`head_dim` or `index_head_dim`).
    pub dim: usize,
    /// `ape` `[ratio, coff · dim]` (transformers `position_bias`).
    pub ape: Vec<f32>,
    /// `norm.weight` `[dim]` (transformers `kv_norm`).
    pub norm: Vec<f32>,
}

/// One closed window's first series: kv rows and gate rows (with `ape`).
type Series = (Vec<Vec<f32>>, Vec<Vec<f32>>);

/// Buffered tokens, the previous window's first series, and the entries emitted so far.
#[derive(Default, Clone)]
pub struct CompCache {
    buf_kv: Vec<Vec<f32>>,
    buf_gate: Vec<Vec<f32>>,
    overlap: Option<Series>,
    pub entries: Vec<Vec<f32>>,
}

impl CompCache {
    pub fn buffered(&self) -> usize {
        self.buf_kv.len()
    }

    /// The state's arrays, named as in `.megakv` (docs/mega.md §12.2), in [`state_shapes`]'s
    /// order: buffered kv rows, buffered gate rows, the previous window's first series (ratio-4
    /// compressors), emitted entries.
    pub(super) fn arrays(&self, p: &CompParams) -> Vec<(&'static str, &[Vec<f32>])> {
        let mut out = vec![
            ("buffer_kv", self.buf_kv.as_slice()),
            ("buffer_gate", self.buf_gate.as_slice()),
        ];
        if p.coff == 2 {
            let (kv, gate) = self
                .overlap
                .as_ref()
                .map_or((&[][..], &[][..]), |(k, g)| (k.as_slice(), g.as_slice()));
            out.push(("overlap_kv", kv));
            out.push(("overlap_gate", gate));
        }
        out.push(("entries", self.entries.as_slice()));
        out
    }

    /// The inverse of [`CompCache::arrays`]: `arrays` in the same order.
    pub(super) fn from_arrays(p: &CompParams, arrays: Vec<Vec<Vec<f32>>>) -> Self {
        let mut it = arrays.into_iter();
        let mut next = || it.next().unwrap_or_default();
        let (buf_kv, buf_gate) = (next(), next());
        let overlap = if p.coff == 2 {
            let (kv, gate) = (next(), next());
            (!kv.is_empty()).then_some((kv, gate))
        } else {
            None
        };
        Self {
            buf_kv,
            buf_gate,
            overlap,
            entries: next(),
        }
    }
}

/// The shape (name, rows, columns) of each of [`CompCache::arrays`] after `positions` tokens: a
/// function of the compressor and the count alone, since every window of `ratio` tokens emits.
pub(super) fn state_shapes(p: &CompParams, positions: usize) -> Vec<(&'static str, usize, usize)> {
    let (r, w) = (p.ratio.max(1), p.coff * p.dim);
    let buffered = positions % r;
    let mut out = vec![("buffer_kv", buffered, w), ("buffer_gate", buffered, w)];
    if p.coff == 2 {
        let rows = if positions >= r { r } else { 0 };
        out.push(("overlap_kv", rows, p.dim));
        out.push(("overlap_gate", rows, p.dim));
    }
    out.push(("entries", positions / r, p.dim));
    out
}

fn emit(p: &CompParams, cache: &mut CompCache, inv_freq: &[f32], eps: f64) {
    let d = p.dim;
    let kv = std::mem::take(&mut cache.buf_kv);
    let gate = std::mem::take(&mut cache.buf_gate);
    let mut entry = vec![0f32; d];
    let mut logits = Vec::with_capacity(2 * p.ratio);
    let mut values = Vec::with_capacity(2 * p.ratio);
    for (c, e) in entry.iter_mut().enumerate() {
        logits.clear();
        values.clear();
        // the current window's series: the second one when two are projected
        let cur = (p.coff - 1) * d + c;
        if p.coff == 2 {
            if let Some((okv, ogate)) = &cache.overlap {
                for (k, g) in okv.iter().zip(ogate) {
                    values.push(f64::from(k[c]));
                    logits.push(f64::from(g[c]));
                }
            }
        }
        for (k, g) in kv.iter().zip(&gate) {
            values.push(f64::from(k[cur]));
            logits.push(f64::from(g[cur]));
        }
        super::ops::softmax(&mut logits);
        // transformers rounds the f32 softmax weights before the product; the sum is f32 there.
        *e = logits
            .iter()
            .zip(&values)
            .map(|(w, v)| f64::from(*w as f32) * v)
            .sum::<f64>() as f32;
    }
    if p.coff == 2 {
        let first = |rows: &[Vec<f32>]| rows.iter().map(|r| r[..d].to_vec()).collect::<Vec<_>>();
        cache.overlap = Some((first(&kv), first(&gate)));
    }
    let mut entry = rmsnorm(&entry, Some(&p.norm), eps);
    let pos = cache.entries.len() * p.ratio;
    rope(&mut entry, inv_freq, pos, false);
    cache.entries.push(entry);
}

/// Feeds `tokens` rows of `kv` and `gate` (each `coff · dim` wide) through the compressor,
/// emitting an entry at every full window. Returns how many entries were emitted.
pub fn update(
    p: &CompParams,
    cache: &mut CompCache,
    kv: &[f32],
    gate: &[f32],
    tokens: usize,
    inv_freq: &[f32],
    eps: f64,
) -> usize {
    let w = p.coff * p.dim;
    let before = cache.entries.len();
    for t in 0..tokens {
        let slot = cache.buf_kv.len();
        let g: Vec<f32> = gate[t * w..(t + 1) * w]
            .iter()
            .zip(&p.ape[slot * w..(slot + 1) * w])
            .map(|(a, b)| a + b)
            .collect();
        cache.buf_kv.push(kv[t * w..(t + 1) * w].to_vec());
        cache.buf_gate.push(g);
        if cache.buf_kv.len() == p.ratio {
            emit(p, cache, inv_freq, eps);
        }
    }
    cache.entries.len() - before
}
