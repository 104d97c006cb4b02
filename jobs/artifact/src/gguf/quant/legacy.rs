//! The legacy 32-element block quantizers (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) and their
//! dequantizers, ports of ggml's `quantize_row_*_ref` / `dequantize_row_*`.
//!
//! Spec: ../shared/design/formats.md §5.2 (block structs, nibble order `qs[j]` = element j low,
//! j+16 high; Q5 fifth bit of element j is bit j of the LE u32 `qh`) and §5.3 (gguf-py 0.19.0
//! `quants.py` is byte-identical to ggml's C here). The one rounding decision is whether
//! `x*id + c` is contracted into an FMA ([`FmaContract`], seed 003 §4.2).

use half::f16;

use super::FmaContract;

/// Elements per legacy block (`QK4_0` = `QK4_1` = `QK5_0` = `QK5_1` = `QK8_0`).
pub const QK: usize = 32;

#[inline]
fn mad(a: f32, b: f32, c: f32, fma: FmaContract) -> f32 {
    match fma {
        FmaContract::Fast => a.mul_add(b, c),
        FmaContract::Off => a * b + c,
    }
}

fn put_f16(out: &mut Vec<u8>, v: f32) {
    out.extend_from_slice(&f16::from_f32(v).to_le_bytes());
}

/// `(int8_t)(v)` of the reference code for the in-range values it produces (truncation).
#[inline]
fn trunc_u8(v: f32, max: u8) -> u8 {
    (v as i32).clamp(0, i32::from(max)) as u8
}

