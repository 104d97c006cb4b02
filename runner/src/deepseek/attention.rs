//! V4 attention for a chunk of tokens (models.md §2; transformers `DeepseekV4Attention`):
//! low-rank query (`wq_a` → `q_norm` → `wq_b`, then a per-head unweighted RMSNorm), one shared
//! key = value head (`wkv` → `kv_norm`), partial interleaved RoPE on the trailing `rope_dim`
//! channels, a per-head sink logit in the softmax, the output's rope slice de-rotated at the
//! query position, and the grouped low-rank output projection (`wo_a` per group, then `wo_b`).
//!
//! Keys are the last `sliding_window` positions (the cache keeps `window − 1` between calls) plus,
//! on compressed layers, the compressor's entries: HCA attends every entry w with
//! `w < (pos + 1) / 128`; CSA attends only the ≤ `index_topk` causal entries the lightning
//! indexer scores highest (`Σ_h w_h · relu(q_h · k)`). Every query reads its keys in position
//! order (window, then entries by index), so a decode step computes exactly what a longer prefill
//! computes for that position.

use std::collections::VecDeque;

use super::chain::{Input, Link};
use super::compress::{update, CompCache, CompParams};
use super::config::{LayerKind, V4Config};
use super::error::V4Error;
use super::linear::{Linears, Results};
use super::ops::{rmsnorm, rope, softmax};

/// One layer's small attention parameters (matrices go through [`Linears`] by stem).
pub struct AttnParams {
    pub kind: LayerKind,
    /// `layers.L.attn`.
    pub stem: String,
    pub q_norm: Vec<f32>,
    pub kv_norm: Vec<f32>,
    pub sinks: Vec<f32>,
    pub comp: Option<CompParams>,
    pub indexer: Option<CompParams>,
}

/// One layer's decode state.
#[derive(Default, Clone)]
pub struct AttnCache {
    window: VecDeque<(usize, Vec<f32>)>,
    pub comp: CompCache,
    pub idx: CompCache,
}

impl AttnCache {
    /// The sliding window's keys, oldest first (consecutive positions ending at the last fed).
    pub(super) fn window_keys(&self) -> Vec<Vec<f32>> {
        self.window.iter().map(|(_, k)| k.clone()).collect()
    }

    /// A state whose window holds `keys` for the positions ending at `positions - 1`.
    pub(super) fn from_parts(
        positions: usize,
        keys: Vec<Vec<f32>>,
        comp: CompCache,
        idx: CompCache,
    ) -> Self {
        let first = positions.saturating_sub(keys.len());
        Self {
            window: keys
                .into_iter()
                .enumerate()
                .map(|(i, k)| (first + i, k))
                .collect(),
            comp,
            idx,
        }
    }
}

/// What the hard paths did (so tests can assert they ran).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PathStats {
    /// Compressed entries emitted by ratio-4 compressors.
    pub csa_entries: u64,
    /// Compressed entries emitted by ratio-128 compressors.
    pub hca_entries: u64,
    /// CSA queries for which the indexer dropped at least one causal entry.
    pub indexer_dropped: u64,
    /// Queries whose sliding window excluded at least one earlier position.
    pub window_evicted: u64,
}

/// Indexer choice for one query: the causal entries (`< causal`) it keeps, ascending.
fn select(scores: &[f64], causal: usize, topk: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..causal.min(scores.len())).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    order.truncate(topk);
    order.sort_unstable();
    order
}

/// The RoPE rows a one-token step on the device reads (the `v4_*.wgsl` kernels' table), in the
/// host's angles: row 0 the main frequencies at the position, row 1 the compressed ones there,
/// then per compressor ratio the compressed frequencies at the position of the entry this step
/// closes (row 0's angles where it closes none: never read).
pub struct StepRope {
    pub table: Vec<f32>,
    pub pairs: usize,
    ratios: Vec<usize>,
}

/// (cos, sin) of `freq` at `pos`, as [`rope`] computes them, rounded to f32.
fn rope_row(freq: &[f32], pos: usize) -> Vec<f32> {
    freq.iter()
        .flat_map(|&f| {
            let (s, c) = f64::from(pos as f32 * f).sin_cos();
            [c as f32, s as f32]
        })
        .collect()
}

