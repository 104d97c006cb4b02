//! Quantizers the generator applies to its f32 draws, by the rules the real checkpoints use:
//! FP8 e4m3 with one power-of-two e8m0 scale per 128×128 block, MXFP4 (e2m1 nibbles, one e8m0
//! scale per 32 inputs of a row), BF16 round-to-nearest-even, and MLX affine 8-bit.
//!
//! Spec: `../shared/design/formats.md` §2.1–2.2 (e2m1, e8m0), §3 (MLX affine), §4.1–4.3 (e4m3,
//! 128×128 blocks, UE8M0 power-of-two scales); `models.md` §1.3 (DeepSeek V4 storage). All
//! arithmetic is exact power-of-two scaling plus IEEE basic operations, so the bytes are the same
//! on every machine.

/// Largest finite e4m3 value.
pub const E4M3_MAX: f32 = 448.0;
/// Largest e2m1 magnitude.
pub const E2M1_MAX: f32 = 6.0;
/// e2m1 code → value (formats.md §2.1).
pub const E2M1: [f32; 16] = [
    0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
];

/// 2^e as f32 for e in [-149, 127], exactly.
pub fn pow2(e: i32) -> f32 {
    if e >= -126 {
        f32::from_bits(((e.clamp(-126, 127) + 127) as u32) << 23)
    } else {
        f32::from_bits(1u32 << (e + 149).clamp(0, 22))
    }
}

/// ceil(log2(x)) for finite x > 0, from the bits (no libm).
pub fn ceil_log2(x: f32) -> i32 {
    let bits = x.to_bits();
    let exp = ((bits >> 23) & 0xFF) as i32;
    let man = bits & 0x7F_FFFF;
    if exp == 0 {
        // Subnormal: value = man · 2^-149.
        let top = 31 - man.leading_zeros() as i32; // floor(log2(man))
        let exact = man.is_power_of_two();
        return top - 149 + i32::from(!exact);
    }
    exp - 127 + i32::from(man != 0)
}

/// The e8m0 byte of the power-of-two scale 2^ceil(log2(amax / max_code)), the UE8M0 rule
/// (`scale_fmt: "ue8m0"`): the block maximum lands at or below `max_code` after division.
/// An all-zero block gets 2^-127 (byte 0), as a real all-zero block would.
pub fn e8m0_scale_for(amax: f32, max_code: f32) -> u8 {
    if amax.is_nan() || amax <= 0.0 || !amax.is_finite() {
        return 0;
    }
    let e = ceil_log2(amax / max_code);
    (e.clamp(-127, 127) + 127) as u8
}

/// Value of an e8m0 byte (0xFF decodes as NaN per OCP).
pub fn e8m0_value(b: u8) -> f32 {
    if b == 0xFF {
        f32::NAN
    } else {
        pow2(i32::from(b) - 127)
    }
}

/// Round-to-nearest, ties to even, for |x| < 2^23 (exact for the ranges used here).
fn rne(x: f32) -> f32 {
    x.round_ties_even()
}

/// f32 → e4m3fn byte, round-to-nearest-even, saturating at ±448 (what `torch.float8_e4m3fn`
/// casting of a pre-scaled block does in DeepSeek's quantizers, which clamp first).
pub fn f32_to_e4m3(x: f32) -> u8 {
    if x.is_nan() {
        return 0x7F;
    }
    let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
    let a = x.abs().min(E4M3_MAX);
    if a == 0.0 {
        return sign;
    }
    // Quantum: 2^(e-3) in the normal range (e = floor(log2 a) >= -6), 2^-9 below.
    let fe = floor_log2(a).max(-6);
    let q = rne(a * pow2(3 - fe)); // integer in [0, 16]
    let v = q * pow2(fe - 3); // exact
    if v == 0.0 {
        return sign;
    }
    let v = v.min(E4M3_MAX);
    let ve = floor_log2(v);
    if ve < -6 {
        // Subnormal: code = v / 2^-9 in 1..=7.
        return sign | (v * pow2(9)) as u8;
    }
    let man = ((v * pow2(3 - ve)) as u32).saturating_sub(8) as u8; // 0..7
    sign | (((ve + 7) as u8) << 3) | man
}

/// floor(log2(x)) for finite x > 0.
pub fn floor_log2(x: f32) -> i32 {
    let bits = x.to_bits();
    let exp = ((bits >> 23) & 0xFF) as i32;
    if exp == 0 {
        let man = bits & 0x7F_FFFF;
        return 31 - man.leading_zeros() as i32 - 149;
    }
    exp - 127
}

