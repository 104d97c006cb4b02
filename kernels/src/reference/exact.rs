//! f64 variants of the non-matmul references (sequential sums, f64 transcendental maths), for an
//! exact CPU forward that judges the f32 kernels; `matvec_f64` lives with the matmul references.

use super::ops::AttentionShape;
use crate::error::KernelError;
use crate::params::RopeMode;

/// RMSNorm in f64: y = x / sqrt(Σ x² / n + eps) · w, per row of `w.len()`.
pub fn rmsnorm_f64(x: &[f64], w: &[f64], eps: f64) -> Result<Vec<f64>, KernelError> {
    let n = w.len();
    if n == 0 || x.len() % n != 0 {
        return Err(KernelError::Shape {
            what: "rmsnorm input length",
            value: x.len(),
            reason: "must be a positive multiple of the weight length",
        });
    }
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks_exact(n) {
        let ms = row.iter().map(|v| v * v).sum::<f64>() / n as f64;
        let inv = 1.0 / (ms + eps).sqrt();
        y.extend(row.iter().zip(w).map(|(v, g)| v * inv * g));
    }
    Ok(y)
}

/// RoPE in f64 at the given positions, angles computed in f64 (no table).
pub fn rope_f64(
    v: &mut [f64],
    positions: &[u32],
    n_heads: usize,
    head_dim: usize,
    rot_dim: usize,
    base: f64,
    mode: RopeMode,
) -> Result<(), KernelError> {
    let per_token = n_heads.checked_mul(head_dim).unwrap_or(0);
    if rot_dim > head_dim || rot_dim % 2 != 0 || per_token == 0 {
        return Err(KernelError::Shape {
            what: "rot_dim",
            value: rot_dim,
            reason: "must be even and at most head_dim, with n_heads and head_dim positive",
        });
    }
    if v.len() != positions.len() * per_token {
        return Err(KernelError::Elements {
            what: "rope input",
            expected: positions.len() * per_token,
            actual: v.len(),
        });
    }
    let half = rot_dim / 2;
    for (th, head) in v.chunks_exact_mut(head_dim).enumerate() {
        let pos = f64::from(positions.get(th / n_heads).copied().unwrap_or(0));
        for i in 0..half {
            let theta = pos * base.powf(-2.0 * i as f64 / rot_dim as f64);
            let (s, c) = theta.sin_cos();
            let (ia, ib) = match mode {
                RopeMode::HalfSplit => (i, i + half),
                RopeMode::Interleaved => (2 * i, 2 * i + 1),
            };
            let a = head.get(ia).copied().unwrap_or(0.0);
            let b = head.get(ib).copied().unwrap_or(0.0);
            if let Some(slot) = head.get_mut(ia) {
                *slot = a * c - b * s;
            }
            if let Some(slot) = head.get_mut(ib) {
                *slot = a * s + b * c;
            }
        }
    }
    Ok(())
}

