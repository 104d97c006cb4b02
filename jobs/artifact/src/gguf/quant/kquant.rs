//! The K-quant super-block encoders Q4_K, Q5_K and Q6_K (256 elements), ports of ggml's
//! `quantize_row_q4_K_ref` / `q5_K_ref` / `q6_K_ref` with their search helpers
//! `make_qkx2_quants` and `make_qx_quants` (no importance matrix: what `llama-quantize --pure`
//! runs), plus the dequantizers used by the tests.
//!
//! Spec: seed 003 §2.2 and §4.2.1; block structs in ../shared/design/formats.md §5.2.
//! Arithmetic: [`FmaContract::Off`] rounds every product and sum separately — the x86-64
//! baseline build (no FMA instructions, so no contraction is possible). [`FmaContract::Fast`]
//! models the contracting aarch64 GCC build the seed measured: `sum_x2 += x*x` fused,
//! `nearest_int(a*b)` folding the product into the magic-constant FMA, `D` fusing its left
//! product and `this_scale` its right one, every other `a*b + c` accumulation fused, and
//! `make_qx_quants`' vectorised candidate loop *not* fused. Only Off is byte-verified here
//! (docs/gguf.md says against what).

use half::f16;

use super::FmaContract;

/// `QK_K`.
pub const QK_K: usize = 256;
pub(super) const GROUP_MAX_EPS: f32 = 1e-15;

#[inline]
pub(super) fn mad(a: f32, b: f32, c: f32, fma: FmaContract) -> f32 {
    match fma {
        FmaContract::Fast => a.mul_add(b, c),
        FmaContract::Off => a * b + c,
    }
}

