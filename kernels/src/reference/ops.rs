//! CPU references of the non-matmul kernels: RMSNorm, RoPE, softmax, attention, SiLU/SwiGLU,
//! embedding lookup and argmax (each mirrors the order documented in its `.wgsl` header).

use super::decode::{q4_1_at, q8_0_at, WeightMatrix};
use super::{elements, lane_dot_tree, tree_sum};
use crate::error::KernelError;
use crate::format::EmbeddingFormat;
use crate::params::RopeMode;
use crate::{ARGMAX_NONE, LANES};

fn product(a: usize, b: usize, what: &'static str) -> Result<usize, KernelError> {
    a.checked_mul(b).ok_or(KernelError::Overflow { what })
}

/// y[t, i] = (x[t, i] · inv) · w[i], inv = 1 / sqrt(Σ x² / n + eps), per token of n values.
pub fn rmsnorm(x: &[f32], w: &[f32], eps: f32) -> Result<Vec<f32>, KernelError> {
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
        let ss = lane_dot_tree(n, |i| {
            let v = row.get(i).copied().unwrap_or(0.0);
            (v, v)
        });
        let inv = 1.0 / (ss / n as f32 + eps).sqrt();
        y.extend(row.iter().zip(w).map(|(v, g)| (v * inv) * g));
    }
    Ok(y)
}

/// (cos θ, sin θ) pairs [positions.len(), rot_dim / 2, 2] with θ = pos · base^(−2i / rot_dim),
/// computed in f64 and rounded to f32 — the table `Kernel::Rope` reads.
pub fn rope_table(positions: &[u32], rot_dim: usize, base: f64) -> Vec<f32> {
    let half = rot_dim / 2;
    let mut t = Vec::with_capacity(positions.len() * half * 2);
    for &pos in positions {
        for i in 0..half {
            let theta = f64::from(pos) * base.powf(-2.0 * i as f64 / rot_dim as f64);
            t.push(theta.cos() as f32);
            t.push(theta.sin() as f32);
        }
    }
    t
}

/// Rotates v [tokens, n_heads, head_dim] in place with `table` from [`rope_table`].
pub fn rope(
    v: &mut [f32],
    table: &[f32],
    n_heads: usize,
    head_dim: usize,
    rot_dim: usize,
    mode: RopeMode,
) -> Result<(), KernelError> {
    if rot_dim > head_dim || rot_dim % 2 != 0 || n_heads == 0 || head_dim == 0 {
        return Err(KernelError::Shape {
            what: "rot_dim",
            value: rot_dim,
            reason: "must be even and at most head_dim, with n_heads and head_dim positive",
        });
    }
    let per_token = product(n_heads, head_dim, "n_heads × head_dim")?;
    let tokens = v.len() / per_token;
    elements("rope input", tokens * per_token, v.len())?;
    let half = rot_dim / 2;
    elements("rope table", tokens * half * 2, table.len())?;
    for (th, head) in v.chunks_exact_mut(head_dim).enumerate() {
        let t = th / n_heads;
        for i in 0..half {
            let (ia, ib) = match mode {
                RopeMode::HalfSplit => (i, i + half),
                RopeMode::Interleaved => (2 * i, 2 * i + 1),
            };
            let c = table.get((t * half + i) * 2).copied().unwrap_or(0.0);
            let s = table.get((t * half + i) * 2 + 1).copied().unwrap_or(0.0);
            let a = head.get(ia).copied().unwrap_or(0.0);
            let b = head.get(ib).copied().unwrap_or(0.0);
            if let Some(slot) = head.get_mut(ia) {
                *slot = a.mul_add(c, -(b * s));
            }
            if let Some(slot) = head.get_mut(ib) {
                *slot = a.mul_add(s, b * c);
            }
        }
    }
    Ok(())
}

/// Softmax of each row of n values, in place.
pub fn softmax(v: &mut [f32], n: usize) -> Result<(), KernelError> {
    if n == 0 || v.len() % n != 0 {
        return Err(KernelError::Shape {
            what: "softmax row length",
            value: n,
            reason: "must be positive and divide the input length",
        });
    }
    for row in v.chunks_exact_mut(n) {
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut partial = [0f32; LANES as usize];
        for (i, x) in row.iter_mut().enumerate() {
            *x = (*x - m).exp();
            if let Some(p) = partial.get_mut(i % LANES as usize) {
                *p += *x;
            }
        }
        let total = tree_sum(&mut partial);
        for x in row.iter_mut() {
            *x /= total;
        }
    }
    Ok(())
}

/// Shapes of one attention call (see `attention.wgsl`).
#[derive(Debug, Clone, Copy)]
pub struct AttentionShape {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub tokens: usize,
    pub pos0: usize,
    pub capacity: usize,
    pub scale: f32,
}

