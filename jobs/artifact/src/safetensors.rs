//! Our own safetensors header codec: read the 8-byte length and the JSON header, validate every
//! tensor's offsets, and write headers in a caller-given tensor order; the sharded
//! `model.safetensors.index.json` lives in [`index`].
//!
//! Spec: `../shared/design/formats.md` §1.1 (layout), §1.2 (8-byte padding, upstream sort order),
//! §1.3 (dtypes, sub-byte sizing), §1.4 (sharded index). The reader works on the header bytes alone
//! (the fetch stage reads only `[0, 8 + N)` with an HTTP Range), so it never needs the data
//! section; [`Header::check_file_len`] checks a file length once it is known.
//!
//! Unlike the `safetensors` crate this keeps tensors in file order, names the tensor in every
//! error, rejects duplicate names (which a JSON map would silently merge) and never reorders what
//! it writes.

pub mod index;

use crate::dtype::Dtype;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use std::fmt;
use std::io::{self, Write};
use std::ops::Range;

/// Upper bound on the JSON header length (same as the `safetensors` crate's `MAX_HEADER_SIZE`).
pub const MAX_HEADER_LEN: u64 = 100_000_000;
/// Upper bound on the rank of one tensor; real checkpoints stay below 8.
pub const MAX_RANK: usize = 64;
/// The key of the string→string metadata map.
pub const METADATA_KEY: &str = "__metadata__";

/// What can be wrong with a safetensors header.
#[derive(Debug, thiserror::Error)]
pub enum SafetensorsError {
    /// Fewer than 8 bytes, or fewer than 8 + N.
    #[error("safetensors header truncated: need {need} bytes, have {have}; read at least the first 8 + N bytes of the file")]
    Truncated {
        /// Bytes needed.
        need: u64,
        /// Bytes given.
        have: u64,
    },
    /// N exceeds [`MAX_HEADER_LEN`].
    #[error("safetensors header length {len} exceeds the limit of {MAX_HEADER_LEN} bytes; this is not a safetensors file or it is corrupt")]
    HeaderTooLarge {
        /// The declared N.
        len: u64,
    },
    /// The header is not UTF-8 JSON of the expected shape.
    #[error("safetensors header is not valid: {0}")]
    Json(String),
    /// One tensor entry is malformed.
    #[error("tensor `{name}`: {problem}")]
    Tensor {
        /// The tensor.
        name: String,
        /// What is wrong.
        problem: String,
    },
    /// Two entries with one name.
    #[error("tensor `{0}` appears twice in the header")]
    Duplicate(String),
    /// Tensors leave a hole or overlap.
    #[error("tensor `{name}` starts at data offset {begin} but the previous tensor ends at {expected}: the data section must be contiguous")]
    NotContiguous {
        /// The tensor.
        name: String,
        /// Its begin offset.
        begin: u64,
        /// Where it should start.
        expected: u64,
    },
    /// The file is not 8 + N + data bytes long.
    #[error(
        "file is {actual} bytes but its header describes {expected} bytes (8 + header + data)"
    )]
    FileLength {
        /// What the header implies.
        expected: u64,
        /// The real length.
        actual: u64,
    },
    /// Writing failed.
    #[error("failed to write safetensors data")]
    Io(#[from] io::Error),
}

/// One tensor as the header describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Its name.
    pub name: String,
    /// Element type.
    pub dtype: Dtype,
    /// Shape in elements.
    pub shape: Vec<u64>,
    /// `[begin, end)` relative to the start of the data section.
    pub data_offsets: [u64; 2],
}

impl TensorInfo {
    /// Bytes of data.
    pub fn len(&self) -> u64 {
        self.data_offsets[1].saturating_sub(self.data_offsets[0])
    }
    /// Whether the tensor has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Number of elements.
    pub fn numel(&self) -> Option<u64> {
        numel(&self.shape)
    }
}

/// A validated header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Tensors in file (data offset) order.
    pub tensors: Vec<TensorInfo>,
    /// `__metadata__` entries in the order written, if present.
    pub metadata: Option<Vec<(String, String)>>,
    /// N, the JSON header length.
    pub header_len: u64,
    /// File offset of the data section: 8 + N.
    pub data_start: u64,
    /// Length of the data section.
    pub data_len: u64,
}

