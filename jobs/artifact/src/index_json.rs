//! `index.json`: the artifact's root index, in the three shapes the seed names, written
//! deterministically and read defensively.
//!
//! Seed (`../shared/seeds/000_…txt`, "index.json and its three shapes"): the index "is not a
//! schema-versioned document"; the reader recognizes a shape by what it carries. A fourth shape is
//! [`Shape::Unrecognized`] with the sorted top-level keys, and bytes that are not JSON (or cannot
//! be read) are [`Shape::Unreadable`], an artifact of unknown identity: both are values, never an
//! error or a panic. The tokenizer and configuration identities ride along ([`crate::identity`]).
//! Every field and decision: `docs/index-json.md`.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde_json::{Map, Value};

use crate::identity::{
    Absent, ConfigurationIdentity, Parsed, TokenizerIdentity, CONFIGURATION_KEY, TOKENIZER_KEY,
};
use crate::manifest::canonical_json_bytes;
use crate::names::{check_repo_id, check_revision, check_root_file_name};

/// The index's file name at the artifact root.
pub const INDEX_FILE_NAME: &str = "index.json";
/// Largest index read, in bytes. The largest published metadata file is under 20 MB (K3); an
/// index is a small part of it.
pub const INDEX_MAX_BYTES: u64 = 64 << 20;

/// One unit's totals (`units[]` of the unit shapes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitTotals {
    /// The unit directory's name (a canonical root file name).
    pub name: String,
    /// How many files the unit holds.
    pub files: u64,
    /// How many bytes they hold together.
    pub bytes: u64,
}

/// One upstream of a multi-source artifact (`sources.<key>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// Canonical Hub repository id.
    pub repo: String,
    /// The upstream commit, 40 lower-case hex.
    pub revision: String,
    /// A sentence saying what this upstream contributed.
    pub role: String,
    /// The upstream's licence (an identifier such as `apache-2.0`, as the upstream declares it).
    pub license: String,
}

/// `singleSourceTotals` (Kimi K3): one upstream and one pair of totals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SingleSourceTotals {
    /// Upstream repository id.
    pub source_repo: String,
    /// Upstream commit.
    pub source_revision: String,
    /// Payload file count of the artifact.
    pub files: u64,
    /// Payload byte count of the artifact.
    pub bytes: u64,
    /// Format name (`minirun`).
    pub format: Option<String>,
    /// Format version (the highest tile-container version in the artifact).
    pub format_version: Option<u64>,
    /// How the artifact relates to its upstream (`byte-preserving-repack`).
    pub relationship: Option<String>,
    /// Number of layer units.
    pub layers: Option<u64>,
    /// Number of global units.
    pub globals: Option<u64>,
}

/// `singleSourceUnits` (DeepSeek V4 Flash): one upstream, totals per unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SingleSourceUnits {
    /// Upstream repository id.
    pub source_repo: String,
    /// Upstream commit.
    pub source_revision: String,
    /// Every unit with its totals, in the order written.
    pub units: Vec<UnitTotals>,
    /// Payload byte count of the artifact.
    pub total_bytes: u64,
}

/// `multiSourceUnits` (MiniMax H3): several upstreams by key, totals per unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiSourceUnits {
    /// The upstreams, by key (sorted).
    pub sources: BTreeMap<String, Source>,
    /// Every unit with its totals, in the order written.
    pub units: Vec<UnitTotals>,
    /// Payload byte count of the artifact, when published.
    pub total_bytes: Option<u64>,
}

/// What an `index.json` turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// Kimi K3's shape.
    SingleSourceTotals(SingleSourceTotals),
    /// DeepSeek V4 Flash's shape.
    SingleSourceUnits(SingleSourceUnits),
    /// MiniMax H3's shape.
    MultiSourceUnits(MultiSourceUnits),
    /// Valid JSON that names no repository this reader understands.
    Unrecognized {
        /// The document's top-level keys, sorted (empty when the top level is not an object).
        keys: Vec<String>,
        /// Why no shape matched.
        reason: String,
    },
    /// Not JSON, not UTF-8, too large or not readable: an artifact of unknown identity.
    Unreadable {
        /// Why.
        reason: String,
    },
}

