//! CPU references of the DeepSeek V4 attention kernels of one query token: a KV compressor's
//! step (`v4_compress.wgsl`), the lightning indexer's scores and choice (`v4_index_score.wgsl`,
//! `v4_index_topk.wgsl`) and the attention over the sliding window and the compressed entries
//! (`v4_attend.wgsl`), each in its kernel's order (the header of each `.wgsl` file). A RoPE
//! row is `pairs` (cos, sin) pairs; the rotated channels are the trailing `2 · pairs`.

use super::{elements, lane_dot_tree, tree_sum};
use crate::error::KernelError;
use crate::LANES;

/// Most channels of a compressed entry or head, and most keys a query attends to.
pub const MAX_ATTN_DIM: usize = 1024;
pub const MAX_ATTN_KEYS: usize = 2048;
/// Most indexer heads `v4_index_score` sums (its workgroup array).
pub const MAX_INDEX_HEADS: usize = 256;

fn shape(what: &'static str, value: usize, reason: &'static str) -> KernelError {
    KernelError::Shape {
        what,
        value,
        reason,
    }
}

/// Rotates the trailing pairs of `v` by `row` ((cos, sin) pairs); `back`: the conjugate.
pub fn rotate(v: &mut [f32], row: &[f32], back: bool) {
    let pairs = row.len() / 2;
    let Some(start) = v.len().checked_sub(2 * pairs) else {
        return;
    };
    for i in 0..pairs {
        let (c, s) = (
            row[2 * i],
            if back {
                -row[2 * i + 1]
            } else {
                row[2 * i + 1]
            },
        );
        let (a, b) = (v[start + 2 * i], v[start + 2 * i + 1]);
        v[start + 2 * i] = a * c - b * s;
        v[start + 2 * i + 1] = b * c + a * s;
    }
}

/// `x · inv (· w)` with inv = 1/sqrt(Σ x² / n + eps), Σ in the lanes-then-tree order.
fn norm(x: &[f32], w: Option<&[f32]>, eps: f32) -> Vec<f32> {
    let ss = lane_dot_tree(x.len(), |i| (x[i], x[i]));
    let inv = 1.0 / (ss / x.len() as f32 + eps).sqrt();
    x.iter()
        .enumerate()
        .map(|(i, &v)| match w {
            Some(w) => v * inv * w[i],
            None => v * inv,
        })
        .collect()
}

/// One compressor's shape: `ratio` tokens a window, `coff` series (2: the overlapping ratio-4
/// compressors), entries of `dim` channels.
#[derive(Debug, Clone, Copy)]
pub struct CompressShape {
    pub ratio: usize,
    pub coff: usize,
    pub dim: usize,
}

impl CompressShape {
    /// f32 values of the compressor's state: buffered kv and gates, the overlap's kv and gates.
    pub fn state_len(&self) -> usize {
        2 * self.ratio * self.coff * self.dim + 2 * self.ratio * self.dim
    }
}

