//! safetensors element types: the header strings, their bit sizes and their sort order.
//!
//! Spec: `../shared/design/formats.md` §1.3 (safetensors 0.8.0 `src/tensor.rs` `enum Dtype`,
//! `bitsize()`, `Display`). The enum order here is the upstream enum order, which is also the order
//! the upstream writer sorts tensors by (descending) to align the data section (§1.2).

use std::fmt;
use std::str::FromStr;

/// One safetensors dtype, spelled in headers exactly as [`Dtype::as_str`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dtype {
    /// `BOOL`, one byte per element.
    Bool,
    /// `F4`: OCP MX FP4 (e2m1), two elements per byte.
    F4,
    /// `F6_E2M3`: 6-bit float.
    F6E2M3,
    /// `F6_E3M2`: 6-bit float.
    F6E3M2,
    /// `U8`.
    U8,
    /// `I8`.
    I8,
    /// `F8_E5M2`.
    F8E5M2,
    /// `F8_E4M3` (= torch `float8_e4m3fn`).
    F8E4M3,
    /// `F8_E8M0` (= torch `float8_e8m0fnu`, unsigned power-of-two scale).
    F8E8M0,
    /// `F8_E4M3FNUZ`.
    F8E4M3Fnuz,
    /// `F8_E5M2FNUZ`.
    F8E5M2Fnuz,
    /// `I16`.
    I16,
    /// `U16`.
    U16,
    /// `F16`.
    F16,
    /// `BF16`.
    BF16,
    /// `I32`.
    I32,
    /// `U32`.
    U32,
    /// `F32`.
    F32,
    /// `C64`: complex of two f32.
    C64,
    /// `F64`.
    F64,
    /// `I64`.
    I64,
    /// `U64`.
    U64,
}

/// Every dtype in upstream enum order.
pub const ALL: [Dtype; 22] = [
    Dtype::Bool,
    Dtype::F4,
    Dtype::F6E2M3,
    Dtype::F6E3M2,
    Dtype::U8,
    Dtype::I8,
    Dtype::F8E5M2,
    Dtype::F8E4M3,
    Dtype::F8E8M0,
    Dtype::F8E4M3Fnuz,
    Dtype::F8E5M2Fnuz,
    Dtype::I16,
    Dtype::U16,
    Dtype::F16,
    Dtype::BF16,
    Dtype::I32,
    Dtype::U32,
    Dtype::F32,
    Dtype::C64,
    Dtype::F64,
    Dtype::I64,
    Dtype::U64,
];

/// A header named a dtype this crate does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown safetensors dtype `{0}` (known: BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64)")]
pub struct UnknownDtype(pub String);

impl Dtype {
    /// The header string (`"F8_E4M3"`, `"BF16"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Dtype::Bool => "BOOL",
            Dtype::F4 => "F4",
            Dtype::F6E2M3 => "F6_E2M3",
            Dtype::F6E3M2 => "F6_E3M2",
            Dtype::U8 => "U8",
            Dtype::I8 => "I8",
            Dtype::F8E5M2 => "F8_E5M2",
            Dtype::F8E4M3 => "F8_E4M3",
            Dtype::F8E8M0 => "F8_E8M0",
            Dtype::F8E4M3Fnuz => "F8_E4M3FNUZ",
            Dtype::F8E5M2Fnuz => "F8_E5M2FNUZ",
            Dtype::I16 => "I16",
            Dtype::U16 => "U16",
            Dtype::F16 => "F16",
            Dtype::BF16 => "BF16",
            Dtype::I32 => "I32",
            Dtype::U32 => "U32",
            Dtype::F32 => "F32",
            Dtype::C64 => "C64",
            Dtype::F64 => "F64",
            Dtype::I64 => "I64",
            Dtype::U64 => "U64",
        }
    }

    /// Bits per element.
    pub fn bits(self) -> u64 {
        match self {
            Dtype::F4 => 4,
            Dtype::F6E2M3 | Dtype::F6E3M2 => 6,
            Dtype::Bool
            | Dtype::U8
            | Dtype::I8
            | Dtype::F8E5M2
            | Dtype::F8E4M3
            | Dtype::F8E8M0
            | Dtype::F8E4M3Fnuz
            | Dtype::F8E5M2Fnuz => 8,
            Dtype::I16 | Dtype::U16 | Dtype::F16 | Dtype::BF16 => 16,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 32,
            Dtype::C64 | Dtype::F64 | Dtype::I64 | Dtype::U64 => 64,
        }
    }

    /// Position in the upstream enum (the writer sorts by this, descending).
    pub fn rank(self) -> usize {
        ALL.iter().position(|d| *d == self).unwrap_or(0)
    }

    /// Bytes taken by `numel` elements: `None` on overflow or when `numel·bits` is not a whole
    /// number of bytes (safetensors' `MisalignedSlice`).
    pub fn byte_len(self, numel: u64) -> Option<u64> {
        let bits = numel.checked_mul(self.bits())?;
        if bits % 8 != 0 {
            return None;
        }
        Some(bits / 8)
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Dtype {
    type Err = UnknownDtype;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ALL.iter()
            .copied()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| UnknownDtype(s.chars().take(64).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip_and_are_distinct() {
        for d in ALL {
            assert_eq!(d.as_str().parse::<Dtype>(), Ok(d));
            assert_eq!(d.to_string(), d.as_str());
        }
        let mut names: Vec<_> = ALL.iter().map(|d| d.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        assert!(
            "f32".parse::<Dtype>().is_err(),
            "header strings are case-sensitive"
        );
        assert!("F8_E4M3FN".parse::<Dtype>().is_err());
    }

    #[test]
    fn byte_lengths() {
        assert_eq!(Dtype::F4.byte_len(32), Some(16));
        assert_eq!(Dtype::F4.byte_len(3), None);
        assert_eq!(Dtype::F6E2M3.byte_len(4), Some(3));
        assert_eq!(Dtype::BF16.byte_len(10), Some(20));
        assert_eq!(Dtype::I64.byte_len(u64::MAX), None);
        assert_eq!(Dtype::F8E8M0.byte_len(7), Some(7));
    }

    #[test]
    fn rank_is_enum_order_and_matches_upstream_names() {
        // The crate we cross-check against prints the same strings in the same order.
        assert!(Dtype::F32.rank() > Dtype::BF16.rank());
        assert!(Dtype::BF16.rank() > Dtype::F8E8M0.rank());
        assert!(Dtype::F8E8M0.rank() > Dtype::F8E4M3.rank());
        assert!(Dtype::F8E4M3.rank() > Dtype::I8.rank());
        assert!(Dtype::I64.rank() > Dtype::F32.rank());
        let upstream = [
            (safetensors::Dtype::BOOL, Dtype::Bool),
            (safetensors::Dtype::U8, Dtype::U8),
            (safetensors::Dtype::I8, Dtype::I8),
            (safetensors::Dtype::F8_E4M3, Dtype::F8E4M3),
            (safetensors::Dtype::F8_E8M0, Dtype::F8E8M0),
            (safetensors::Dtype::BF16, Dtype::BF16),
            (safetensors::Dtype::F32, Dtype::F32),
            (safetensors::Dtype::I64, Dtype::I64),
            (safetensors::Dtype::U32, Dtype::U32),
        ];
        for (u, ours) in upstream {
            assert_eq!(u.to_string(), ours.as_str());
            assert_eq!(u.bitsize() as u64, ours.bits());
        }
    }
}
