//! Plain scalar CPU references of every kernel, in pure Rust. Each f32 reference performs the same
//! operations in the same order as its WGSL kernel (lane partials over k = l, l + 64, … with
//! `mul_add`, then the lane-order fold for matmul or the fixed tree for the other reductions), so on an adapter with fused `fma` the two agree to the bit; the
//! `*_f64` variants are plain sequential f64 sums for judging the f32 results.

mod decode;
mod exact;
mod gguf_blocks;
mod matmul;
mod ops;
mod v4;
mod v4_attn;

pub use decode::{bf16_to_f32, e2m1_to_f32, e4m3_to_f32, e8m0_to_f32, f16_to_f32, WeightMatrix};
pub use exact::{attention_f64, rmsnorm_f64, rope_f64, softmax_f64, swiglu_f64};
pub use matmul::{matmul, matvec, matvec_f64};
pub use ops::{
    argmax, attention, embedding, rmsnorm, rope, rope_table, silu, softmax, swiglu, swiglu_clamped,
    AttentionShape,
};
pub use v4::{
    hc_expand, hc_mix, hc_step, moe_combine, moe_route, sqrt_softplus, After, HcMixed, HcWeights,
    Pick, MAX_EXPERTS, MAX_HC, MAX_TOP_K,
};
pub use v4_attn::{
    rotate, v4_attend, v4_compress, v4_index_scores, v4_index_topk, AttendKeys, CompressShape,
    MAX_ATTN_DIM, MAX_ATTN_KEYS, MAX_INDEX_HEADS,
};

use crate::error::KernelError;
use crate::{WeightFormat, LANES};

/// `Ok` when `actual` is `expected`, else the [`KernelError::Elements`] naming `what`.
pub(crate) fn elements(
    what: &'static str,
    expected: usize,
    actual: usize,
) -> Result<(), KernelError> {
    if expected == actual {
        Ok(())
    } else {
        Err(KernelError::Elements {
            what,
            expected,
            actual,
        })
    }
}

/// The first byte of the block holding element `k` of row `r` (rows of `k_len` elements) of a
/// block format, by the one block table ([`WeightFormat::block`]) the WGSL modules and
/// `artifact::gguf` are held against (`tests/block_layouts.rs`).
pub(crate) fn block_base(format: WeightFormat, r: usize, k_len: usize, k: usize) -> usize {
    let (elems, bytes) = format.block().unwrap_or((1, 0));
    r * (k_len / elems) * bytes + (k / elems) * bytes
}

/// Folds `LANES` partial sums with the kernels' tree: partial[l] += partial[l + s] for
/// s = LANES/2, …, 1; returns partial[0].
pub fn tree_sum(partial: &mut [f32; LANES as usize]) -> f32 {
    let mut s = LANES as usize / 2;
    while s > 0 {
        for l in 0..s {
            partial[l] += partial[l + s];
        }
        s /= 2;
    }
    partial[0]
}

/// Adds `LANES` partial sums in lane order, (((p0 + p1) + p2) + … + p63): the matmul kernels'
/// final step (one barrier, then lane 0 folds the partials).
pub fn lane_order_sum(partial: &[f32; LANES as usize]) -> f32 {
    partial.iter().skip(1).fold(partial[0], |acc, p| acc + p)
}

/// Σ a(i)·b(i) for i in 0..n in the matmul kernels' order: lane l accumulates i = l, l + LANES, …
/// with `acc = a.mul_add(b, acc)`, then [`lane_order_sum`].
pub fn lane_dot(n: usize, term: impl FnMut(usize) -> (f32, f32)) -> f32 {
    lane_order_sum(&lane_partials(n, 1, term))
}

/// [`lane_dot`] over `chunks` chunks of `len` terms: lane l takes chunks c = l, l + LANES, … and
/// inside a chunk the terms c·len .. c·len + len in order (the GGUF matmul kernels' order).
pub fn lane_dot_chunked(chunks: usize, len: usize, term: impl FnMut(usize) -> (f32, f32)) -> f32 {
    lane_order_sum(&lane_partials(chunks, len, term))
}

