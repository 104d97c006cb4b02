//! Weight encoders and decoders for `minirun-gguf quantize` / `convert`: the quant targets, the
//! element casts (f32 → f16 / bf16, round-to-nearest-even), decoding of the float and legacy
//! types to f32, and the arithmetic switch [`FmaContract`].
//!
//! Spec: seed 003 §2.2 (targets), §2.1 (bf16 RNE incl. the quiet-NaN rule), §4.2 (FMA
//! contraction is a rounding decision of the reference build); formats.md §5.2–5.3.

pub mod kquant;
pub mod kquant_low;
pub mod legacy;

use half::{bf16, f16};

use super::types::GgmlType;

/// Whether `a*b + c` in the reference quantizers is one fused multiply-add (a build with
/// `-ffp-contract=fast` on a CPU with FMA, e.g. GCC on aarch64) or a multiply then an add (an
/// x86-64 baseline build such as llama.cpp with `GGML_NATIVE=OFF`, and gguf-py's numpy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FmaContract {
    /// Contracted: one rounding.
    Fast,
    /// Not contracted: two roundings (the default; matches gguf-py and x86-64 baseline ggml).
    #[default]
    Off,
}

/// The `--type` targets of `quantize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types, missing_docs)]
pub enum QuantTarget {
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q4_K,
    Q5_K,
    Q6_K,
    F16,
    F32,
}

/// The supported list, in the seed's order, as printed in refusals.
pub const SUPPORTED: &str = "q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K, f16, f32";

impl QuantTarget {
    /// Parse a `--type` value (exact spelling, plus upper-case K/k tolerance).
    pub fn parse(s: &str) -> Option<QuantTarget> {
        use QuantTarget::*;
        Some(match s.to_ascii_lowercase().as_str() {
            "q4_0" => Q4_0,
            "q4_1" => Q4_1,
            "q5_0" => Q5_0,
            "q5_1" => Q5_1,
            "q8_0" => Q8_0,
            "q4_k" => Q4_K,
            "q5_k" => Q5_K,
            "q6_k" => Q6_K,
            "f16" => F16,
            "f32" => F32,
            _ => return None,
        })
    }

    /// The ggml type written.
    pub fn ggml_type(self) -> GgmlType {
        use QuantTarget::*;
        match self {
            Q4_0 => GgmlType::Q4_0,
            Q4_1 => GgmlType::Q4_1,
            Q5_0 => GgmlType::Q5_0,
            Q5_1 => GgmlType::Q5_1,
            Q8_0 => GgmlType::Q8_0,
            Q4_K => GgmlType::Q4_K,
            Q5_K => GgmlType::Q5_K,
            Q6_K => GgmlType::Q6_K,
            F16 => GgmlType::F16,
            F32 => GgmlType::F32,
        }
    }

    /// The llama.cpp file type this target writes (q4_K/q5_K as their _M types, seed §2.2).
    pub fn llama_file_type(self) -> crate::gguf::file_type::FileType {
        use crate::gguf::file_type::FileType as F;
        use QuantTarget::*;
        match self {
            F32 => F::F32,
            F16 => F::F16,
            Q4_0 => F::Q4_0,
            Q4_1 => F::Q4_1,
            Q8_0 => F::Q8_0,
            Q5_0 => F::Q5_0,
            Q5_1 => F::Q5_1,
            Q4_K => F::Q4_K_M,
            Q5_K => F::Q5_K_M,
            Q6_K => F::Q6_K,
        }
    }

    /// `general.file_type` (llama.cpp's `llama_ftype` number of [`Self::llama_file_type`]).
    pub fn file_type(self) -> u32 {
        self.llama_file_type().id()
    }

    /// The K-quant row fallback (`tensor_type_fallback`): q4_K→q5_0, q5_K→q5_1, q6_K→q8_0.
    pub fn k_fallback(self) -> Option<GgmlType> {
        match self {
            QuantTarget::Q4_K => Some(GgmlType::Q5_0),
            QuantTarget::Q5_K => Some(GgmlType::Q5_1),
            QuantTarget::Q6_K => Some(GgmlType::Q8_0),
            _ => None,
        }
    }
}

/// Types [`decode_to_f32`] can decode.
pub fn is_decodable(t: GgmlType) -> bool {
    use GgmlType::*;
    matches!(t, F32 | F16 | BF16 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0)
}