/// e4m3fn byte → f32 (0x7F/0xFF → NaN).
pub fn e4m3_to_f32(b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = i32::from((b >> 3) & 0xF);
    let m = f32::from(b & 7);
    if b & 0x7F == 0x7F {
        return f32::NAN;
    }
    if e == 0 {
        sign * m * pow2(-9)
    } else {
        sign * (1.0 + m / 8.0) * pow2(e - 7)
    }
}

/// FP8 block quantization of a row-major `[rows, cols]` matrix: returns (e4m3 bytes, e8m0 scales
/// `[ceil(rows/128), ceil(cols/128)]`). `w = e4m3 · 2^(scale-127)` (models.md §1.3).
pub fn fp8_block_quantize(w: &[f32], rows: usize, cols: usize) -> (Vec<u8>, Vec<u8>) {
    const B: usize = 128;
    let br = rows.div_ceil(B);
    let bc = cols.div_ceil(B);
    let mut scales = vec![0u8; br * bc];
    let mut out = vec![0u8; rows * cols];
    for bi in 0..br {
        for bj in 0..bc {
            let (r0, r1) = (bi * B, ((bi + 1) * B).min(rows));
            let (c0, c1) = (bj * B, ((bj + 1) * B).min(cols));
            let mut amax = 0f32;
            for r in r0..r1 {
                for v in &w[r * cols + c0..r * cols + c1] {
                    amax = amax.max(v.abs());
                }
            }
            let s = e8m0_scale_for(amax, E4M3_MAX);
            scales[bi * bc + bj] = s;
            let inv = pow2(127 - i32::from(s));
            for r in r0..r1 {
                for c in c0..c1 {
                    out[r * cols + c] = f32_to_e4m3(w[r * cols + c] * inv);
                }
            }
        }
    }
    (out, scales)
}

/// f32 → e2m1 nibble, round-to-nearest-even on the code grid, sign kept (−0 stays code 8).
pub fn f32_to_e2m1(x: f32) -> u8 {
    let sign = if x.is_sign_negative() { 8u8 } else { 0 };
    let a = x.abs();
    let code = if a <= 0.25 {
        0
    } else if a < 0.75 {
        1
    } else if a <= 1.25 {
        2
    } else if a < 1.75 {
        3
    } else if a <= 2.5 {
        4
    } else if a < 3.5 {
        5
    } else if a <= 5.0 {
        6
    } else {
        7
    };
    sign | code
}

/// MXFP4 quantization of `[rows, cols]` (cols a multiple of 32): returns (packed bytes
/// `[rows, cols/2]`, low nibble = even column, and e8m0 scales `[rows, cols/32]`).
pub fn mxfp4_quantize(w: &[f32], rows: usize, cols: usize) -> (Vec<u8>, Vec<u8>) {
    let groups = cols / 32;
    let mut packed = vec![0u8; rows * cols / 2];
    let mut scales = vec![0u8; rows * groups];
    for r in 0..rows {
        for g in 0..groups {
            let blk = &w[r * cols + g * 32..r * cols + g * 32 + 32];
            let amax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
            let s = e8m0_scale_for(amax, E2M1_MAX);
            scales[r * groups + g] = s;
            let inv = pow2(127 - i32::from(s));
            for k in 0..16 {
                let lo = f32_to_e2m1(blk[2 * k] * inv);
                let hi = f32_to_e2m1(blk[2 * k + 1] * inv);
                packed[(r * cols + g * 32) / 2 + k] = lo | (hi << 4);
            }
        }
    }
    (packed, scales)
}

