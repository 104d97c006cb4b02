//! Scalar decoders of the element and scale types (formats.md §2.1 e2m1, §2.2 e8m0, §4.1 e4m3,
//! §1.3 f16/bf16) and [`WeightMatrix`], a validated view of one weight matrix (or row tile) in any
//! [`WeightFormat`] that yields the dequantized value of (row, k) exactly as the kernels compute it.

use super::gguf_blocks;
use crate::error::KernelError;
use crate::format::{Dtype, WeightFormat};

/// FP8 E4M3FN (bias 7, no infinities, 0x7F/0xFF NaN, subnormals m · 2^-9).
pub fn e4m3_to_f32(c: u8) -> f32 {
    let sign = if c & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = i32::from((c >> 3) & 0xf);
    let m = f32::from(c & 7);
    if e == 0xf && c & 7 == 7 {
        return f32::NAN;
    }
    if e == 0 {
        return sign * m * 2f32.powi(-9);
    }
    sign * (1.0 + m / 8.0) * 2f32.powi(e - 7)
}

/// E2M1 (S EE M, bias 1): the low four bits of `c`.
pub fn e2m1_to_f32(c: u8) -> f32 {
    const TABLE: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    let mag = TABLE.get(usize::from(c & 7)).copied().unwrap_or(f32::NAN);
    if c & 8 != 0 {
        -mag
    } else {
        mag
    }
}

/// E8M0: 2^(e − 127); 0xFF is NaN (OCP; see formats.md §2.2 for what other decoders do).
pub fn e8m0_to_f32(e: u8) -> f32 {
    match e {
        0 => f32::from_bits(0x0040_0000),
        255 => f32::NAN,
        _ => f32::from_bits(u32::from(e) << 23),
    }
}

pub fn f16_to_f32(bits: u16) -> f32 {
    half::f16::from_bits(bits).to_f32()
}

pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

fn byte(buf: &[u8], i: usize) -> u8 {
    buf.get(i).copied().unwrap_or(0)
}

fn half_bits(buf: &[u8], byte_offset: usize) -> u16 {
    u16::from_le_bytes([byte(buf, byte_offset), byte(buf, byte_offset + 1)])
}

fn dtype_at(buf: &[u8], dtype: Dtype, i: usize) -> f32 {
    match dtype {
        Dtype::F32 => f32::from_le_bytes([
            byte(buf, 4 * i),
            byte(buf, 4 * i + 1),
            byte(buf, 4 * i + 2),
            byte(buf, 4 * i + 3),
        ]),
        Dtype::F16 => f16_to_f32(half_bits(buf, 2 * i)),
        Dtype::Bf16 => bf16_to_f32(half_bits(buf, 2 * i)),
    }
}

/// A weight matrix `[rows, k]` whose buffer lengths were checked against its format.
#[derive(Debug, Clone, Copy)]
pub struct WeightMatrix<'a> {
    pub format: WeightFormat,
    pub rows: usize,
    pub k: usize,
    pub packed: &'a [u8],
    pub scales: &'a [u8],
    pub biases: &'a [u8],
}

impl<'a> WeightMatrix<'a> {
    pub fn new(
        format: WeightFormat,
        rows: usize,
        k: usize,
        packed: &'a [u8],
        scales: &'a [u8],
        biases: &'a [u8],
    ) -> Result<Self, KernelError> {
        format.check(rows, k, packed, scales, biases)?;
        Ok(Self {
            format,
            rows,
            k,
            packed,
            scales,
            biases,
        })
    }

    /// The dequantized value of (r, k), computed as the kernel computes it.
    pub fn get(&self, r: usize, k: usize) -> f32 {
        let i = r * self.k + k;
        match self.format {
            WeightFormat::Plain(d) => dtype_at(self.packed, d, i),
            WeightFormat::Fp8Block { block_rows, group } => {
                let cols = self.k.div_ceil(group as usize);
                let s = (r / block_rows as usize) * cols + k / group as usize;
                e4m3_to_f32(byte(self.packed, i)) * e8m0_to_f32(byte(self.scales, s))
            }
            WeightFormat::Mxfp4 => {
                let code = byte(self.packed, i / 2) >> ((i & 1) * 4);
                let s = r * (self.k / 32) + k / 32;
                e2m1_to_f32(code) * e8m0_to_f32(byte(self.scales, s))
            }
            WeightFormat::Affine8 { group, scale_dtype } => {
                let g = r * (self.k / group as usize) + k / group as usize;
                let q = f32::from(byte(self.packed, i));
                dtype_at(self.scales, scale_dtype, g)
                    .mul_add(q, dtype_at(self.biases, scale_dtype, g))
            }
            WeightFormat::Q8_0 => q8_0_at(self.packed, r, self.k, k),
            WeightFormat::Q4_1 => q4_1_at(self.packed, r, self.k, k),
            WeightFormat::Q4_0 => gguf_blocks::q4_0_at(self.packed, r, self.k, k),
            WeightFormat::Q5_0 => gguf_blocks::q5_0_at(self.packed, r, self.k, k),
            WeightFormat::Q5_1 => gguf_blocks::q5_1_at(self.packed, r, self.k, k),
            WeightFormat::Q4K => gguf_blocks::q45_k_at(self.packed, r, self.k, k, false),
            WeightFormat::Q5K => gguf_blocks::q45_k_at(self.packed, r, self.k, k, true),
            WeightFormat::Q6K => gguf_blocks::q6_k_at(self.packed, r, self.k, k),
        }
    }