/// Types [`encode`] can write.
pub fn is_encodable(t: GgmlType) -> bool {
    use GgmlType::*;
    matches!(
        t,
        F32 | F16 | BF16 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q2_K | Q3_K | Q4_K | Q5_K | Q6_K
    )
}

/// `ggml_compute_fp32_to_bf16`: round to nearest even, NaN forced quiet.
pub fn f32_to_bf16_bits(x: f32) -> u16 {
    let u = x.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    ((u as u64 + (0x7fff + u64::from((u >> 16) & 1))) >> 16) as u16
}

/// Decode `src` (the payload of a tensor of type `t`) to f32, appending to `out`.
pub fn decode_to_f32(t: GgmlType, src: &[u8], out: &mut Vec<f32>) -> Result<(), String> {
    let ts = t.type_size() as usize;
    if src.len() % ts != 0 {
        return Err(format!(
            "{} bytes is not a whole number of {t} blocks",
            src.len()
        ));
    }
    match t {
        GgmlType::F32 => out.extend(
            src.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        ),
        GgmlType::F16 => out.extend(
            src.chunks_exact(2)
                .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32()),
        ),
        GgmlType::BF16 => out.extend(
            src.chunks_exact(2)
                .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32()),
        ),
        GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q8_0 => {
            legacy::dequantize(t, src, out)
        }
        other => return Err(format!("no decoder for {other}")),
    }
    Ok(())
}

/// Encode `x` (whole rows of length `row_len`) as type `t`, appending to `out`.
pub fn encode(
    t: GgmlType,
    x: &[f32],
    row_len: usize,
    out: &mut Vec<u8>,
    fma: FmaContract,
) -> Result<(), String> {
    let bs = t.block_size() as usize;
    if row_len == 0 || row_len % bs != 0 || x.len() % row_len != 0 {
        return Err(format!(
            "row length {row_len} is not a multiple of the {t} block size {bs}"
        ));
    }
    match t {
        GgmlType::F32 => out.extend(x.iter().flat_map(|v| v.to_le_bytes())),
        GgmlType::F16 => out.extend(x.iter().flat_map(|v| f16::from_f32(*v).to_le_bytes())),
        GgmlType::BF16 => out.extend(x.iter().flat_map(|v| f32_to_bf16_bits(*v).to_le_bytes())),
        GgmlType::Q4_0 => legacy::quantize_q4_0(x, out, fma),
        GgmlType::Q4_1 => legacy::quantize_q4_1(x, out, fma),
        GgmlType::Q5_0 => legacy::quantize_q5_0(x, out, fma),
        GgmlType::Q5_1 => legacy::quantize_q5_1(x, out, fma),
        GgmlType::Q8_0 => legacy::quantize_q8_0(x, out),
        GgmlType::Q2_K => kquant_low::quantize_q2_k(x, out, fma),
        GgmlType::Q3_K => kquant_low::quantize_q3_k(x, out, fma),
        GgmlType::Q4_K => kquant::quantize_q4_k(x, out, fma),
        GgmlType::Q5_K => kquant::quantize_q5_k(x, out, fma),
        GgmlType::Q6_K => kquant::quantize_q6_k(x, out, fma),
        other => return Err(format!("no encoder for {other}")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_is_round_to_nearest_even_with_quiet_nan() {
        assert_eq!(f32_to_bf16_bits(1.0), 0x3f80);
        // exactly half-way, even below → stays
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3f80_8000)), 0x3f80);
        // half-way, odd below → rounds up
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3f80_8001)), 0x3f81);
        // signalling NaN becomes quiet
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x7f80_0001)), 0x7fc0);
        assert_eq!(f32_to_bf16_bits(f32::INFINITY), 0x7f80);
    }

    #[test]
    fn decode_encode_round_trip_for_exact_types() {
        let x: Vec<f32> = (0..64).map(|i| i as f32 * 0.25 - 8.0).collect();
        for t in [GgmlType::F32, GgmlType::F16, GgmlType::BF16] {
            let mut b = Vec::new();
            encode(t, &x, 32, &mut b, FmaContract::Off).unwrap();
            let mut y = Vec::new();
            decode_to_f32(t, &b, &mut y).unwrap();
            assert_eq!(x, y, "{t}");
        }
        assert!(encode(GgmlType::Q4_0, &x, 16, &mut Vec::new(), FmaContract::Off).is_err());
    }
}
