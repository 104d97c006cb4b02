//! `LedgerError`: every failure of the ledger, naming the file and saying how to fix it.

use std::path::PathBuf;

/// A failure of the ledger. Each variant names the file it concerns; messages are lower-case.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// An I/O operation on a named file failed.
    #[error("failed to {action} `{path}`")]
    Io {
        /// What was being done (`"read"`, `"fsync"`, `"rename into place"`, ...).
        action: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A journal file exists but is not a journal this build can read. The ledger never treats it
    /// as absent on its own: see `docs/ledger.md` ("A journal that cannot be read").
    #[error(
        "journal `{path}` is unreadable: {reason}; it was not written by this ledger's atomic \
         replace (disk fault or a foreign writer): inspect it, then delete it to redo the unit"
    )]
    CorruptJournal {
        /// The journal file.
        path: PathBuf,
        /// Why it could not be read.
        reason: String,
    },
    /// A journal carries a schema version this build does not know.
    #[error(
        "journal `{path}` has schema version {found}, this build reads version {supported}; \
         run the matching minirun version or delete the journal to redo the unit"
    )]
    UnsupportedVersion {
        /// The journal file.
        path: PathBuf,
        /// The `v` the file carries.
        found: u64,
        /// The version this build reads and writes.
        supported: u32,
    },
    /// A journal is larger than any journal this ledger writes.
    #[error("journal `{path}` is {len} bytes, larger than the limit of {max} bytes")]
    JournalTooLarge {
        /// The journal file.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The limit ([`crate::JOURNAL_MAX_BYTES`]).
        max: u64,
    },
    /// A journal read from the (stage, unit) path names another stage or unit.
    #[error("journal `{path}` records {field} `{found}`, expected `{expected}`; it was copied or renamed by hand: delete it to redo the unit")]
    WrongJournal {
        /// The journal file.
        path: PathBuf,
        /// `"stage"` or `"unit"`.
        field: &'static str,
        /// What the path says.
        expected: String,
        /// What the document says.
        found: String,
    },
    /// A stage name, unit name or relative path is not canonical.
    #[error("{what} `{name}` is not canonical: {reason}")]
    BadName {
        /// `"stage name"`, `"unit name"` or `"relative path"`.
        what: &'static str,
        /// The offending name (a name is never a secret).
        name: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// Another process holds the unit's lock.
    #[error(
        "unit `{unit}` of stage `{stage}` is being worked by another process (lock `{lock_path}`{})",
        holder.as_deref().map(|h| format!(", holder: {h}")).unwrap_or_default()
    )]
    Busy {
        /// The stage.
        stage: String,
        /// The unit.
        unit: String,
        /// The lock file held by the other process.
        lock_path: PathBuf,
        /// What the holder wrote into the lock file (`pid <n>`), if readable.
        holder: Option<String>,
    },
    /// A chunk log's header is not this format.
    #[error("chunk log `{path}` is not a minirun chunk log: {reason}; delete it and the partial file it describes to re-fetch")]
    BadChunkLog {
        /// The chunk log file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A chunk handed to [`crate::ChunkLog::record`] cannot be a real chunk.
    #[error("chunk at offset {offset} with length {len} cannot be recorded in `{path}`: {reason}")]
    BadChunk {
        /// The chunk log file.
        path: PathBuf,
        /// The chunk's offset.
        offset: u64,
        /// The chunk's length.
        len: u64,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A file changed while it was being hashed, so neither digest nor identity can be trusted.
    #[error("`{path}` changed while it was being hashed; something else is writing it: stop that process and re-run")]
    ChangedWhileHashing {
        /// The file.
        path: PathBuf,
    },
    /// Only a done journal can be reclaimed.
    #[error("the {stage} journal of `{unit}` says {status}, not done: only a finished unit's outputs may be reclaimed")]
    NotReclaimable {
        /// The stage.
        stage: String,
        /// The unit.
        unit: String,
        /// What the journal says.
        status: String,
    },
    /// A timestamp does not fit the journal's signed 64-bit nanosecond fields.
    #[error(
        "`{path}` has a timestamp outside the years 1678..2262, which the journal cannot record"
    )]
    TimestampOutOfRange {
        /// The file.
        path: PathBuf,
    },
}

impl LedgerError {
    /// Wraps an I/O error with what was being done and to which file.
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> LedgerError {
        let path = path.into();
        move |source| LedgerError::Io {
            action,
            path,
            source,
        }
    }
}