impl StepRope {
    pub fn new(c: &V4Config, pos: usize) -> Self {
        let mut ratios: Vec<usize> = c
            .kinds
            .iter()
            .filter(|k| **k != LayerKind::Sliding)
            .map(|k| k.ratio())
            .chain(c.kinds.contains(&LayerKind::Csa).then_some(4))
            .collect();
        ratios.sort_unstable();
        ratios.dedup();
        let mut table = rope_row(&c.main_inv_freq, pos);
        table.extend(rope_row(&c.compress_inv_freq, pos));
        for &r in &ratios {
            let closes = (pos + 1) % r == 0;
            let at = if closes { (pos + 1 - r) / r * r } else { pos };
            table.extend(rope_row(&c.compress_inv_freq, at));
        }
        Self {
            table,
            pairs: c.main_inv_freq.len(),
            ratios,
        }
    }

    /// The row a layer of `kind` rotates its query and keys with.
    pub fn query_row(kind: LayerKind) -> u32 {
        u32::from(kind != LayerKind::Sliding)
    }

    /// The row of the entry a compressor of `ratio` closes at this step.
    pub fn entry_row(&self, ratio: usize) -> Option<u32> {
        let i = self.ratios.iter().position(|&r| r == ratio)?;
        u32::try_from(2 + i).ok()
    }
}

/// One token's attention block on the device (docs/runner-deepseek-v4.md "Attention on the
/// device"): the input projections of [`Input::Block`] as one chain that reads nothing, then
/// the backend's [`super::residual::Residual::attend`] (the compressors, the indexer and the
/// attention over its key ring and entries), then `wo_a`'s groups over the heads it wrote and
/// `wo_b`, whose output stays where [`super::residual::BlockOut::Product`] finds it.
pub fn forward_device(
    c: &V4Config,
    p: &AttnParams,
    l: &mut dyn Linears,
    layer: usize,
    pos: usize,
    rope: &StepRope,
    stats: &mut PathStats,
) -> Result<(), V4Error> {
    let (h, hd, d) = (c.heads, c.head_dim, c.hidden);
    let s = &p.stem;
    let link = |stem: String, rows: usize| Link::new(stem, rows, Input::Block, 1).internal();
    let mut links = vec![
        link(format!("{s}.wq_a"), c.q_lora),
        link(format!("{s}.wkv"), hd),
    ];
    for cp in [&p.comp, &p.indexer].into_iter().flatten() {
        let w = cp.coff * cp.dim;
        links.push(link(format!("{}.wkv", cp.stem), w));
        links.push(link(format!("{}.wgate", cp.stem), w));
    }
    if p.indexer.is_some() {
        links.push(link(format!("{s}.indexer.weights_proj"), c.index_heads));
    }
    let qr = Input::RmsNorm {
        of: 0,
        weight: &p.q_norm,
        eps: c.eps,
    };
    links.push(Link::new(format!("{s}.wq_b"), h * hd, qr.clone(), 1).internal());
    if p.indexer.is_some() {
        let rows = c.index_heads * c.index_head_dim;
        links.push(Link::new(format!("{s}.indexer.wq_b"), rows, qr, 1).internal());
    }
    l.linear_chain(&links)?;
    let residual = l
        .residual()
        .ok_or_else(|| V4Error::Input(format!("{s}: this backend keeps no device residual")))?;
    residual.attend(c, layer, p, pos, rope)?;
    count_paths(c, p, pos, stats);
    let g = c.o_groups;
    let per = h * hd / g.max(1);
    let mut links: Vec<Link<'_>> = (0..g)
        .map(|gi| Link {
            stem: format!("{s}.wo_a"),
            rows: gi * c.o_lora..(gi + 1) * c.o_lora,
            input: Input::Heads(gi * per..(gi + 1) * per),
            tokens: 1,
            read: false,
        })
        .collect();
    links.push(Link::new(format!("{s}.wo_b"), d, Input::Concat((0..g).collect()), 1).internal());
    l.linear_chain(&links)?;
    Ok(())
}

