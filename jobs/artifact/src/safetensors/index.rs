//! The sharded checkpoint index `model.safetensors.index.json`:
//! `{"metadata": {"total_size": N, ...}, "weight_map": {"tensor": "shard file", ...}}`.
//!
//! Spec: `../shared/design/formats.md` §1.4. Shard names are never parsed: callers drive
//! everything from `weight_map`. The reader keeps the written order and refuses duplicate tensor
//! names, which a plain JSON map would merge silently.

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use std::fmt;

/// Upper bound on an index file we are willing to parse (real ones are a few MB).
pub const MAX_INDEX_LEN: usize = 256 << 20;

/// What can be wrong with an index file.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// Not JSON of the expected shape.
    #[error("`model.safetensors.index.json` is not valid: {0}")]
    Invalid(String),
    /// A tensor appears twice in `weight_map`.
    #[error("`model.safetensors.index.json` maps tensor `{0}` twice")]
    Duplicate(String),
    /// Over [`MAX_INDEX_LEN`].
    #[error("`model.safetensors.index.json` is {0} bytes, over the {MAX_INDEX_LEN}-byte limit")]
    TooLarge(usize),
}

/// A parsed or to-be-written index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardIndex {
    /// `metadata.total_size`: the sum of all tensor data bytes (no headers).
    pub total_size: u64,
    /// Other `metadata` entries, as raw JSON, in written order.
    pub extra_metadata: Vec<(String, serde_json::Value)>,
    /// `weight_map` entries (tensor, shard file) in written order.
    pub weight_map: Vec<(String, String)>,
}

impl ShardIndex {
    /// Shard files in order of first appearance in `weight_map`.
    pub fn shards(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for (_, f) in &self.weight_map {
            if !out.contains(&f.as_str()) {
                out.push(f);
            }
        }
        out
    }

    /// The shard holding `tensor`.
    pub fn shard_of(&self, tensor: &str) -> Option<&str> {
        self.weight_map
            .iter()
            .find(|(t, _)| t == tensor)
            .map(|(_, f)| f.as_str())
    }

    /// Serialize as transformers does (`json.dumps(index, indent=2, sort_keys=True) + "\n"`):
    /// two-space indentation, `weight_map` sorted by tensor name, a trailing newline.
    pub fn to_json(&self) -> Vec<u8> {
        let mut meta = serde_json::Map::new();
        let mut extra = self.extra_metadata.clone();
        extra.push((
            "total_size".into(),
            serde_json::Value::from(self.total_size),
        ));
        extra.sort_by(|a, b| a.0.cmp(&b.0));
        for (k, v) in extra {
            meta.insert(k, v);
        }
        let mut wm = self.weight_map.clone();
        wm.sort();
        let mut map = serde_json::Map::new();
        for (k, v) in wm {
            map.insert(k, serde_json::Value::String(v));
        }
        let mut root = serde_json::Map::new();
        root.insert("metadata".into(), serde_json::Value::Object(meta));
        root.insert("weight_map".into(), serde_json::Value::Object(map));
        let mut out =
            serde_json::to_vec_pretty(&serde_json::Value::Object(root)).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// Parse an index file.
    pub fn parse(bytes: &[u8]) -> Result<Self, IndexError> {
        if bytes.len() > MAX_INDEX_LEN {
            return Err(IndexError::TooLarge(bytes.len()));
        }
        let root: Root =
            serde_json::from_slice(bytes).map_err(|e| IndexError::Invalid(format!("JSON: {e}")))?;
        let mut total_size = None;
        let mut extra_metadata = Vec::new();
        let serde_json::Value::Object(m) = root.metadata.unwrap_or_default() else {
            return Err(IndexError::Invalid("`metadata` is not an object".into()));
        };
        for (mk, mv) in m {
            if mk == "total_size" {
                // Some writers emit it as a float (`1.5e+11`); accept only exact integers.
                let n = mv.as_u64().or_else(|| {
                    mv.as_f64()
                        .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 9.0e15)
                        .map(|f| f as u64)
                });
                total_size = Some(n.ok_or_else(|| {
                    IndexError::Invalid(
                        "`metadata.total_size` is not a non-negative integer".into(),
                    )
                })?);
            } else {
                extra_metadata.push((mk, mv));
            }
        }
        let mut weight_map = None;
        if let Some(Entries(entries)) = root.weight_map {
            let mut seen = std::collections::HashSet::with_capacity(entries.len());
            let mut wm = Vec::with_capacity(entries.len());
            for (t, f) in entries {
                let serde_json::Value::String(f) = f else {
                    return Err(IndexError::Invalid(format!(
                        "`weight_map` entry `{t}` is not a file name string"
                    )));
                };
                if !seen.insert(t.clone()) {
                    return Err(IndexError::Duplicate(t));
                }
                wm.push((t, f));
            }
            weight_map = Some(wm);
        }
        Ok(ShardIndex {
            total_size: total_size
                .ok_or_else(|| IndexError::Invalid("missing `metadata.total_size`".into()))?,
            extra_metadata,
            weight_map: weight_map
                .ok_or_else(|| IndexError::Invalid("missing `weight_map`".into()))?,
        })
    }
}

