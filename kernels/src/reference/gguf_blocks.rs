//! Scalar decoders of the GGUF blocks Q4_0, Q5_0, Q5_1 (32 elements) and the K-quant super-blocks
//! Q4_K, Q5_K, Q6_K (256 elements), formats.md §5.2 (ggml's `block_*` structs). Each returns the
//! element exactly as ggml's `dequantize_row_*` (and `artifact::gguf::quant`) computes it — same
//! operands, same rounding order, no fused multiply-add — and as the WGSL kernels write it.

use super::block_base;
use super::decode::f16_to_f32;
use crate::WeightFormat;

fn byte(buf: &[u8], i: usize) -> u8 {
    buf.get(i).copied().unwrap_or(0)
}

fn f16_at(buf: &[u8], i: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([byte(buf, i), byte(buf, i + 1)]))
}

/// Element k of row r of a Q4_0 matrix (18-byte blocks: f16 d | u8 qs[16]).
pub(crate) fn q4_0_at(blocks: &[u8], r: usize, k_len: usize, k: usize) -> f32 {
    let base = block_base(WeightFormat::Q4_0, r, k_len, k);
    let d = f16_at(blocks, base);
    let j = k & 31;
    let q = (byte(blocks, base + 2 + (j & 15)) >> ((j >> 4) * 4)) & 0xf;
    f32::from(i16::from(q) - 8) * d
}

/// The 5-bit level of element j of a Q5_0/Q5_1 block whose `qh` starts at `hq` (qs at hq + 4).
fn q5_level(blocks: &[u8], hq: usize, j: usize) -> u8 {
    let qh = u32::from_le_bytes([
        byte(blocks, hq),
        byte(blocks, hq + 1),
        byte(blocks, hq + 2),
        byte(blocks, hq + 3),
    ]);
    let low = (byte(blocks, hq + 4 + (j & 15)) >> ((j >> 4) * 4)) & 0xf;
    low | ((((qh >> j) & 1) as u8) << 4)
}

/// Element k of row r of a Q5_0 matrix (22-byte blocks) with rows of `k_len` elements.
pub(crate) fn q5_0_at(blocks: &[u8], r: usize, k_len: usize, k: usize) -> f32 {
    let base = block_base(WeightFormat::Q5_0, r, k_len, k);
    let d = f16_at(blocks, base);
    f32::from(i16::from(q5_level(blocks, base + 2, k & 31)) - 16) * d
}

/// Element k of row r of a Q5_1 matrix (24-byte blocks) with rows of `k_len` elements.
pub(crate) fn q5_1_at(blocks: &[u8], r: usize, k_len: usize, k: usize) -> f32 {
    let base = block_base(WeightFormat::Q5_1, r, k_len, k);
    let (d, m) = (f16_at(blocks, base), f16_at(blocks, base + 2));
    f32::from(q5_level(blocks, base + 4, k & 31)) * d + m
}

/// ggml's `get_scale_min_k4`: the 6-bit scale and min of sub-block j from `scales[12]` at `sc`.
fn scale_min_k4(blocks: &[u8], sc: usize, j: usize) -> (u8, u8) {
    let q = |i: usize| byte(blocks, sc + i);
    if j < 4 {
        (q(j) & 63, q(j + 4) & 63)
    } else {
        (
            (q(j + 4) & 0xf) | ((q(j - 4) >> 6) << 4),
            (q(j + 4) >> 4) | ((q(j) >> 6) << 4),
        )
    }
}

/// Element k of row r of a Q4_K (`five` = false, 144-byte) or Q5_K (176-byte) matrix.
pub(crate) fn q45_k_at(blocks: &[u8], r: usize, k_len: usize, k: usize, five: bool) -> f32 {
    let format = if five {
        WeightFormat::Q5K
    } else {
        WeightFormat::Q4K
    };
    let base = block_base(format, r, k_len, k);
    let (d, dmin) = (f16_at(blocks, base), f16_at(blocks, base + 2));
    let e = k & 255;
    let (j, i) = (e / 32, e & 31);
    let (s, m) = scale_min_k4(blocks, base + 4, j);
    let qs = base + if five { 48 } else { 16 };
    let mut q = (byte(blocks, qs + 32 * (e / 64) + i) >> (4 * (j & 1))) & 0xf;
    if five && byte(blocks, base + 16 + i) & (1u8 << j) != 0 {
        q += 16;
    }
    d * f32::from(s) * f32::from(q) - dmin * f32::from(m)
}

