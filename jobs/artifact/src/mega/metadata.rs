//! `mega::metadata`: typed metadata values, their byte encoding (docs/mega.md §3), the reserved
//! namespaces and the key schema of MEGA v1 (seed `004`, "Required metadata", "Custom metadata",
//! "Compatibility policy").
//!
//! Keys are kept in a `BTreeMap`, so the section is written in ascending byte order of the key and
//! a reader can refuse duplicates by checking strict order.

use std::collections::BTreeMap;

use super::layout::{MAX_ARRAY_DEPTH, MAX_KEY_LEN};
use super::MegaError;

/// Metadata of a section, in canonical (ascending key) order.
pub type Metadata = BTreeMap<String, Value>;

/// A typed metadata value. Tags on disk: 1 string, 2 u64, 3 i64, 4 f64, 5 bool, 6 bytes, 7 array.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// UTF-8 string (the seed's preferred type for values older readers must survive).
    Str(String),
    /// Unsigned 64-bit integer.
    U64(u64),
    /// Signed 64-bit integer.
    I64(i64),
    /// IEEE-754 binary64.
    F64(f64),
    /// Boolean (one byte, 0 or 1).
    Bool(bool),
    /// Raw bytes.
    Bytes(Vec<u8>),
    /// Homogeneous array: every element has the same tag (nested arrays may differ inside).
    Array(Vec<Value>),
}

impl Value {
    /// The on-disk tag.
    pub fn tag(&self) -> u8 {
        match self {
            Value::Str(_) => 1,
            Value::U64(_) => 2,
            Value::I64(_) => 3,
            Value::F64(_) => 4,
            Value::Bool(_) => 5,
            Value::Bytes(_) => 6,
            Value::Array(_) => 7,
        }
    }

    /// The string, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if this is a u64.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::U64(v) => Some(*v),
            _ => None,
        }
    }

    /// Append the untagged body (the tag is written by the caller). Fails on a heterogeneous array.
    fn encode_body(&self, out: &mut Vec<u8>, key: &str) -> Result<(), MegaError> {
        match self {
            Value::Str(s) => {
                out.extend_from_slice(&(s.len() as u64).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::Bool(v) => out.push(u8::from(*v)),
            Value::Bytes(b) => {
                out.extend_from_slice(&(b.len() as u64).to_le_bytes());
                out.extend_from_slice(b);
            }
            Value::Array(items) => {
                // An empty array is written with the string tag (docs §3.2).
                let tag = items.first().map_or(1, Value::tag);
                if items.iter().any(|v| v.tag() != tag) {
                    return Err(MegaError::KeyRefused {
                        key: key.into(),
                        reason: "array elements must all have the same type".into(),
                    });
                }
                out.push(tag);
                out.extend_from_slice(&(items.len() as u64).to_le_bytes());
                for v in items {
                    v.encode_body(out, key)?;
                }
            }
        }
        Ok(())
    }
}

/// Encode a metadata section: per entry `u32 key_len, key, u8 tag, body` (docs §3.1).
pub fn encode_section(md: &Metadata) -> Result<Vec<u8>, MegaError> {
    let mut out = Vec::new();
    for (k, v) in md {
        check_key_syntax(k).map_err(|reason| MegaError::KeyRefused {
            key: k.clone(),
            reason,
        })?;
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(k.as_bytes());
        out.push(v.tag());
        v.encode_body(&mut out, k)?;
    }
    Ok(out)
}

/// A bounds-checked cursor over a byte section; every read names the file.
pub(crate) struct Cursor<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
    pub file: &'a str,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8], file: &'a str) -> Self {
        Cursor { buf, pos: 0, file }
    }
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }
    pub fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], MegaError> {
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| MegaError::Truncated {
                file: self.file.into(),
                what: what.into(),
                need: n,
                have: self.remaining() as u64,
            })?;
        let s = self.buf.get(self.pos..end).unwrap_or_default();
        self.pos = end;
        Ok(s)
    }
    pub fn u8(&mut self, what: &str) -> Result<u8, MegaError> {
        Ok(self.take(1, what)?.first().copied().unwrap_or(0))
    }
    pub fn u32(&mut self, what: &str) -> Result<u32, MegaError> {
        let b = self.take(4, what)?;
        let mut w = [0u8; 4];
        w.copy_from_slice(b);
        Ok(u32::from_le_bytes(w))
    }
    pub fn u64(&mut self, what: &str) -> Result<u64, MegaError> {
        let b = self.take(8, what)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        Ok(u64::from_le_bytes(w))
    }
    pub fn utf8(&mut self, n: u64, what: &str) -> Result<&'a str, MegaError> {
        let b = self.take(n, what)?;
        std::str::from_utf8(b).map_err(|e| MegaError::BadMetadata {
            file: self.file.into(),
            key: what.into(),
            reason: format!("not valid UTF-8 ({e})"),
        })
    }
}

