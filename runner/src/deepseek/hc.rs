//! Manifold-constrained hyper-connections (mHC, models.md §2; transformers
//! `DeepseekV4HyperConnection` / `DeepseekV4HyperHead`): the residual is `hc` parallel streams;
//! before each block a learned projection of the RMS-normalised streams gives `pre` (collapse
//! weights, sigmoid + eps), `post` (expansion weights, 2·sigmoid) and `comb` (an `hc × hc` mixing
//! matrix: softmax + eps, then Sinkhorn-Knopp to doubly stochastic); after the block the streams
//! become `post[k] · out + Σ_j comb[j][k] · streams[j]`.

use super::ops::{rmsnorm, sigmoid};

/// One mixer's parameters: `fn` `[(2+hc)·hc, hc·D]`, `base` `[(2+hc)·hc]`, `scale` `[3]`.
pub struct HcParams {
    pub weight: Vec<f32>,
    pub base: Vec<f32>,
    pub scale: Vec<f32>,
}

/// What one mixer produces for one token.
pub struct HcOut {
    pub post: Vec<f64>,
    /// Row-major `comb[j][k]`.
    pub comb: Vec<f64>,
    /// The collapsed block input `Σ_i pre[i] · streams[i]`.
    pub collapsed: Vec<f32>,
}

fn project(weight: &[f32], flat: &[f32], rows: usize) -> Vec<f64> {
    let k = flat.len();
    (0..rows)
        .map(|r| {
            weight
                .get(r * k..(r + 1) * k)
                .map_or(0.0, |w| super::linear::dot(w, flat))
        })
        .collect()
}

fn collapse(streams: &[f32], pre: &[f64], d: usize) -> Vec<f32> {
    (0..d)
        .map(|c| {
            pre.iter()
                .enumerate()
                .map(|(i, &p)| p * f64::from(streams[i * d + c]))
                .sum::<f64>() as f32
        })
        .collect()
}

/// The mixer for one token's streams (`hc · d` values, stream-major).
pub fn mix(
    p: &HcParams,
    streams: &[f32],
    hc: usize,
    iters: usize,
    eps: f64,
    norm_eps: f64,
) -> HcOut {
    let d = streams.len() / hc;
    let flat = rmsnorm(streams, None, norm_eps);
    let m = project(&p.weight, &flat, (2 + hc) * hc);
    let s = |i: usize| f64::from(p.scale.get(i).copied().unwrap_or(0.0));
    let b = |i: usize| f64::from(p.base.get(i).copied().unwrap_or(0.0));
    let pre: Vec<f64> = (0..hc).map(|i| sigmoid(m[i] * s(0) + b(i)) + eps).collect();
    let post: Vec<f64> = (0..hc)
        .map(|i| 2.0 * sigmoid(m[hc + i] * s(1) + b(hc + i)))
        .collect();
    let mut comb = vec![0f64; hc * hc];
    for j in 0..hc {
        let row: Vec<f64> = (0..hc)
            .map(|k| m[2 * hc + j * hc + k] * s(2) + b(2 * hc + j * hc + k))
            .collect();
        let mx = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|v| (v - mx).exp()).collect();
        let sum: f64 = e.iter().sum();
        for k in 0..hc {
            comb[j * hc + k] = e[k] / sum + eps;
        }
    }
    let col_norm = |c: &mut [f64]| {
        for k in 0..hc {
            let s: f64 = (0..hc).map(|j| c[j * hc + k]).sum();
            for j in 0..hc {
                c[j * hc + k] /= s + eps;
            }
        }
    };
    let row_norm = |c: &mut [f64]| {
        for j in 0..hc {
            let s: f64 = (0..hc).map(|k| c[j * hc + k]).sum();
            for k in 0..hc {
                c[j * hc + k] /= s + eps;
            }
        }
    };
    col_norm(&mut comb);
    for _ in 1..iters {
        row_norm(&mut comb);
        col_norm(&mut comb);
    }
    HcOut {
        collapsed: collapse(streams, &pre, d),
        post,
        comb,
    }
}

/// The streams after a block: `post[k] · out + Σ_j comb[j][k] · streams[j]`.
pub fn expand(o: &HcOut, out: &[f32], streams: &[f32], hc: usize) -> Vec<f32> {
    let d = out.len();
    let mut next = vec![0f32; hc * d];
    for k in 0..hc {
        for c in 0..d {
            let mut v = o.post[k] * f64::from(out[c]);
            for j in 0..hc {
                v += o.comb[j * hc + k] * f64::from(streams[j * d + c]);
            }
            next[k * d + c] = v as f32;
        }
    }
    next
}