impl Shape {
    /// The shape's name as the docs spell it.
    pub fn name(&self) -> &'static str {
        match self {
            Shape::SingleSourceTotals(_) => "singleSourceTotals",
            Shape::SingleSourceUnits(_) => "singleSourceUnits",
            Shape::MultiSourceUnits(_) => "multiSourceUnits",
            Shape::Unrecognized { .. } => "unrecognized",
            Shape::Unreadable { .. } => "unreadable",
        }
    }
}

/// A read (or to-be-written) `index.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDocument {
    /// The shape and its fields.
    pub shape: Shape,
    /// The tokenizer identity, or why it is absent.
    pub tokenizer: Parsed<TokenizerIdentity>,
    /// The configuration identity, or why it is absent.
    pub configuration: Parsed<ConfigurationIdentity>,
    /// Soft findings that did not change the shape (a total that disagrees with its units, an
    /// optional field of the wrong type), for an operator to see.
    pub notes: Vec<String>,
}

/// Why [`IndexDocument::to_bytes`] refused to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IndexWriteError {
    /// Only the three recognized shapes are written.
    #[error("refusing to write an index of shape `{shape}`: only the three recognized shapes are written")]
    NotWritable {
        /// The shape's name.
        shape: &'static str,
    },
    /// A field would not be read back as written.
    #[error("index field `{field}` is invalid: {reason}")]
    Invalid {
        /// The field (`source_repo`, `units[3].name`, `tokenizer`, ...).
        field: String,
        /// The rule it breaks.
        reason: String,
    },
}

fn keys_sorted(m: &Map<String, Value>) -> Vec<String> {
    let mut k: Vec<String> = m.keys().cloned().collect();
    k.sort();
    k
}

fn get_str<'a>(m: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    match m.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(format!("`{key}` is not a string")),
        None => Err(format!("`{key}` is missing")),
    }
}

fn get_u64(m: &Map<String, Value>, key: &str) -> Result<u64, String> {
    match m.get(key) {
        Some(Value::Number(n)) => n
            .as_u64()
            .ok_or_else(|| format!("`{key}` is not a non-negative integer")),
        Some(_) => Err(format!("`{key}` is not a number")),
        None => Err(format!("`{key}` is missing")),
    }
}

fn repo_and_revision(
    m: &Map<String, Value>,
    repo: &str,
    rev: &str,
) -> Result<(String, String), String> {
    let r = get_str(m, repo)?;
    check_repo_id(r).map_err(|e| format!("`{repo}` is not a canonical repository id: {e}"))?;
    let v = get_str(m, rev)?;
    check_revision(v).map_err(|e| format!("`{rev}` is not an immutable commit: {e}"))?;
    Ok((r.to_owned(), v.to_owned()))
}

/// An optional display field: absent → `None`; wrong type → `None` and a note.
fn optional<T>(
    m: &Map<String, Value>,
    key: &str,
    get: impl Fn(&Value) -> Option<T>,
    notes: &mut Vec<String>,
) -> Option<T> {
    let v = m.get(key)?;
    let got = get(v);
    if got.is_none() {
        notes.push(format!(
            "optional field `{key}` has an unexpected type and was ignored"
        ));
    }
    got
}

fn units(m: &Map<String, Value>, notes: &mut Vec<String>) -> Result<Vec<UnitTotals>, String> {
    let Some(Value::Array(list)) = m.get("units") else {
        return Err("`units` is not an array".to_owned());
    };
    let mut out = Vec::with_capacity(list.len().min(1 << 16));
    let mut seen = std::collections::BTreeSet::new();
    for (i, u) in list.iter().enumerate() {
        let Value::Object(u) = u else {
            return Err(format!("`units[{i}]` is not an object"));
        };
        let name = get_str(u, "name").map_err(|e| format!("`units[{i}]`: {e}"))?;
        check_root_file_name(name)
            .map_err(|e| format!("`units[{i}].name` is not a canonical unit name: {e}"))?;
        let files = get_u64(u, "files").map_err(|e| format!("`units[{i}]`: {e}"))?;
        let bytes = get_u64(u, "bytes").map_err(|e| format!("`units[{i}]`: {e}"))?;
        if !seen.insert(name.to_owned()) {
            notes.push(format!("unit `{name}` is listed more than once"));
        }
        out.push(UnitTotals {
            name: name.to_owned(),
            files,
            bytes,
        });
    }
    Ok(out)
}

