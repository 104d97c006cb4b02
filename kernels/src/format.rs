//! Weight formats the dequantize-and-multiply kernels read, with the byte length of each buffer
//! (formats.md §1.3, §2, §3, §4, §5.2 incl. the K-quant super-blocks; container seed 000 "Quantization modes").

use crate::error::KernelError;
use crate::kernel::Kernel;
use crate::params::MatmulParams;

/// A plain element type; also the scale/bias dtype of the affine mode. The discriminant is the
/// `dtype` code the WGSL kernels switch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    F32 = 0,
    F16 = 1,
    Bf16 = 2,
}

impl Dtype {
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
        }
    }

    pub fn code(self) -> u32 {
        self as u32
    }

    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
        }
    }
}

/// How a weight matrix `[rows, K]` is stored. Tiles hold whole rows, so every length here is for
/// the rows of one buffer (a tile or the whole matrix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// Row-major elements of one dtype.
    Plain(Dtype),
    /// `fp8-e4m3-block`: e4m3 bytes [rows, K] and an e8m0 grid [ceil(rows/block_rows), ceil(K/group)].
    Fp8Block { block_rows: u32, group: u32 },
    /// `mxfp4`: e2m1 nibbles (low nibble first) [rows, K/2] bytes and e8m0 scales [rows, K/32].
    Mxfp4,
    /// `affine` with 8 bits: u8 q [rows, K], scales and biases [rows, K/group] in `scale_dtype`.
    Affine8 { group: u32, scale_dtype: Dtype },
    /// GGUF Q8_0: rows of K/32 blocks of 34 bytes.
    Q8_0,
    /// GGUF Q4_1: rows of K/32 blocks of 20 bytes.
    Q4_1,
    /// GGUF Q4_0: rows of K/32 blocks of 18 bytes.
    Q4_0,
    /// GGUF Q5_0: rows of K/32 blocks of 22 bytes.
    Q5_0,
    /// GGUF Q5_1: rows of K/32 blocks of 24 bytes.
    Q5_1,
    /// GGUF Q4_K: rows of K/256 super-blocks of 144 bytes.
    Q4K,
    /// GGUF Q5_K: rows of K/256 super-blocks of 176 bytes.
    Q5K,
    /// GGUF Q6_K: rows of K/256 super-blocks of 210 bytes.
    Q6K,
}

fn mul(a: usize, b: usize, what: &'static str) -> Result<usize, KernelError> {
    a.checked_mul(b).ok_or(KernelError::Overflow { what })
}

impl WeightFormat {
    pub fn name(&self) -> String {
        match self {
            WeightFormat::Plain(d) => d.name().to_string(),
            WeightFormat::Fp8Block { block_rows, group } => {
                format!("fp8-e4m3-block({block_rows}x{group})")
            }
            WeightFormat::Mxfp4 => "mxfp4".to_string(),
            WeightFormat::Affine8 { group, scale_dtype } => {
                format!("affine-8bit(group {group}, {})", scale_dtype.name())
            }
            WeightFormat::Q8_0 => "q8_0".to_string(),
            WeightFormat::Q4_1 => "q4_1".to_string(),
            WeightFormat::Q4_0 => "q4_0".to_string(),
            WeightFormat::Q5_0 => "q5_0".to_string(),
            WeightFormat::Q5_1 => "q5_1".to_string(),
            WeightFormat::Q4K => "q4_K".to_string(),
            WeightFormat::Q5K => "q5_K".to_string(),
            WeightFormat::Q6K => "q6_K".to_string(),
        }
    }

    /// Checks that K (and the group sizes) fit the format.
    pub fn check_k(&self, k: usize) -> Result<(), KernelError> {
        let need = |multiple: usize| {
            if k % multiple == 0 {
                Ok(())
            } else {
                Err(KernelError::KNotMultiple {
                    format: self.name(),
                    k,
                    multiple,
                })
            }
        };
        if k == 0 {
            return Err(KernelError::Shape {
                what: "k",
                value: 0,
                reason: "the reduction length must be positive",
            });
        }
        match *self {
            WeightFormat::Plain(_) => Ok(()),
            WeightFormat::Fp8Block { block_rows, group } => {
                for g in [block_rows, group] {
                    if g == 0 {
                        return Err(KernelError::BadGroup {
                            format: self.name(),
                            group: 0,
                        });
                    }
                }
                Ok(())
            }
            WeightFormat::Mxfp4
            | WeightFormat::Q8_0
            | WeightFormat::Q4_1
            | WeightFormat::Q4_0
            | WeightFormat::Q5_0
            | WeightFormat::Q5_1 => need(32),
            WeightFormat::Q4K | WeightFormat::Q5K | WeightFormat::Q6K => need(256),
            WeightFormat::Affine8 { group, .. } => {
                let g = group as usize;
                if g == 0 || !g.is_power_of_two() {
                    return Err(KernelError::BadGroup {
                        format: self.name(),
                        group: g,
                    });
                }
                need(g)
            }
        }
    }