/// The final collapse (`hc_head_fn` `[hc, hc·D]`, `hc_head_base` `[hc]`, `hc_head_scale` `[1]`).
pub fn head(p: &HcParams, streams: &[f32], hc: usize, eps: f64, norm_eps: f64) -> Vec<f32> {
    let d = streams.len() / hc;
    let flat = rmsnorm(streams, None, norm_eps);
    let m = project(&p.weight, &flat, hc);
    let s = f64::from(p.scale.first().copied().unwrap_or(0.0));
    let pre: Vec<f64> = (0..hc)
        .map(|i| sigmoid(m[i] * s + f64::from(p.base.get(i).copied().unwrap_or(0.0))) + eps)
        .collect();
    collapse(streams, &pre, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sinkhorn_makes_comb_doubly_stochastic() {
        let hc = 4;
        let d = 8;
        let weight: Vec<f32> = (0..(2 + hc) * hc * hc * d)
            .map(|i| ((i * 37 % 101) as f32 / 101.0 - 0.5) * 0.3)
            .collect();
        let base: Vec<f32> = (0..(2 + hc) * hc)
            .map(|i| (i % 5) as f32 * 0.2 - 0.4)
            .collect();
        let p = HcParams {
            weight,
            base,
            scale: vec![0.1, 0.2, 0.9],
        };
        let streams: Vec<f32> = (0..hc * d).map(|i| (i as f32 * 0.7).sin()).collect();
        let o = mix(&p, &streams, hc, 20, 1e-6, 1e-6);
        for k in 0..hc {
            let col: f64 = (0..hc).map(|j| o.comb[j * hc + k]).sum();
            let row: f64 = (0..hc).map(|j| o.comb[k * hc + j]).sum();
            assert!((col - 1.0).abs() < 1e-5, "column {k} sums to {col}");
            assert!((row - 1.0).abs() < 1e-3, "row {k} sums to {row}");
        }
        assert!(o.post.iter().all(|&p| p > 0.0 && p < 2.0));
    }

    /// The device kernels' f32 references (`kernels::reference::hc_mix` / `hc_expand`, which
    /// `hc_mix.wgsl` / `hc_expand.wgsl` are tested against) compute this module's f64 forward:
    /// the mixer's pre/post/comb, the normalised collapsed input, the head and the expansion.
    #[test]
    fn the_device_kernels_references_compute_this_forward() {
        use kernels::reference::{self as kref, HcWeights};
        let (hc, d, iters, eps) = (4, 96, 20, 1e-6);
        let wave = |n: usize, a: f32, f: f32| -> Vec<f32> {
            (0..n)
                .map(|i| ((i as f32 * f).sin() + 0.3 * (i as f32 * 0.37).cos()) * a)
                .collect()
        };
        let p = HcParams {
            weight: wave((2 + hc) * hc * hc * d, 0.05, 0.731),
            base: wave((2 + hc) * hc, 0.5, 1.3),
            scale: vec![0.3, 0.6, 1.1],
        };
        let norm = wave(d, 1.0, 0.19);
        let streams = wave(hc * d, 2.0, 0.053);
        let want = mix(&p, &streams, hc, iters, eps, eps);
        let want_x = rmsnorm(&want.collapsed, Some(&norm), eps);
        let w = HcWeights {
            wfn: &p.weight,
            base: &p.base,
            scale: &p.scale,
            norm: &norm,
        };
        let got = kref::hc_mix(&streams, w, hc, iters, false, eps as f32, eps as f32)
            .expect("reference mixer");
        let close = |a: f64, b: f64, what: &str| {
            assert!((a - b).abs() <= 1e-6 + 1e-5 * b.abs(), "{what}: {a} vs {b}");
        };
        for i in 0..hc {
            close(f64::from(got.mix[hc + i]), want.post[i], "post");
        }
        for (i, &c) in want.comb.iter().enumerate() {
            close(f64::from(got.mix[2 * hc + i]), c, "comb");
        }
        for (a, b) in got.x.iter().zip(&want_x) {
            close(f64::from(*a), f64::from(*b), "x");
        }
        // the expansion of a block output with these coefficients
        let out = wave(d, 1.0, 0.41);
        let want_next = expand(&want, &out, &streams, hc);
        let mut next = streams.clone();
        kref::hc_expand(&got.mix, &out, &mut next, hc).expect("reference expansion");
        for (a, b) in next.iter().zip(&want_next) {
            close(f64::from(*a), f64::from(*b), "expanded streams");
        }
        // the head: pre over hc rows, then the final norm
        let hp = HcParams {
            weight: wave(hc * hc * d, 0.05, 0.29),
            base: wave(hc, 0.5, 0.7),
            scale: vec![0.8],
        };
        let want_head = rmsnorm(&head(&hp, &streams, hc, eps, eps), Some(&norm), eps);
        let hw = HcWeights {
            wfn: &hp.weight,
            base: &hp.base,
            scale: &hp.scale,
            norm: &norm,
        };
        let got_head = kref::hc_mix(&streams, hw, hc, iters, true, eps as f32, eps as f32)
            .expect("reference head");
        for (a, b) in got_head.x.iter().zip(&want_head) {
            close(f64::from(*a), f64::from(*b), "head");
        }
    }
}