fn check_total(units: &[UnitTotals], total: u64, notes: &mut Vec<String>) {
    let sum = units.iter().try_fold(0u64, |a, u| a.checked_add(u.bytes));
    if sum != Some(total) {
        notes.push(format!(
            "`total_bytes` is {total} but the units add up to {}",
            sum.map_or_else(|| "more than 2^64".to_owned(), |s| s.to_string())
        ));
    }
}

fn sources(m: &Map<String, Value>) -> Result<BTreeMap<String, Source>, String> {
    let Some(Value::Object(map)) = m.get("sources") else {
        return Err("`sources` is not an object".to_owned());
    };
    if map.is_empty() {
        return Err("`sources` is empty".to_owned());
    }
    let mut out = BTreeMap::new();
    for (key, s) in map {
        let short: String = key.chars().take(64).collect();
        check_root_file_name(key)
            .map_err(|e| format!("source key `{short}` is not canonical: {e}"))?;
        let Value::Object(s) = s else {
            return Err(format!("`sources.{short}` is not an object"));
        };
        let (repo, revision) = repo_and_revision(s, "repo", "revision")
            .map_err(|e| format!("`sources.{short}`: {e}"))?;
        let role = get_str(s, "role").map_err(|e| format!("`sources.{short}`: {e}"))?;
        let license = get_str(s, "license").map_err(|e| format!("`sources.{short}`: {e}"))?;
        out.insert(
            key.clone(),
            Source {
                repo,
                revision,
                role: role.to_owned(),
                license: license.to_owned(),
            },
        );
    }
    Ok(out)
}

fn recognize(m: &Map<String, Value>, notes: &mut Vec<String>) -> Result<Shape, String> {
    if m.contains_key("sources") {
        let sources = sources(m)?;
        let units = units(m, notes)?;
        let total_bytes = optional(m, "total_bytes", Value::as_u64, notes);
        if let Some(t) = total_bytes {
            check_total(&units, t, notes);
        }
        return Ok(Shape::MultiSourceUnits(MultiSourceUnits {
            sources,
            units,
            total_bytes,
        }));
    }
    if !m.contains_key("source_repo") {
        return Err("it names no repository (no `source_repo` and no `sources`)".to_owned());
    }
    let (source_repo, source_revision) = repo_and_revision(m, "source_repo", "source_revision")?;
    if m.contains_key("units") {
        let units = units(m, notes)?;
        let total_bytes = get_u64(m, "total_bytes")?;
        check_total(&units, total_bytes, notes);
        return Ok(Shape::SingleSourceUnits(SingleSourceUnits {
            source_repo,
            source_revision,
            units,
            total_bytes,
        }));
    }
    if m.contains_key("files") || m.contains_key("bytes") {
        let as_string = |v: &Value| v.as_str().map(str::to_owned);
        return Ok(Shape::SingleSourceTotals(SingleSourceTotals {
            files: get_u64(m, "files")?,
            bytes: get_u64(m, "bytes")?,
            format: optional(m, "format", as_string, notes),
            format_version: optional(m, "format_version", Value::as_u64, notes),
            relationship: optional(m, "relationship", as_string, notes),
            layers: optional(m, "layers", Value::as_u64, notes),
            globals: optional(m, "globals", Value::as_u64, notes),
            source_repo,
            source_revision,
        }));
    }
    Err("it has `source_repo` but neither `units` nor `files`/`bytes` totals".to_owned())
}

impl IndexDocument {
    /// Reads an index from bytes. Never panics and never fails: see [`Shape`].
    pub fn read(bytes: &[u8]) -> IndexDocument {
        if bytes.len() as u64 > INDEX_MAX_BYTES {
            return Self::unreadable(format!(
                "it is {} bytes, larger than the limit of {INDEX_MAX_BYTES}",
                bytes.len()
            ));
        }
        let (value, duplicates) = match parse_strict(bytes) {
            Ok(v) => v,
            Err(e) => return Self::unreadable(format!("not JSON: {e}")),
        };
        let mut doc = Self::from_value(&value);
        if duplicates.is_empty() {
            return doc;
        }
        // Duplicate names are ambiguous: whatever they touch is not evidence (docs/index-json.md).
        let under = |p: &str, key: &str| {
            p.strip_prefix('/')
                .and_then(|rest| rest.strip_prefix(key))
                .is_some_and(|tail| tail.is_empty() || tail.starts_with('/'))
        };
        let short = |p: &String| p.chars().take(128).collect::<String>();
        if let Some(p) = duplicates.iter().find(|p| under(p, TOKENIZER_KEY)) {
            doc.tokenizer = Parsed::Absent(Absent::DuplicateKey { pointer: short(p) });
        }
        if let Some(p) = duplicates.iter().find(|p| under(p, CONFIGURATION_KEY)) {
            doc.configuration = Parsed::Absent(Absent::DuplicateKey { pointer: short(p) });
        }
        if let Some(p) = duplicates
            .iter()
            .find(|p| !under(p, TOKENIZER_KEY) && !under(p, CONFIGURATION_KEY))
        {
            if let Value::Object(m) = &value {
                doc.shape = Shape::Unrecognized {
                    keys: keys_sorted(m),
                    reason: format!(
                        "the name `{}` appears more than once, so the document is ambiguous",
                        short(p)
                    ),
                };
                doc.notes.clear();
            }
        }
        doc
    }

