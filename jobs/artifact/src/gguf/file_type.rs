//! llama.cpp's file types (`llama_ftype`): the names `llama-quantize` takes and the number a GGUF
//! file records in `general.file_type`. A value of the format; which tensor gets which type for a
//! file type (llama-quantize's mixture) is the `tooling` crate's `gguf::mixture`.

use super::types::GgmlType;

/// A llama.cpp file type (`llama_ftype`) as `llama-quantize` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types, missing_docs)]
pub enum FileType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2_K,
    Q2_K_S,
    Q3_K_S,
    Q3_K_M,
    Q3_K_L,
    Q4_K_S,
    Q4_K_M,
    Q5_K_S,
    Q5_K_M,
    Q6_K,
}

/// Every file type, in llama-quantize's `--help` order.
pub const ALL: [FileType; 17] = {
    use FileType::*;
    [
        Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q2_K_S, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S,
        Q5_K_M, Q6_K, Q8_0, F16, F32,
    ]
};

impl FileType {
    /// Parse llama-quantize's spelling (case-insensitive), with its aliases Q3_K → Q3_K_M,
    /// Q4_K → Q4_K_M and Q5_K → Q5_K_M.
    pub fn parse(s: &str) -> Option<FileType> {
        let up = s.to_ascii_uppercase();
        let alias = match up.as_str() {
            "Q3_K" => "Q3_K_M",
            "Q4_K" => "Q4_K_M",
            "Q5_K" => "Q5_K_M",
            other => other,
        };
        ALL.into_iter().find(|f| f.name() == alias)
    }

    /// Whether `s` names a llama-quantize file type the seed's target list does not define
    /// (Q4_K_M, Q2_K, Q3_K_S, …): such a `--type` always means llama-quantize's rules.
    pub fn is_mixture_name(s: &str) -> bool {
        FileType::parse(s).is_some() && super::quant::QuantTarget::parse(s).is_none()
    }

    /// llama-quantize's name.
    pub fn name(self) -> &'static str {
        use FileType::*;
        match self {
            F32 => "F32",
            F16 => "F16",
            Q4_0 => "Q4_0",
            Q4_1 => "Q4_1",
            Q5_0 => "Q5_0",
            Q5_1 => "Q5_1",
            Q8_0 => "Q8_0",
            Q2_K => "Q2_K",
            Q2_K_S => "Q2_K_S",
            Q3_K_S => "Q3_K_S",
            Q3_K_M => "Q3_K_M",
            Q3_K_L => "Q3_K_L",
            Q4_K_S => "Q4_K_S",
            Q4_K_M => "Q4_K_M",
            Q5_K_S => "Q5_K_S",
            Q5_K_M => "Q5_K_M",
            Q6_K => "Q6_K",
        }
    }

    /// The `llama_ftype` number written as `general.file_type`.
    pub fn id(self) -> u32 {
        use FileType::*;
        match self {
            F32 => 0,
            F16 => 1,
            Q4_0 => 2,
            Q4_1 => 3,
            Q8_0 => 7,
            Q5_0 => 8,
            Q5_1 => 9,
            Q2_K => 10,
            Q3_K_S => 11,
            Q3_K_M => 12,
            Q3_K_L => 13,
            Q4_K_S => 14,
            Q4_K_M => 15,
            Q5_K_S => 16,
            Q5_K_M => 17,
            Q6_K => 18,
            Q2_K_S => 21,
        }
    }

    /// `llama_ftype_get_default_type`.
    pub fn default_type(self) -> GgmlType {
        use FileType::*;
        match self {
            F32 => GgmlType::F32,
            F16 => GgmlType::F16,
            Q4_0 => GgmlType::Q4_0,
            Q4_1 => GgmlType::Q4_1,
            Q5_0 => GgmlType::Q5_0,
            Q5_1 => GgmlType::Q5_1,
            Q8_0 => GgmlType::Q8_0,
            Q2_K | Q2_K_S => GgmlType::Q2_K,
            Q3_K_S | Q3_K_M | Q3_K_L => GgmlType::Q3_K,
            Q4_K_S | Q4_K_M => GgmlType::Q4_K,
            Q5_K_S | Q5_K_M => GgmlType::Q5_K,
            Q6_K => GgmlType::Q6_K,
        }
    }

    /// Every name `parse` accepts, for refusal texts.
    pub fn names() -> String {
        ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
    }
}
