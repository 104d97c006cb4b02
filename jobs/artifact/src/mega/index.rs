//! `mega::index`: the `.mega.index.json` manifest (docs/mega.md §6; seed `004`, "Index file") and
//! [`Release`], the runtime view that resolves the index first and opens only the shards holding the
//! requested tensors.
//!
//! The JSON keeps the seed's shape (`metadata` string→string, `weight_map` tensor→shard) and adds a
//! `shards` list with each shard's size, payload range, tensor count and payload hashes. Unknown
//! top-level and shard-entry fields are ignored (compatibility policy, docs §7).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::metadata::{check_key_syntax, namespace, schema_of, Metadata, Namespace, Value};
use super::reader::{is_lower_hex, Opener, ShardHeader, ShardReader};
use super::writer::{ShardOutcome, TensorOrder};
use super::MegaError;

/// An index larger than this is refused before parsing (a 1M-tensor weight map is ~100 MB less).
pub const MAX_INDEX_LEN: u64 = 64 << 20;
/// Index format version written in `metadata["mega.index.version"]`.
pub const INDEX_VERSION: &str = "1";
/// Reserved keys that only the index carries.
pub const INDEX_ONLY_KEYS: &[&str] = &["mega.index.version"];

#[derive(Debug, Serialize, Deserialize)]
struct RawIndex {
    metadata: BTreeMap<String, String>,
    shards: Vec<RawShard>,
    weight_map: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct RawShard {
    file: String,
    nbytes: u64,
    payload_offset: u64,
    payload_range: [u64; 2],
    tensor_count: u64,
    crc32: String,
    sha256: String,
}

/// One shard as the index lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardEntry {
    /// File name inside the release directory.
    pub file: String,
    /// File size in bytes.
    pub nbytes: u64,
    /// Absolute payload offset in the shard file.
    pub payload_offset: u64,
    /// Start of the shard's payload in the release's concatenated payload.
    pub payload_begin: u64,
    /// End (exclusive) of the shard's payload in the concatenated payload.
    pub payload_end: u64,
    /// Tensors in the shard.
    pub tensor_count: u64,
    /// Payload CRC-32, 8 lowercase hex.
    pub crc32: String,
    /// Payload SHA-256, 64 lowercase hex.
    pub sha256: String,
}

/// A validated `.mega.index.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    /// Shared metadata, all values strings.
    pub metadata: BTreeMap<String, String>,
    /// Shards in ordinal order.
    pub shards: Vec<ShardEntry>,
    /// Tensor name → shard file name.
    pub weight_map: BTreeMap<String, String>,
}

fn value_to_index_string(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        Value::U64(x) => x.to_string(),
        Value::I64(x) => x.to_string(),
        Value::F64(x) => x.to_string(),
        Value::Bool(x) => x.to_string(),
        Value::Bytes(b) => hex::encode(b),
        Value::Array(items) => {
            let parts: Vec<serde_json::Value> = items
                .iter()
                .map(|i| serde_json::Value::String(value_to_index_string(i)))
                .collect();
            serde_json::Value::Array(parts).to_string()
        }
    }
}

impl Index {
    /// The index of shards just written, with `shared` caller metadata rendered as strings.
    pub fn from_release(shards: &[ShardOutcome], shared: &Metadata, order: TensorOrder) -> Index {
        let mut metadata: BTreeMap<String, String> = shared
            .iter()
            .map(|(k, v)| (k.clone(), value_to_index_string(v)))
            .collect();
        let tensors: u64 = shards.iter().map(|s| s.tensors.len() as u64).sum();
        let params = shards
            .iter()
            .fold(0u64, |a, s| a.saturating_add(s.parameter_count));
        let payload: u64 = shards.iter().map(|s| s.payload_nbytes).sum();
        for (k, v) in [
            ("mega.index.version", INDEX_VERSION.to_string()),
            ("mega.layout.tensor_order", order.as_str().to_string()),
            ("mega.parameter.count", params.to_string()),
            ("mega.payload.nbytes", payload.to_string()),
            ("mega.shard.count", shards.len().to_string()),
            ("mega.tensor.count", tensors.to_string()),
        ] {
            metadata.insert(k.into(), v);
        }
        let mut weight_map = BTreeMap::new();
        for s in shards {
            for t in &s.tensors {
                weight_map.insert(t.clone(), s.file.clone());
            }
        }
        Index {
            metadata,
            shards: shards
                .iter()
                .map(|s| ShardEntry {
                    file: s.file.clone(),
                    nbytes: s.nbytes,
                    payload_offset: s.payload_offset,
                    payload_begin: s.payload_begin,
                    payload_end: s.payload_begin + s.payload_nbytes,
                    tensor_count: s.tensors.len() as u64,
                    crc32: s.crc32.clone(),
                    sha256: s.sha256.clone(),
                })
                .collect(),
            weight_map,
        }
    }