/// Smallest encoded size of one element of each tag, used to bound counts before allocating.
fn min_body_len(tag: u8) -> usize {
    match tag {
        5 => 1,
        7 => 9,
        _ => 8,
    }
}

/// Decode `count` entries that must fill `buf` exactly.
pub fn decode_section(buf: &[u8], count: u64, file: &str) -> Result<Metadata, MegaError> {
    // Each entry is at least 4 (key_len) + 1 (key) + 1 (tag) + 1 (bool) bytes.
    if count > (buf.len() / 7) as u64 {
        return Err(MegaError::BadHeader {
            file: file.into(),
            reason: format!(
                "{count} metadata entries cannot fit in a {}-byte section",
                buf.len()
            ),
        });
    }
    let mut c = Cursor::new(buf, file);
    let mut md = Metadata::new();
    let mut prev: Option<String> = None;
    for i in 0..count {
        let klen = c.u32(&format!("metadata entry #{i} key length"))?;
        if klen == 0 || klen as usize > MAX_KEY_LEN {
            return Err(MegaError::BadMetadata {
                file: file.into(),
                key: format!("#{i}"),
                reason: format!("key length {klen} outside 1..={MAX_KEY_LEN}"),
            });
        }
        let key = c.utf8(u64::from(klen), &format!("metadata entry #{i} key"))?;
        let bad = |reason: String| MegaError::BadMetadata {
            file: file.into(),
            key: key.into(),
            reason,
        };
        check_key_syntax(key).map_err(bad)?;
        if prev.as_deref().is_some_and(|p| p >= key) {
            return Err(bad("keys must be unique and in ascending byte order".into()));
        }
        let tag = c.u8(key)?;
        let v = decode_body(&mut c, tag, key, 1)?;
        prev = Some(key.to_string());
        md.insert(key.to_string(), v);
    }
    if c.remaining() != 0 {
        return Err(MegaError::BadHeader {
            file: file.into(),
            reason: format!(
                "{} trailing bytes after {count} metadata entries",
                c.remaining()
            ),
        });
    }
    Ok(md)
}

fn decode_body(c: &mut Cursor<'_>, tag: u8, key: &str, depth: u32) -> Result<Value, MegaError> {
    let file = c.file;
    let bad = |reason: String| MegaError::BadMetadata {
        file: file.into(),
        key: key.into(),
        reason,
    };
    Ok(match tag {
        1 => {
            let n = c.u64(key)?;
            Value::Str(c.utf8(n, key)?.to_string())
        }
        2 => Value::U64(c.u64(key)?),
        3 => Value::I64(c.u64(key)? as i64),
        4 => Value::F64(f64::from_bits(c.u64(key)?)),
        5 => match c.u8(key)? {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            b => return Err(bad(format!("bool byte is {b}, must be 0 or 1"))),
        },
        6 => {
            let n = c.u64(key)?;
            Value::Bytes(c.take(n, key)?.to_vec())
        }
        7 => {
            if depth > MAX_ARRAY_DEPTH {
                return Err(bad(format!(
                    "arrays nested deeper than {MAX_ARRAY_DEPTH} levels"
                )));
            }
            let etag = c.u8(key)?;
            if !(1..=7).contains(&etag) {
                return Err(bad(format!("unknown array element type tag {etag}")));
            }
            let n = c.u64(key)?;
            if n > (c.remaining() / min_body_len(etag)) as u64 {
                return Err(bad(format!(
                    "array of {n} elements cannot fit in the {} remaining bytes",
                    c.remaining()
                )));
            }
            let mut items = Vec::with_capacity(n as usize);
            for _ in 0..n {
                items.push(decode_body(c, etag, key, depth + 1)?);
            }
            Value::Array(items)
        }
        t => return Err(bad(format!("unknown type tag {t}"))),
    })
}

