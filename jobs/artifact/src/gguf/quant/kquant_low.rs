//! The 2- and 3-bit K-quant super-block encoders Q2_K (84 bytes per 256 elements) and Q3_K (110
//! bytes), ports of ggml's `quantize_row_q2_K_ref` / `quantize_row_q3_K_ref` with
//! `make_q3_quants` (what `llama-quantize` runs for these types without an importance matrix),
//! and their dequantizers (`dequantize_row_q2_K` / `q3_K`).
//!
//! Spec: block structs in ggml-common.h (`block_q2_K`: scales[16], qs[64], d, dmin;
//! `block_q3_K`: hmask[32], qs[64], scales[12], d); formats.md §5.2. Arithmetic as in
//! [`super::kquant`]: only [`FmaContract::Off`] is byte-verified (against ggml-quants.c built
//! for the x86-64 baseline and against llama-quantize's whole files).

use half::f16;

use super::kquant::{
    f16_round, mad, make_qkx2_quants, nearest_int, nearest_int_mul, put_f16, GROUP_MAX_EPS, QK_K,
};
use super::FmaContract;

/// Pack 256 two-bit levels as ggml does: byte `j/4 + l` of each 128-element half holds
/// elements `l`, `l+32`, `l+64`, `l+96` in bits 0–1, 2–3, 4–5, 6–7.
fn pack_2bit(l: &[u8; QK_K]) -> [u8; QK_K / 4] {
    let mut qs = [0u8; QK_K / 4];
    for j in (0..QK_K).step_by(128) {
        for i in 0..32 {
            qs[j / 4 + i] =
                l[j + i] | (l[j + i + 32] << 2) | (l[j + i + 64] << 4) | (l[j + i + 96] << 6);
        }
    }
    qs
}

/// `quantize_row_q2_K_ref`.
pub fn quantize_q2_k(x: &[f32], out: &mut Vec<u8>, fma: FmaContract) {
    const Q4SCALE: f32 = 15.0;
    for xb in x.chunks_exact(QK_K) {
        let mut l = [0u8; QK_K];
        let mut laux = [0u8; 16];
        let mut weights = [0f32; 16];
        let (mut mins, mut scales) = ([0f32; 16], [0f32; 16]);
        let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
        for j in 0..QK_K / 16 {
            let xs = &xb[16 * j..16 * j + 16];
            for (w, v) in weights.iter_mut().zip(xs) {
                *w = v.abs();
            }
            let (s, m) = make_qkx2_quants(
                3,
                xs,
                &weights,
                &mut l[16 * j..16 * j + 16],
                &mut laux,
                -0.5,
                0.1,
                15,
                true,
                fma,
            );
            scales[j] = s;
            mins[j] = m;
            max_scale = max_scale.max(s);
            max_min = max_min.max(m);
        }
        let mut sc = [0u8; 16];
        let d = if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for j in 0..16 {
                sc[j] = nearest_int_mul(iscale, scales[j], fma) as u8;
            }
            max_scale / Q4SCALE
        } else {
            0.0
        };
        let dmin = if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for j in 0..16 {
                sc[j] |= (nearest_int_mul(iscale, mins[j], fma) << 4) as u8;
            }
            max_min / Q4SCALE
        } else {
            0.0
        };
        let (d16, dmin16) = (f16_round(d), f16_round(dmin));
        for j in 0..QK_K / 16 {
            let dd = d16 * f32::from(sc[j] & 0xf);
            if dd == 0.0 {
                continue;
            }
            let dm = dmin16 * f32::from(sc[j] >> 4);
            for ii in 0..16 {
                l[16 * j + ii] = nearest_int((xb[16 * j + ii] + dm) / dd).clamp(0, 3) as u8;
            }
        }
        out.extend_from_slice(&sc);
        out.extend_from_slice(&pack_2bit(&l));
        put_f16(out, d);
        put_f16(out, dmin);
    }
}

/// `make_q3_quants(n = 16, nmax = 4, do_rmse = true)`: the scale, levels 0..8 in `l`.
fn make_q3_quants(x: &[f32], l: &mut [i8], fma: FmaContract) -> f32 {
    const NMAX: i32 = 4;
    let (mut max, mut amax) = (0.0f32, 0.0f32);
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
    let iscale = -(NMAX as f32) / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (i, &v) in x.iter().enumerate() {
        let q = nearest_int_mul(iscale, v, fma).clamp(-NMAX, NMAX - 1);
        l[i] = q as i8;
        let w = v * v;
        sumlx = mad(w * v, q as f32, sumlx, fma);
        suml2 = mad(w * q as f32, q as f32, suml2, fma);
    }
    for _ in 0..5 {
        let mut changed = 0;
        for (i, &v) in x.iter().enumerate() {
            let w = v * v;
            let li = f32::from(l[i]);
            let mut slx = mad(-(w * v), li, sumlx, fma);
            if slx > 0.0 {
                let mut sl2 = mad(-(w * li), li, suml2, fma);
                let new_l = nearest_int(v * sl2 / slx).clamp(-NMAX, NMAX - 1);
                if new_l != i32::from(l[i]) {
                    let nl = new_l as f32;
                    slx = mad(w * v, nl, slx, fma);
                    sl2 = mad(w * nl, nl, sl2, fma);
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l[i] = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed += 1;
                    }
                }
            }
        }
        if changed == 0 {
            break;
        }
    }
    l.iter_mut().for_each(|v| *v += NMAX as i8);
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// The 6-bit scale `j` (0..16) of a q3_K block, as stored (0..63, bias 32).
fn q3_scale(sc: &[u8; 12], j: usize) -> i8 {
    let low = if j < 8 { sc[j] & 0xf } else { sc[j - 8] >> 4 };
    ((low | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) as i8) - 32
}