    /// Serialize: pretty JSON (2-space indent, keys of maps sorted) plus a final newline.
    pub fn to_json_bytes(&self) -> Result<Vec<u8>, MegaError> {
        let raw = RawIndex {
            metadata: self.metadata.clone(),
            shards: self
                .shards
                .iter()
                .map(|s| RawShard {
                    file: s.file.clone(),
                    nbytes: s.nbytes,
                    payload_offset: s.payload_offset,
                    payload_range: [s.payload_begin, s.payload_end],
                    tensor_count: s.tensor_count,
                    crc32: s.crc32.clone(),
                    sha256: s.sha256.clone(),
                })
                .collect(),
            weight_map: self.weight_map.clone(),
        };
        let mut out = serde_json::to_vec_pretty(&raw).map_err(|e| MegaError::BadIndex {
            file: "<writer>".into(),
            reason: e.to_string(),
        })?;
        out.push(b'\n');
        Ok(out)
    }

    /// Parse and validate an index. serde_json's recursion limit (128) bounds nesting.
    pub fn parse(file: &str, bytes: &[u8]) -> Result<Index, MegaError> {
        let bad = |reason: String| MegaError::BadIndex {
            file: file.into(),
            reason,
        };
        if bytes.len() as u64 > MAX_INDEX_LEN {
            return Err(bad(format!(
                "{} bytes exceed the {MAX_INDEX_LEN}-byte limit",
                bytes.len()
            )));
        }
        let raw: RawIndex = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
        for k in raw.metadata.keys() {
            check_key_syntax(k).map_err(|r| bad(format!("metadata key `{k}`: {r}")))?;
            if namespace(k) != Namespace::Custom
                && schema_of(k).is_none()
                && !INDEX_ONLY_KEYS.contains(&k.as_str())
            {
                return Err(bad(format!(
                    "metadata key `{k}` is in a reserved namespace but not in the MEGA 1 schema"
                )));
            }
        }
        let get = |k: &str| raw.metadata.get(k).map(String::as_str);
        if get("mega.index.version") != Some(INDEX_VERSION) {
            return Err(bad(format!(
                "`mega.index.version` must be \"{INDEX_VERSION}\", found {:?}",
                get("mega.index.version")
            )));
        }
        let num = |k: &str| -> Result<u64, MegaError> {
            get(k)
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| bad(format!("`{k}` must be a decimal string")))
        };
        if raw.shards.is_empty() {
            return Err(bad("the shard list is empty".into()));
        }
        let mut files = BTreeSet::new();
        let mut shards = Vec::with_capacity(raw.shards.len());
        let mut next = 0u64;
        for (i, s) in raw.shards.iter().enumerate() {
            let f = &s.file;
            if f.is_empty()
                || f.starts_with('.')
                || f.contains(['/', '\\'])
                || !f.ends_with(".mega")
            {
                return Err(bad(format!(
                    "shard #{i} file `{f}` must be a plain `*.mega` name in the index directory"
                )));
            }
            if !files.insert(f.as_str()) {
                return Err(bad(format!("shard `{f}` is listed twice")));
            }
            let [b, e] = s.payload_range;
            if b != next || e < b {
                return Err(bad(format!(
                    "shard `{f}` payload range {b}..{e} does not continue at {next}"
                )));
            }
            next = e;
            if !is_lower_hex(&s.crc32, 8) || !is_lower_hex(&s.sha256, 64) {
                return Err(bad(format!("shard `{f}` hashes must be lowercase hex")));
            }
            shards.push(ShardEntry {
                file: f.clone(),
                nbytes: s.nbytes,
                payload_offset: s.payload_offset,
                payload_begin: b,
                payload_end: e,
                tensor_count: s.tensor_count,
                crc32: s.crc32.clone(),
                sha256: s.sha256.clone(),
            });
        }
        let mut per_shard: BTreeMap<&str, u64> = BTreeMap::new();
        for (t, f) in &raw.weight_map {
            if !files.contains(f.as_str()) {
                return Err(bad(format!(
                    "tensor `{t}` maps to `{f}`, which is not in the shard list"
                )));
            }
            *per_shard.entry(f.as_str()).or_insert(0) += 1;
        }
        for s in &shards {
            let n = per_shard.get(s.file.as_str()).copied().unwrap_or(0);
            if n != s.tensor_count {
                return Err(bad(format!(
                    "shard `{}` lists {} tensors, the weight map places {n} in it",
                    s.file, s.tensor_count
                )));
            }
        }
        for (k, want) in [
            ("mega.shard.count", shards.len() as u64),
            ("mega.tensor.count", raw.weight_map.len() as u64),
            ("mega.payload.nbytes", next),
        ] {
            let got = num(k)?;
            if got != want {
                return Err(bad(format!("`{k}` is {got}, the index lists {want}")));
            }
        }
        num("mega.parameter.count")?;
        Ok(Index {
            metadata: raw.metadata,
            shards,
            weight_map: raw.weight_map,
        })
    }

    /// Check an opened shard against its index entry (ordinal = position in the list).
    pub fn check_shard(&self, ordinal: usize, h: &ShardHeader) -> Result<(), MegaError> {
        let Some(e) = self.shards.get(ordinal) else {
            return Err(MegaError::ShardMismatch {
                shard: h.file.clone(),
                reason: format!("ordinal {ordinal} is not in the index"),
            });
        };
        let mism = |reason: String| MegaError::ShardMismatch {
            shard: e.file.clone(),
            reason,
        };
        let pairs: [(&str, u64, u64); 6] = [
            ("file size", e.nbytes, h.fixed.file_len()),
            ("payload offset", e.payload_offset, h.fixed.payload_offset),
            (
                "payload size",
                e.payload_end - e.payload_begin,
                h.fixed.payload_size,
            ),
            ("tensor count", e.tensor_count, h.fixed.tensor_count),
            (
                "mega.shard.ordinal",
                ordinal as u64,
                h.get_u64("mega.shard.ordinal").unwrap_or(u64::MAX),
            ),
            (
                "mega.shard.payload.begin",
                e.payload_begin,
                h.get_u64("mega.shard.payload.begin").unwrap_or(u64::MAX),
            ),
        ];
        for (what, idx, shard) in pairs {
            if idx != shard {
                return Err(mism(format!(
                    "{what}: index says {idx}, shard says {shard}"
                )));
            }
        }
        if h.get_u64("mega.shard.count") != Some(self.shards.len() as u64) {
            return Err(mism(format!(
                "mega.shard.count: index lists {} shards",
                self.shards.len()
            )));
        }
        for (what, idx, shard) in [
            ("crc32", &e.crc32, h.get_str("mega.hash.payload.crc32")),
            ("sha256", &e.sha256, h.get_str("mega.hash.payload.sha256")),
        ] {
            if Some(idx.as_str()) != shard {
                return Err(mism(format!(
                    "payload {what}: index says {idx}, shard says {shard:?}"
                )));
            }
        }
        for t in &h.tensors {
            if self.weight_map.get(&t.name) != Some(&e.file) {
                return Err(mism(format!(
                    "tensor `{}` is not mapped to this shard",
                    t.name
                )));
            }
        }
        Ok(())
    }
}