/// Causal GQA attention in f64 (see [`super::attention`] for the layout); `s.scale` is widened.
pub fn attention_f64(
    s: &AttentionShape,
    q: &[f64],
    k_cache: &[f64],
    v_cache: &[f64],
) -> Result<Vec<f64>, KernelError> {
    if s.n_kv_heads == 0 || s.n_heads % s.n_kv_heads != 0 || s.pos0 + s.tokens > s.capacity {
        return Err(KernelError::Shape {
            what: "n_kv_heads",
            value: s.n_kv_heads,
            reason: "must divide n_heads, and pos0 + tokens must fit the cache",
        });
    }
    let hd = s.head_dim;
    let kv_len = s.capacity * s.n_kv_heads * hd;
    if q.len() != s.tokens * s.n_heads * hd || k_cache.len() != kv_len || v_cache.len() != kv_len {
        return Err(KernelError::Elements {
            what: "attention inputs",
            expected: s.tokens * s.n_heads * hd,
            actual: q.len(),
        });
    }
    let group = s.n_heads / s.n_kv_heads;
    let at = |buf: &[f64], i: usize| buf.get(i).copied().unwrap_or(0.0);
    let mut out = vec![0f64; q.len()];
    for t in 0..s.tokens {
        for h in 0..s.n_heads {
            let kvh = h / group;
            let qb = (t * s.n_heads + h) * hd;
            let scores: Vec<f64> = (0..=s.pos0 + t)
                .map(|p| {
                    let kb = (p * s.n_kv_heads + kvh) * hd;
                    (0..hd)
                        .map(|i| at(q, qb + i) * at(k_cache, kb + i))
                        .sum::<f64>()
                        * f64::from(s.scale)
                })
                .collect();
            let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
            let total: f64 = e.iter().sum();
            for i in 0..hd {
                let o: f64 = e
                    .iter()
                    .enumerate()
                    .map(|(p, w)| w * at(v_cache, (p * s.n_kv_heads + kvh) * hd + i))
                    .sum();
                if let Some(slot) = out.get_mut(qb + i) {
                    *slot = o / total;
                }
            }
        }
    }
    Ok(out)
}

/// SwiGLU in f64.
pub fn swiglu_f64(gate: &[f64], up: &[f64]) -> Vec<f64> {
    gate.iter()
        .zip(up)
        .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
        .collect()
}

/// Softmax of rows of n in f64, in place.
pub fn softmax_f64(v: &mut [f64], n: usize) {
    if n == 0 {
        return;
    }
    for row in v.chunks_mut(n) {
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut total = 0.0;
        for x in row.iter_mut() {
            *x = (*x - m).exp();
            total += *x;
        }
        row.iter_mut().for_each(|x| *x /= total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference;

    fn wide(v: &[f32]) -> Vec<f64> {
        v.iter().map(|&x| f64::from(x)).collect()
    }

    fn close(a: &[f32], b: &[f64], tol: f64) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (f64::from(*x) - y).abs() <= tol,
                "index {i}: f32 {x}, f64 {y}"
            );
        }
    }

    #[test]
    fn f64_variants_agree_with_the_f32_references() {
        let x: Vec<f32> = (0..96)
            .map(|i| ((i * 37 % 19) as f32 - 9.0) / 4.0)
            .collect();
        let w: Vec<f32> = (0..48).map(|i| 0.5 + (i % 5) as f32 / 8.0).collect();
        close(
            &reference::rmsnorm(&x, &w, 1e-5).expect("f32"),
            &rmsnorm_f64(&wide(&x), &wide(&w), 1e-5).expect("f64"),
            1e-5,
        );
        let positions = [3u32, 200];
        for mode in [RopeMode::HalfSplit, RopeMode::Interleaved] {
            let mut a = x.clone();
            let table = reference::rope_table(&positions, 16, 10000.0);
            reference::rope(&mut a, &table, 3, 16, 16, mode).expect("f32");
            let mut b = wide(&x);
            rope_f64(&mut b, &positions, 3, 16, 16, 10000.0, mode).expect("f64");
            close(&a, &b, 1e-5);
        }
        let mut a = x.clone();
        reference::softmax(&mut a, 48).expect("f32");
        let mut b = wide(&x);
        softmax_f64(&mut b, 48);
        close(&a, &b, 1e-6);
        close(
            &reference::swiglu(&x, &x).expect("f32"),
            &swiglu_f64(&wide(&x), &wide(&x)),
            1e-5,
        );
        let s = AttentionShape {
            n_heads: 4,
            n_kv_heads: 2,
            head_dim: 8,
            tokens: 2,
            pos0: 1,
            capacity: 3,
            scale: 0.35,
        };
        let q = &x[..64];
        let kv: Vec<f32> = x.iter().chain(&x).take(48).copied().collect();
        close(
            &reference::attention(&s, q, &kv, &kv).expect("f32"),
            &attention_f64(&s, &wide(q), &wide(&kv), &wide(&kv)).expect("f64"),
            1e-5,
        );
    }
}