/// Element k of row r of a Q6_K matrix (210-byte super-blocks) with rows of `k_len` elements.
pub(crate) fn q6_k_at(blocks: &[u8], r: usize, k_len: usize, k: usize) -> f32 {
    let base = block_base(WeightFormat::Q6K, r, k_len, k);
    let d = f16_at(blocks, base + 208);
    let e = k & 255;
    let (h, t, l) = (e / 128, (e & 127) / 32, e & 31);
    let lo = (byte(blocks, base + 64 * h + 32 * (t & 1) + l) >> (4 * (t >> 1))) & 0xf;
    let hi = (byte(blocks, base + 128 + 32 * h + l) >> (2 * t)) & 3;
    let s = f32::from(byte(blocks, base + 192 + 8 * h + l / 16 + 2 * t) as i8);
    let q = i32::from(lo | (hi << 4)) - 32;
    d * s * q as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q4_0_is_symmetric() {
        // d = 0.5; qs[0] = 0xf0: element 0 = 0 → −4, element 16 = 15 → 3.5
        let mut b = vec![0x00, 0x38];
        b.extend([0u8; 16]);
        b[2] = 0xf0;
        assert_eq!(q4_0_at(&b, 0, 32, 0), -4.0);
        assert_eq!(q4_0_at(&b, 0, 32, 16), 3.5);
        assert_eq!(q4_0_at(&b, 0, 32, 1), -4.0);
    }

    #[test]
    fn q5_0_high_bit_and_offset() {
        // d = 0.5; qh bit 0 and bit 17 set; qs[0] = 0x3f: element 0 = 0xf | 16 = 31 → 7.5,
        // element 16 = 3 → (3 − 16)/2 = −6.5, element 17 = 0 | 16 → 0
        let mut b = vec![0x00, 0x38, 0x01, 0x00, 0x02, 0x00];
        b.extend([0u8; 16]);
        b[6] = 0x3f;
        assert_eq!(q5_0_at(&b, 0, 32, 0), 7.5);
        assert_eq!(q5_0_at(&b, 0, 32, 16), -6.5);
        assert_eq!(q5_0_at(&b, 0, 32, 17), 0.0);
        assert_eq!(q5_0_at(&b, 0, 32, 1), -8.0);
    }

    #[test]
    fn q5_1_is_affine() {
        // d = 2, m = −1; qh bit 31; qs[15] = 0xa0: element 31 = 10 | 16 = 26 → 51
        let mut b = vec![0x00, 0x40, 0x00, 0xbc, 0, 0, 0, 0x80];
        b.extend([0u8; 16]);
        b[8 + 15] = 0xa0;
        assert_eq!(q5_1_at(&b, 0, 32, 31), 51.0);
        assert_eq!(q5_1_at(&b, 0, 32, 15), -1.0);
    }

    #[test]
    fn q4_k_scale_packing_upper_sub_blocks() {
        // d = 1, dmin = 0.5; sub-block 5: s = (sc[9] & 15) | (sc[1] >> 6) << 4,
        // m = (sc[9] >> 4) | (sc[5] >> 6) << 4
        let mut b = vec![0u8; 144];
        b[0..2].copy_from_slice(&[0x00, 0x3c]);
        b[2..4].copy_from_slice(&[0x00, 0x38]);
        b[4 + 1] = 0x40; // s high bits = 1 → +16
        b[4 + 5] = 0x80; // m high bits = 2 → +32
        b[4 + 9] = 0x32; // s low = 2, m low = 3
                         // element 160 = sub-block 5, i = 0: byte qs[32·2 + 0], HIGH nibble
        b[16 + 64] = 0x70;
        // s = 18, m = 35, q = 7 → 18·7 − 0.5·35 = 108.5
        assert_eq!(q45_k_at(&b, 0, 256, 160, false), 108.5);
        // element 128 (sub-block 4, LOW nibble of the same byte = 0): s = sc[8]… = 0, m = 0 → 0
        assert_eq!(q45_k_at(&b, 0, 256, 128, false), 0.0);
    }

    #[test]
    fn q6_k_quarters() {
        // d = 1; scale of (h 1, l/16 0, t 3) = scales[8 + 0 + 6] = −2; element 128 + 96 + 0:
        // lo = HIGH nibble of ql[64 + 32 + 0], hi = bits 6,7 of qh[32 + 0]
        let mut b = vec![0u8; 210];
        b[208..210].copy_from_slice(&[0x00, 0x3c]);
        b[192 + 14] = 0xfe;
        b[96] = 0x50;
        b[128 + 32] = 0x80;
        // q = 5 | 2 << 4 = 37 → (37 − 32) · −2 = −10
        assert_eq!(q6_k_at(&b, 0, 256, 224), -10.0);
    }
}