/// How a release was entered.
#[derive(Debug, Clone)]
pub enum ReleaseEntry {
    /// A single `.mega` file opened directly.
    Single(String),
    /// A `.mega.index.json` (file name, parsed index).
    Indexed(String, Index),
}

/// A release opened for tensor access: the index is resolved first; shards are opened lazily, only
/// when a tensor they hold is requested, and each is checked against the index when opened.
pub struct Release<O: Opener> {
    /// The opener (public so tests can read its counters).
    pub opener: O,
    /// How the release was entered.
    pub entry: ReleaseEntry,
    open: BTreeMap<String, ShardReader>,
}

impl<O: Opener> Release<O> {
    /// Enter through a `.mega.index.json`: reads the index only.
    pub fn open_index(opener: O, index_file: &str) -> Result<Self, MegaError> {
        let mut f = opener.open(index_file)?;
        let mut bytes = Vec::new();
        std::io::Read::take(&mut f, MAX_INDEX_LEN + 1)
            .read_to_end_checked(&mut bytes, index_file)?;
        let index = Index::parse(index_file, &bytes)?;
        Ok(Release {
            opener,
            entry: ReleaseEntry::Indexed(index_file.into(), index),
            open: BTreeMap::new(),
        })
    }

    /// Enter through a single `.mega` file: reads its header.
    pub fn open_single(opener: O, file: &str) -> Result<Self, MegaError> {
        let reader = ShardReader::open(&opener, file)?;
        let mut open = BTreeMap::new();
        open.insert(file.to_string(), reader);
        Ok(Release {
            opener,
            entry: ReleaseEntry::Single(file.into()),
            open,
        })
    }