/// [`PathStats`] of one token at `pos` through layer `p`, as the host forward counts them.
fn count_paths(c: &V4Config, p: &AttnParams, pos: usize, stats: &mut PathStats) {
    if pos + 1 > c.window {
        stats.window_evicted += 1;
    }
    if let Some(cp) = &p.comp {
        if (pos + 1) % cp.ratio.max(1) == 0 {
            match p.kind {
                LayerKind::Csa => stats.csa_entries += 1,
                _ => stats.hca_entries += 1,
            }
        }
    }
    if p.indexer.is_some() && (pos + 1) / 4 > c.index_topk {
        stats.indexer_dropped += 1;
    }
}

/// The lightning indexer's score of each of `entries` for one query: `q` its heads (rotated),
/// `w` their weights: `Σ_h relu(q_h · e) / sqrt(dim) · w_h / sqrt(heads)`.
pub(super) fn index_scores(q: &[f32], w: &[f32], entries: &[Vec<f32>]) -> Vec<f64> {
    let ih = w.len().max(1);
    let ihd = q.len() / ih;
    entries
        .iter()
        .map(|e| {
            q.chunks_exact(ihd.max(1))
                .zip(w)
                .map(|(qh, &wh)| {
                    let dotv = super::linear::dot(qh, e).max(0.0);
                    dotv / (ihd as f64).sqrt() * (f64::from(wh) / (ih as f64).sqrt())
                })
                .sum()
        })
        .collect()
}

/// One query's attention: each head of `q` (normalised and rotated, `sinks.len()` heads) over
/// `keys` (which are also the values) with its sink logit in the softmax, the output rotated
/// back at `pos`.
pub(super) fn attend(
    q: &[f32],
    keys: &[&[f32]],
    sinks: &[f32],
    scale: f64,
    freq: &[f32],
    pos: usize,
) -> Vec<f32> {
    let hd = q.len() / sinks.len().max(1);
    let mut out = vec![0f32; q.len()];
    for (hh, (qh, o)) in q.chunks_exact(hd).zip(out.chunks_exact_mut(hd)).enumerate() {
        let mut logits: Vec<f64> = keys
            .iter()
            .map(|k| super::linear::dot(qh, k) * scale)
            .collect();
        logits.push(f64::from(sinks.get(hh).copied().unwrap_or(0.0)));
        softmax(&mut logits);
        let mut acc = vec![0f64; hd];
        for (k, &pw) in keys.iter().zip(&logits) {
            for (a, &kv) in acc.iter_mut().zip(k.iter()) {
                *a += pw * f64::from(kv);
            }
        }
        for (oo, a) in o.iter_mut().zip(&acc) {
            *oo = *a as f32;
        }
        rope(o, freq, pos, true);
    }
    out
}

