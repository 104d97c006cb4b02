//! CPU references of the DeepSeek V4 block kernels: the mHC step (`hc_mix.wgsl`: the MoE's
//! weighted sum, the expansion and the next mixer or the head's collapse, [`hc_step`] of
//! [`moe_combine`], [`hc_expand`] and [`hc_mix`]) and the MoE router (`moe_route.wgsl`), each in
//! its kernel's order (the header of each `.wgsl` file).

use super::{elements, lane_dot_chunked, lane_dot_tree_chunked};
use crate::error::KernelError;

/// The streams (`hc_mult`) the mHC kernels take: a constant of theirs (`hc_mix.wgsl` says why).
/// The references take 1 to 4.
pub const MAX_HC: usize = 4;
/// Most routed experts and picks the router kernel takes.
pub const MAX_EXPERTS: usize = 512;
pub const MAX_TOP_K: usize = 16;

fn shape(what: &'static str, value: usize, reason: &'static str) -> KernelError {
    KernelError::Shape {
        what,
        value,
        reason,
    }
}

/// One mHC mixer's (or the head's) small parameters, f32 as the kernel binds them.
#[derive(Debug, Clone, Copy)]
pub struct HcWeights<'a> {
    /// `fn` [rows, hc · d].
    pub wfn: &'a [f32],
    /// `base` [rows].
    pub base: &'a [f32],
    /// `scale` [3] (mixer) or [1] (head).
    pub scale: &'a [f32],
    /// The RMSNorm weight applied to the collapsed streams [d].
    pub norm: &'a [f32],
}

/// What [`hc_mix`] computes: `mix` = [pre hc | post hc | comb hc·hc] (the head: pre only) and
/// the normalised collapsed input `x` [d].
#[derive(Debug, Clone, PartialEq)]
pub struct HcMixed {
    pub mix: Vec<f32>,
    pub x: Vec<f32>,
}

fn sigmoid(v: f32) -> f32 {
    1.0 / (1.0 + (-v).exp())
}

/// The mixer part of `hc_mix.wgsl` for `streams` [hc · d]; `head`: the head's collapse (pre
/// only).
#[allow(clippy::too_many_arguments)]
pub fn hc_mix(
    streams: &[f32],
    w: HcWeights<'_>,
    hc: usize,
    iters: usize,
    head: bool,
    eps: f32,
    norm_eps: f32,
) -> Result<HcMixed, KernelError> {
    if hc == 0 || hc > MAX_HC || streams.len() % (4 * hc) != 0 {
        return Err(shape(
            "hc",
            hc,
            "must be 1 to 4, the streams hc rows of 4·m",
        ));
    }
    let n = streams.len();
    let d = n / hc;
    let rows = if head { hc } else { (2 + hc) * hc };
    elements("hc fn", rows * n, w.wfn.len())?;
    elements("hc base", rows, w.base.len())?;
    elements("hc scale", if head { 1 } else { 3 }, w.scale.len())?;
    elements("hc norm", d, w.norm.len())?;
    let ss = lane_dot_tree_chunked(n / 4, 4, |i| (streams[i], streams[i]));
    let inv = 1.0 / (ss / n as f32 + norm_eps).sqrt();
    let m: Vec<f32> = (0..rows)
        .map(|r| lane_dot_chunked(n / 4, 4, |i| (w.wfn[r * n + i], streams[i] * inv)))
        .collect();
    let mut coef = vec![0f32; rows];
    for i in 0..hc {
        coef[i] = sigmoid(m[i] * w.scale[0] + w.base[i]) + eps;
    }
    if !head {
        for i in 0..hc {
            coef[hc + i] = 2.0 * sigmoid(m[hc + i] * w.scale[1] + w.base[hc + i]);
        }
        sinkhorn(
            &mut coef[2 * hc..],
            &m[2 * hc..],
            &w.base[2 * hc..],
            w.scale[2],
            hc,
            iters,
            eps,
        );
    }
    let mut x: Vec<f32> = (0..d)
        .map(|c| (0..hc).fold(0f32, |v, i| coef[i].mul_add(streams[i * d + c], v)))
        .collect();
    let ss2 = lane_dot_tree_chunked(d / 4, 4, |c| (x[c], x[c]));
    let inv2 = 1.0 / (ss2 / d as f32 + norm_eps).sqrt();
    for (v, g) in x.iter_mut().zip(w.norm) {
        *v = (*v * inv2) * g;
    }
    Ok(HcMixed { mix: coef, x })
}

/// `comb`: the row softmax of `m · scale + base` plus eps, then Sinkhorn-Knopp (the column
/// normalisation, then `iters − 1` times rows then columns).
fn sinkhorn(
    comb: &mut [f32],
    m: &[f32],
    base: &[f32],
    scale: f32,
    hc: usize,
    iters: usize,
    eps: f32,
) {
    for j in 0..hc {
        let row = j * hc..(j + 1) * hc;
        let mut mx = f32::NEG_INFINITY;
        for r in row.clone() {
            comb[r] = m[r] * scale + base[r];
            mx = mx.max(comb[r]);
        }
        let mut sum = 0f32;
        for r in row.clone() {
            comb[r] = (comb[r] - mx).exp();
            sum += comb[r];
        }
        for r in row {
            comb[r] = comb[r] / sum + eps;
        }
    }
    let columns = |c: &mut [f32]| {
        for k in 0..hc {
            let sum = (0..hc).fold(0f32, |s, j| s + c[j * hc + k]);
            for j in 0..hc {
                c[j * hc + k] /= sum + eps;
            }
        }
    };
    columns(comb);
    for _ in 1..iters {
        for j in 0..hc {
            let sum = (0..hc).fold(0f32, |s, k| s + comb[j * hc + k]);
            for k in 0..hc {
                comb[j * hc + k] /= sum + eps;
            }
        }
        columns(comb);
    }
}