    /// Elements and bytes of one block of a self-contained block format, the GGUF types
    /// (ggml's `blck_size` and `type_size`; `tests/block_layouts.rs` holds this table against
    /// `artifact::gguf`'s, the WGSL modules' `BLOCK_ELEMS`/`BLOCK_BYTES` and the CPU reference).
    pub const fn block(&self) -> Option<(usize, usize)> {
        match self {
            WeightFormat::Q8_0 => Some((32, 34)),
            WeightFormat::Q4_1 => Some((32, 20)),
            WeightFormat::Q4_0 => Some((32, 18)),
            WeightFormat::Q5_0 => Some((32, 22)),
            WeightFormat::Q5_1 => Some((32, 24)),
            WeightFormat::Q4K => Some((256, 144)),
            WeightFormat::Q5K => Some((256, 176)),
            WeightFormat::Q6K => Some((256, 210)),
            WeightFormat::Plain(_)
            | WeightFormat::Fp8Block { .. }
            | WeightFormat::Affine8 { .. }
            | WeightFormat::Mxfp4 => None,
        }
    }

    /// Bytes of the packed (element) buffer for `rows` rows.
    pub fn packed_len(&self, rows: usize, k: usize) -> Result<usize, KernelError> {
        let n = mul(rows, k, "rows × k")?;
        if let Some((elems, bytes)) = self.block() {
            return mul(n / elems, bytes, "packed length");
        }
        match self {
            WeightFormat::Plain(d) => mul(n, d.size(), "packed length"),
            WeightFormat::Mxfp4 => Ok(n / 2),
            _ => Ok(n),
        }
    }

    /// Bytes of the scale buffer (0 when the format has none).
    pub fn scales_len(&self, rows: usize, k: usize) -> Result<usize, KernelError> {
        match *self {
            WeightFormat::Fp8Block { block_rows, group } => mul(
                rows.div_ceil((block_rows as usize).max(1)),
                k.div_ceil((group as usize).max(1)),
                "scale grid",
            ),
            WeightFormat::Mxfp4 => Ok(mul(rows, k, "rows × k")? / 32),
            WeightFormat::Affine8 { group, scale_dtype } => mul(
                mul(rows, k / (group as usize).max(1), "scale count")?,
                scale_dtype.size(),
                "scale length",
            ),
            _ => Ok(0),
        }
    }

    /// Bytes of the bias buffer (affine only; 0 otherwise).
    pub fn biases_len(&self, rows: usize, k: usize) -> Result<usize, KernelError> {
        match self {
            WeightFormat::Affine8 { .. } => self.scales_len(rows, k),
            _ => Ok(0),
        }
    }

    /// How many weight buffers the kernels bind: packed, then scales, then biases.
    pub fn buffer_count(&self) -> usize {
        match self {
            WeightFormat::Plain(_)
            | WeightFormat::Q8_0
            | WeightFormat::Q4_1
            | WeightFormat::Q4_0
            | WeightFormat::Q5_0
            | WeightFormat::Q5_1
            | WeightFormat::Q4K
            | WeightFormat::Q5K
            | WeightFormat::Q6K => 1,
            WeightFormat::Fp8Block { .. } | WeightFormat::Mxfp4 => 2,
            WeightFormat::Affine8 { .. } => 3,
        }
    }