impl Header {
    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }
    /// Absolute byte range in the file of the tensor called `name`.
    pub fn file_range(&self, name: &str) -> Option<Range<u64>> {
        self.tensor(name)
            .map(|t| absolute_range(self.data_start, t))
    }
    /// Total file length this header implies.
    pub fn file_len(&self) -> u64 {
        self.data_start + self.data_len
    }
    /// Check a file's real length against [`Header::file_len`].
    pub fn check_file_len(&self, actual: u64) -> Result<(), SafetensorsError> {
        if actual == self.file_len() {
            Ok(())
        } else {
            Err(SafetensorsError::FileLength {
                expected: self.file_len(),
                actual,
            })
        }
    }
}

/// Absolute file range of `t` given the data section start (8 + N).
pub fn absolute_range(data_start: u64, t: &TensorInfo) -> Range<u64> {
    data_start + t.data_offsets[0]..data_start + t.data_offsets[1]
}

fn numel(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, d| acc.checked_mul(*d))
}

/// N from the first 8 bytes of a file, checked against [`MAX_HEADER_LEN`].
pub fn header_len(first8: [u8; 8]) -> Result<u64, SafetensorsError> {
    let len = u64::from_le_bytes(first8);
    if len > MAX_HEADER_LEN {
        return Err(SafetensorsError::HeaderTooLarge { len });
    }
    Ok(len)
}

/// Parse and validate the header at the start of `bytes` (the whole file, or just its first
/// 8 + N bytes; anything after the header is ignored).
pub fn parse_header(bytes: &[u8]) -> Result<Header, SafetensorsError> {
    let have = bytes.len() as u64;
    let first8: [u8; 8] = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or(SafetensorsError::Truncated { need: 8, have })?;
    let n = header_len(first8)?;
    let data_start = 8 + n;
    let json = usize::try_from(data_start)
        .ok()
        .and_then(|end| bytes.get(8..end))
        .ok_or(SafetensorsError::Truncated {
            need: data_start,
            have,
        })?;
    let text = std::str::from_utf8(json)
        .map_err(|e| SafetensorsError::Json(format!("header is not UTF-8 ({e})")))?;
    if !text
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
    {
        return Err(SafetensorsError::Json(
            "header does not start with `{`".into(),
        ));
    }
    let entries: Entries = serde_json::from_str(text)
        .map_err(|e| SafetensorsError::Json(format!("header JSON: {e}")))?;
    let mut metadata = None;
    let mut tensors = Vec::with_capacity(entries.0.len());
    let mut seen = std::collections::HashSet::with_capacity(entries.0.len());
    for (name, value) in entries.0 {
        if !seen.insert(name.clone()) {
            return Err(SafetensorsError::Duplicate(name));
        }
        if name == METADATA_KEY {
            metadata = Some(parse_metadata(value)?);
        } else {
            tensors.push(parse_tensor(name, value)?);
        }
    }
    // File order; zero-length tensors sort before a non-empty one at the same offset.
    tensors.sort_by_key(|t| (t.data_offsets[0], t.data_offsets[1]));
    let mut expected = 0u64;
    for t in &tensors {
        if t.data_offsets[0] != expected {
            return Err(SafetensorsError::NotContiguous {
                name: t.name.clone(),
                begin: t.data_offsets[0],
                expected,
            });
        }
        expected = t.data_offsets[1];
    }
    if data_start.checked_add(expected).is_none() {
        return Err(SafetensorsError::Json(
            "data section length overflows u64".into(),
        ));
    }
    Ok(Header {
        tensors,
        metadata,
        header_len: n,
        data_start,
        data_len: expected,
    })
}

fn parse_metadata(value: serde_json::Value) -> Result<Vec<(String, String)>, SafetensorsError> {
    let serde_json::Value::Object(map) = value else {
        return Err(SafetensorsError::Json(
            "`__metadata__` is not a JSON object".into(),
        ));
    };
    map.into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => Ok((k, s)),
            _ => Err(SafetensorsError::Json(format!(
                "`__metadata__` key `{k}` is not a string (only string values are allowed)"
            ))),
        })
        .collect()
}