fn absmax_signed(b: &[f32]) -> f32 {
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in b {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

fn min_max(b: &[f32]) -> (f32, f32) {
    let mut min = f32::MAX;
    let mut max = -f32::MAX;
    for &v in b {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// `quantize_row_q4_0_ref`: 18 bytes per 32 elements. `x.len()` must be a multiple of 32.
pub fn quantize_q4_0(x: &[f32], out: &mut Vec<u8>, fma: FmaContract) {
    for b in x.chunks_exact(QK) {
        let d = absmax_signed(b) / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        put_f16(out, d);
        let mut q = [0u8; QK];
        for (qj, &v) in q.iter_mut().zip(b) {
            *qj = trunc_u8(mad(v, id, 8.5, fma), 15);
        }
        put_nibbles(out, &q);
    }
}

/// `qs[j] = q[j] | q[j + 16] << 4` (low nibbles only).
fn put_nibbles(out: &mut Vec<u8>, q: &[u8; QK]) {
    let mut qs = [0u8; QK / 2];
    for (j, o) in qs.iter_mut().enumerate() {
        *o = (q[j] & 0x0f) | ((q[j + QK / 2] & 0x0f) << 4);
    }
    out.extend_from_slice(&qs);
}

/// `quantize_row_q4_1_ref`: 20 bytes per 32 elements.
pub fn quantize_q4_1(x: &[f32], out: &mut Vec<u8>, fma: FmaContract) {
    for b in x.chunks_exact(QK) {
        let (min, max) = min_max(b);
        let d = (max - min) / 15.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        put_f16(out, d);
        put_f16(out, min);
        let mut q = [0u8; QK];
        for (qj, &v) in q.iter_mut().zip(b) {
            *qj = trunc_u8(mad(v - min, id, 0.5, fma), 15);
        }
        put_nibbles(out, &q);
    }
}

fn put_q5(out: &mut Vec<u8>, q: &[u8; QK]) {
    let mut qh: u32 = 0;
    for (j, &v) in q.iter().enumerate() {
        qh |= u32::from((v >> 4) & 1) << j;
    }
    out.extend_from_slice(&qh.to_le_bytes());
    put_nibbles(out, q);
}

/// `quantize_row_q5_0_ref`: 22 bytes per 32 elements.
pub fn quantize_q5_0(x: &[f32], out: &mut Vec<u8>, fma: FmaContract) {
    for b in x.chunks_exact(QK) {
        let d = absmax_signed(b) / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        put_f16(out, d);
        let mut q = [0u8; QK];
        for (qj, &v) in q.iter_mut().zip(b) {
            *qj = trunc_u8(mad(v, id, 16.5, fma), 31);
        }
        put_q5(out, &q);
    }
}

/// `quantize_row_q5_1_ref`: 24 bytes per 32 elements.
pub fn quantize_q5_1(x: &[f32], out: &mut Vec<u8>, fma: FmaContract) {
    for b in x.chunks_exact(QK) {
        let (min, max) = min_max(b);
        let d = (max - min) / 31.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        put_f16(out, d);
        put_f16(out, min);
        let mut q = [0u8; QK];
        for (qj, &v) in q.iter_mut().zip(b) {
            *qj = trunc_u8(mad(v - min, id, 0.5, fma), 31);
        }
        put_q5(out, &q);
    }
}

/// `quantize_row_q8_0_ref`: 34 bytes per 32 elements (a single multiply: no FMA decision).
pub fn quantize_q8_0(x: &[f32], out: &mut Vec<u8>) {
    for b in x.chunks_exact(QK) {
        let amax = b.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        put_f16(out, d);
        let mut q = [0u8; QK];
        for (qj, &v) in q.iter_mut().zip(b) {
            // roundf: half away from zero, as f32::round.
            *qj = ((v * id).round() as i32).clamp(-128, 127) as i8 as u8;
        }
        out.extend_from_slice(&q);
    }
}

fn rd_f16(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Dequantize `q4_0`/`q4_1`/`q5_0`/`q5_1`/`q8_0` blocks (`dequantize_row_*`). `src.len()` must
/// be a multiple of the type size (checked by the caller).
pub fn dequantize(t: crate::gguf::GgmlType, src: &[u8], out: &mut Vec<f32>) {
    use crate::gguf::GgmlType as G;
    let ts = t.type_size() as usize;
    for b in src.chunks_exact(ts) {
        let d = rd_f16(b, 0);
        match t {
            G::Q4_0 | G::Q4_1 => {
                let (m, qs) = if t == G::Q4_1 {
                    (rd_f16(b, 2), &b[4..])
                } else {
                    (0.0, &b[2..])
                };
                let mut y = [0f32; QK];
                for j in 0..QK / 2 {
                    let (lo, hi) = (qs[j] & 0x0f, qs[j] >> 4);
                    if t == G::Q4_1 {
                        y[j] = f32::from(lo) * d + m;
                        y[j + QK / 2] = f32::from(hi) * d + m;
                    } else {
                        y[j] = f32::from(i16::from(lo) - 8) * d;
                        y[j + QK / 2] = f32::from(i16::from(hi) - 8) * d;
                    }
                }
                out.extend_from_slice(&y);
            }
            G::Q5_0 | G::Q5_1 => {
                let (m, rest) = if t == G::Q5_1 {
                    (rd_f16(b, 2), &b[4..])
                } else {
                    (0.0, &b[2..])
                };
                let qh = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
                let qs = &rest[4..];
                let mut y = [0f32; QK];
                for j in 0..QK / 2 {
                    let h0 = ((qh >> j) & 1) as u8;
                    let h1 = ((qh >> (j + 16)) & 1) as u8;
                    let q0 = (qs[j] & 0x0f) | (h0 << 4);
                    let q1 = (qs[j] >> 4) | (h1 << 4);
                    if t == G::Q5_1 {
                        y[j] = f32::from(q0) * d + m;
                        y[j + QK / 2] = f32::from(q1) * d + m;
                    } else {
                        y[j] = f32::from(i16::from(q0) - 16) * d;
                        y[j + QK / 2] = f32::from(i16::from(q1) - 16) * d;
                    }
                }
                out.extend_from_slice(&y);
            }
            _ => {
                // Q8_0 (the caller only passes the five legacy types).
                out.extend(b[2..].iter().map(|&q| f32::from(q as i8) * d));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q4_0_block_layout_by_hand() {
        // max |x| is -8 at element 0 → d = 1, id = 1; q = trunc(x + 8.5).
        let mut x = [0f32; 32];
        x[0] = -8.0;
        x[1] = 7.0;
        x[16] = 3.4;
        x[17] = -1.6;
        let mut out = Vec::new();
        quantize_q4_0(&x, &mut out, FmaContract::Off);
        assert_eq!(out.len(), 18);
        assert_eq!(&out[..2], &f16::from_f32(1.0).to_le_bytes());
        // element 0 → 0, element 16 → trunc(11.9) = 11 in the high nibble of qs[0]
        assert_eq!(out[2], 11 << 4);
        // element 1 → trunc(15.5)=15; element 17 → trunc(6.9) = 6
        assert_eq!(out[3], 15 | (6 << 4));
        // the rest: 0 → 8 in both nibbles
        assert!(out[4..].iter().all(|&b| b == 0x88));
        let mut y = Vec::new();
        dequantize(crate::gguf::GgmlType::Q4_0, &out, &mut y);
        assert_eq!(&y[..2], &[-8.0, 7.0]);
        assert_eq!(y[16], 3.0);
    }

    #[test]
    fn q5_0_fifth_bit_plane_and_zero_block() {
        let mut x = [0f32; 32];
        x[0] = -16.0; // d = 1: q = trunc(x + 16.5)
        x[31] = 15.0; // q = 31 → bit 31 of qh set
        let mut out = Vec::new();
        quantize_q5_0(&x, &mut out, FmaContract::Fast);
        let qh = u32::from_le_bytes([out[2], out[3], out[4], out[5]]);
        // element 0 → 0 (no fifth bit), every zero → 16 (fifth bit set), element 31 → 31
        assert_eq!(qh, !1u32);
        let mut zero = Vec::new();
        quantize_q8_0(&[0.0; 32], &mut zero);
        assert_eq!(zero, vec![0u8; 34]);
    }

    #[test]
    fn q8_0_rounds_half_away_from_zero() {
        let mut x = [0f32; 32];
        x[0] = 127.0; // d = 1
        x[1] = 2.5;
        x[2] = -2.5;
        let mut out = Vec::new();
        quantize_q8_0(&x, &mut out);
        assert_eq!(&out[2..5], &[127, 3, (-3i8) as u8]);
    }
}
