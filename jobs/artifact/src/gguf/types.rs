//! The GGUF v3 vocabulary: ggml tensor types (id, name, block size, bytes per block) and the 13
//! metadata value types with their owned values.
//!
//! Spec: ggml `docs/gguf.md` and `ggml.h` `enum ggml_type` (../shared/design/formats.md §5.1–5.2).
//! Sizes are ggml's `ggml_blck_size` / `ggml_type_size`, which gguf-py 0.19.0 `GGML_QUANT_SIZES`
//! repeats for every type except `Q8_1` (gguf-py says 40 bytes; ggml's `block_q8_1` is 36).

use std::fmt;

/// A ggml tensor element type, by its on-disk id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(non_camel_case_types, missing_docs)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ2_XXS,
    IQ2_XS,
    IQ3_XXS,
    IQ1_S,
    IQ4_NL,
    IQ3_S,
    IQ2_S,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    IQ1_M,
    BF16,
    TQ1_0,
    TQ2_0,
    MXFP4,
    NVFP4,
    Q1_0,
    Q2_0,
}

/// (type, id, name, block size in elements, bytes per block). Ids 4, 5, 31–33 and 36–38 were
/// removed from ggml and are refused.
const TABLE: &[(GgmlType, u32, &str, u64, u64)] = &[
    (GgmlType::F32, 0, "f32", 1, 4),
    (GgmlType::F16, 1, "f16", 1, 2),
    (GgmlType::Q4_0, 2, "q4_0", 32, 18),
    (GgmlType::Q4_1, 3, "q4_1", 32, 20),
    (GgmlType::Q5_0, 6, "q5_0", 32, 22),
    (GgmlType::Q5_1, 7, "q5_1", 32, 24),
    (GgmlType::Q8_0, 8, "q8_0", 32, 34),
    (GgmlType::Q8_1, 9, "q8_1", 32, 36),
    (GgmlType::Q2_K, 10, "q2_K", 256, 84),
    (GgmlType::Q3_K, 11, "q3_K", 256, 110),
    (GgmlType::Q4_K, 12, "q4_K", 256, 144),
    (GgmlType::Q5_K, 13, "q5_K", 256, 176),
    (GgmlType::Q6_K, 14, "q6_K", 256, 210),
    (GgmlType::Q8_K, 15, "q8_K", 256, 292),
    (GgmlType::IQ2_XXS, 16, "iq2_xxs", 256, 66),
    (GgmlType::IQ2_XS, 17, "iq2_xs", 256, 74),
    (GgmlType::IQ3_XXS, 18, "iq3_xxs", 256, 98),
    (GgmlType::IQ1_S, 19, "iq1_s", 256, 50),
    (GgmlType::IQ4_NL, 20, "iq4_nl", 32, 18),
    (GgmlType::IQ3_S, 21, "iq3_s", 256, 110),
    (GgmlType::IQ2_S, 22, "iq2_s", 256, 82),
    (GgmlType::IQ4_XS, 23, "iq4_xs", 256, 136),
    (GgmlType::I8, 24, "i8", 1, 1),
    (GgmlType::I16, 25, "i16", 1, 2),
    (GgmlType::I32, 26, "i32", 1, 4),
    (GgmlType::I64, 27, "i64", 1, 8),
    (GgmlType::F64, 28, "f64", 1, 8),
    (GgmlType::IQ1_M, 29, "iq1_m", 256, 56),
    (GgmlType::BF16, 30, "bf16", 1, 2),
    (GgmlType::TQ1_0, 34, "tq1_0", 256, 54),
    (GgmlType::TQ2_0, 35, "tq2_0", 256, 66),
    (GgmlType::MXFP4, 39, "mxfp4", 32, 17),
    (GgmlType::NVFP4, 40, "nvfp4", 64, 36),
    (GgmlType::Q1_0, 41, "q1_0", 128, 18),
    (GgmlType::Q2_0, 42, "q2_0", 64, 18),
];

impl GgmlType {
    fn row(self) -> (GgmlType, u32, &'static str, u64, u64) {
        // Every variant has exactly one table row (asserted by a unit test).
        TABLE
            .iter()
            .copied()
            .find(|r| r.0 == self)
            .unwrap_or((self, u32::MAX, "?", 1, 1))
    }