/// Key syntax: dot-separated non-empty segments of `[A-Za-z0-9_-]`, at most `MAX_KEY_LEN` bytes.
pub fn check_key_syntax(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(format!("key length must be 1..={MAX_KEY_LEN} bytes"));
    }
    for seg in key.split('.') {
        if seg.is_empty() {
            return Err("empty segment (`..`, or a leading or trailing dot)".into());
        }
        if !seg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(format!(
                "segment `{seg}` may only contain ASCII letters, digits, `_` and `-`"
            ));
        }
    }
    Ok(())
}

/// The namespace a key belongs to (seed `004`, "Required metadata").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespace {
    /// `general.*`
    General,
    /// `mega.*` other than the three sub-namespaces below.
    Mega,
    /// `mega.shard.*`
    MegaShard,
    /// `mega.hash.*`
    MegaHash,
    /// `mega.trust.*`
    MegaTrust,
    /// `model.*`
    Model,
    /// `tokenizer.*`
    Tokenizer,
    /// Anything else: an owned prefix such as `tensorplay.release.channel`.
    Custom,
}

/// Classify a key.
pub fn namespace(key: &str) -> Namespace {
    let first = key.split('.').next().unwrap_or("");
    match first {
        "general" => Namespace::General,
        "model" => Namespace::Model,
        "tokenizer" => Namespace::Tokenizer,
        "mega" => match key.split('.').nth(1) {
            Some("shard") => Namespace::MegaShard,
            Some("hash") => Namespace::MegaHash,
            Some("trust") => Namespace::MegaTrust,
            _ => Namespace::Mega,
        },
        _ => Namespace::Custom,
    }
}

/// The type a schema key must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `Value::Str`
    Str,
    /// `Value::U64`
    U64,
    /// `Value::Array` of `Value::Str`
    StrArray,
}

impl Kind {
    fn matches(self, v: &Value) -> bool {
        match (self, v) {
            (Kind::Str, Value::Str(_)) | (Kind::U64, Value::U64(_)) => true,
            (Kind::StrArray, Value::Array(items)) => {
                items.iter().all(|i| matches!(i, Value::Str(_)))
            }
            _ => false,
        }
    }
}

/// Who may set a schema key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Supplied by the caller in the header metadata.
    Caller,
    /// Computed by the writer; a caller supplying it is refused.
    Computed,
    /// Only in the footer overlay (written after the payload hashes exist).
    Footer,
}