    /// Checks every buffer length against `rows × k`.
    pub fn check(
        &self,
        rows: usize,
        k: usize,
        packed: &[u8],
        scales: &[u8],
        biases: &[u8],
    ) -> Result<(), KernelError> {
        self.check_k(k)?;
        let parts: [(&'static str, usize, usize); 3] = [
            ("packed", self.packed_len(rows, k)?, packed.len()),
            ("scales", self.scales_len(rows, k)?, scales.len()),
            ("biases", self.biases_len(rows, k)?, biases.len()),
        ];
        for (what, expected, actual) in parts {
            if expected != actual {
                return Err(KernelError::Length {
                    what,
                    format: self.name(),
                    rows,
                    k,
                    expected,
                    actual,
                });
            }
        }
        Ok(())
    }

    /// Byte ranges of rows `r0..r1` inside whole-matrix packed, scale and bias buffers: what one
    /// row tile holds. For `fp8-e4m3-block` the tile must start on a multiple of `block_rows` so its
    /// scale-grid rows are its own.
    pub fn row_ranges(
        &self,
        k: usize,
        r0: usize,
        r1: usize,
    ) -> Result<[std::ops::Range<usize>; 3], KernelError> {
        if r0 > r1 {
            return Err(KernelError::Shape {
                what: "row range start",
                value: r0,
                reason: "must not exceed the end",
            });
        }
        let packed = self.packed_len(r0, k)?..self.packed_len(r1, k)?;
        let scales = match *self {
            WeightFormat::Fp8Block { block_rows, group } => {
                let br = (block_rows as usize).max(1);
                if r0 % br != 0 {
                    return Err(KernelError::Shape {
                        what: "fp8 tile start row",
                        value: r0,
                        reason: "must be a multiple of the scale block rows",
                    });
                }
                let cols = k.div_ceil((group as usize).max(1));
                mul(r0 / br, cols, "scale range")?..mul(r1.div_ceil(br), cols, "scale range")?
            }
            _ => self.scales_len(r0, k)?..self.scales_len(r1, k)?,
        };
        let biases = self.biases_len(r0, k)?..self.biases_len(r1, k)?;
        Ok([packed, scales, biases])
    }

    pub fn matvec_kernel(&self) -> Kernel {
        match self {
            WeightFormat::Plain(_) => Kernel::MatvecPlain,
            WeightFormat::Fp8Block { .. } => Kernel::MatvecFp8Block,
            WeightFormat::Mxfp4 => Kernel::MatvecMxfp4,
            WeightFormat::Affine8 { .. } => Kernel::MatvecAffine8,
            WeightFormat::Q8_0 => Kernel::MatvecQ8_0,
            WeightFormat::Q4_1 => Kernel::MatvecQ4_1,
            WeightFormat::Q4_0 => Kernel::MatvecQ4_0,
            WeightFormat::Q5_0 => Kernel::MatvecQ5_0,
            WeightFormat::Q5_1 => Kernel::MatvecQ5_1,
            WeightFormat::Q4K => Kernel::MatvecQ4K,
            WeightFormat::Q5K => Kernel::MatvecQ5K,
            WeightFormat::Q6K => Kernel::MatvecQ6K,
        }
    }

    pub fn matmul_kernel(&self) -> Kernel {
        match self {
            WeightFormat::Plain(_) => Kernel::MatmulPlain,
            WeightFormat::Fp8Block { .. } => Kernel::MatmulFp8Block,
            WeightFormat::Mxfp4 => Kernel::MatmulMxfp4,
            WeightFormat::Affine8 { .. } => Kernel::MatmulAffine8,
            WeightFormat::Q8_0 => Kernel::MatmulQ8_0,
            WeightFormat::Q4_1 => Kernel::MatmulQ4_1,
            WeightFormat::Q4_0 => Kernel::MatmulQ4_0,
            WeightFormat::Q5_0 => Kernel::MatmulQ5_0,
            WeightFormat::Q5_1 => Kernel::MatmulQ5_1,
            WeightFormat::Q4K => Kernel::MatmulQ4K,
            WeightFormat::Q5K => Kernel::MatmulQ5K,
            WeightFormat::Q6K => Kernel::MatmulQ6K,
        }
    }

    /// Uniform parameters for multiplying `rows` rows (one tile or the whole matrix) by `tokens`
    /// vectors of length `k`, writing `y[t · y_stride + y_offset + r]`.
    pub fn params(
        &self,
        rows: u32,
        k: u32,
        tokens: u32,
        y_stride: u32,
        y_offset: u32,
    ) -> MatmulParams {
        let (group, block_rows, dtype) = match *self {
            WeightFormat::Plain(d) => (1, 1, d.code()),
            WeightFormat::Fp8Block { block_rows, group } => (group, block_rows, 0),
            WeightFormat::Mxfp4 => (32, 1, 0),
            WeightFormat::Affine8 { group, scale_dtype } => (group, 1, scale_dtype.code()),
            // the GGUF blocks: the scale group is the block (`block`, the one table)
            f => (f.block().map_or(1, |(elems, _)| elems as u32), 1, 0),
        };
        MatmulParams {
            rows,
            k,
            tokens,
            y_stride,
            y_offset,
            group,
            block_rows,
            dtype,
            groups_x: crate::grid_2d(rows).0,
            accumulate: 0,
            zero: 0,
            position: 0,
        }
    }
}

/// The element formats an embedding table may have. The discriminant is the kernel's `dtype` code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmbeddingFormat {
    F32 = 0,
    F16 = 1,
    Bf16 = 2,
    Q8_0 = 3,
    Q4_1 = 4,
    Q5_0 = 5,
    Q5_1 = 6,
    Q4K = 7,
    Q5K = 8,
    Q6K = 9,
    Q4_0 = 10,
}

impl EmbeddingFormat {
    pub fn code(self) -> u32 {
        self as u32
    }

    pub fn weight_format(self) -> WeightFormat {
        match self {
            EmbeddingFormat::F32 => WeightFormat::Plain(Dtype::F32),
            EmbeddingFormat::F16 => WeightFormat::Plain(Dtype::F16),
            EmbeddingFormat::Bf16 => WeightFormat::Plain(Dtype::Bf16),
            EmbeddingFormat::Q8_0 => WeightFormat::Q8_0,
            EmbeddingFormat::Q4_1 => WeightFormat::Q4_1,
            EmbeddingFormat::Q5_0 => WeightFormat::Q5_0,
            EmbeddingFormat::Q5_1 => WeightFormat::Q5_1,
            EmbeddingFormat::Q4K => WeightFormat::Q4K,
            EmbeddingFormat::Q5K => WeightFormat::Q5K,
            EmbeddingFormat::Q6K => WeightFormat::Q6K,
            EmbeddingFormat::Q4_0 => WeightFormat::Q4_0,
        }
    }
}