/// The top level; other keys are ignored.
#[derive(serde::Deserialize)]
struct Root {
    #[serde(default)]
    metadata: Option<serde_json::Value>,
    #[serde(default)]
    weight_map: Option<Entries>,
}

/// A JSON object's entries in written order, duplicates kept.
struct Entries(Vec<(String, serde_json::Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ShardIndex {
        ShardIndex {
            total_size: 1234,
            extra_metadata: vec![],
            weight_map: vec![
                (
                    "layers.0.b".into(),
                    "model-00002-of-00003.safetensors".into(),
                ),
                (
                    "embed.weight".into(),
                    "model-00001-of-00003.safetensors".into(),
                ),
                (
                    "layers.0.a".into(),
                    "model-00002-of-00003.safetensors".into(),
                ),
            ],
        }
    }

    #[test]
    fn round_trip_sorted_and_pretty() {
        let bytes = sample().to_json();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.starts_with("{\n  \"metadata\": {\n    \"total_size\": 1234\n  },\n  \"weight_map\": {\n    \"embed.weight\""));
        assert!(text.ends_with("}\n"));
        let back = ShardIndex::parse(&bytes).unwrap();
        assert_eq!(back.total_size, 1234);
        let mut want = sample().weight_map;
        want.sort();
        assert_eq!(back.weight_map, want);
        assert_eq!(
            back.shards(),
            vec![
                "model-00001-of-00003.safetensors",
                "model-00002-of-00003.safetensors"
            ]
        );
        assert_eq!(
            back.shard_of("layers.0.a"),
            Some("model-00002-of-00003.safetensors")
        );
    }

    #[test]
    fn refuses_duplicates_and_missing_keys() {
        let dup = br#"{"metadata":{"total_size":1},"weight_map":{"a":"x","a":"y"}}"#;
        assert!(matches!(ShardIndex::parse(dup), Err(IndexError::Duplicate(n)) if n == "a"));
        assert!(ShardIndex::parse(br#"{"weight_map":{}}"#).is_err());
        assert!(ShardIndex::parse(br#"{"metadata":{"total_size":-1},"weight_map":{}}"#).is_err());
        assert!(
            ShardIndex::parse(br#"{"metadata":{"total_size":1},"weight_map":{"a":3}}"#).is_err()
        );
        assert!(ShardIndex::parse(b"[]").is_err());
        assert!(ShardIndex::parse(b"\xff").is_err());
        let ok = ShardIndex::parse(
            br#"{"metadata":{"total_size":1.5e3,"format":"pt"},"weight_map":{}}"#,
        )
        .unwrap();
        assert_eq!(ok.total_size, 1500);
        assert_eq!(ok.extra_metadata.len(), 1);
    }
}