/// The MEGA v1.0 schema: every key the reserved namespaces may hold (docs/mega.md §4).
pub const SCHEMA: &[(&str, Kind, Origin)] = &[
    ("general.architecture", Kind::Str, Origin::Caller),
    ("general.basename", Kind::Str, Origin::Caller),
    ("general.description", Kind::Str, Origin::Caller),
    ("general.license", Kind::Str, Origin::Caller),
    ("general.name", Kind::Str, Origin::Caller),
    ("general.size_label", Kind::Str, Origin::Caller),
    ("general.source.repo", Kind::Str, Origin::Caller),
    ("general.source.revision", Kind::Str, Origin::Caller),
    ("general.tags", Kind::StrArray, Origin::Caller),
    ("mega.hash.payload.crc32", Kind::Str, Origin::Computed),
    ("mega.hash.payload.sha256", Kind::Str, Origin::Computed),
    ("mega.layout.tensor_order", Kind::Str, Origin::Computed),
    ("mega.parameter.count", Kind::U64, Origin::Computed),
    ("mega.payload.nbytes", Kind::U64, Origin::Computed),
    ("mega.shard.count", Kind::U64, Origin::Computed),
    ("mega.shard.ordinal", Kind::U64, Origin::Computed),
    ("mega.shard.payload.begin", Kind::U64, Origin::Computed),
    ("mega.shard.payload.end", Kind::U64, Origin::Computed),
    ("mega.source.format", Kind::Str, Origin::Caller),
    ("mega.tensor.count", Kind::U64, Origin::Computed),
    ("mega.tensor.name_mapping", Kind::Str, Origin::Caller),
    ("mega.trust.public_key", Kind::Str, Origin::Footer),
    ("mega.trust.scheme", Kind::Str, Origin::Footer),
    ("mega.trust.signature", Kind::Str, Origin::Footer),
    ("mega.trust.signed_digest", Kind::Str, Origin::Footer),
    ("mega.trust.signer", Kind::Str, Origin::Footer),
    ("mega.trust.timestamp", Kind::Str, Origin::Footer),
    ("model.class", Kind::Str, Origin::Caller),
    ("model.dtype", Kind::Str, Origin::Caller),
    ("model.init_args", Kind::Str, Origin::Caller),
    ("model.state_dict_prefix", Kind::Str, Origin::Caller),
    ("tokenizer.bos_token", Kind::Str, Origin::Caller),
    ("tokenizer.chat_template", Kind::Str, Origin::Caller),
    ("tokenizer.eos_token", Kind::Str, Origin::Caller),
    ("tokenizer.merges", Kind::StrArray, Origin::Caller),
    ("tokenizer.model", Kind::Str, Origin::Caller),
    ("tokenizer.pad_token", Kind::Str, Origin::Caller),
    ("tokenizer.special_tokens", Kind::Str, Origin::Caller),
    ("tokenizer.tokens", Kind::StrArray, Origin::Caller),
    ("tokenizer.unk_token", Kind::Str, Origin::Caller),
];

/// The schema entry of a reserved key, if it has one.
pub fn schema_of(key: &str) -> Option<(Kind, Origin)> {
    SCHEMA
        .binary_search_by(|(k, _, _)| k.cmp(&key))
        .ok()
        .and_then(|i| SCHEMA.get(i))
        .map(|&(_, kind, origin)| (kind, origin))
}

/// Where a caller-supplied key is going.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// The header metadata section.
    Header,
    /// The footer overlay.
    Footer,
}

/// Writer-side check of a caller-supplied key: syntax, owned prefix for custom keys, reserved keys
/// must be in the schema with the right type and writable by the caller in this section.
pub fn check_caller_key(key: &str, v: &Value, section: Section) -> Result<(), MegaError> {
    let refuse = |reason: String| MegaError::KeyRefused {
        key: key.into(),
        reason,
    };
    check_key_syntax(key).map_err(refuse)?;
    if namespace(key) == Namespace::Custom {
        if !key.contains('.') {
            return Err(refuse(
                "custom metadata needs an owned prefix, e.g. `acme.routing.partition`".into(),
            ));
        }
        return Ok(());
    }
    let Some((kind, origin)) = schema_of(key) else {
        return Err(refuse(
            "unknown key in a reserved namespace (general, mega, model, tokenizer); \
             use an owned prefix such as `acme.` for custom data"
                .into(),
        ));
    };
    if !kind.matches(v) {
        return Err(refuse(format!("must be of type {kind:?}")));
    }
    match (origin, section) {
        (Origin::Computed, _) => Err(refuse("computed by the writer; do not supply it".into())),
        (Origin::Footer, Section::Header) => Err(refuse(
            "trust metadata goes in the footer overlay (`append_footer`)".into(),
        )),
        (Origin::Caller, Section::Footer) => Err(refuse(
            "the footer overlay may only hold `mega.trust.*` and custom keys".into(),
        )),
        _ => Ok(()),
    }
}

