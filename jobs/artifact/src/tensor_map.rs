//! `tensors.json`: the per-unit map from each upstream tensor to the artifact file (and container
//! stream) that holds its bytes, with the upstream range and SHA-256 they came from
//! (docs/repack.md "`tensors.json`"). Written by repack; read strictly by the gate, `minirun-run`
//! and the DeepSeek V4 adapter, all through these types.

use serde::{Deserialize, Serialize};

/// The per-unit map from upstream tensor to artifact file.
pub const TENSORS_FILE: &str = "tensors.json";

/// `tensors.json`: where each upstream tensor of the unit lives in the artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorMap {
    /// Schema version (1).
    pub v: u32,
    /// The unit.
    pub unit: String,
    /// One entry per upstream tensor, sorted by name.
    pub tensors: Vec<TensorEntry>,
}

impl TensorMap {
    /// Reads `tensors.json` bytes strictly (schema of these types, no unknown field): the one
    /// reader the gate, `minirun-run` and the V4 adapter share.
    pub fn parse(bytes: &[u8]) -> Result<TensorMap, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

/// One upstream tensor in the artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorEntry {
    /// Upstream tensor name.
    pub name: String,
    /// Safetensors dtype string.
    pub dtype: String,
    /// Shape as stored upstream.
    pub shape: Vec<u64>,
    /// File in the unit directory.
    pub file: String,
    /// `plain` (the whole file is this tensor's bytes) or the container stream it forms:
    /// `packed`, `scale`, `bias`.
    pub role: String,
    /// The plan source it came from.
    pub source: String,
    /// Upstream repository path of the safetensors file.
    pub upstream_file: String,
    /// Absolute byte range in that file.
    pub upstream_range: [u64; 2],
    /// SHA-256 of the tensor's upstream bytes.
    pub sha256: String,
    /// Why a quantized weight is stored as plain streams instead of a container, if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// In a stacked container (docs/repack.md "Stacked containers"): the rows `[first, end)` of
    /// the container this tensor's matrix occupies (its scale and bias entries carry the same
    /// rows). Absent when the container holds this matrix alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<[u64; 2]>,
    /// A plain stream in a unit's file of plain streams (docs/repack.md "Plain streams"): the
    /// bytes `[start, end)` of `file` that are this tensor's. Absent when the whole file is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<[u64; 2]>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> TensorEntry {
        TensorEntry {
            name: "layers.0.attn.wq_a.weight".into(),
            dtype: "F8_E4M3".into(),
            shape: vec![128, 256],
            file: "layers.0.attn.wq_a.til".into(),
            role: "packed".into(),
            source: "main".into(),
            upstream_file: "model-00002-of-00046.safetensors".into(),
            upstream_range: [1000, 1000 + 128 * 256],
            sha256: "0".repeat(64),
            fallback: None,
            rows: None,
            span: None,
        }
    }

    #[test]
    fn round_trips_omits_absent_fallback_and_refuses_unknown_fields() {
        let map = TensorMap {
            v: 1,
            unit: "layers00".into(),
            tensors: vec![entry()],
        };
        let text = serde_json::to_string(&map).unwrap();
        assert!(!text.contains("fallback"), "{text}");
        assert_eq!(serde_json::from_str::<TensorMap>(&text).unwrap(), map);
        let extra = text.replacen("\"role\"", "\"colour\":\"red\",\"role\"", 1);
        let e = serde_json::from_str::<TensorMap>(&extra).unwrap_err();
        assert!(e.to_string().contains("unknown field `colour`"), "{e}");
        let missing = text.replacen("\"sha256\"", "\"sha\"", 1);
        assert!(serde_json::from_str::<TensorMap>(&missing).is_err());
    }
}
