//! Tokenizer and configuration identity objects, parsed fail-closed.
//!
//! An `index.json` may carry a `tokenizer` object and a `configuration` object naming the exact
//! repository-root file a runner must open, with its byte count, SHA-256 and upstream provenance.
//! The seed (`../shared/seeds/000_…txt`, "Tokenizer and configuration identity") makes them
//! execution evidence: "every required field must be well formed or the whole identity is
//! absent — not partially filled in, and not defaulted". So parsing returns either a complete
//! identity or [`Absent`] saying why, never a half-filled value and never an error. Rules and
//! decisions: `docs/index-json.md` ("Tokenizer and configuration identity").

use serde_json::{Map, Value};

use crate::names::{check_repo_id, check_revision, check_root_file_name, check_sha256, NameError};

/// The top-level `index.json` key of the tokenizer identity.
pub const TOKENIZER_KEY: &str = "tokenizer";
/// The top-level `index.json` key of the configuration identity.
pub const CONFIGURATION_KEY: &str = "configuration";

/// A field of an identity object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Field {
    /// `file`: the repository-root file name.
    File,
    /// `bytes`: the file's recorded length.
    Bytes,
    /// `sha256`: the file's digest.
    Sha256,
    /// `source_repo`: the upstream repository the file came from.
    SourceRepo,
    /// `source_revision`: the upstream commit.
    SourceRevision,
    /// `license`: the root file holding the tokenizer's licence (tokenizer only).
    License,
}

impl Field {
    /// The JSON key.
    pub fn key(self) -> &'static str {
        match self {
            Field::File => "file",
            Field::Bytes => "bytes",
            Field::Sha256 => "sha256",
            Field::SourceRepo => "source_repo",
            Field::SourceRevision => "source_revision",
            Field::License => "license",
        }
    }
}

/// The JSON type of a value, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonKind {
    /// `null`.
    Null,
    /// `true` / `false`.
    Boolean,
    /// A number.
    Number,
    /// A string.
    String,
    /// An array.
    Array,
    /// An object.
    Object,
}

impl JsonKind {
    /// The kind of `v`.
    pub fn of(v: &Value) -> Self {
        match v {
            Value::Null => JsonKind::Null,
            Value::Bool(_) => JsonKind::Boolean,
            Value::Number(_) => JsonKind::Number,
            Value::String(_) => JsonKind::String,
            Value::Array(_) => JsonKind::Array,
            Value::Object(_) => JsonKind::Object,
        }
    }
}

/// Why a field is not well formed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Malformed {
    /// A text field holds another JSON type.
    NotAString {
        /// What it holds.
        found: JsonKind,
    },
    /// A text field breaks its canonical-name rule.
    Name(NameError),
    /// `bytes` is `true` or `false`.
    BytesBoolean,
    /// `bytes` is a string (even `"5"`).
    BytesString,
    /// `bytes` is a number with a fraction or exponent form (`5.0`, `1e3`) or beyond `u64`.
    BytesNotInteger,
    /// `bytes` is zero.
    BytesZero,
    /// `bytes` is negative.
    BytesNegative,
    /// `bytes` is `null`, an array or an object.
    BytesOtherType {
        /// What it holds.
        found: JsonKind,
    },
}

/// Why an identity is absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Absent {
    /// The index has no such key (or the index itself is not an object).
    NotPublished,
    /// The index could not be read at all, so nothing in it can be evidence.
    IndexUnreadable,
    /// The key holds something other than an object.
    NotAnObject {
        /// What it holds.
        found: JsonKind,
    },
    /// A required field is missing.
    MissingField {
        /// The field.
        field: Field,
    },
    /// A field is not well formed.
    Malformed {
        /// The field.
        field: Field,
        /// The rule it breaks.
        reason: Malformed,
    },
    /// The configuration object carries `license`, which only the tokenizer object may carry.
    LicenseOnConfiguration,
    /// The object (or the index's key for it) appears twice, or one of its fields does: JSON
    /// with duplicate names is ambiguous (parsers disagree on which value wins), so neither is
    /// evidence.
    DuplicateKey {
        /// JSON pointer of the duplicated name (`/tokenizer/bytes`), at most 128 characters.
        pointer: String,
    },
    /// The object carries a key that is not one of its fields (fail-closed: nothing unknown is
    /// evidence).
    UnknownField {
        /// The key (at most 64 characters of it).
        key: String,
    },
}