/// ggml's `nearest_int`: add 1.5·2^23 and read the mantissa (round half to even).
#[inline]
pub(super) fn nearest_int(v: f32) -> i32 {
    let bits = (v + 12_582_912.0f32).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

/// `nearest_int(a*b)`; under Fast the product is not rounded before the magic add.
#[inline]
pub(super) fn nearest_int_mul(a: f32, b: f32, fma: FmaContract) -> i32 {
    match fma {
        FmaContract::Fast => {
            let bits = a.mul_add(b, 12_582_912.0f32).to_bits() as i32;
            (bits & 0x007f_ffff) - 0x0040_0000
        }
        FmaContract::Off => nearest_int(a * b),
    }
}

pub(super) fn put_f16(out: &mut Vec<u8>, v: f32) {
    out.extend_from_slice(&f16::from_f32(v).to_le_bytes());
}

pub(super) fn f16_round(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}

/// `make_qkx2_quants` (n = `x.len()`): returns (scale, the_min) and fills `l`. `use_mad` sums
/// weighted absolute errors instead of squared ones (q2_K).
#[allow(clippy::too_many_arguments)]
pub(super) fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    w: &[f32],
    l: &mut [u8],
    laux: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
    fma: FmaContract,
) -> (f32, f32) {
    let err = |diff: f32| if use_mad { diff.abs() } else { diff * diff };
    let n = x.len();
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = w[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        sum_w += w[i];
        sum_x = mad(w[i], x[i], sum_x, fma);
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l.iter_mut().for_each(|v| *v = 0);
        return (0.0, -min);
    }
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let q = nearest_int_mul(iscale, x[i] - min, fma).clamp(0, nmax);
        l[i] = q as u8;
        let diff = mad(scale, q as f32, min, fma) - x[i];
        best_error = mad(w[i], err(diff), best_error, fma);
    }
    for is in 0..=nstep {
        iscale = (mad(rdelta, is as f32, rmin, fma) + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let q = nearest_int_mul(iscale, x[i] - min, fma).clamp(0, nmax);
            laux[i] = q as u8;
            let qf = q as f32;
            let wl = w[i] * qf;
            sum_l += wl;
            sum_l2 = mad(wl, qf, sum_l2, fma);
            sum_xl = mad(wl, x[i], sum_xl, fma);
        }
        let d = match fma {
            FmaContract::Fast => sum_w.mul_add(sum_l2, -(sum_l * sum_l)),
            FmaContract::Off => sum_w * sum_l2 - sum_l * sum_l,
        };
        if d > 0.0 {
            let (mut this_scale, mut this_min) = match fma {
                FmaContract::Fast => {
                    let a = sum_w * sum_xl;
                    let b = sum_l * sum_xl;
                    (
                        (-sum_x).mul_add(sum_l, a) / d,
                        sum_l2.mul_add(sum_x, -b) / d,
                    )
                }
                FmaContract::Off => (
                    (sum_w * sum_xl - sum_x * sum_l) / d,
                    (sum_l2 * sum_x - sum_l * sum_xl) / d,
                ),
            };
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = mad(this_scale, f32::from(laux[i]), this_min, fma) - x[i];
                cur_error = mad(w[i], err(diff), cur_error, fma);
            }
            if cur_error < best_error {
                l[..n].copy_from_slice(&laux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// `get_scale_min_k4`.
fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// The shared part of Q4_K and Q5_K: per 32-element sub-block scale/min search, 6-bit packed
/// scales, then the final levels in `l` (0..=nmax). Returns (d, dmin, scales).
fn qk_scales(x: &[f32], nmax: i32, l: &mut [u8; QK_K], fma: FmaContract) -> (f32, f32, [u8; 12]) {
    let (rmin, rdelta, nstep) = if nmax == 15 {
        (-1.0f32, 0.1f32, 20)
    } else {
        (-0.5f32, 0.1f32, 15)
    };
    let mut mins = [0f32; QK_K / 32];
    let mut scales = [0f32; QK_K / 32];
    let mut weights = [0f32; 32];
    let mut laux = [0u8; 32];
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for j in 0..QK_K / 32 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 = mad(v, v, sum_x2, fma);
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        for (wl, &v) in weights.iter_mut().zip(xs) {
            *wl = av_x + v.abs();
        }
        let (s, m) = make_qkx2_quants(
            nmax,
            xs,
            &weights,
            &mut l[32 * j..32 * j + 32],
            &mut laux,
            rmin,
            rdelta,
            nstep,
            false,
            fma,
        );
        scales[j] = s;
        mins[j] = m;
        if s > max_scale {
            max_scale = s;
        }
        if m > max_min {
            max_min = m;
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut sc = [0u8; 12];
    for j in 0..QK_K / 32 {
        // (uint8_t)nearest_int(...) then MIN(63, ·): the C truncates to 8 bits first.
        let ls = (nearest_int_mul(inv_scale, scales[j], fma) as u8).min(63);
        let lm = (nearest_int_mul(inv_min, mins[j], fma) as u8).min(63);
        if j < 4 {
            sc[j] = ls;
            sc[j + 4] = lm;
        } else {
            sc[j + 4] = (ls & 0xf) | ((lm & 0xf) << 4);
            sc[j - 4] |= (ls >> 4) << 6;
            sc[j] |= (lm >> 4) << 6;
        }
    }
    let d = f16_round(max_scale / 63.0);
    let dmin = f16_round(max_min / 63.0);
    for j in 0..QK_K / 32 {
        let (s, m) = scale_min_k4(j, &sc);
        let dd = d * f32::from(s);
        if dd == 0.0 {
            continue;
        }
        let dm = dmin * f32::from(m);
        for ii in 0..32 {
            let q = nearest_int((x[32 * j + ii] + dm) / dd).clamp(0, nmax);
            l[32 * j + ii] = q as u8;
        }
    }
    (max_scale / 63.0, max_min / 63.0, sc)
}

/// `quantize_row_q4_K_ref`: 144 bytes per 256 elements.
pub fn quantize_q4_k(x: &[f32], out: &mut Vec<u8>, fma: FmaContract) {
    for xb in x.chunks_exact(QK_K) {
        let mut l = [0u8; QK_K];
        let (d, dmin, sc) = qk_scales(xb, 15, &mut l, fma);
        put_f16(out, d);
        put_f16(out, dmin);
        out.extend_from_slice(&sc);
        for j in (0..QK_K).step_by(64) {
            for i in 0..32 {
                out.push(l[j + i] | (l[j + i + 32] << 4));
            }
        }
    }
}

/// `quantize_row_q5_K_ref`: 176 bytes per 256 elements.
pub fn quantize_q5_k(x: &[f32], out: &mut Vec<u8>, fma: FmaContract) {
    for xb in x.chunks_exact(QK_K) {
        let mut l = [0u8; QK_K];
        let (d, dmin, sc) = qk_scales(xb, 31, &mut l, fma);
        put_f16(out, d);
        put_f16(out, dmin);
        out.extend_from_slice(&sc);
        let mut qh = [0u8; 32];
        let mut ql = [0u8; 128];
        let (mut m1, mut m2) = (1u8, 2u8);
        for (blk, n) in (0..QK_K).step_by(64).enumerate() {
            for j in 0..32 {
                let mut l1 = l[n + j];
                if l1 > 15 {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                let mut l2 = l[n + j + 32];
                if l2 > 15 {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[32 * blk + j] = l1 | (l2 << 4);
            }
            m1 <<= 2;
            m2 <<= 2;
        }
        out.extend_from_slice(&qh);
        out.extend_from_slice(&ql);
    }
}

/// `make_qx_quants` with `rmse_type = 1`, no weights (n = 16): returns the scale and fills `l`
/// with levels 0..2·nmax.
fn make_qx_quants(nmax: i32, x: &[f32], l: &mut [i8], fma: FmaContract) -> f32 {
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l.iter_mut().for_each(|v| *v = 0);
        return 0.0;
    }
    let mut iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (i, &v) in x.iter().enumerate() {
        let q = nearest_int_mul(iscale, v, fma).clamp(-nmax, nmax - 1);
        l[i] = (q + nmax) as i8;
        let w = v * v;
        let qf = q as f32;
        sumlx = mad(w * v, qf, sumlx, fma);
        suml2 = mad(w * qf, qf, suml2, fma);
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9i32..=9 {
        if is == 0 {
            continue;
        }
        // The vectorised candidate loop: plain products, in-order adds (no FMA in either build).
        iscale = -(mad(0.1, is as f32, nmax as f32, fma)) / max;
        let (mut slx, mut sl2) = (0.0f32, 0.0f32);
        for &v in x {
            let q = nearest_int_mul(iscale, v, fma).clamp(-nmax, nmax - 1) as f32;
            let w = v * v;
            slx += w * v * q;
            sl2 += w * q * q;
        }
        if sl2 > 0.0 && slx * slx > best * sl2 {
            for (i, &v) in x.iter().enumerate() {
                let q = nearest_int_mul(iscale, v, fma).clamp(-nmax, nmax - 1);
                l[i] = (q + nmax) as i8;
            }
            scale = slx / sl2;
            best = scale * slx;
        }
    }
    scale
}

/// `quantize_row_q6_K_ref`: 210 bytes per 256 elements.
pub fn quantize_q6_k(x: &[f32], out: &mut Vec<u8>, fma: FmaContract) {
    for xb in x.chunks_exact(QK_K) {
        let mut l = [0i8; QK_K];
        let mut scales = [0f32; QK_K / 16];
        let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
        for ib in 0..QK_K / 16 {
            let s = make_qx_quants(
                32,
                &xb[16 * ib..16 * ib + 16],
                &mut l[16 * ib..16 * ib + 16],
                fma,
            );
            scales[ib] = s;
            if s.abs() > max_abs_scale {
                max_abs_scale = s.abs();
                max_scale = s;
            }
        }
        if max_abs_scale < GROUP_MAX_EPS {
            out.extend_from_slice(&[0u8; 210]);
            continue;
        }
        let iscale = -128.0f32 / max_scale;
        let d = 1.0 / iscale;
        let mut sc = [0i8; 16];
        for ib in 0..QK_K / 16 {
            sc[ib] = nearest_int_mul(iscale, scales[ib], fma).min(127) as i8;
        }
        let dd16 = f16_round(d);
        for j in 0..QK_K / 16 {
            let dd = dd16 * f32::from(sc[j]);
            if dd == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let q = nearest_int(xb[16 * j + ii] / dd).clamp(-32, 31);
                l[16 * j + ii] = (q + 32) as i8;
            }
        }
        let mut ql = [0u8; 128];
        let mut qh = [0u8; 64];
        for (h, j) in (0..QK_K).step_by(128).enumerate() {
            for i in 0..32 {
                let q = |k: usize| l[j + i + k] as u8;
                ql[64 * h + i] = (q(0) & 0xf) | ((q(64) & 0xf) << 4);
                ql[64 * h + i + 32] = (q(32) & 0xf) | ((q(96) & 0xf) << 4);
                qh[32 * h + i] =
                    (q(0) >> 4) | ((q(32) >> 4) << 2) | ((q(64) >> 4) << 4) | ((q(96) >> 4) << 6);
            }
        }
        out.extend_from_slice(&ql);
        out.extend_from_slice(&qh);
        out.extend(sc.iter().map(|&s| s as u8));
        put_f16(out, d);
    }
}

/// Dequantize Q4_K / Q5_K / Q6_K blocks (`dequantize_row_*`), for tests and round-trip checks.
pub fn dequantize(t: crate::gguf::GgmlType, src: &[u8], out: &mut Vec<f32>) {
    use crate::gguf::GgmlType as G;
    let rd = |b: &[u8], at: usize| f16::from_le_bytes([b[at], b[at + 1]]).to_f32();
    for b in src.chunks_exact(t.type_size() as usize) {
        match t {
            G::Q4_K | G::Q5_K => {
                let (d, dmin) = (rd(b, 0), rd(b, 2));
                let mut sc = [0u8; 12];
                sc.copy_from_slice(&b[4..16]);
                let (qh, ql) = if t == G::Q5_K {
                    (&b[16..48], &b[48..176])
                } else {
                    (&b[0..0], &b[16..144])
                };
                for (blk, j) in (0..QK_K).step_by(64).enumerate() {
                    let (s1, m1) = scale_min_k4(2 * blk, &sc);
                    let (s2, m2) = scale_min_k4(2 * blk + 1, &sc);
                    let q = &ql[32 * blk..32 * blk + 32];
                    let _ = j;
                    for (half, (s, m)) in [(s1, m1), (s2, m2)].into_iter().enumerate() {
                        for i in 0..32 {
                            let mut v = if half == 0 { q[i] & 0xf } else { q[i] >> 4 };
                            if t == G::Q5_K && qh[i] & (1u8 << (2 * blk + half)) != 0 {
                                v += 16;
                            }
                            out.push(d * f32::from(s) * f32::from(v) - dmin * f32::from(m));
                        }
                    }
                }
            }
            _ => {
                let (ql, qh, sc) = (&b[0..128], &b[128..192], &b[192..208]);
                let d = rd(b, 208);
                let mut y = [0f32; QK_K];
                for h in 0..2 {
                    for l in 0..32 {
                        let is = l / 16;
                        let (a, c, hh) = (ql[64 * h + l], ql[64 * h + l + 32], qh[32 * h + l]);
                        let q1 = i32::from((a & 0xf) | ((hh & 3) << 4)) - 32;
                        let q2 = i32::from((c & 0xf) | (((hh >> 2) & 3) << 4)) - 32;
                        let q3 = i32::from((a >> 4) | (((hh >> 4) & 3) << 4)) - 32;
                        let q4 = i32::from((c >> 4) | (((hh >> 6) & 3) << 4)) - 32;
                        let s = |k: usize| f32::from(sc[8 * h + is + k] as i8);
                        y[128 * h + l] = d * s(0) * q1 as f32;
                        y[128 * h + l + 32] = d * s(2) * q2 as f32;
                        y[128 * h + l + 64] = d * s(4) * q3 as f32;
                        y[128 * h + l + 96] = d * s(6) * q4 as f32;
                    }
                }
                out.extend_from_slice(&y);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::GgmlType;

    fn lcg(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2.0
            })
            .collect()
    }

    #[test]
    fn nearest_int_rounds_half_to_even() {
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(3.5), 4);
        assert_eq!(nearest_int(-2.5), -2);
        assert_eq!(nearest_int(-0.4), 0);
    }

    #[test]
    fn k_quants_round_trip_within_their_resolution() {
        let x = lcg(4 * QK_K, 7);
        for (t, bound) in [
            (GgmlType::Q4_K, 0.1f32),
            (GgmlType::Q5_K, 0.06),
            (GgmlType::Q6_K, 0.03),
        ] {
            for fma in [FmaContract::Off, FmaContract::Fast] {
                let mut q = Vec::new();
                match t {
                    GgmlType::Q4_K => quantize_q4_k(&x, &mut q, fma),
                    GgmlType::Q5_K => quantize_q5_k(&x, &mut q, fma),
                    _ => quantize_q6_k(&x, &mut q, fma),
                }
                assert_eq!(q.len() as u64, 4 * t.type_size(), "{t}");
                let mut y = Vec::new();
                dequantize(t, &q, &mut y);
                let err = x
                    .iter()
                    .zip(&y)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f32::max);
                assert!(err < bound, "{t} {fma:?}: max error {err} ≥ {bound}");
            }
        }
    }

    #[test]
    fn zero_super_blocks_encode_to_zero_bytes() {
        let x = [0f32; QK_K];
        for f in [quantize_q4_k, quantize_q5_k, quantize_q6_k] {
            let mut q = Vec::new();
            f(&x, &mut q, FmaContract::Off);
            assert!(q.iter().all(|&b| b == 0));
        }
    }
}