/// MLX affine quantization (formats.md §3) of `[rows, cols]` with `bits` ∈ {8} and
/// `group` | cols: returns (u32 words LE-packed LSB first, per-group scales, per-group biases)
/// with scale/bias as f32 (the caller casts them to the weight dtype).
pub fn mlx_affine8_quantize(
    w: &[f32],
    rows: usize,
    cols: usize,
    group: usize,
) -> (Vec<u8>, Vec<f32>, Vec<f32>) {
    let n_bins = 255f32;
    let groups = cols / group;
    let mut codes = vec![0u8; rows * cols];
    let mut scales = Vec::with_capacity(rows * groups);
    let mut biases = Vec::with_capacity(rows * groups);
    for r in 0..rows {
        for g in 0..groups {
            let blk = &w[r * cols + g * group..r * cols + (g + 1) * group];
            let w_max = blk.iter().fold(f32::MIN, |m, v| m.max(*v));
            let w_min = blk.iter().fold(f32::MAX, |m, v| m.min(*v));
            let mask = w_min.abs() > w_max.abs();
            let mut scale = ((w_max - w_min) / n_bins).max(1e-7);
            if !mask {
                scale = -scale;
            }
            let edge = if mask { w_min } else { w_max };
            let q0 = rne(edge / scale);
            let (scale, bias) = if q0 != 0.0 {
                (edge / q0, edge)
            } else {
                (scale, 0.0)
            };
            for (k, v) in blk.iter().enumerate() {
                let q = rne((v - bias) / scale).clamp(0.0, n_bins);
                codes[r * cols + g * group + k] = q as u8;
            }
            scales.push(scale);
            biases.push(bias);
        }
    }
    // 8-bit codes, 4 per u32, element i at bits 8i.. of its word: little-endian u32 words are
    // exactly the codes in order.
    (codes, scales, biases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e4m3_round_trips_every_finite_code() {
        for b in 0u8..=255 {
            let v = e4m3_to_f32(b);
            if v.is_nan() {
                continue;
            }
            let back = f32_to_e4m3(v);
            if b == 0x80 {
                assert_eq!(back, 0x80);
            } else {
                assert_eq!(back, b, "code {b:#04x} value {v}");
            }
        }
        assert_eq!(f32_to_e4m3(1.0), 0x38);
        assert_eq!(f32_to_e4m3(448.0), 0x7E);
        assert_eq!(f32_to_e4m3(1e6), 0x7E);
        assert_eq!(f32_to_e4m3(-1e6), 0xFE);
        // Ties to even: 1.0625 is halfway between 1.0 (0x38) and 1.125 (0x39) → even 0x38.
        assert_eq!(f32_to_e4m3(1.0625), 0x38);
        assert_eq!(f32_to_e4m3(1.1875), 0x3A);
        // Smallest subnormal and below half of it.
        assert_eq!(f32_to_e4m3(pow2(-9)), 0x01);
        assert_eq!(f32_to_e4m3(pow2(-11)), 0x00);
        assert_eq!(e4m3_to_f32(0x7E), 448.0);
    }

    #[test]
    fn log2_helpers_and_scales() {
        assert_eq!(ceil_log2(1.0), 0);
        assert_eq!(ceil_log2(1.5), 1);
        assert_eq!(ceil_log2(0.25), -2);
        assert_eq!(floor_log2(0.3), -2);
        assert_eq!(ceil_log2(pow2(-140)), -140);
        assert_eq!(pow2(-149), f32::from_bits(1));
        // amax 448 → scale 1.0 (byte 127); amax 449 → 2.0.
        assert_eq!(e8m0_scale_for(448.0, E4M3_MAX), 127);
        assert_eq!(e8m0_scale_for(449.0, E4M3_MAX), 128);
        assert_eq!(e8m0_scale_for(0.0, E4M3_MAX), 0);
        assert_eq!(e8m0_value(127), 1.0);
    }

    #[test]
    fn fp8_blocks_dequantize_close() {
        let rows = 256;
        let cols = 128;
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let (q, s) = fp8_block_quantize(&w, rows, cols);
        assert_eq!(s.len(), 2);
        for (i, (orig, b)) in w.iter().zip(&q).enumerate() {
            let deq = e4m3_to_f32(*b) * e8m0_value(s[(i / cols) / 128]);
            assert!(
                (deq - orig).abs() <= orig.abs() / 16.0 + 1e-3,
                "{orig} vs {deq}"
            );
        }
    }

    #[test]
    fn e2m1_grid_and_mxfp4_packing() {
        for (code, v) in E2M1.iter().enumerate() {
            let c = f32_to_e2m1(*v) as usize;
            assert!(c == code || (code == 8 && c == 8), "{v}");
        }
        assert_eq!(f32_to_e2m1(0.25), 0);
        assert_eq!(f32_to_e2m1(0.75), 2);
        assert_eq!(f32_to_e2m1(5.0), 6);
        assert_eq!(f32_to_e2m1(100.0), 7);
        let mut w = vec![0f32; 64];
        w[0] = 6.0;
        w[1] = -3.0;
        w[32] = 0.75;
        let (p, s) = mxfp4_quantize(&w, 1, 64);
        assert_eq!(s, vec![127, 0x7F - 3]);
        assert_eq!(p[0], 0x07 | (0x0D << 4));
        assert_eq!(p[16] & 0x0F, 7, "0.75 at scale 2^-3 is 6.0");
    }

    #[test]
    fn mlx_affine_reconstructs_edges_exactly() {
        let w: Vec<f32> = (0..64).map(|i| i as f32 / 10.0 - 1.0).collect();
        let (codes, s, b) = mlx_affine8_quantize(&w, 1, 64, 64);
        assert_eq!(codes.len(), 64);
        // The larger-magnitude edge (max 5.3) is represented exactly.
        assert_eq!(b[0], 5.3);
        for (v, q) in w.iter().zip(&codes) {
            let deq = s[0] * f32::from(*q) + b[0];
            // The far edge can be off by more than half a step: the step is rescaled to hit `edge`.
            assert!((deq - v).abs() <= s[0].abs(), "{v} {deq}");
        }
    }
}