impl std::fmt::Display for Absent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Absent::NotPublished => write!(f, "not published in the index"),
            Absent::IndexUnreadable => write!(f, "the index could not be read"),
            Absent::NotAnObject { found } => write!(f, "it is a {found:?}, not an object"),
            Absent::MissingField { field } => write!(f, "field `{}` is missing", field.key()),
            Absent::Malformed { field, reason } => {
                write!(f, "field `{}` is malformed: ", field.key())?;
                match reason {
                    Malformed::NotAString { found } => write!(f, "a {found:?}, not a string"),
                    Malformed::Name(e) => write!(f, "{e}"),
                    Malformed::BytesBoolean => write!(f, "a boolean, not a positive integer"),
                    Malformed::BytesString => write!(f, "a string, not a positive integer"),
                    Malformed::BytesNotInteger => write!(f, "not an integer that fits 64 bits"),
                    Malformed::BytesZero => write!(f, "zero, not a positive integer"),
                    Malformed::BytesNegative => write!(f, "negative, not a positive integer"),
                    Malformed::BytesOtherType { found } => {
                        write!(f, "a {found:?}, not a positive integer")
                    }
                }
            }
            Absent::LicenseOnConfiguration => write!(
                f,
                "the configuration object carries `license`, which only the tokenizer object may carry"
            ),
            Absent::UnknownField { key } => write!(f, "unknown field `{key}`"),
            Absent::DuplicateKey { pointer } => {
                write!(f, "the name `{pointer}` appears more than once in the index")
            }
        }
    }
}

/// A parsed identity: complete, or absent with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<T> {
    /// Every field well formed.
    Present(T),
    /// Not usable as evidence, and why.
    Absent(Absent),
}

impl<T> Parsed<T> {
    /// The identity, if present.
    pub fn present(&self) -> Option<&T> {
        match self {
            Parsed::Present(t) => Some(t),
            Parsed::Absent(_) => None,
        }
    }

    /// Why it is absent, if it is.
    pub fn absent(&self) -> Option<&Absent> {
        match self {
            Parsed::Present(_) => None,
            Parsed::Absent(a) => Some(a),
        }
    }
}

/// The five fields both identity objects carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootFile {
    /// Canonical repository-root file name (`tokenizer.json`).
    pub file: String,
    /// Recorded byte count, positive.
    pub bytes: u64,
    /// SHA-256, 64 lower-case hex characters (upper-case input is lowered; the value is the same).
    pub sha256: String,
    /// Canonical Hub repository id of the upstream (`deepseek-ai/DeepSeek-V4-Flash`).
    pub source_repo: String,
    /// The upstream commit, 40 lower-case hex characters.
    pub source_revision: String,
}

/// The tokenizer identity: the root file plus its licence file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenizerIdentity {
    /// The tokenizer file and its provenance.
    pub root: RootFile,
    /// Canonical repository-root file name of the licence (`LICENSE`).
    pub license: String,
}

/// The configuration identity: the root file, and no licence field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigurationIdentity {
    /// The configuration file and its provenance.
    pub root: RootFile,
}

fn text(obj: &Map<String, Value>, field: Field) -> Result<&str, Absent> {
    match obj.get(field.key()) {
        None => Err(Absent::MissingField { field }),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(Absent::Malformed {
            field,
            reason: Malformed::NotAString {
                found: JsonKind::of(other),
            },
        }),
    }
}

fn named(
    obj: &Map<String, Value>,
    field: Field,
    rule: fn(&str) -> Result<(), NameError>,
) -> Result<String, Absent> {
    let s = text(obj, field)?;
    rule(s).map_err(|e| Absent::Malformed {
        field,
        reason: Malformed::Name(e),
    })?;
    Ok(s.to_owned())
}

fn positive_bytes(obj: &Map<String, Value>) -> Result<u64, Absent> {
    let bad = |reason| Absent::Malformed {
        field: Field::Bytes,
        reason,
    };
    match obj.get(Field::Bytes.key()) {
        None => Err(Absent::MissingField {
            field: Field::Bytes,
        }),
        Some(Value::Bool(_)) => Err(bad(Malformed::BytesBoolean)),
        Some(Value::String(_)) => Err(bad(Malformed::BytesString)),
        Some(Value::Number(n)) => match (n.as_u64(), n.as_i64()) {
            (Some(0), _) => Err(bad(Malformed::BytesZero)),
            (Some(v), _) => Ok(v),
            (None, Some(_)) => Err(bad(Malformed::BytesNegative)),
            (None, None) if n.as_f64().is_some_and(|f| f < 0.0) => {
                Err(bad(Malformed::BytesNegative))
            }
            (None, None) => Err(bad(Malformed::BytesNotInteger)),
        },
        Some(other) => Err(bad(Malformed::BytesOtherType {
            found: JsonKind::of(other),
        })),
    }
}

