//! Per-unit journals: what the disk can prove about a stage's work on one unit.
//!
//! This crate owns the resumability contract of the seed's publication protocol
//! (`../shared/seeds/001_…txt`, "The builders": "one journal file per unit is replaced atomically,
//! so a killed job resumes from what the disk can prove rather than from what the process
//! remembered. A chunk digest and a file offset are recorded together after every write") and
//! `ARCHITECTURE.md` §4. The byte layouts are specified in `docs/ledger.md`.
//!
//! - [`Journal`]: one versioned JSON document per (stage, unit), replaced atomically
//!   ([`write_atomic`]), with [`Journal::is_done`] deciding done-ness from the journal *and* the
//!   files it names ([`FileIdentity`] on a normal re-run, a full re-hash with `--verify`).
//! - [`ChunkLog`]: the durable log of chunks written into a file (fetch writes ranges
//!   concurrently); [`ChunkLog::verify_and_truncate`] cuts a partial file back to what is proven.
//! - [`UnitLock`]: an advisory lock (fs2) so two processes never work one unit.
#![deny(missing_docs)]

mod atomic;
mod chunk_log;
mod error;
mod file_identity;
mod hash;
mod journal;
mod lock;
mod names;

pub use atomic::{is_temp_name, write_atomic, TEMP_MARKER};
pub use chunk_log::{ChunkLog, ChunkRecord, ResumeReport, CHUNK_LOG_HEADER};
pub use error::LedgerError;
pub use file_identity::FileIdentity;
pub use hash::{sha256_file, sha256_hex, Sha256Hex};
pub use journal::{
    ByContent, DoneCheck, FileRecord, Journal, NotDone, Status, JOURNAL_MAX_BYTES, JOURNAL_VERSION,
    RECLAIMED_KEY,
};
pub use lock::UnitLock;
pub use names::{check_rel_path, check_stage_name, check_unit_name};

/// The result type of this crate.
pub type Result<T, E = LedgerError> = std::result::Result<T, E>;