    /// The shard file holding `name`.
    pub fn shard_of(&self, name: &str) -> Result<String, MegaError> {
        let found = match &self.entry {
            ReleaseEntry::Indexed(_, idx) => idx.weight_map.get(name).cloned(),
            ReleaseEntry::Single(f) => self
                .open
                .get(f)
                .and_then(|r| r.header.tensor(name))
                .map(|_| f.clone()),
        };
        found.ok_or_else(|| MegaError::TensorNotFound { name: name.into() })
    }

    /// Shard files opened so far.
    pub fn opened_shards(&self) -> Vec<String> {
        self.open.keys().cloned().collect()
    }

    /// The opened shard `file`, opening and cross-checking it against the index on first use.
    pub fn shard(&mut self, file: &str) -> Result<&mut ShardReader, MegaError> {
        if !self.open.contains_key(file) {
            let reader = ShardReader::open(&self.opener, file)?;
            if let ReleaseEntry::Indexed(_, idx) = &self.entry {
                let ordinal = idx
                    .shards
                    .iter()
                    .position(|s| s.file == file)
                    .ok_or_else(|| MegaError::ShardMismatch {
                        shard: file.into(),
                        reason: "not listed in the index".into(),
                    })?;
                idx.check_shard(ordinal, &reader.header)?;
            }
            self.open.insert(file.to_string(), reader);
        }
        self.open
            .get_mut(file)
            .ok_or_else(|| MegaError::TensorNotFound { name: file.into() })
    }

    /// The stored bytes of tensor `name`, opening only the shard that holds it.
    pub fn read_tensor(&mut self, name: &str) -> Result<Vec<u8>, MegaError> {
        let file = self.shard_of(name)?;
        self.shard(&file)?.read_tensor(name)
    }

    /// All shard files of the release, in ordinal order.
    pub fn shard_files(&self) -> Vec<String> {
        match &self.entry {
            ReleaseEntry::Indexed(_, idx) => idx.shards.iter().map(|s| s.file.clone()).collect(),
            ReleaseEntry::Single(f) => vec![f.clone()],
        }
    }
}

/// `read_to_end` with the file named in the error and the size cap enforced.
trait ReadToEndChecked {
    fn read_to_end_checked(&mut self, buf: &mut Vec<u8>, file: &str) -> Result<(), MegaError>;
}

impl<R: std::io::Read> ReadToEndChecked for R {
    fn read_to_end_checked(&mut self, buf: &mut Vec<u8>, file: &str) -> Result<(), MegaError> {
        self.read_to_end(buf)
            .map_err(|e| MegaError::io("read", file, e))?;
        if buf.len() as u64 > MAX_INDEX_LEN {
            return Err(MegaError::BadIndex {
                file: file.into(),
                reason: format!("larger than the {MAX_INDEX_LEN}-byte limit"),
            });
        }
        Ok(())
    }
}
