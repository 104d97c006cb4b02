//! Reclaim (issue 52, `docs/publish.md` §12): a disk-budgeted run frees a unit's fetched and
//! release bytes once its unit record is written and the hub's LFS batch has answered "no action"
//! for every object of the unit. What stays: `upstream/_headers/`, the discovery record, the
//! upstream index, the root files, every journal, the unit record and the reports.
//!
//! Order, so that a crash at any instant leaves a state the next run finishes: the record is
//! written, the hub is asked, the unit's repack and fetch journals are marked
//! [`ledger::Status::Reclaimed`] (the gate's word and the record's digest in
//! `extra["reclaimed"]`), and only then are `upstream/<unit>/`, its chunk logs, `release/<unit>/`
//! and `staging/<unit>/` removed. A reclaimed unit's journals never vouch for bytes on disk, so
//! leftovers of a killed removal are removed by the next reclaim and read by no stage. Every unit
//! owns its `upstream/<unit>/` copy of the bytes it needs (a shard shared by two units is fetched
//! into each), so no removal can break a whole-file digest another unit still needs.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{GateWord, UnitRecord};
use crate::work::WorkDir;

/// The journals a reclaim marks, in the order it marks them.
pub const JOURNALS: [&str; 2] = [crate::repack::STAGE, crate::fetch::STAGE];

/// What a reclaimed unit's journals say (`extra["reclaimed"]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReclaimNote {
    /// The gate's word on the unit before its bytes were removed (what its record says).
    pub gate: GateWord,
    /// The hub repository that holds the unit's objects.
    pub repo: String,
    /// LFS objects the hub confirmed it stores.
    pub objects: u64,
    /// SHA-256 of the unit record's bytes when the unit was reclaimed.
    pub record_sha256: String,
}

/// Why a unit cannot be reclaimed, or its reclaimed state cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReclaimError {
    /// Journal trouble (a unit not done is refused here).
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
    /// A reclaimed journal whose note cannot be read.
    #[error("the {stage} journal of `{unit}` says reclaimed but its note is unreadable ({detail}): restore the journal or fetch the unit again (remove its journals)")]
    BadNote {
        /// The journal's stage.
        stage: &'static str,
        /// The unit.
        unit: String,
        /// What is wrong.
        detail: String,
    },
    /// A unit was not done in every journal a reclaim marks.
    #[error("unit `{unit}` has no {stage} journal: only a fetched, repacked, gated and uploaded unit is reclaimed")]
    NotDone {
        /// The journal missing.
        stage: &'static str,
        /// The unit.
        unit: String,
    },
    /// A file could not be removed.
    #[error("cannot remove `{path}` while reclaiming unit `{unit}`: {source}")]
    Remove {
        /// The unit.
        unit: String,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The note of `unit` when its repack journal says it was reclaimed (`None`: not reclaimed).
pub fn reclaimed(work: &WorkDir, unit: &str) -> Result<Option<ReclaimNote>, ReclaimError> {
    let stage = crate::repack::STAGE;
    let Some(j) = ledger::Journal::load(&work.ledger(), stage, unit)? else {
        return Ok(None);
    };
    if j.status != ledger::Status::Reclaimed {
        return Ok(None);
    }
    let bad = |detail: String| ReclaimError::BadNote {
        stage,
        unit: unit.to_owned(),
        detail,
    };
    let v = j
        .extra
        .get(ledger::RECLAIMED_KEY)
        .ok_or_else(|| bad("no note".into()))?;
    serde_json::from_value(v.clone())
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}

/// Reclaim the unit `rec` describes: mark its journals (under their unit locks), then remove its
/// payload directories. The caller has written the record and had the hub confirm every object.
/// Returns the bytes freed.
pub fn reclaim_unit(
    work: &WorkDir,
    rec: &UnitRecord,
    repo: &str,
    record_sha256: &str,
) -> Result<u64, ReclaimError> {
    let unit = rec.unit.as_str();
    let note = ReclaimNote {
        gate: rec.gate.clone(),
        repo: repo.to_owned(),
        objects: rec.files.iter().filter(|f| f.lfs).count() as u64,
        record_sha256: record_sha256.to_owned(),
    };
    mark(work, unit, &note)?;
    remove_payload(work, unit)
}

/// Finish the reclaim of a unit an earlier run marked (its repack journal says `reclaimed`) and
/// may have been killed in: mark what it had not marked yet, then remove what is left of it.
/// Returns the bytes freed.
pub fn finish(work: &WorkDir, unit: &str) -> Result<u64, ReclaimError> {
    if let Some(note) = reclaimed(work, unit)? {
        mark(work, unit, &note)?;
    }
    remove_payload(work, unit)
}

/// Mark every done journal of [`JOURNALS`] reclaimed with `note`, each under its unit lock, before
/// any file is removed. A journal already reclaimed is left; one that is not done (a unit
/// reopened after the hub lost an object) is left for its stage to redo.
fn mark(work: &WorkDir, unit: &str, note: &ReclaimNote) -> Result<(), ReclaimError> {
    let ledger_dir = work.ledger();
    let note = serde_json::to_value(note).unwrap_or_default();
    for stage in JOURNALS {
        let _lock = ledger::UnitLock::acquire(&ledger_dir, stage, unit)?;
        let Some(mut j) = ledger::Journal::load(&ledger_dir, stage, unit)? else {
            return Err(ReclaimError::NotDone {
                stage,
                unit: unit.to_owned(),
            });
        };
        if j.status == ledger::Status::Done {
            j.mark_reclaimed(note.clone())?;
            j.store(&ledger_dir)?;
        }
    }
    Ok(())
}

/// Remove what a reclaimed unit left on disk — `upstream/<unit>/`, its chunk logs,
/// `release/<unit>/` and `staging/<unit>/` — and return the bytes freed. Called after its journals
/// say `reclaimed`, and again over a reclaimed unit (a killed removal's leftovers).
pub fn remove_payload(work: &WorkDir, unit: &str) -> Result<u64, ReclaimError> {
    let dirs = [
        work.upstream_unit(unit),
        work.chunk_logs(unit),
        work.release().join(unit),
        work.staging().join(unit),
    ];
    // staging holds links to release files: measured over the whole work directory, each
    // inode once
    let before = crate::space::allocated(work.root());
    for dir in dirs {
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(ReclaimError::Remove {
                    unit: unit.to_owned(),
                    path: dir,
                    source,
                })
            }
        }
    }
    Ok(before.saturating_sub(crate::space::allocated(work.root())))
}

/// Undo the reclaim of `unit` when the hub no longer holds one of its objects (the join asked):
/// its journals are marked failed with `why`, fetch's first and repack's last (the repack journal
/// is what [`reclaimed`] reads, so a crash in between leaves the unit reclaimed and the next join
/// reopens it again). The next window fetches, repacks, gates and uploads the unit anew. Returns
/// whether the unit was reclaimed here.
pub fn reopen(work: &WorkDir, unit: &str, why: &str) -> Result<bool, ReclaimError> {
    if reclaimed(work, unit)?.is_none() {
        return Ok(false);
    }
    let ledger_dir = work.ledger();
    for stage in JOURNALS.iter().rev() {
        let _lock = ledger::UnitLock::acquire(&ledger_dir, stage, unit)?;
        if let Some(mut j) = ledger::Journal::load(&ledger_dir, stage, unit)? {
            if j.status == ledger::Status::Reclaimed {
                j.mark_failed(why);
                j.store(&ledger_dir)?;
            }
        }
    }
    Ok(true)
}