/// Causal GQA attention of q [tokens, n_heads, head_dim] over caches [capacity, n_kv_heads,
/// head_dim]; returns out [tokens, n_heads, head_dim].
pub fn attention(
    s: &AttentionShape,
    q: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
) -> Result<Vec<f32>, KernelError> {
    if s.n_kv_heads == 0 || s.n_heads % s.n_kv_heads != 0 || s.head_dim == 0 {
        return Err(KernelError::Shape {
            what: "n_kv_heads",
            value: s.n_kv_heads,
            reason: "must be positive and divide n_heads, with head_dim positive",
        });
    }
    if s.pos0 + s.tokens > s.capacity {
        return Err(KernelError::Shape {
            what: "pos0 + tokens",
            value: s.pos0 + s.tokens,
            reason: "exceeds the kv cache capacity",
        });
    }
    let hd = s.head_dim;
    elements("q", s.tokens * s.n_heads * hd, q.len())?;
    elements("k_cache", s.capacity * s.n_kv_heads * hd, k_cache.len())?;
    elements("v_cache", s.capacity * s.n_kv_heads * hd, v_cache.len())?;
    let group = s.n_heads / s.n_kv_heads;
    let mut out = vec![0f32; q.len()];
    let at = |buf: &[f32], i: usize| buf.get(i).copied().unwrap_or(0.0);
    for t in 0..s.tokens {
        let n_ctx = s.pos0 + t + 1;
        for h in 0..s.n_heads {
            let kvh = h / group;
            let qb = (t * s.n_heads + h) * hd;
            let mut scores: Vec<f32> = (0..n_ctx)
                .map(|p| {
                    let kb = (p * s.n_kv_heads + kvh) * hd;
                    let mut d = 0f32;
                    for i in 0..hd {
                        d = at(q, qb + i).mul_add(at(k_cache, kb + i), d);
                    }
                    d * s.scale
                })
                .collect();
            let m = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut partial = [0f32; LANES as usize];
            for (p, sc) in scores.iter_mut().enumerate() {
                *sc = (*sc - m).exp();
                if let Some(slot) = partial.get_mut(p % LANES as usize) {
                    *slot += *sc;
                }
            }
            let total = tree_sum(&mut partial);
            for i in 0..hd {
                let mut o = 0f32;
                for (p, e) in scores.iter().enumerate() {
                    o = e.mul_add(at(v_cache, (p * s.n_kv_heads + kvh) * hd + i), o);
                }
                if let Some(slot) = out.get_mut(qb + i) {
                    *slot = o / total;
                }
            }
        }
    }
    Ok(out)
}

/// SiLU: a / (1 + exp(−a)).
pub fn silu(a: &[f32]) -> Vec<f32> {
    a.iter().map(|&v| v / (1.0 + (-v).exp())).collect()
}

/// SwiGLU: silu(gate) · up.
pub fn swiglu(gate: &[f32], up: &[f32]) -> Result<Vec<f32>, KernelError> {
    elements("up", gate.len(), up.len())?;
    Ok(gate
        .iter()
        .zip(up)
        .map(|(&g, &u)| (g / (1.0 + (-g).exp())) * u)
        .collect())
}

/// SwiGLU with DeepSeek V4's clamp (`activation.wgsl` with `limit_bits` set): silu(min(gate,
/// limit)) · clamp(up, −limit, limit).
pub fn swiglu_clamped(gate: &[f32], up: &[f32], limit: f32) -> Result<Vec<f32>, KernelError> {
    elements("up", gate.len(), up.len())?;
    Ok(gate
        .iter()
        .zip(up)
        .map(|(&g, &u)| {
            let g = g.min(limit);
            (g / (1.0 + (-g).exp())) * u.clamp(-limit, limit)
        })
        .collect())
}

/// Rows `ids` of a [vocab, dim] table, dequantized; an id ≥ vocab is an error here (the kernel
/// writes zeros for it).
pub fn embedding(
    format: EmbeddingFormat,
    table: &[u8],
    vocab: usize,
    dim: usize,
    ids: &[u32],
) -> Result<Vec<f32>, KernelError> {
    let matrix = WeightMatrix::new(format.weight_format(), vocab, dim, table, &[], &[])?;
    let mut out = Vec::with_capacity(ids.len() * dim);
    for (position, &id) in ids.iter().enumerate() {
        let row = id as usize;
        if row >= vocab {
            return Err(KernelError::TokenId {
                id,
                position,
                vocab,
            });
        }
        for k in 0..dim {
            out.push(match format {
                EmbeddingFormat::Q8_0 => q8_0_at(table, row, dim, k),
                EmbeddingFormat::Q4_1 => q4_1_at(table, row, dim, k),
                _ => matrix.get(row, k),
            });
        }
    }
    Ok(out)
}