    /// Reads `path`; a file that cannot be opened or read is [`Shape::Unreadable`] too.
    pub fn read_file(path: &Path) -> IndexDocument {
        let mut bytes = Vec::new();
        let got = std::fs::File::open(path)
            .and_then(|f| f.take(INDEX_MAX_BYTES + 1).read_to_end(&mut bytes));
        match got {
            Ok(_) => Self::read(&bytes),
            Err(e) => Self::unreadable(format!("`{}` cannot be read: {e}", path.display())),
        }
    }

    fn unreadable(reason: String) -> IndexDocument {
        IndexDocument {
            shape: Shape::Unreadable { reason },
            tokenizer: Parsed::Absent(Absent::IndexUnreadable),
            configuration: Parsed::Absent(Absent::IndexUnreadable),
            notes: Vec::new(),
        }
    }

    /// Classifies a parsed JSON value.
    pub fn from_value(value: &Value) -> IndexDocument {
        let mut notes = Vec::new();
        let shape = match value {
            Value::Object(m) => match recognize(m, &mut notes) {
                Ok(shape) => shape,
                Err(reason) => Shape::Unrecognized {
                    keys: keys_sorted(m),
                    reason,
                },
            },
            other => Shape::Unrecognized {
                keys: Vec::new(),
                reason: format!(
                    "the top level is a {:?}, not an object",
                    crate::identity::JsonKind::of(other)
                ),
            },
        };
        IndexDocument {
            shape,
            tokenizer: TokenizerIdentity::from_index(value),
            configuration: ConfigurationIdentity::from_index(value),
            notes,
        }
    }