/// `v4_compress.wgsl`: buffers the token (`kv`, `gate` + `ape[slot]`) at `slot` of `state`;
/// with `emit` = Some((n, rope row)) pools entry n of the closed window into `entries` row n
/// (then the overlap takes the window's first series when there are two).
#[allow(clippy::too_many_arguments)]
pub fn v4_compress(
    sh: CompressShape,
    kv: &[f32],
    gate: &[f32],
    ape: &[f32],
    norm_w: &[f32],
    state: &mut [f32],
    entries: &mut [f32],
    slot: usize,
    emit: Option<(usize, &[f32])>,
    eps: f32,
) -> Result<(), KernelError> {
    let (r, d) = (sh.ratio, sh.dim);
    let w = sh.coff * d;
    if !(1..=2).contains(&sh.coff) || d > MAX_ATTN_DIM || slot >= r {
        return Err(shape(
            "compressor",
            slot,
            "a slot within 1 or 2 series of ≤ 1024",
        ));
    }
    elements("compressor kv", w, kv.len())?;
    elements("compressor gate", w, gate.len())?;
    elements("compressor ape", r * w, ape.len())?;
    elements("compressor norm", d, norm_w.len())?;
    elements("compressor state", sh.state_len(), state.len())?;
    let gates = r * w;
    for i in 0..w {
        state[slot * w + i] = kv[i];
        state[gates + slot * w + i] = gate[i] + ape[slot * w + i];
    }
    let Some((n, row)) = emit else {
        return Ok(());
    };
    if entries.len() < (n + 1) * d {
        return Err(shape("compressor entries", n, "past the entries buffer"));
    }
    let (ov_kv, ov_gate) = (2 * gates, 2 * gates + r * d);
    let overlap = sh.coff == 2 && n > 0;
    let mut e = vec![0f32; d];
    for (c, out) in e.iter_mut().enumerate() {
        let cur = (sh.coff - 1) * d + c;
        let mut window: Vec<(f32, f32)> = Vec::with_capacity(2 * r);
        if overlap {
            window.extend((0..r).map(|j| (state[ov_gate + j * d + c], state[ov_kv + j * d + c])));
        }
        window.extend((0..r).map(|j| (state[gates + j * w + cur], state[j * w + cur])));
        let m = window.iter().fold(f32::MIN, |m, &(g, _)| m.max(g));
        let (s, acc) = window.iter().fold((0f32, 0f32), |(s, acc), &(g, v)| {
            let x = (g - m).exp();
            (s + x, x.mul_add(v, acc))
        });
        *out = acc / s;
    }
    let mut e = norm(&e, Some(norm_w), eps);
    rotate(&mut e, row, false);
    entries[n * d..(n + 1) * d].copy_from_slice(&e);
    if sh.coff == 2 {
        for j in 0..r {
            for c in 0..d {
                state[ov_kv + j * d + c] = state[j * w + c];
                state[ov_gate + j * d + c] = state[gates + j * w + c];
            }
        }
    }
    Ok(())
}

/// `v4_index_score.wgsl`: the scores of the first `n` entries for the indexer query `q`
/// (`heads` rows of `dim`, unrotated) with head weights `w`.
pub fn v4_index_scores(
    q: &[f32],
    w: &[f32],
    entries: &[f32],
    row: &[f32],
    heads: usize,
    dim: usize,
    n: usize,
) -> Result<Vec<f32>, KernelError> {
    elements("indexer query", heads * dim, q.len())?;
    elements("indexer weights", heads, w.len())?;
    if entries.len() < n * dim || dim == 0 {
        return Err(shape("indexer entries", n, "past the entries buffer"));
    }
    let (qs, ws) = (1.0 / (dim as f32).sqrt(), 1.0 / (heads as f32).sqrt());
    let qr: Vec<Vec<f32>> = q
        .chunks_exact(dim)
        .map(|h| {
            let mut v = h.to_vec();
            rotate(&mut v, row, false);
            v
        })
        .collect();
    Ok((0..n)
        .map(|e| {
            let ent = &entries[e * dim..(e + 1) * dim];
            qr.iter().zip(w).fold(0f32, |total, (qh, &wh)| {
                let dot = qh
                    .iter()
                    .zip(ent)
                    .fold(0f32, |acc, (&a, &b)| a.mul_add(b, acc));
                total + dot.max(0.0) * qs * (wh * ws)
            })
        })
        .collect())
}

