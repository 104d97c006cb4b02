//! The work directory of one plan, and where each stage keeps its files in it
//! (ARCHITECTURE.md §1). One place, so every stage agrees on the layout:
//!
//! ```text
//! <work>/upstream/<unit>/<source>/<repo path>   fetched byte ranges at their upstream offsets (sparse)
//! <work>/upstream/_headers/<source>/<repo path> cached safetensors headers (first 8 + N bytes)
//! <work>/upstream/_root/<source>/<repo path>    whole upstream root files (tokenizer, config, licence)
//! <work>/upstream/_discovery.json               pinned revisions: files, sizes, digests
//! <work>/ledger/<stage>/<unit>.json             journals (ledger crate)
//! <work>/ledger/chunks/<unit>/<source>/<path>   fetch chunk logs while a unit is in progress
//! <work>/release/                               the artifact tree repack writes
//! <work>/staging/                               the reconciled staging tree
//! <work>/reports/                               gate.json and other reports
//! ```

use std::path::{Path, PathBuf};

/// Paths inside one plan's work directory.
#[derive(Debug, Clone)]
pub struct WorkDir {
    root: PathBuf,
}

impl WorkDir {
    /// The work directory `root` (the plan's `run.work_dir` or `--work-dir`).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The work directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Journals of every stage.
    pub fn ledger(&self) -> PathBuf {
        self.root.join("ledger")
    }

    /// The fetched bytes of one unit (sparse copies of the upstream files it needs).
    pub fn upstream_unit(&self, unit: &str) -> PathBuf {
        self.root.join("upstream").join(unit)
    }

    /// Cached safetensors headers of one source.
    pub fn headers(&self, source: &str) -> PathBuf {
        self.root.join("upstream").join("_headers").join(source)
    }

    /// What fetch learned of the pinned revisions (files, sizes, digests, weight files).
    pub fn discovery(&self) -> PathBuf {
        self.root.join("upstream").join("_discovery.json")
    }

    /// Whole upstream root files (tokenizer, config, licence, ...) of one source.
    pub fn root_files(&self, source: &str) -> PathBuf {
        self.root.join("upstream").join("_root").join(source)
    }

    /// Chunk logs of one unit while its fetch is in progress.
    pub fn chunk_logs(&self, unit: &str) -> PathBuf {
        self.ledger().join("chunks").join(unit)
    }

    /// The release tree repack writes.
    pub fn release(&self) -> PathBuf {
        self.root.join("release")
    }

    /// The staging tree.
    pub fn staging(&self) -> PathBuf {
        self.root.join("staging")
    }

    /// Reports (gate.json, ...).
    pub fn reports(&self) -> PathBuf {
        self.root.join("reports")
    }
}
