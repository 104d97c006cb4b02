//! GGUF v3: one reader ([`reader`]), one writer ([`writer`]), the multi-part convention
//! ([`split`]), the weight encoders ([`quant`]) and llama.cpp's file types ([`file_type`]). The
//! `minirun-gguf` operations (quantize plans, the HF → GGUF converter, split/info) are the
//! `tooling` crate's.
//!
//! Spec: ggml `docs/gguf.md`; the writer/split/quantize contract is the third seed document
//! (`../shared/seeds/003_*.txt`); byte layouts in `../shared/design/formats.md` §5; decisions and
//! deviations in `docs/gguf.md`.

pub mod file_type;
pub mod metadata;
pub mod quant;
pub mod reader;
pub mod split;
pub mod types;
pub mod writer;

pub use metadata::Metadata;
pub use reader::{GgufFile, GgufModel, Header, TensorInfo};
pub use types::{GgmlType, Value, ValueType};
pub use writer::{TensorSpec, DEFAULT_ALIGNMENT};

use std::path::{Path, PathBuf};

/// `GGML_MAX_NAME`: a tensor name must be shorter than this many bytes.
pub const MAX_NAME_LEN: usize = 64;
/// `GGML_MAX_DIMS`.
pub const MAX_DIMS: usize = 4;

/// Errors of the GGUF reader, writer and multi-part loader. Every message names the file (or
/// tensor / key) and, for a hostile header, the limit it broke.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// An I/O failure on a named file.
    #[error("gguf: cannot {op} `{path}`: {err}")]
    Io {
        /// What was being done (`open`, `read`, `create`, `write`, `rename`, `map`).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        err: std::io::Error,
    },
    /// The bytes are not a valid GGUF v3 file (malformed or hostile header).
    #[error("gguf: `{}`: {detail}", file.display())]
    Format {
        /// The file (or a label such as `<memory>`).
        file: PathBuf,
        /// What is wrong, naming the field and the limit.
        detail: String,
    },
    /// The writer refuses what it was asked to write.
    #[error("gguf writer: {0}")]
    Write(String),
    /// A multi-part set is inconsistent (missing part, wrong `split.no`, count mismatch).
    #[error("GGUF split: {0}")]
    Split(String),
}

impl GgufError {
    /// An I/O failure of `op` on `path`.
    pub fn io(op: &'static str, path: &Path, source: std::io::Error) -> GgufError {
        GgufError::Io {
            op,
            path: path.to_path_buf(),
            err: source,
        }
    }
}

/// `GGML_PAD(x, align)` with checked arithmetic; `align` must be a power of two.
pub fn pad(x: u64, align: u64) -> Option<u64> {
    let mask = align.checked_sub(1)?;
    Some(x.checked_add(mask)? & !mask)
}