/// The expansion part of `hc_mix.wgsl`: the streams after a block whose output is `out` [d],
/// with the coefficients `mix` of the mixer before the block.
pub fn hc_expand(
    mix: &[f32],
    out: &[f32],
    streams: &mut [f32],
    hc: usize,
) -> Result<(), KernelError> {
    if hc == 0 || hc > MAX_HC {
        return Err(shape("hc", hc, "must be 1 to 4"));
    }
    let d = out.len();
    elements("hc_expand streams", hc * d, streams.len())?;
    elements("hc_expand mix", (2 + hc) * hc, mix.len())?;
    for c in 0..d {
        let s: Vec<f32> = (0..hc).map(|j| streams[j * d + c]).collect();
        for k in 0..hc {
            let mut v = mix[hc + k] * out[c];
            for (j, sj) in s.iter().enumerate() {
                v = mix[2 * hc + j * hc + k].mul_add(*sj, v);
            }
            streams[k * d + c] = v;
        }
    }
    Ok(())
}

/// torch's softplus (threshold 20) then sqrt, as `moe_route.wgsl` computes it in f32.
pub fn sqrt_softplus(v: f32) -> f32 {
    if v > 20.0 {
        return v.sqrt();
    }
    let u = (-v.abs()).exp();
    let log1p = if u < 1e-4 {
        u - 0.5 * u * u
    } else {
        (1.0 + u).ln()
    };
    (v.max(0.0) + log1p).sqrt()
}

/// How the router picks: the top-k of score + bias, or a `tid2eid` row.
#[derive(Debug, Clone, Copy)]
pub enum Pick<'a> {
    TopK { bias: &'a [f32] },
    Table { table: &'a [u32], token: u32 },
}

/// `moe_route.wgsl`: the picked experts in ascending id, with their weights.
pub fn moe_route(
    logits: &[f32],
    pick: Pick<'_>,
    top_k: usize,
    scale: f32,
) -> Result<(Vec<u32>, Vec<f32>), KernelError> {
    let n = logits.len();
    if n == 0 || n > MAX_EXPERTS {
        return Err(shape("experts", n, "must be 1 to 512"));
    }
    if top_k == 0 || top_k > MAX_TOP_K.min(n) {
        return Err(shape(
            "top_k",
            top_k,
            "must be 1 to 16 and at most the experts",
        ));
    }
    let score: Vec<f32> = logits.iter().map(|&l| sqrt_softplus(l)).collect();
    let mut picked: Vec<usize> = match pick {
        Pick::Table { table, token } => {
            let row = token as usize * top_k;
            let r = table.get(row..row + top_k).ok_or(KernelError::TokenId {
                id: token,
                position: 0,
                vocab: table.len() / top_k,
            })?;
            r.iter().map(|&e| (e as usize).min(n - 1)).collect()
        }
        Pick::TopK { bias } => {
            elements("router bias", n, bias.len())?;
            let biased: Vec<f32> = score.iter().zip(bias).map(|(s, b)| s + b).collect();
            let mut picked: Vec<usize> = Vec::with_capacity(top_k);
            for _ in 0..top_k {
                let mut best: Option<usize> = None;
                for e in (0..n).filter(|e| !picked.contains(e)) {
                    if best.is_none_or(|b| biased[e] > biased[b]) {
                        best = Some(e);
                    }
                }
                picked.push(best.unwrap_or(0));
            }
            picked
        }
    };
    let sum = picked.iter().fold(0f32, |s, &e| s + score[e]) + 1e-20;
    picked.sort_unstable();
    let weights = picked.iter().map(|&e| score[e] / sum * scale).collect();
    Ok((picked.into_iter().map(|e| e as u32).collect(), weights))
}

/// The block output of `hc_mix.wgsl`'s expansion: Σ_j ys[j] · w[j] (each product rounded) +
/// ys[k], per channel, for `ys` [k + 1, d] (the MoE: the picks' outputs, then the shared
/// expert's; k = 0: the row itself).
pub fn moe_combine(ys: &[f32], w: &[f32]) -> Result<Vec<f32>, KernelError> {
    let rows = w.len() + 1;
    if ys.is_empty() || ys.len() % rows != 0 {
        return Err(shape("moe_combine outputs", ys.len(), "must be k + 1 rows"));
    }
    let d = ys.len() / rows;
    Ok((0..d)
        .map(|c| {
            let acc = w
                .iter()
                .enumerate()
                .fold(0f32, |acc, (j, &wj)| acc + ys[j * d + c] * wj);
            acc + ys[w.len() * d + c]
        })
        .collect())
}

/// What a block left for the expansion: the coefficients of the mixer before it, and its output
/// as [`moe_combine`] takes it.
#[derive(Debug, Clone, Copy)]
pub struct After<'a> {
    pub mix: &'a [f32],
    pub ys: &'a [f32],
    pub w: &'a [f32],
}

/// `hc_mix.wgsl` whole: with `after`, the expansion of `streams` (in place) with the block's
/// output, then [`hc_mix`].
#[allow(clippy::too_many_arguments)]
pub fn hc_step(
    streams: &mut [f32],
    after: Option<After<'_>>,
    w: HcWeights<'_>,
    hc: usize,
    iters: usize,
    head: bool,
    eps: f32,
    norm_eps: f32,
) -> Result<HcMixed, KernelError> {
    if let Some(a) = after {
        let out = moe_combine(a.ys, a.w)?;
        hc_expand(a.mix, &out, streams, hc)?;
    }
    hc_mix(streams, w, hc, iters, head, eps, norm_eps)
}