fn parse_tensor(name: String, value: serde_json::Value) -> Result<TensorInfo, SafetensorsError> {
    let bad = |problem: String| SafetensorsError::Tensor {
        name: name.clone(),
        problem,
    };
    let serde_json::Value::Object(map) = value else {
        return Err(bad("entry is not a JSON object".into()));
    };
    for key in map.keys() {
        if !matches!(key.as_str(), "dtype" | "shape" | "data_offsets") {
            return Err(bad(format!(
                "unexpected key `{}`",
                key.chars().take(64).collect::<String>()
            )));
        }
    }
    let dtype: Dtype = match map.get("dtype") {
        Some(serde_json::Value::String(s)) => s.parse().map_err(|e| bad(format!("{e}")))?,
        _ => return Err(bad("missing or non-string `dtype`".into())),
    };
    let shape =
        u64_array(map.get("shape")).ok_or_else(|| bad("missing or invalid `shape`".into()))?;
    if shape.len() > MAX_RANK {
        return Err(bad(format!("rank {} exceeds {MAX_RANK}", shape.len())));
    }
    let offs = u64_array(map.get("data_offsets"))
        .ok_or_else(|| bad("missing or invalid `data_offsets`".into()))?;
    let [begin, end] = offs[..] else {
        return Err(bad(format!(
            "`data_offsets` has {} entries, want 2",
            offs.len()
        )));
    };
    if end < begin {
        return Err(bad(format!(
            "`data_offsets` [{begin}, {end}] ends before it begins"
        )));
    }
    let numel = numel(&shape).ok_or_else(|| bad("shape element count overflows u64".into()))?;
    let want = dtype.byte_len(numel).ok_or_else(|| {
        bad(format!(
            "{numel} elements of {dtype} are not a whole number of bytes"
        ))
    })?;
    if end - begin != want {
        return Err(bad(format!(
            "`data_offsets` [{begin}, {end}] span {} bytes but shape {shape:?} of {dtype} needs {want}",
            end - begin
        )));
    }
    Ok(TensorInfo {
        name,
        dtype,
        shape,
        data_offsets: [begin, end],
    })
}

fn u64_array(v: Option<&serde_json::Value>) -> Option<Vec<u64>> {
    v?.as_array()?.iter().map(|x| x.as_u64()).collect()
}