/// `v4_index_topk.wgsl`: the `k` highest of `scores` (ties to the lower index; NaN never),
/// their indices ascending; all of them when there are no more than k.
pub fn v4_index_topk(scores: &[f32], k: usize) -> Vec<u32> {
    if scores.len() <= k {
        return (0..scores.len() as u32).collect();
    }
    let mut order: Vec<usize> = (0..scores.len()).filter(|&i| !scores[i].is_nan()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    order.truncate(k);
    order.sort_unstable();
    order.into_iter().map(|i| i as u32).collect()
}

/// Where a query's keys are: the ring's window (`window` slots of `dim`, position p at slot p
/// mod window), and the compressed entries it sees.
#[derive(Debug, Clone, Copy)]
pub struct AttendKeys<'a> {
    pub window: usize,
    /// The first window position seen and the query's position.
    pub lo: usize,
    pub pos: usize,
    pub entries: &'a [f32],
    /// `None`: no entries; `Some(None)`: the first `n`; `Some(Some(list))`: those listed.
    pub seen: Option<(usize, Option<&'a [u32]>)>,
}

/// `v4_attend.wgsl` for one query token: the token's key (`kv` normalised with `kv_norm` and
/// rotated), which goes to ring slot pos mod window; each head's output, rotated back
/// ([heads · dim]).
#[allow(clippy::too_many_arguments)]
pub fn v4_attend(
    q: &[f32],
    kv: &[f32],
    kv_norm: &[f32],
    sinks: &[f32],
    row: &[f32],
    ring: &mut [f32],
    keys: AttendKeys<'_>,
    eps: f32,
    scale: f32,
) -> Result<Vec<f32>, KernelError> {
    let d = kv.len();
    let heads = sinks.len();
    let AttendKeys {
        window, lo, pos, ..
    } = keys;
    if d > MAX_ATTN_DIM || d % 2 != 0 || window == 0 || lo > pos || pos - lo >= window {
        return Err(shape(
            "attention",
            pos,
            "a window within the ring and dim ≤ 1024, even",
        ));
    }
    elements("attention query", heads * d, q.len())?;
    elements("attention ring", window * d, ring.len())?;
    let mut k = norm(kv, Some(kv_norm), eps);
    rotate(&mut k, row, false);
    let mut list: Vec<Vec<f32>> = (lo..pos)
        .map(|p| ring[(p % window) * d..(p % window + 1) * d].to_vec())
        .collect();
    list.push(k.clone());
    if let Some((n, picks)) = keys.seen {
        for j in 0..n {
            let e = match picks {
                Some(l) => *l
                    .get(j)
                    .ok_or_else(|| shape("entry list", j, "too short"))?
                    as usize,
                None => j,
            };
            let ent = keys
                .entries
                .get(e * d..(e + 1) * d)
                .ok_or_else(|| shape("entry", e, "past the entries"))?;
            list.push(ent.to_vec());
        }
    }
    if list.len() > MAX_ATTN_KEYS {
        return Err(shape("keys", list.len(), "at most 2048 a query"));
    }
    let slot = pos % window;
    ring[slot * d..(slot + 1) * d].copy_from_slice(&k);
    let mut out = Vec::with_capacity(heads * d);
    for (h, &sink) in sinks.iter().enumerate() {
        let mut qv = norm(&q[h * d..(h + 1) * d], None, eps);
        rotate(&mut qv, row, false);
        let logits: Vec<f32> = list
            .iter()
            .map(|key| {
                qv.iter()
                    .zip(key)
                    .fold(0f32, |acc, (&a, &b)| a.mul_add(b, acc))
                    * scale
            })
            .collect();
        let m = lane_fold(&logits, f32::MIN, f32::max).max(sink);
        let weights: Vec<f32> = logits.iter().map(|l| (l - m).exp()).collect();
        let total = lane_sum(&weights) + (sink - m).exp();
        let mut o: Vec<f32> = (0..d)
            .map(|c| {
                list.iter()
                    .zip(&weights)
                    .fold(0f32, |acc, (key, &wj)| (wj / total).mul_add(key[c], acc))
            })
            .collect();
        rotate(&mut o, row, true);
        out.extend(o);
    }
    Ok(out)
}

/// The lanes' folds of `v` (lane l: elements l, l + 64, … with `f` from `init`), then the tree
/// with `f`.
fn lane_fold(v: &[f32], init: f32, f: impl Fn(f32, f32) -> f32) -> f32 {
    let n = LANES as usize;
    let mut p: Vec<f32> = (0..n)
        .map(|l| v.iter().skip(l).step_by(n).fold(init, |a, &x| f(a, x)))
        .collect();
    let mut s = n / 2;
    while s > 0 {
        for l in 0..s {
            p[l] = f(p[l], p[l + s]);
        }
        s /= 2;
    }
    p[0]
}

/// Σ v with the lanes' sums (elements l, l + 64, …) folded by the tree.
fn lane_sum(v: &[f32]) -> f32 {
    let mut p = [0f32; LANES as usize];
    for (l, slot) in p.iter_mut().enumerate() {
        *slot = v.iter().skip(l).step_by(LANES as usize).sum();
    }
    tree_sum(&mut p)
}