/// [`lane_dot_tree`] over `chunks` chunks of `len` terms (lane l takes chunks l, l + LANES, …,
/// a chunk's terms in order): the order of the vec4 reductions of `hc_mix.wgsl`.
pub fn lane_dot_tree_chunked(
    chunks: usize,
    len: usize,
    term: impl FnMut(usize) -> (f32, f32),
) -> f32 {
    tree_sum(&mut lane_partials(chunks, len, term))
}

/// Σ a(i)·b(i) with the lanes folded by [`tree_sum`] (the order RMSNorm uses for Σ x²).
pub fn lane_dot_tree(n: usize, term: impl FnMut(usize) -> (f32, f32)) -> f32 {
    tree_sum(&mut lane_partials(n, 1, term))
}

fn lane_partials(
    chunks: usize,
    len: usize,
    mut term: impl FnMut(usize) -> (f32, f32),
) -> [f32; LANES as usize] {
    let mut partial = [0f32; LANES as usize];
    for (l, slot) in partial.iter_mut().enumerate() {
        let mut acc = 0f32;
        let mut c = l;
        while c < chunks {
            for i in 0..len {
                let (a, b) = term(c * len + i);
                acc = a.mul_add(b, acc);
            }
            c += LANES as usize;
        }
        *slot = acc;
    }
    partial
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_sum_is_the_documented_pairing() {
        // with 64 lanes holding 1, 2, 4, … the tree is exact; check the pairing via rounding:
        // lane 0 = 1e8, lane 32 = -1e8, lane 1 = 1: the tree adds lane 32 to lane 0 first (→ 0),
        // then lane 1 → 1. A left-to-right sum would give (1e8 + 1) - 1e8 = 0 in f32.
        let mut p = [0f32; 64];
        p[0] = 1e8;
        p[32] = -1e8;
        p[1] = 1.0;
        assert_eq!(tree_sum(&mut p), 1.0);
        let left_to_right = (1e8f32 + 1.0) + -1e8;
        assert_eq!(left_to_right, 0.0);
    }

    /// The negative control of the streamed == resident identity: splitting the reduction axis
    /// (two K halves summed afterwards) changes the bits, which is why tiles hold whole rows.
    #[test]
    fn splitting_k_changes_the_bits() {
        let mut seed = 0x1234_5678_u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            (seed as f32 / u32::MAX as f32) * 2.0 - 1.0
        };
        let k = 256;
        let mut differing = 0;
        for _ in 0..50 {
            let a: Vec<f32> = (0..k).map(|_| next()).collect();
            let b: Vec<f32> = (0..k).map(|_| next()).collect();
            let whole = lane_dot(k, |i| (a[i], b[i]));
            let h = k / 2;
            let halves = lane_dot(h, |i| (a[i], b[i])) + lane_dot(h, |i| (a[h + i], b[h + i]));
            if whole.to_bits() != halves.to_bits() {
                differing += 1;
            }
        }
        assert!(differing > 0, "a K split never changed the bits in 50 rows");
    }

    #[test]
    fn lane_order_sum_folds_left_to_right() {
        // lane 0 = 1e8, lane 1 = 1, lane 32 = -1e8: (1e8 + 1) rounds to 1e8, so the left fold gives
        // 0 where the tree gives 1 — the two orders are distinguishable, and matmul uses this one.
        let mut p = [0f32; 64];
        p[0] = 1e8;
        p[32] = -1e8;
        p[1] = 1.0;
        assert_eq!(lane_order_sum(&p), 0.0);
        assert_eq!(tree_sum(&mut p.clone()), 1.0);
    }

    #[test]
    fn lane_dot_of_small_vectors_is_exact() {
        let a = [1.0f32, 2.0, 3.0, 4.0, 5.0];
        let b = [0.5f32, -1.0, 2.0, 0.25, 4.0];
        // 0.5 - 2 + 6 + 1 + 20 = 25.5
        assert_eq!(lane_dot(5, |i| (a[i], b[i])), 25.5);
        assert_eq!(lane_dot(0, |_| (1.0, 1.0)), 0.0);
    }
}
