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

    /// The work directory of `plan`: `work_dir` (a `--work-dir` option) if given, else the
    /// plan's `run.work_dir`. Every stage finds it here.
    pub fn of_plan(plan: &crate::plan::Plan, work_dir: Option<&Path>) -> Self {
        Self::new(work_dir.map_or_else(|| plan.run.work_dir.clone(), Path::to_path_buf))
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

    /// Safetensors indexes (`*.safetensors.index.json`) of one source, proven by the hub's digest
    /// and checked against the headers.
    pub fn indexes(&self, source: &str) -> PathBuf {
        self.root.join("upstream").join("_index").join(source)
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

/// Run `f` over `items` on all cores (scoped threads taking the next item), results in the order
/// of `items`. The stages use it for independent units, whose work is hashing bound but waits on
/// the drive too (reads after the page cache was dropped, fsyncs): two workers per core keep every
/// core hashing while another worker waits.
pub fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    par_map_per_core(2, items, f)
}

/// As [`par_map`] with `per_core` workers per core (repack, whose direct writes also wait on the
/// drive, uses more).
pub fn par_map_per_core<T: Sync, R: Send>(
    per_core: usize,
    items: &[T],
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .saturating_mul(per_core)
        .min(items.len())
        .max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        out.push((i, f(item)));
                    }
                    out
                })
            })
            .collect();
        // A worker that panicked re-raises here: no unit's result is silently lost.
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// Whether `e` says another process holds a unit's lock (the unit is left for last, then
/// waited for: [`wait_for_unit`]).
pub fn is_busy(e: &ledger::LedgerError) -> bool {
    matches!(e, ledger::LedgerError::Busy { .. })
}

/// Waits until no process holds the lock of `(stage, unit)`, a unit this run found busy
/// (`busy` says by whom) and left until its other units were done; says so on stderr unless
/// progress is off. The caller then re-reads the unit's journal: the holder may have finished it.
pub fn wait_for_unit(
    ledger_dir: &Path,
    stage: &str,
    unit: &str,
    busy: &ledger::LedgerError,
    progress: crate::progress::ProgressMode,
) -> Result<(), ledger::LedgerError> {
    if progress != crate::progress::ProgressMode::Off {
        eprintln!("{stage}: {busy}; waiting for it");
    }
    drop(ledger::UnitLock::wait(ledger_dir, stage, unit)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn par_map_keeps_order_and_covers_every_item() {
        let items: Vec<u64> = (0..100).collect();
        assert_eq!(
            super::par_map(&items, |x| x * 2),
            items.iter().map(|x| x * 2).collect::<Vec<_>>()
        );
        assert!(super::par_map(&Vec::<u8>::new(), |x| *x).is_empty());
    }
}