/// Index of the first maximum of each row of n values; NaN never wins; [`ARGMAX_NONE`] for a row
/// without a comparable value.
pub fn argmax(v: &[f32], n: usize) -> Vec<u32> {
    if n == 0 {
        return Vec::new();
    }
    v.chunks(n)
        .map(|row| {
            let mut best: Option<(usize, f32)> = None;
            for (i, &x) in row.iter().enumerate() {
                match best {
                    None if !x.is_nan() => best = Some((i, x)),
                    Some((_, b)) if x > b => best = Some((i, x)),
                    _ => {}
                }
            }
            best.map_or(ARGMAX_NONE, |(i, _)| i as u32)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rmsnorm_by_hand() {
        // x = [3, 4]: mean square 12.5, eps 0 → inv = 1/sqrt(12.5); w = [1, 2]
        let y = rmsnorm(&[3.0, 4.0], &[1.0, 2.0], 0.0).expect("shape");
        let inv = 1.0 / 12.5f32.sqrt();
        assert_eq!(y, vec![3.0 * inv, (4.0 * inv) * 2.0]);
        assert!(rmsnorm(&[1.0; 3], &[1.0; 2], 0.0).is_err());
    }

    #[test]
    fn rope_pairings_by_hand() {
        // one head of 4, position with θ_0 = π/2 for pair 0 and θ_1 = 0 for pair 1
        let table = [0.0, 1.0, 1.0, 0.0];
        let mut v = [1.0, 2.0, 3.0, 4.0];
        rope(&mut v, &table, 1, 4, 4, RopeMode::HalfSplit).expect("shape");
        // pair (0, 2): (1, 3) → (1·0 − 3·1, 1·1 + 3·0) = (−3, 1); pair (1, 3) unchanged
        assert_eq!(v, [-3.0, 2.0, 1.0, 4.0]);
        let mut v = [1.0, 2.0, 3.0, 4.0];
        rope(&mut v, &table, 1, 4, 4, RopeMode::Interleaved).expect("shape");
        // pair (0, 1): (1, 2) → (−2, 1); pair (2, 3) unchanged
        assert_eq!(v, [-2.0, 1.0, 3.0, 4.0]);
        let t = rope_table(&[0, 1], 4, 10000.0);
        assert_eq!(&t[..4], &[1.0, 0.0, 1.0, 0.0]);
        assert_eq!(t[4], 1f64.cos() as f32);
        assert_eq!(t[7], 0.01f64.sin() as f32);
    }

    #[test]
    fn softmax_by_hand() {
        let mut v = [0.0, 2f32.ln()];
        softmax(&mut v, 2).expect("shape");
        assert!((v[0] - 1.0 / 3.0).abs() < 1e-7 && (v[1] - 2.0 / 3.0).abs() < 1e-7);
    }

    #[test]
    fn attention_single_position_returns_its_value_and_gqa_maps_heads() {
        // capacity 2, 2 query heads over 1 kv head, head_dim 2, one query at position 0
        let s = AttentionShape {
            n_heads: 2,
            n_kv_heads: 1,
            head_dim: 2,
            tokens: 1,
            pos0: 0,
            capacity: 2,
            scale: 1.0,
        };
        let k = [1.0, 0.0, 100.0, 100.0];
        let v = [5.0, -7.0, 1e6, 1e6]; // position 1 is in the future: must be ignored
        let out = attention(&s, &[1.0, 2.0, -3.0, 0.5], &k, &v).expect("shape");
        assert_eq!(out, vec![5.0, -7.0, 5.0, -7.0]);
        // two positions with equal scores average the values
        let s2 = AttentionShape { pos0: 1, ..s };
        let k2 = [1.0, 0.0, 1.0, 0.0];
        let v2 = [2.0, 4.0, 6.0, 8.0];
        let out = attention(&s2, &[1.0, 0.0, 0.0, 1.0], &k2, &v2).expect("shape");
        assert_eq!(out, vec![4.0, 6.0, 4.0, 6.0]);
    }

    #[test]
    fn silu_swiglu_by_hand() {
        assert_eq!(silu(&[0.0]), vec![0.0]);
        assert_eq!(swiglu(&[0.0, 1.0], &[3.0, 2.0]).expect("shape")[0], 0.0);
        let s1 = 1.0 / (1.0 + (-1f32).exp());
        assert_eq!(swiglu(&[1.0], &[2.0]).expect("shape"), vec![s1 * 2.0]);
    }

    #[test]
    fn embedding_rows_and_bad_ids() {
        let table: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let out = embedding(EmbeddingFormat::F32, &table, 2, 2, &[1, 0, 1]).expect("ids fit");
        assert_eq!(out, vec![3.0, 4.0, 1.0, 2.0, 3.0, 4.0]);
        assert!(embedding(EmbeddingFormat::F32, &table, 2, 2, &[2]).is_err());
    }

    #[test]
    fn argmax_first_maximum_and_nan() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, -1.0], 4), vec![1]);
        assert_eq!(argmax(&[f32::NAN, -1.0, f32::NAN], 3), vec![1]);
        assert_eq!(argmax(&[f32::NAN; 2], 2), vec![ARGMAX_NONE]);
        assert_eq!(argmax(&[f32::NEG_INFINITY, f32::NEG_INFINITY], 2), vec![0]);
        assert_eq!(argmax(&[0.0, 5.0, 9.0, 2.0], 2), vec![1, 0]);
    }
}
