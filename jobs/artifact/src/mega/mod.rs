//! MEGA artifacts: `.mega` tensor shards and the `.mega.index.json` manifest (seed `004`, "Artifact
//! Format"; the byte layout this crate freezes is `docs/mega.md`, checked by the golden files under
//! `tests/golden/mega/`).
//!
//! - [`layout`]: the fixed 128-byte header, limits, alignment and the dtype table;
//! - [`metadata`]: typed values, their encoding, the reserved namespaces and the key schema;
//! - [`writer`]: streaming shard writer (payload hashes computed while writing) and release writer;
//! - [`reader`]: bounded header reader, tensor access and on-demand hash verification;
//! - [`index`]: the `.mega.index.json` schema and the release view that resolves the index first;
//! - [`inspect`]: the hub card's entry-point rules, summary, fallbacks, hash and trust states;
//! - [`kv`]: the `.megakv` KV-cache sidecar (prefix cache), reader and writer.
//!
//! The `minirun-mega` operations (safetensors → MEGA conversion, inspect/verify as text + status)
//! are the `tooling` crate's `mega` module.

pub mod index;
pub mod inspect;
pub mod kv;
pub mod layout;
pub mod metadata;
pub mod reader;
pub mod writer;

pub use index::{Index, Release, ShardEntry};
pub use inspect::{inspect, verify, Card, EntryPoint, TrustState, VerifyReport};
pub use layout::{FixedHeader, DEFAULT_ALIGNMENT};
pub use metadata::{Metadata, Value};
pub use reader::{DirOpener, Opener, ReadSeek, ShardHeader, ShardReader, TensorEntry};
pub use writer::{write_release, ReleaseOptions, ReleaseSummary, TensorData, TensorOrder};

/// Everything that can go wrong reading, writing or checking a MEGA artifact. Each variant names the
/// file (and tensor or key) involved.
#[derive(Debug, thiserror::Error)]
pub enum MegaError {
    /// An I/O operation on a file failed.
    #[error("failed to {op} `{file}`")]
    Io {
        /// What was attempted (read, write, open, ...).
        op: &'static str,
        /// The file.
        file: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file ends before a structure it declares.
    #[error("`{file}` is truncated: {what} needs {need} bytes, {have} available")]
    Truncated {
        /// The file.
        file: String,
        /// The structure being read.
        what: String,
        /// Bytes needed.
        need: u64,
        /// Bytes present.
        have: u64,
    },
    /// The first 8 bytes are not the MEGA magic.
    #[error("`{file}` is not a MEGA shard (bad magic)")]
    BadMagic {
        /// The file.
        file: String,
    },
    /// A major version this reader does not know.
    #[error("`{file}` has MEGA version {major}.{minor}; this reader supports major version 1")]
    UnsupportedVersion {
        /// The file.
        file: String,
        /// Major version found.
        major: u16,
        /// Minor version found.
        minor: u16,
    },
    /// A fixed-header field is inconsistent.
    #[error("invalid header in `{file}`: {reason}")]
    BadHeader {
        /// The file.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// An alignment that is not a power of two in 8..=2^30.
    #[error("alignment {value} is not a power of two between 8 and 1073741824")]
    BadAlignment {
        /// The value given.
        value: u64,
    },
    /// A section is longer than the reader's cap.
    #[error("{section} of `{file}` is {len} bytes, the limit is {max}")]
    SectionTooLarge {
        /// The file.
        file: String,
        /// The section.
        section: &'static str,
        /// Declared length.
        len: u64,
        /// Limit.
        max: u64,
    },
    /// A metadata entry is malformed, has the wrong type, or breaks the schema.
    #[error("invalid metadata in `{file}` at key `{key}`: {reason}")]
    BadMetadata {
        /// The file (or `<writer>`).
        file: String,
        /// The key (or `#N` when the key itself could not be read).
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A tensor directory entry is malformed.
    #[error("invalid tensor `{tensor}` in `{file}`: {reason}")]
    BadTensor {
        /// The file.
        file: String,
        /// The tensor (or `#N`).
        tensor: String,
        /// What is wrong.
        reason: String,
    },
    /// The header CRC does not match the header bytes.
    #[error("header checksum of `{file}` is {actual:08x}, the header records {expected:08x}")]
    HeaderCrc {
        /// The file.
        file: String,
        /// Recorded.
        expected: u32,
        /// Computed.
        actual: u32,
    },
    /// The index manifest is malformed or inconsistent.
    #[error("invalid index `{file}`: {reason}")]
    BadIndex {
        /// The index file.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// A shard disagrees with the index that lists it.
    #[error("shard `{shard}` disagrees with its index: {reason}")]
    ShardMismatch {
        /// The shard file.
        shard: String,
        /// What differs.
        reason: String,
    },
    /// A requested tensor is not in the release.
    #[error("tensor `{name}` is not in the release")]
    TensorNotFound {
        /// The name.
        name: String,
    },
    /// The writer refused a metadata key (reserved namespace, computed key, bad syntax).
    #[error("metadata key `{key}` refused: {reason}")]
    KeyRefused {
        /// The key.
        key: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// The writer refused a tensor.
    #[error("tensor `{name}` refused: {reason}")]
    TensorRefused {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The conversion source is unusable.
    #[error("cannot convert `{file}`: {reason}")]
    Source {
        /// The source file or directory.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// No MEGA artifact where one was expected.
    #[error("no MEGA artifact at `{path}`: {reason}")]
    NotMega {
        /// The path given.
        path: String,
        /// What was found instead.
        reason: String,
    },
}

impl MegaError {
    /// A fix the user can apply, for the binaries' `hint:` line.
    pub fn hint(&self) -> Option<String> {
        // A file of another format given to the MEGA tools: name the tool that reads it.
        if let MegaError::BadMagic { file } | MegaError::NotMega { path: file, .. } = self {
            let path = std::path::Path::new(file);
            match crate::sniff::sniff(path) {
                Some(kind) if kind != crate::sniff::Kind::Mega => return Some(kind.hint(path)),
                _ => {}
            }
        }
        Some(match self {
            MegaError::Truncated { .. }
            | MegaError::HeaderCrc { .. }
            | MegaError::BadMagic { .. } => {
                "the file is damaged or incomplete: download or convert it again, then run \
                 `minirun-mega verify`"
                    .into()
            }
            MegaError::UnsupportedVersion { .. } => {
                "this file needs a newer reader (docs/mega.md §8)".into()
            }
            MegaError::BadAlignment { .. } => "pass --alignment 4096 or 65536".into(),
            MegaError::KeyRefused { .. } => {
                "custom metadata goes under an owned prefix such as `acme.`; reserved keys are \
                 listed in docs/mega.md §4"
                    .into()
            }
            MegaError::Source { .. } => {
                "point SRC at a `.safetensors` file, a `*.index.json`, or their directory, and \
                 --output-dir at an empty directory"
                    .into()
            }
            MegaError::NotMega { .. } => {
                "pass a release directory, a `.mega` file or a `.mega.index.json`".into()
            }
            MegaError::ShardMismatch { .. } | MegaError::BadIndex { .. } => {
                "the index and its shards come from different conversions: re-convert or \
                 re-download the whole release"
                    .into()
            }
            _ => return None,
        })
    }

    /// An I/O failure of `op` on `file`.
    pub fn io(op: &'static str, file: impl Into<String>, source: std::io::Error) -> Self {
        MegaError::Io {
            op,
            file: file.into(),
            source,
        }
    }
}