    /// Elements per chunk of the matmul kernels' accumulation order (`chunk_dot` in the WGSL):
    /// 8 (one packed word) for Q4_1, Q8_0 and mxfp4, 8 consecutive elements for Q4_0, Q5_0, Q5_1 and
    /// the K-quants, 1 for every other format.
    pub fn chunk_len(&self) -> usize {
        match self.format {
            WeightFormat::Q4_1
            | WeightFormat::Q8_0
            | WeightFormat::Mxfp4
            | WeightFormat::Q4_0
            | WeightFormat::Q5_0
            | WeightFormat::Q5_1
            | WeightFormat::Q4K
            | WeightFormat::Q5K
            | WeightFormat::Q6K => 8,
            _ => 1,
        }
    }

    /// The column k of element `i` of chunk `c`, in the kernels' order.
    pub fn chunk_k(&self, c: usize, i: usize) -> usize {
        match self.format {
            // qs word w of block c/4: low nibbles (elements 4w..4w+3), then high (16+4w..)
            WeightFormat::Q4_1 => {
                let w = c % 4;
                let j = if i < 4 {
                    4 * w + i
                } else {
                    16 + 4 * w + (i - 4)
                };
                32 * (c / 4) + j
            }
            WeightFormat::Q8_0 => 32 * (c / 4) + 8 * (c % 4) + i,
            WeightFormat::Mxfp4
            | WeightFormat::Q4_0
            | WeightFormat::Q5_0
            | WeightFormat::Q5_1
            | WeightFormat::Q4K
            | WeightFormat::Q5K
            | WeightFormat::Q6K => 8 * c + i,
            _ => c,
        }
    }

    /// Every value, row-major.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.rows * self.k);
        for r in 0..self.rows {
            for k in 0..self.k {
                out.push(self.get(r, k));
            }
        }
        out
    }
}

/// Element k of row r of a Q8_0 matrix with rows of `k_len` elements.
pub(crate) fn q8_0_at(blocks: &[u8], r: usize, k_len: usize, k: usize) -> f32 {
    let base = super::block_base(WeightFormat::Q8_0, r, k_len, k);
    let d = f16_to_f32(half_bits(blocks, base));
    let q = byte(blocks, base + 2 + (k & 31)) as i8;
    d * f32::from(q)
}