/// `quantize_row_q3_K_ref`.
pub fn quantize_q3_k(x: &[f32], out: &mut Vec<u8>, fma: FmaContract) {
    for xb in x.chunks_exact(QK_K) {
        let mut l = [0i8; QK_K];
        let mut scales = [0f32; 16];
        let (mut max_scale, mut amax) = (0.0f32, 0.0f32);
        for j in 0..QK_K / 16 {
            scales[j] = make_q3_quants(&xb[16 * j..16 * j + 16], &mut l[16 * j..16 * j + 16], fma);
            if scales[j].abs() > amax {
                amax = scales[j].abs();
                max_scale = scales[j];
            }
        }
        let mut sc = [0u8; 12];
        let d = if max_scale != 0.0 {
            let iscale = -32.0f32 / max_scale;
            for j in 0..QK_K / 16 {
                let q = (nearest_int_mul(iscale, scales[j], fma) as i8).clamp(-32, 31) + 32;
                let q = q as u8;
                if j < 8 {
                    sc[j] = q & 0xf;
                } else {
                    sc[j - 8] |= (q & 0xf) << 4;
                }
                sc[j % 4 + 8] |= (q >> 4) << (2 * (j / 4));
            }
            1.0 / iscale
        } else {
            0.0
        };
        let d16 = f16_round(d);
        for j in 0..QK_K / 16 {
            let dd = d16 * f32::from(q3_scale(&sc, j));
            if dd == 0.0 {
                continue;
            }
            for ii in 0..16 {
                l[16 * j + ii] = (nearest_int(xb[16 * j + ii] / dd).clamp(-4, 3) + 4) as i8;
            }
        }
        let mut hmask = [0u8; QK_K / 8];
        let mut low = [0u8; QK_K];
        for j in 0..QK_K {
            let mut q = l[j] as u8;
            if q > 3 {
                hmask[j % 32] |= 1 << (j / 32);
                q -= 4;
            }
            low[j] = q;
        }
        out.extend_from_slice(&hmask);
        out.extend_from_slice(&pack_2bit(&low));
        out.extend_from_slice(&sc);
        put_f16(out, d);
    }
}

/// `dequantize_row_q2_K` / `dequantize_row_q3_K` for whole blocks of type `t` (Q2_K or Q3_K).
pub fn dequantize(t: crate::gguf::GgmlType, src: &[u8], out: &mut Vec<f32>) {
    use crate::gguf::GgmlType as G;
    let rd = |b: &[u8], at: usize| f16::from_le_bytes([b[at], b[at + 1]]).to_f32();
    let q2 = t == G::Q2_K;
    for b in src.chunks_exact(t.type_size() as usize) {
        // Per sub-block of 16: ggml's `dl` (scale) and `ml` (offset, q2_K only), once a block.
        let mut dl = [0f32; 16];
        let mut ml = [0f32; 16];
        if q2 {
            let (d, dmin) = (rd(b, 80), rd(b, 82));
            for (is, &s) in b[..16].iter().enumerate() {
                dl[is] = d * f32::from(s & 0xf);
                ml[is] = dmin * f32::from(s >> 4);
            }
        } else {
            let mut sc = [0u8; 12];
            sc.copy_from_slice(&b[96..108]);
            let d = rd(b, 108);
            for (is, v) in dl.iter_mut().enumerate() {
                *v = d * f32::from(q3_scale(&sc, is));
            }
        }
        // ggml's loop order: half n, bit plane j, lower/upper 16 of the 32 quant bytes.
        let q = &b[if q2 { 16 } else { 32 }..];
        for n in 0..2 {
            for j in 0..4 {
                for part in 0..2 {
                    let is = 8 * n + 2 * j + part;
                    for k in 16 * part..16 * part + 16 {
                        let lvl = f32::from((q[32 * n + k] >> (2 * j)) & 3);
                        out.push(if q2 {
                            dl[is] * lvl - ml[is]
                        } else {
                            let high = b[k] & (1 << (4 * n + j)) != 0;
                            dl[is] * (lvl - if high { 0.0 } else { 4.0 })
                        });
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::GgmlType;

    fn wave(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7919 % 1013) as f32 / 1013.0 - 0.5) * 2.0)
            .collect()
    }

    #[test]
    fn two_and_three_bit_round_trip_within_their_resolution() {
        let x = wave(4 * QK_K);
        for (t, bound) in [(GgmlType::Q2_K, 0.35f32), (GgmlType::Q3_K, 0.2)] {
            let mut q = Vec::new();
            match t {
                GgmlType::Q2_K => quantize_q2_k(&x, &mut q, FmaContract::Off),
                _ => quantize_q3_k(&x, &mut q, FmaContract::Off),
            }
            assert_eq!(q.len() as u64, 4 * t.type_size(), "{t}");
            let mut y = Vec::new();
            dequantize(t, &q, &mut y);
            let err = x
                .iter()
                .zip(&y)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            assert!(err < bound, "{t}: max error {err} ≥ {bound}");
        }
    }

    #[test]
    fn zero_blocks_encode_to_zero_bytes() {
        let x = [0f32; QK_K];
        for f in [quantize_q2_k, quantize_q3_k] {
            let mut q = Vec::new();
            f(&x, &mut q, FmaContract::Off);
            assert!(q.iter().all(|&b| b == 0));
        }
    }
}