/// Runs the attention block on `tokens` normalised inputs `x` (the host's, or one token's
/// [`Input::Block`] on the device) at positions `pos0..`. Its output comes back to the host
/// unless `x` is the device's block input: then it stays where the backend keeps `wo_b`'s
/// output ([`super::residual::BlockOut::Product`]) and the result is empty.
#[allow(clippy::too_many_arguments)]
pub fn forward(
    c: &V4Config,
    p: &AttnParams,
    cache: &mut AttnCache,
    l: &mut dyn Linears,
    x: Input<'_>,
    pos0: usize,
    tokens: usize,
    stats: &mut PathStats,
) -> Result<Vec<f32>, V4Error> {
    let on_device = x == Input::Block;
    let (h, hd, d) = (c.heads, c.head_dim, c.hidden);
    let freq = c.inv_freq(p.kind);
    let s = &p.stem;
    // Every product of the normalised input, then those of the normalised query LoRA (`wq_a`'s
    // output through `q_norm`): one chain, so one device round trip where it runs on the device.
    let host = |stem: String, rows: usize| Link::new(stem, rows, x.clone(), tokens);
    let mut links = vec![
        host(format!("{s}.wq_a"), c.q_lora).internal(),
        host(format!("{s}.wkv"), hd),
    ];
    for cp in [&p.comp, &p.indexer].into_iter().flatten() {
        let w = cp.coff * cp.dim;
        links.push(host(format!("{}.wkv", cp.stem), w));
        links.push(host(format!("{}.wgate", cp.stem), w));
    }
    let (ih, ihd) = (c.index_heads, c.index_head_dim);
    if p.indexer.is_some() {
        links.push(host(format!("{s}.indexer.weights_proj"), ih));
    }
    let qr = Input::RmsNorm {
        of: 0,
        weight: &p.q_norm,
        eps: c.eps,
    };
    links.push(Link::new(format!("{s}.wq_b"), h * hd, qr.clone(), tokens));
    if p.indexer.is_some() {
        links.push(Link::new(format!("{s}.indexer.wq_b"), ih * ihd, qr, tokens));
    }
    // (the first output, `wq_a`'s, is not read back)
    let mut ys = Results::of(l.linear_chain(&links)?.into_iter().skip(1).collect());
    let kv_raw = ys.take()?;
    let comp_out = match &p.comp {
        Some(_) => Some((ys.take()?, ys.take()?)),
        None => None,
    };
    let idx_out = match &p.indexer {
        Some(_) => Some((ys.take()?, ys.take()?, ys.take()?)),
        None => None,
    };
    let mut q = ys.take()?;
    let iq = match &p.indexer {
        Some(_) => Some(ys.take()?),
        None => None,
    };
    for (i, head) in q.chunks_exact_mut(hd).enumerate() {
        let mut v = rmsnorm(head, None, c.eps);
        rope(&mut v, freq, pos0 + i / h, false);
        head.copy_from_slice(&v);
    }
    for (i, row) in kv_raw.chunks_exact(hd).enumerate() {
        let mut k = rmsnorm(row, Some(&p.kv_norm), c.eps);
        rope(&mut k, freq, pos0 + i, false);
        cache.window.push_back((pos0 + i, k));
    }
    // Compressed entries of this chunk (emitted before any query reads them, as transformers).
    if let (Some(cp), Some((kv, g))) = (&p.comp, &comp_out) {
        let n = update(
            cp,
            &mut cache.comp,
            kv,
            g,
            tokens,
            &c.compress_inv_freq,
            c.eps,
        ) as u64;
        match p.kind {
            LayerKind::Csa => stats.csa_entries += n,
            _ => stats.hca_entries += n,
        }
    }
    // Indexer choices per query (CSA only).
    let mut chosen: Vec<Vec<usize>> = Vec::new();
    if let (Some(ip), Some((kv, g, wts)), Some(mut iq)) = (&p.indexer, &idx_out, iq) {
        update(
            ip,
            &mut cache.idx,
            kv,
            g,
            tokens,
            &c.compress_inv_freq,
            c.eps,
        );
        for (i, head) in iq.chunks_exact_mut(ihd).enumerate() {
            rope(head, &c.compress_inv_freq, pos0 + i / ih, false);
        }
        let entries = &cache.idx.entries;
        for t in 0..tokens {
            let causal = (pos0 + t + 1) / 4;
            let qt = &iq[t * ih * ihd..(t + 1) * ih * ihd];
            let scores = index_scores(
                qt,
                &wts[t * ih..(t + 1) * ih],
                &entries[..causal.min(entries.len())],
            );
            let pick = select(&scores, causal, c.index_topk);
            if pick.len() < causal.min(entries.len()) {
                stats.indexer_dropped += 1;
            }
            chosen.push(pick);
        }
    }
    // Attention per query and head.
    let scale = 1.0 / (hd as f64).sqrt();
    let mut out = vec![0f32; tokens * h * hd];
    let window: Vec<&(usize, Vec<f32>)> = cache.window.iter().collect();
    for t in 0..tokens {
        let pos = pos0 + t;
        let lo = (pos + 1).saturating_sub(c.window);
        if lo > 0 {
            stats.window_evicted += 1;
        }
        let mut keys: Vec<&[f32]> = window
            .iter()
            .filter(|(kp, _)| *kp >= lo && *kp <= pos)
            .map(|(_, k)| k.as_slice())
            .collect();
        match p.kind {
            LayerKind::Sliding => {}
            LayerKind::Hca => {
                let causal = (pos + 1) / 128;
                keys.extend(cache.comp.entries.iter().take(causal).map(Vec::as_slice));
            }
            LayerKind::Csa => {
                let pick = chosen.get(t).map(Vec::as_slice).unwrap_or(&[]);
                keys.extend(
                    pick.iter()
                        .filter_map(|&i| cache.comp.entries.get(i))
                        .map(Vec::as_slice),
                );
            }
        }
        let heads = &q[t * h * hd..(t + 1) * h * hd];
        let o = attend(heads, &keys, &p.sinks, scale, freq, pos);
        out[t * h * hd..(t + 1) * h * hd].copy_from_slice(&o);
    }
    while cache.window.len() > c.window.saturating_sub(1) {
        cache.window.pop_front();
    }
    // Grouped output projection: group g's heads through rows g·o_lora.. of wo_a.
    let g = c.o_groups;
    let per = h * hd / g;
    let xs: Vec<Vec<f32>> = (0..g)
        .map(|gi| {
            (0..tokens)
                .flat_map(|t| {
                    out[t * h * hd + gi * per..t * h * hd + (gi + 1) * per]
                        .iter()
                        .copied()
                })
                .collect()
        })
        .collect();
    // The groups' products, then `wo_b` over their outputs side by side: one chain.
    let mut links: Vec<Link<'_>> = xs
        .iter()
        .enumerate()
        .map(|(gi, xg)| Link {
            stem: format!("{s}.wo_a"),
            rows: gi * c.o_lora..(gi + 1) * c.o_lora,
            input: Input::Host(xg),
            tokens,
            read: false,
        })
        .collect();
    let wo_b = Link::new(
        format!("{s}.wo_b"),
        d,
        Input::Concat((0..g).collect()),
        tokens,
    );
    links.push(if on_device { wo_b.internal() } else { wo_b });
    l.linear_chain(&links)?
        .pop()
        .ok_or_else(|| V4Error::Input(format!("{s}.wo_b: the chain returned no output")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernels::reference::{self as kref, AttendKeys};

    fn wave(n: usize, a: f32, f: f32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as f32 * f).sin() + 0.3 * (i as f32 * 0.37).cos()) * a)
            .collect()
    }

    /// The RoPE row the device kernels read for `freq` at `pos` (as [`StepRope`] fills it).
    fn row(freq: &[f32], pos: usize) -> Vec<f32> {
        rope_row(freq, pos)
    }

    fn close(what: &str, got: &[f32], want: &[f32], rel: f32) {
        assert_eq!(got.len(), want.len(), "{what}");
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!(
                (a - b).abs() <= rel * (1.0 + b.abs()),
                "{what} [{i}]: {a} vs {b}"
            );
        }
    }

    /// The attention kernels' f32 references (`kernels::reference::{v4_attend, v4_index_scores,
    /// v4_index_topk}`, which the `.wgsl` kernels are tested against) compute this module's f64
    /// forward of one query: the key and query norms and rotations, the window, the compressed
    /// entries (the first n, or the indexer's choice) and the sink, the rotation back.
    #[test]
    fn the_attention_kernels_references_compute_this_forward() {
        let c = V4Config::parse(
            super::super::config::parse_tests::base()
                .to_string()
                .as_bytes(),
            "config.json",
        )
        .expect("config");
        let (h, hd) = (c.heads, c.head_dim);
        let freq = c.inv_freq(LayerKind::Csa);
        let window = c.window;
        let entries: Vec<Vec<f32>> = (0..9)
            .map(|i| wave(hd, 0.8, 0.1 + i as f32 * 0.07))
            .collect();
        let flat: Vec<f32> = entries.concat();
        let kv_norm = wave(hd, 1.0, 0.23);
        let sinks = wave(h, 1.0, 1.3);
        let scale = 1.0 / (hd as f64).sqrt();
        for (pos, list) in [
            (0usize, None),
            (3, Some(vec![])),
            (window + 5, Some(vec![1u32, 4, 8])),
        ] {
            let lo = (pos + 1).saturating_sub(window);
            let q = wave(h * hd, 2.0, 0.05 + pos as f32 * 0.01);
            let kv = wave(hd, 1.5, 0.31);
            let mut ring = wave(window * hd, 0.9, 0.019);
            // host: the normalised, rotated query heads and key; the window's keys from the ring
            let mut qh = Vec::new();
            for head in q.chunks_exact(hd) {
                let mut v = rmsnorm(head, None, c.eps);
                rope(&mut v, freq, pos, false);
                qh.extend(v);
            }
            let mut key = rmsnorm(&kv, Some(&kv_norm), c.eps);
            rope(&mut key, freq, pos, false);
            let mut keys: Vec<&[f32]> = (lo..pos)
                .map(|p| &ring[(p % window) * hd..(p % window + 1) * hd])
                .collect();
            keys.push(&key);
            let seen: Vec<usize> = match &list {
                None => Vec::new(),
                Some(l) if l.is_empty() => (0..entries.len()).collect(),
                Some(l) => l.iter().map(|&i| i as usize).collect(),
            };
            keys.extend(seen.iter().map(|&i| entries[i].as_slice()));
            let want = attend(&qh, &keys, &sinks, scale, freq, pos);
            let seen = match &list {
                None => None,
                Some(l) if l.is_empty() => Some((entries.len(), None)),
                Some(l) => Some((l.len(), Some(l.as_slice()))),
            };
            let keys = AttendKeys {
                window,
                lo,
                pos,
                entries: &flat,
                seen,
            };
            let got = kref::v4_attend(
                &q,
                &kv,
                &kv_norm,
                &sinks,
                &row(freq, pos),
                &mut ring,
                keys,
                c.eps as f32,
                scale as f32,
            )
            .expect("reference");
            close(&format!("pos {pos}"), &got, &want, 2e-5);
            close("ring", &ring[(pos % window) * hd..][..hd], &key, 1e-6);
        }
        // the indexer: scores and choice
        let (ih, ihd) = (4, hd);
        let iq = wave(ih * ihd, 1.0, 0.043);
        let w = wave(ih, 1.0, 0.9);
        let pos = 37;
        let mut rotated = iq.clone();
        for head in rotated.chunks_exact_mut(ihd) {
            rope(head, freq, pos, false);
        }
        let want = index_scores(&rotated, &w, &entries);
        let got = kref::v4_index_scores(&iq, &w, &flat, &row(freq, pos), ih, ihd, entries.len())
            .expect("reference");
        let want32: Vec<f32> = want.iter().map(|&v| v as f32).collect();
        close("scores", &got, &want32, 1e-5);
        for k in [1, 3, 9, 12] {
            let picks: Vec<u32> = select(&want, entries.len(), k)
                .iter()
                .map(|&i| i as u32)
                .collect();
            assert_eq!(kref::v4_index_topk(&got, k), picks, "top {k}");
        }
    }

    /// The compressor kernel's reference (`kernels::reference::v4_compress`) emits
    /// `compress::update`'s entries, window after window, for two overlapping series (CSA) and
    /// one (HCA).
    #[test]
    fn the_compressor_kernels_reference_computes_this_forward() {
        use super::super::compress::{update, CompCache, CompParams};
        use kernels::reference::CompressShape;
        let eps = 1e-6;
        for (ratio, coff, dim, pairs) in [(4usize, 2usize, 64usize, 8usize), (8, 1, 32, 4)] {
            let w = coff * dim;
            let p = CompParams {
                stem: "c".into(),
                ratio,
                coff,
                dim,
                ape: wave(ratio * w, 0.5, 0.11),
                norm: wave(dim, 1.0, 0.29),
            };
            let freq: Vec<f32> = (0..pairs).map(|i| 1.0 / (1.0 + i as f32)).collect();
            let sh = CompressShape { ratio, coff, dim };
            let mut cache = CompCache::default();
            let mut state = vec![0f32; sh.state_len()];
            let windows = 3;
            let mut entries = vec![0f32; windows * dim];
            for t in 0..windows * ratio {
                let kv = wave(w, 1.5, 0.05 + t as f32 * 0.013);
                let gate = wave(w, 2.0, 0.07 + t as f32 * 0.017);
                update(&p, &mut cache, &kv, &gate, 1, &freq, eps);
                let (slot, n) = (t % ratio, t / ratio);
                let r = row(&freq, n * ratio);
                let emit = (slot == ratio - 1).then_some((n, r.as_slice()));
                kref::v4_compress(
                    sh,
                    &kv,
                    &gate,
                    &p.ape,
                    &p.norm,
                    &mut state,
                    &mut entries,
                    slot,
                    emit,
                    eps as f32,
                )
                .expect("reference");
            }
            assert_eq!(cache.entries.len(), windows);
            close(
                &format!("ratio {ratio}"),
                &entries,
                &cache.entries.concat(),
                2e-5,
            );
        }
    }
}