    /// The index as a JSON value, after checking that it reads back as written. Absent
    /// identities are omitted.
    pub fn to_value(&self) -> Result<Value, IndexWriteError> {
        let invalid = |field: &str, reason: String| IndexWriteError::Invalid {
            field: field.to_owned(),
            reason,
        };
        let mut m = Map::new();
        let put_repo = |m: &mut Map<String, Value>, rk: &str, r: &str, vk: &str, v: &str| {
            check_repo_id(r).map_err(|e| invalid(rk, e.to_string()))?;
            check_revision(v).map_err(|e| invalid(vk, e.to_string()))?;
            m.insert(rk.into(), Value::from(r));
            m.insert(vk.into(), Value::from(v));
            Ok::<(), IndexWriteError>(())
        };
        let put_units = |m: &mut Map<String, Value>, units: &[UnitTotals]| {
            let mut list = Vec::with_capacity(units.len());
            for (i, u) in units.iter().enumerate() {
                check_root_file_name(&u.name)
                    .map_err(|e| invalid(&format!("units[{i}].name"), e.to_string()))?;
                let mut o = Map::new();
                o.insert("name".into(), Value::from(u.name.clone()));
                o.insert("files".into(), Value::from(u.files));
                o.insert("bytes".into(), Value::from(u.bytes));
                list.push(Value::Object(o));
            }
            m.insert("units".into(), Value::Array(list));
            Ok::<(), IndexWriteError>(())
        };
        let check_sum = |units: &[UnitTotals], total: u64| {
            let sum = units.iter().try_fold(0u64, |a, u| a.checked_add(u.bytes));
            if sum == Some(total) {
                Ok(())
            } else {
                Err(invalid(
                    "total_bytes",
                    format!("{total} is not the sum of the units' bytes"),
                ))
            }
        };
        match &self.shape {
            Shape::SingleSourceTotals(t) => {
                put_repo(
                    &mut m,
                    "source_repo",
                    &t.source_repo,
                    "source_revision",
                    &t.source_revision,
                )?;
                m.insert("files".into(), Value::from(t.files));
                m.insert("bytes".into(), Value::from(t.bytes));
                let opt_s = |m: &mut Map<String, Value>, k: &str, v: &Option<String>| {
                    if let Some(v) = v {
                        m.insert(k.into(), Value::from(v.clone()));
                    }
                };
                let opt_n = |m: &mut Map<String, Value>, k: &str, v: Option<u64>| {
                    if let Some(v) = v {
                        m.insert(k.into(), Value::from(v));
                    }
                };
                opt_s(&mut m, "format", &t.format);
                opt_n(&mut m, "format_version", t.format_version);
                opt_s(&mut m, "relationship", &t.relationship);
                opt_n(&mut m, "layers", t.layers);
                opt_n(&mut m, "globals", t.globals);
            }
            Shape::SingleSourceUnits(u) => {
                put_repo(
                    &mut m,
                    "source_repo",
                    &u.source_repo,
                    "source_revision",
                    &u.source_revision,
                )?;
                check_sum(&u.units, u.total_bytes)?;
                put_units(&mut m, &u.units)?;
                m.insert("total_bytes".into(), Value::from(u.total_bytes));
            }
            Shape::MultiSourceUnits(u) => {
                if u.sources.is_empty() {
                    return Err(invalid("sources", "at least one source is required".into()));
                }
                let mut srcs = Map::new();
                for (k, s) in &u.sources {
                    check_root_file_name(k)
                        .map_err(|e| invalid(&format!("sources.{k}"), e.to_string()))?;
                    let mut o = Map::new();
                    put_repo(&mut o, "repo", &s.repo, "revision", &s.revision)
                        .map_err(|e| invalid(&format!("sources.{k}"), e.to_string()))?;
                    o.insert("role".into(), Value::from(s.role.clone()));
                    o.insert("license".into(), Value::from(s.license.clone()));
                    srcs.insert(k.clone(), Value::Object(o));
                }
                m.insert("sources".into(), Value::Object(srcs));
                put_units(&mut m, &u.units)?;
                if let Some(t) = u.total_bytes {
                    check_sum(&u.units, t)?;
                    m.insert("total_bytes".into(), Value::from(t));
                }
            }
            other => {
                return Err(IndexWriteError::NotWritable {
                    shape: other.name(),
                })
            }
        }
        if let Parsed::Present(t) = &self.tokenizer {
            t.validate()
                .map_err(|e| invalid(TOKENIZER_KEY, e.to_string()))?;
            m.insert(TOKENIZER_KEY.into(), t.to_value());
        }
        if let Parsed::Present(c) = &self.configuration {
            c.validate()
                .map_err(|e| invalid(CONFIGURATION_KEY, e.to_string()))?;
            m.insert(CONFIGURATION_KEY.into(), c.to_value());
        }
        Ok(Value::Object(m))
    }

    /// The index's canonical bytes (sorted keys, two-space indent, trailing newline): the same
    /// document always gives the same bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, IndexWriteError> {
        Ok(canonical_json_bytes(&self.to_value()?))
    }
}

/// Parses JSON like `serde_json::from_slice::<Value>` (same grammar, same recursion limit), and
/// also returns the JSON pointer of every object member whose name was already present in that
/// object. `serde_json` keeps the last value silently; other parsers keep the first.
fn parse_strict(bytes: &[u8]) -> Result<(Value, Vec<String>), serde_json::Error> {
    use serde::de::DeserializeSeed;
    let dups = std::cell::RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Strict {
        dups: &dups,
        pointer: String::new(),
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok((value, dups.into_inner()))
}

struct Strict<'a> {
    dups: &'a std::cell::RefCell<Vec<String>>,
    pointer: String,
}

impl Strict<'_> {
    fn child(&self, token: &str) -> Self {
        Strict {
            dups: self.dups,
            pointer: format!(
                "{}/{}",
                self.pointer,
                token.replace('~', "~0").replace('/', "~1")
            ),
        }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Strict<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(self.child(&out.len().to_string()))? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let child = self.child(&key);
            let value = map.next_value_seed(Strict {
                dups: self.dups,
                pointer: child.pointer.clone(),
            })?;
            if out.insert(key, value).is_some() {
                self.dups.borrow_mut().push(child.pointer);
            }
        }
        Ok(Value::Object(out))
    }
}