/// Reader-side check of a decoded section. Unknown custom keys are accepted (ignored by
/// interpretation); a reserved key must be in the schema with the right type unless the file's minor
/// version is newer than this reader's, in which case it is returned as unknown for a warning.
pub fn check_read_section(
    md: &Metadata,
    section: Section,
    file_minor: u16,
    file: &str,
) -> Result<Vec<String>, MegaError> {
    let mut unknown = Vec::new();
    for (k, v) in md {
        if namespace(k) == Namespace::Custom {
            continue;
        }
        let bad = |reason: String| MegaError::BadMetadata {
            file: file.into(),
            key: k.clone(),
            reason,
        };
        match schema_of(k) {
            None if file_minor > super::layout::VERSION_MINOR => unknown.push(k.clone()),
            None => {
                return Err(bad(
                    "unknown key in a reserved namespace for MEGA 1.0".into()
                ))
            }
            Some((kind, origin)) => {
                if !kind.matches(v) {
                    return Err(bad(format!("must be of type {kind:?}")));
                }
                if section == Section::Footer && origin != Origin::Footer {
                    return Err(bad(
                        "the footer overlay may only hold `mega.trust.*` and custom keys".into(),
                    ));
                }
                if section == Section::Header && origin == Origin::Footer {
                    return Err(bad("trust metadata belongs in the footer overlay".into()));
                }
            }
        }
    }
    Ok(unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_sorted_for_binary_search() {
        assert!(SCHEMA.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn every_type_round_trips() {
        let mut md = Metadata::new();
        md.insert("a.s".into(), Value::Str("héllo".into()));
        md.insert("a.u".into(), Value::U64(u64::MAX));
        md.insert("a.i".into(), Value::I64(-5));
        md.insert("a.f".into(), Value::F64(68.2));
        md.insert("a.b".into(), Value::Bool(true));
        md.insert("a.y".into(), Value::Bytes(vec![0, 255]));
        md.insert(
            "a.n".into(),
            Value::Array(vec![
                Value::Array(vec![Value::U64(1)]),
                Value::Array(vec![]),
            ]),
        );
        let bytes = encode_section(&md).unwrap();
        assert_eq!(decode_section(&bytes, 7, "t").unwrap(), md);
    }

    #[test]
    fn caller_key_rules() {
        let s = Value::Str("x".into());
        assert!(check_caller_key("tensorplay.release.channel", &s, Section::Header).is_ok());
        assert!(check_caller_key("general.name", &s, Section::Header).is_ok());
        assert!(check_caller_key("general.favourite_colour", &s, Section::Header).is_err());
        assert!(check_caller_key("mega.tensor.count", &Value::U64(1), Section::Header).is_err());
        assert!(check_caller_key("mega.trust.signer", &s, Section::Header).is_err());
        assert!(check_caller_key("mega.trust.signer", &s, Section::Footer).is_ok());
        assert!(check_caller_key("nodot", &s, Section::Header).is_err());
        assert!(check_caller_key("general.name", &Value::U64(1), Section::Header).is_err());
    }

    #[test]
    fn deep_nesting_is_refused() {
        let mut v = Value::Array(vec![Value::U64(1)]);
        for _ in 0..MAX_ARRAY_DEPTH {
            v = Value::Array(vec![v]);
        }
        let mut md = Metadata::new();
        md.insert("a.deep".into(), v);
        let bytes = encode_section(&md).unwrap();
        let err = decode_section(&bytes, 1, "t").unwrap_err().to_string();
        assert!(err.contains("nested deeper"), "{err}");
    }
}