fn object(value: Option<&Value>) -> Result<&Map<String, Value>, Absent> {
    match value {
        None => Err(Absent::NotPublished),
        Some(Value::Object(m)) => Ok(m),
        Some(other) => Err(Absent::NotAnObject {
            found: JsonKind::of(other),
        }),
    }
}

fn unknown_keys(obj: &Map<String, Value>, allowed: &[Field]) -> Result<(), Absent> {
    let mut keys: Vec<&String> = obj.keys().collect();
    keys.sort();
    match keys
        .into_iter()
        .find(|k| !allowed.iter().any(|f| f.key() == k.as_str()))
    {
        Some(k) => Err(Absent::UnknownField {
            key: k.chars().take(64).collect(),
        }),
        None => Ok(()),
    }
}

impl RootFile {
    fn from_object(obj: &Map<String, Value>) -> Result<Self, Absent> {
        Ok(RootFile {
            file: named(obj, Field::File, check_root_file_name)?,
            bytes: positive_bytes(obj)?,
            sha256: named(obj, Field::Sha256, check_sha256)?.to_ascii_lowercase(),
            source_repo: named(obj, Field::SourceRepo, check_repo_id)?,
            source_revision: named(obj, Field::SourceRevision, check_revision)?,
        })
    }

    fn insert_into(&self, m: &mut Map<String, Value>) {
        m.insert(Field::File.key().into(), Value::from(self.file.clone()));
        m.insert(Field::Bytes.key().into(), Value::from(self.bytes));
        m.insert(
            Field::Sha256.key().into(),
            Value::from(self.sha256.to_ascii_lowercase()),
        );
        m.insert(
            Field::SourceRepo.key().into(),
            Value::from(self.source_repo.clone()),
        );
        m.insert(
            Field::SourceRevision.key().into(),
            Value::from(self.source_revision.clone()),
        );
    }
}

const ROOT_FIELDS: [Field; 5] = [
    Field::File,
    Field::Bytes,
    Field::Sha256,
    Field::SourceRepo,
    Field::SourceRevision,
];
const TOKENIZER_FIELDS: [Field; 6] = [
    Field::File,
    Field::Bytes,
    Field::Sha256,
    Field::SourceRepo,
    Field::SourceRevision,
    Field::License,
];

impl TokenizerIdentity {
    /// Parses the tokenizer object itself (`None`: the key is absent).
    pub fn from_value(value: Option<&Value>) -> Parsed<Self> {
        let parse = || -> Result<Self, Absent> {
            let obj = object(value)?;
            unknown_keys(obj, &TOKENIZER_FIELDS)?;
            let root = RootFile::from_object(obj)?;
            let license = named(obj, Field::License, check_root_file_name)?;
            Ok(TokenizerIdentity { root, license })
        };
        match parse() {
            Ok(t) => Parsed::Present(t),
            Err(a) => Parsed::Absent(a),
        }
    }

    /// Reads `tokenizer` from a parsed `index.json` document.
    pub fn from_index(index: &Value) -> Parsed<Self> {
        Self::from_value(index.get(TOKENIZER_KEY))
    }

    /// The object as written into `index.json`.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        self.root.insert_into(&mut m);
        m.insert(
            Field::License.key().into(),
            Value::from(self.license.clone()),
        );
        Value::Object(m)
    }

    /// Checks every field as the reader would (writers refuse what readers would drop).
    pub fn validate(&self) -> Result<(), Absent> {
        match Self::from_value(Some(&self.to_value())) {
            Parsed::Present(_) => Ok(()),
            Parsed::Absent(a) => Err(a),
        }
    }
}

impl ConfigurationIdentity {
    /// Parses the configuration object itself (`None`: the key is absent).
    pub fn from_value(value: Option<&Value>) -> Parsed<Self> {
        let parse = || -> Result<Self, Absent> {
            let obj = object(value)?;
            if obj.contains_key(Field::License.key()) {
                return Err(Absent::LicenseOnConfiguration);
            }
            unknown_keys(obj, &ROOT_FIELDS)?;
            Ok(ConfigurationIdentity {
                root: RootFile::from_object(obj)?,
            })
        };
        match parse() {
            Ok(c) => Parsed::Present(c),
            Err(a) => Parsed::Absent(a),
        }
    }

    /// Reads `configuration` from a parsed `index.json` document.
    pub fn from_index(index: &Value) -> Parsed<Self> {
        Self::from_value(index.get(CONFIGURATION_KEY))
    }

    /// The object as written into `index.json`.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        self.root.insert_into(&mut m);
        Value::Object(m)
    }

    /// Checks every field as the reader would.
    pub fn validate(&self) -> Result<(), Absent> {
        match Self::from_value(Some(&self.to_value())) {
            Parsed::Present(_) => Ok(()),
            Parsed::Absent(a) => Err(a),
        }
    }
}