/// Element k of row r of a Q4_1 matrix with rows of `k_len` elements.
pub(crate) fn q4_1_at(blocks: &[u8], r: usize, k_len: usize, k: usize) -> f32 {
    let base = super::block_base(WeightFormat::Q4_1, r, k_len, k);
    let d = f16_to_f32(half_bits(blocks, base));
    let m = f16_to_f32(half_bits(blocks, base + 2));
    let j = k & 31;
    let q = (byte(blocks, base + 4 + (j & 15)) >> ((j >> 4) * 4)) & 0xf;
    d.mul_add(f32::from(q), m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e2m1_table_matches_formats_md_2_1() {
        let expected = [
            0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
        ];
        for (c, e) in expected.iter().enumerate() {
            let v = e2m1_to_f32(c as u8);
            assert_eq!(v.to_bits(), f32::to_bits(*e), "code {c:#x}");
        }
    }

    #[test]
    fn e8m0_matches_formats_md_2_2() {
        assert_eq!(e8m0_to_f32(0x7f), 1.0);
        assert_eq!(e8m0_to_f32(0x80), 2.0);
        assert_eq!(e8m0_to_f32(0x7e), 0.5);
        assert_eq!(e8m0_to_f32(0xfe), 2f32.powi(127));
        assert_eq!(e8m0_to_f32(0x00), 2f32.powi(-127));
        assert!(e8m0_to_f32(0xff).is_nan());
    }

    #[test]
    fn e4m3_matches_formats_md_4_1() {
        assert_eq!(e4m3_to_f32(0x38), 1.0);
        assert_eq!(e4m3_to_f32(0x7e), 448.0);
        assert_eq!(e4m3_to_f32(0xfe), -448.0);
        assert_eq!(e4m3_to_f32(0x08), 2f32.powi(-6));
        assert_eq!(e4m3_to_f32(0x01), 2f32.powi(-9));
        assert_eq!(e4m3_to_f32(0x80).to_bits(), (-0.0f32).to_bits());
        assert!(e4m3_to_f32(0x7f).is_nan());
        assert!(e4m3_to_f32(0xff).is_nan());
        // 0x3c = 0.0111.100 = 1.5 · 2^0; 0x41 = 0.1000.001 = 1.125 · 2
        assert_eq!(e4m3_to_f32(0x3c), 1.5);
        assert_eq!(e4m3_to_f32(0x41), 2.25);
        // every finite code round-trips through its sign and is ≤ 448 in magnitude
        for c in 0..=255u8 {
            let v = e4m3_to_f32(c);
            if c & 0x7f != 0x7f {
                assert!(v.abs() <= 448.0, "code {c:#x}");
                assert_eq!(v.is_sign_negative(), c & 0x80 != 0, "code {c:#x}");
            }
        }
    }

    #[test]
    fn half_types() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(bf16_to_f32(0x3f80), 1.0);
        assert_eq!(bf16_to_f32(0xc040), -3.0);
    }

    #[test]
    fn q4_1_nibble_order_and_affine_value() {
        // d = 0.5 (f16 0x3800), m = -1 (0xbc00); qs[0] = 0x21: element 0 = 1, element 16 = 2
        let mut block = vec![0x00, 0x38, 0x00, 0xbc];
        block.extend([0u8; 16]);
        block[4] = 0x21;
        block[4 + 15] = 0xf0; // element 15 = 0, element 31 = 15
        assert_eq!(q4_1_at(&block, 0, 32, 0), -0.5);
        assert_eq!(q4_1_at(&block, 0, 32, 16), 0.0);
        assert_eq!(q4_1_at(&block, 0, 32, 15), -1.0);
        assert_eq!(q4_1_at(&block, 0, 32, 31), 6.5);
    }

    #[test]
    fn q8_0_signed_values() {
        // d = 2 (f16 0x4000); qs = [-128, 127, -1, …]
        let mut block = vec![0x00, 0x40];
        block.extend([0u8; 32]);
        block[2] = 0x80;
        block[3] = 0x7f;
        block[4] = 0xff;
        assert_eq!(q8_0_at(&block, 0, 32, 0), -256.0);
        assert_eq!(q8_0_at(&block, 0, 32, 1), 254.0);
        assert_eq!(q8_0_at(&block, 0, 32, 2), -2.0);
        assert_eq!(q8_0_at(&block, 0, 32, 3), 0.0);
    }

    #[test]
    fn mxfp4_low_nibble_is_the_even_element() {
        // one row of 32: byte 0 = 0xa3 → element 0 = code 3 (1.5), element 1 = code 0xa (−1);
        // scale 0x80 = 2
        let mut packed = vec![0u8; 16];
        packed[0] = 0xa3;
        let scales = [0x80u8];
        let w = WeightMatrix::new(WeightFormat::Mxfp4, 1, 32, &packed, &scales, &[])
            .expect("valid shape");
        assert_eq!(w.get(0, 0), 3.0);
        assert_eq!(w.get(0, 1), -2.0);
        assert_eq!(w.get(0, 2), 0.0);
    }

    #[test]
    fn fp8_block_grid_is_two_dimensional() {
        // 3 rows × 5 cols with 2×2 blocks: grid [2, 3]
        let format = WeightFormat::Fp8Block {
            block_rows: 2,
            group: 2,
        };
        let packed = [0x38u8; 15]; // all 1.0
        let scales = [127u8, 128, 129, 130, 131, 132]; // 1, 2, 4 / 8, 16, 32
        let w = WeightMatrix::new(format, 3, 5, &packed, &scales, &[]).expect("valid shape");
        let got = w.dequantize();
        let want = [
            1.0, 1.0, 2.0, 2.0, 4.0, //
            1.0, 1.0, 2.0, 2.0, 4.0, //
            8.0, 8.0, 16.0, 16.0, 32.0,
        ];
        assert_eq!(got, want);
        assert!(WeightMatrix::new(format, 3, 5, &packed, &scales[..5], &[]).is_err());
    }

    #[test]
    fn affine_uses_its_scale_dtype_and_negative_scales() {
        // 1 row × 4, group 2, bf16 scales [-0.5, 2], biases [3, -1]; q = [0, 2, 1, 255]
        let format = WeightFormat::Affine8 {
            group: 2,
            scale_dtype: Dtype::Bf16,
        };
        let packed = [0u8, 2, 1, 255];
        let scales = [0x00, 0xbf, 0x00, 0x40];
        let biases = [0x40, 0x40, 0x80, 0xbf];
        let w = WeightMatrix::new(format, 1, 4, &packed, &scales, &biases).expect("valid shape");
        assert_eq!(w.dequantize(), vec![3.0, 2.0, 1.0, 509.0]);
        let bad = WeightFormat::Affine8 {
            group: 3,
            scale_dtype: Dtype::F32,
        };
        assert!(bad.check_k(6).is_err());
    }
}