    /// The type with on-disk id `id`, if ggml defines it.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        TABLE.iter().find(|r| r.1 == id).map(|r| r.0)
    }

    /// The type named `name` (case-insensitive: `q4_k` and `Q4_K` both work).
    pub fn from_name(name: &str) -> Option<GgmlType> {
        TABLE
            .iter()
            .find(|r| r.2.eq_ignore_ascii_case(name))
            .map(|r| r.0)
    }

    /// On-disk id.
    pub fn id(self) -> u32 {
        self.row().1
    }

    /// ggml's name in llama.cpp's CLI spelling (`q4_K`, `f16`).
    pub fn name(self) -> &'static str {
        self.row().2
    }

    /// Elements per block (`ggml_blck_size`).
    pub fn block_size(self) -> u64 {
        self.row().3
    }

    /// Bytes per block (`ggml_type_size`).
    pub fn type_size(self) -> u64 {
        self.row().4
    }

    /// Every type, in id order.
    pub fn all() -> impl Iterator<Item = GgmlType> {
        TABLE.iter().map(|r| r.0)
    }

    /// A K-quant or I-quant (or another super-block type) that this crate cannot decode.
    pub fn is_k_or_i_quant(self) -> bool {
        self.block_size() == 256
            || matches!(self, GgmlType::IQ4_NL | GgmlType::NVFP4 | GgmlType::Q1_0)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The metadata value type ids of GGUF (`enum gguf_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    /// The type with id `id`, if GGUF defines it.
    pub fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// Bytes of one scalar of this type; `None` for string and array.
    pub fn scalar_size(self) -> Option<usize> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    /// Lower-case name for messages.
    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "uint8",
            I8 => "int8",
            U16 => "uint16",
            I16 => "int16",
            U32 => "uint32",
            I32 => "int32",
            F32 => "float32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "uint64",
            I64 => "int64",
            F64 => "float64",
        }
    }
}

/// One metadata value. Strings are kept as raw bytes (GGUF does not promise UTF-8 for values;
/// the getters check it), numeric arrays as their raw little-endian bytes, so a rewrite emits
/// exactly what was read.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    /// The on-disk byte (0 or 1; anything else is refused by the reader).
    Bool(bool),
    String(Vec<u8>),
    U64(u64),
    I64(i64),
    F64(f64),
    /// An array of strings.
    StringArray(Vec<Vec<u8>>),
    /// An array of a numeric (or bool) type: element type, element count, raw little-endian bytes.
    NumArray {
        elem: ValueType,
        count: u64,
        raw: Vec<u8>,
    },
}

impl Value {
    /// The GGUF value type of this value.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
            Value::StringArray(_) | Value::NumArray { .. } => ValueType::Array,
        }
    }

    /// A string value from text.
    pub fn str(s: &str) -> Value {
        Value::String(s.as_bytes().to_vec())
    }

    /// An array of strings from text.
    pub fn str_array<S: AsRef<str>>(items: &[S]) -> Value {
        Value::StringArray(
            items
                .iter()
                .map(|s| s.as_ref().as_bytes().to_vec())
                .collect(),
        )
    }

    /// An `int32` array.
    pub fn i32_array(items: &[i32]) -> Value {
        Value::NumArray {
            elem: ValueType::I32,
            count: items.len() as u64,
            raw: items.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    /// An `uint32` array.
    pub fn u32_array(items: &[u32]) -> Value {
        Value::NumArray {
            elem: ValueType::U32,
            count: items.len() as u64,
            raw: items.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    /// An `float32` array.
    pub fn f32_array(items: &[f32]) -> Value {
        Value::NumArray {
            elem: ValueType::F32,
            count: items.len() as u64,
            raw: items.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    /// The value as an unsigned integer if it is any integer type holding a non-negative value.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as JSON: numbers as numbers (a non-finite float as its name, "NaN", "inf" or
    /// "-inf", which JSON cannot hold), booleans, strings (invalid UTF-8 replaced by U+FFFD), and
    /// arrays of at most `limit` elements (the caller reports the full count).
    pub fn to_json(&self, limit: usize) -> serde_json::Value {
        use serde_json::Value as J;
        let float = |v: f64| {
            serde_json::Number::from_f64(v).map_or_else(|| J::String(format!("{v}")), J::Number)
        };
        match self {
            Value::U8(v) => J::from(*v),
            Value::I8(v) => J::from(*v),
            Value::U16(v) => J::from(*v),
            Value::I16(v) => J::from(*v),
            Value::U32(v) => J::from(*v),
            Value::I32(v) => J::from(*v),
            Value::U64(v) => J::from(*v),
            Value::I64(v) => J::from(*v),
            Value::F32(v) => float(f64::from(*v)),
            Value::F64(v) => float(*v),
            Value::Bool(v) => J::Bool(*v),
            Value::String(b) => J::String(String::from_utf8_lossy(b).into_owned()),
            Value::StringArray(v) => J::Array(
                v.iter()
                    .take(limit)
                    .map(|b| J::String(String::from_utf8_lossy(b).into_owned()))
                    .collect(),
            ),
            Value::NumArray { elem, raw, .. } => {
                let size = elem.scalar_size().unwrap_or(1).max(1);
                J::Array(
                    raw.chunks_exact(size)
                        .take(limit)
                        .filter_map(|c| scalar_from_le(*elem, c))
                        .map(|v| v.to_json(0))
                        .collect(),
                )
            }
        }
    }

    /// Short rendering for listings (arrays summarised).
    pub fn summary(&self) -> String {
        match self {
            Value::String(s) => format!("{:?}", String::from_utf8_lossy(s)),
            Value::StringArray(v) => format!("[string; {}]", v.len()),
            Value::NumArray { elem, count, .. } => format!("[{}; {count}]", elem.name()),
            Value::F32(v) => format!("{v}"),
            Value::F64(v) => format!("{v}"),
            Value::Bool(v) => format!("{v}"),
            other => other
                .as_u64()
                .map(|v| v.to_string())
                .unwrap_or_else(|| format!("{other:?}")),
        }
    }
}

/// One little-endian scalar of type `t` (`None` for string/array or a short slice).
fn scalar_from_le(t: ValueType, b: &[u8]) -> Option<Value> {
    let a = |n: usize| b.get(..n);
    Some(match t {
        ValueType::U8 => Value::U8(*b.first()?),
        ValueType::I8 => Value::I8(*b.first()? as i8),
        ValueType::Bool => Value::Bool(*b.first()? != 0),
        ValueType::U16 => Value::U16(u16::from_le_bytes(a(2)?.try_into().ok()?)),
        ValueType::I16 => Value::I16(i16::from_le_bytes(a(2)?.try_into().ok()?)),
        ValueType::U32 => Value::U32(u32::from_le_bytes(a(4)?.try_into().ok()?)),
        ValueType::I32 => Value::I32(i32::from_le_bytes(a(4)?.try_into().ok()?)),
        ValueType::F32 => Value::F32(f32::from_le_bytes(a(4)?.try_into().ok()?)),
        ValueType::U64 => Value::U64(u64::from_le_bytes(a(8)?.try_into().ok()?)),
        ValueType::I64 => Value::I64(i64::from_le_bytes(a(8)?.try_into().ok()?)),
        ValueType::F64 => Value::F64(f64::from_le_bytes(a(8)?.try_into().ok()?)),
        ValueType::String | ValueType::Array => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_render_as_typed_json() {
        use serde_json::json;
        assert_eq!(Value::String(b"llama".to_vec()).to_json(4), json!("llama"));
        assert_eq!(Value::U32(30).to_json(4), json!(30));
        assert_eq!(Value::I32(-3).to_json(4), json!(-3));
        assert_eq!(Value::F32(1e-5).to_json(4), json!(f64::from(1e-5f32)));
        assert_eq!(Value::F32(f32::NAN).to_json(4), json!("NaN"));
        assert_eq!(Value::F64(f64::NEG_INFINITY).to_json(4), json!("-inf"));
        assert_eq!(Value::Bool(true).to_json(4), json!(true));
        let strs = Value::StringArray(vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(strs.to_json(2), json!(["a", "b"]));
        assert_eq!(Value::u32_array(&[1, 2, 3]).to_json(8), json!([1, 2, 3]));
        assert_eq!(Value::f32_array(&[0.5, -2.0]).to_json(1), json!([0.5]));
        let bools = Value::NumArray {
            elem: ValueType::Bool,
            count: 2,
            raw: vec![1, 0],
        };
        assert_eq!(bools.to_json(8), json!([true, false]));
    }

    #[test]
    fn every_type_has_one_row_and_ids_are_unique() {
        let mut ids: Vec<u32> = GgmlType::all().map(|t| t.id()).collect();
        assert_eq!(ids.len(), TABLE.len());
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), TABLE.len());
        for t in GgmlType::all() {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
            assert_eq!(GgmlType::from_name(t.name()), Some(t));
        }
        for removed in [4, 5, 31, 32, 33, 36, 37, 38, 43] {
            assert_eq!(GgmlType::from_id(removed), None);
        }
    }

    #[test]
    fn sizes_match_ggml_for_the_emitted_types() {
        let want = [
            (GgmlType::F32, 1, 4),
            (GgmlType::F16, 1, 2),
            (GgmlType::BF16, 1, 2),
            (GgmlType::Q4_0, 32, 18),
            (GgmlType::Q4_1, 32, 20),
            (GgmlType::Q5_0, 32, 22),
            (GgmlType::Q5_1, 32, 24),
            (GgmlType::Q8_0, 32, 34),
            (GgmlType::Q4_K, 256, 144),
            (GgmlType::Q5_K, 256, 176),
            (GgmlType::Q6_K, 256, 210),
            (GgmlType::MXFP4, 32, 17),
        ];
        for (t, b, s) in want {
            assert_eq!((t.block_size(), t.type_size()), (b, s), "{t}");
        }
    }
}