/// The header's top-level entries in written order, duplicates kept so they can be refused.
struct Entries(Vec<(String, serde_json::Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object of tensor entries")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, serde_json::Value>()? {
                    out.push((k, v));
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// One tensor to write: data length follows from dtype and shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    /// Name.
    pub name: String,
    /// Element type.
    pub dtype: Dtype,
    /// Shape in elements.
    pub shape: Vec<u64>,
}

impl TensorSpec {
    /// Build a spec.
    pub fn new(name: impl Into<String>, dtype: Dtype, shape: &[u64]) -> Self {
        Self {
            name: name.into(),
            dtype,
            shape: shape.to_vec(),
        }
    }
    /// Bytes of data, checked.
    pub fn byte_len(&self) -> Result<u64, SafetensorsError> {
        numel(&self.shape)
            .and_then(|n| self.dtype.byte_len(n))
            .ok_or_else(|| SafetensorsError::Tensor {
                name: self.name.clone(),
                problem: format!(
                    "shape {:?} of {} has no whole byte size",
                    self.shape, self.dtype
                ),
            })
    }
}

/// Sort specs the way the upstream writer does (formats.md §1.2): dtype descending, then name.
/// Real checkpoints written by `safetensors.torch.save_file` have this order.
pub fn sort_like_upstream(specs: &mut [TensorSpec]) {
    specs.sort_by(|a, b| {
        b.dtype
            .rank()
            .cmp(&a.dtype.rank())
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// Encode `8-byte N + JSON header` for `specs` in exactly the given order, data offsets
/// assigned consecutively, `__metadata__` first when given, the JSON padded with spaces to a
/// multiple of 8 bytes. Returns the prefix and the parsed header it describes.
pub fn encode_header(
    specs: &[TensorSpec],
    metadata: Option<&[(String, String)]>,
) -> Result<(Vec<u8>, Header), SafetensorsError> {
    encode_header_padded(specs, metadata, true)
}

/// [`encode_header`] with the 8-byte padding optional: `mx.save_safetensors` does not pad, so its
/// data section can start at any offset (formats.md §1.2).
pub fn encode_header_padded(
    specs: &[TensorSpec],
    metadata: Option<&[(String, String)]>,
    pad: bool,
) -> Result<(Vec<u8>, Header), SafetensorsError> {
    let mut json = String::from("{");
    let mut first = true;
    let mut push_key = |json: &mut String, key: &str| -> Result<(), SafetensorsError> {
        if !first {
            json.push(',');
        }
        first = false;
        json.push_str(&quote(key)?);
        json.push(':');
        Ok(())
    };
    if let Some(meta) = metadata {
        push_key(&mut json, METADATA_KEY)?;
        json.push('{');
        for (i, (k, v)) in meta.iter().enumerate() {
            if i > 0 {
                json.push(',');
            }
            json.push_str(&quote(k)?);
            json.push(':');
            json.push_str(&quote(v)?);
        }
        json.push('}');
    }
    let mut offset = 0u64;
    let mut tensors = Vec::with_capacity(specs.len());
    for s in specs {
        if s.name == METADATA_KEY {
            return Err(SafetensorsError::Tensor {
                name: s.name.clone(),
                problem: "reserved name".into(),
            });
        }
        let len = s.byte_len()?;
        let end = offset
            .checked_add(len)
            .ok_or_else(|| SafetensorsError::Tensor {
                name: s.name.clone(),
                problem: "data offsets overflow u64".into(),
            })?;
        push_key(&mut json, &s.name)?;
        let dims: Vec<String> = s.shape.iter().map(u64::to_string).collect();
        json.push_str(&format!(
            "{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
            s.dtype,
            dims.join(",")
        ));
        tensors.push(TensorInfo {
            name: s.name.clone(),
            dtype: s.dtype,
            shape: s.shape.clone(),
            data_offsets: [offset, end],
        });
        offset = end;
    }
    json.push('}');
    while pad && json.len() % 8 != 0 {
        json.push(' ');
    }
    let n = json.len() as u64;
    if n > MAX_HEADER_LEN {
        return Err(SafetensorsError::HeaderTooLarge { len: n });
    }
    let mut out = Vec::with_capacity(json.len() + 8);
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(json.as_bytes());
    let mut seen = std::collections::HashSet::new();
    for t in &tensors {
        if !seen.insert(t.name.as_str()) {
            return Err(SafetensorsError::Duplicate(t.name.clone()));
        }
    }
    let header = Header {
        tensors,
        metadata: metadata.map(<[_]>::to_vec),
        header_len: n,
        data_start: 8 + n,
        data_len: offset,
    };
    Ok((out, header))
}

fn quote(s: &str) -> Result<String, SafetensorsError> {
    serde_json::to_string(s).map_err(|e| SafetensorsError::Json(e.to_string()))
}

/// Write a whole file: header for `tensors` in the given order, then each tensor's bytes.
/// Each data slice must have exactly the spec's byte length.
pub fn write_file<W: Write>(
    mut w: W,
    tensors: &[(TensorSpec, &[u8])],
    metadata: Option<&[(String, String)]>,
) -> Result<Header, SafetensorsError> {
    let specs: Vec<TensorSpec> = tensors.iter().map(|(s, _)| s.clone()).collect();
    let (prefix, header) = encode_header(&specs, metadata)?;
    for (spec, data) in tensors {
        if spec.byte_len()? != data.len() as u64 {
            return Err(SafetensorsError::Tensor {
                name: spec.name.clone(),
                problem: format!(
                    "{} data bytes given, {} expected",
                    data.len(),
                    spec.byte_len()?
                ),
            });
        }
    }
    w.write_all(&prefix)?;
    for (_, data) in tensors {
        w.write_all(data)?;
    }
    Ok(header)
}

/// `{"format": "pt"}`, the metadata torch writers put in every file.
pub fn pt_metadata() -> Vec<(String, String)> {
    vec![("format".to_string(), "pt".to_string())]
}

#[cfg(test)]
mod tests;
