//! The repack stage: turns fetched upstream ranges into the unit directories of the artifact —
//! tile containers for quantized tensors, plain streams (the upstream bytes verbatim) for
//! everything else, a `tensors.json` map and a `manifest.json` per unit — and, once every unit is
//! done, the release-wide files (`index.json`, the root files the identities point at).
//! Never dequantizes, never requantizes (seed 000: "An artifact is a repack, not a re-encode").
//! Layout and resume rules: `docs/repack.md`.

mod container;
mod files;
mod finalize;
pub mod plain;
mod unit;

use std::path::PathBuf;

use serde::Serialize;

pub use files::{planned_files, planned_metadata_bytes, planned_unit_bytes};

use crate::fetch::{self, FetchError};
use crate::plan::{Plan, PlanError};
use crate::progress::Counter;
use crate::units::UnitStatus;
use crate::work::WorkDir;

pub(crate) use finalize::root_files;
pub use finalize::{finalize, write_release_files};
pub use unit::{TensorEntry, TensorMap, TENSORS_FILE};

/// The stage name in journals.
pub const STAGE: &str = "repack";

/// Options of one repack run.
#[derive(Debug, Clone, Default)]
pub struct RepackOpts {
    /// `--work-dir`, else the plan's.
    pub work_dir: Option<PathBuf>,
    /// `--units`.
    pub units: Option<String>,
    /// `--dry-run`.
    pub dry_run: bool,
    /// `--verify`: re-hash finished units' files before counting them done.
    pub verify: bool,
    /// `--finalize`: only write the release-wide files (every unit must be done).
    pub finalize_only: bool,
    /// Progress on stderr: one line per repacked unit (a bar on a terminal).
    pub progress: crate::progress::ProgressMode,
    /// `--finalize --records DIR` (the distributed join): the release-wide files from the workers'
    /// unit records instead of units on disk.
    pub records: Option<PathBuf>,
}

/// Why repack failed.
#[derive(Debug, thiserror::Error)]
pub enum RepackError {
    /// The plan was refused.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The distributed join's unit records are missing, malformed or not this plan's.
    #[error(transparent)]
    Records(#[from] crate::distributed::RecordsError),
    /// The fetched upstream could not be loaded.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// A journal or lock failed.
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
    /// A unit's fetch is not done.
    #[error("unit `{unit}` has not been fetched ({reason})")]
    NotFetched {
        /// The unit.
        unit: String,
        /// Why its fetch journal does not prove it.
        reason: String,
    },
    /// A container could not be written.
    #[error("unit `{unit}`: container for `{tensor}`")]
    Container {
        /// The unit.
        unit: String,
        /// The weight tensor.
        tensor: String,
        /// The container writer's error.
        #[source]
        source: artifact::container::ContainerError,
    },
    /// A manifest could not be built.
    #[error("unit `{unit}`: manifest")]
    Manifest {
        /// The unit.
        unit: String,
        /// The manifest error.
        #[source]
        source: artifact::manifest::ManifestError,
    },
    /// `index.json` could not be written.
    #[error("index.json")]
    Index(#[source] artifact::index_json::IndexWriteError),
    /// Finalize needs every unit.
    #[error("cannot finalize: units not repacked yet: {units}")]
    Incomplete {
        /// The missing units.
        units: String,
    },
    /// Finalize from the release tree needs every unit on disk; reclaimed units are in records.
    #[error("cannot finalize from the release tree: units {units} were reclaimed (their bytes are on the hub, their totals in their unit records)")]
    Reclaimed {
        /// The reclaimed units.
        units: String,
    },
    /// A reclaimed unit's journal could not be read.
    #[error(transparent)]
    Reclaim(#[from] crate::distributed::reclaim::ReclaimError),
    /// A local file operation failed.
    #[error("failed to {what} `{path}`")]
    Io {
        /// The operation.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl crate::cli::Hint for RepackError {
    fn hint(&self) -> Option<String> {
        match self {
            RepackError::NotFetched { unit, .. } => {
                Some(format!("run `minirun-fetch --units {unit}` first"))
            }
            RepackError::Incomplete { .. } => {
                Some("repack the missing units, then `minirun-repack --finalize`".into())
            }
            RepackError::Reclaimed { .. } => {
                Some("finalize from the records: `minirun-repack --finalize --records DIR`".into())
            }
            RepackError::Fetch(e) => crate::cli::Hint::hint(e),
            _ => None,
        }
    }
}

pub(crate) fn io_err(
    what: &'static str,
    path: &std::path::Path,
) -> impl FnOnce(std::io::Error) -> RepackError {
    let path = path.to_owned();
    move |source| RepackError::Io { what, path, source }
}

/// What one unit's repack did.
#[derive(Debug, Clone, Serialize)]
pub struct UnitReport {
    /// The unit.
    pub unit: String,
    /// `already-done`, `repacked` or `pending` (dry run).
    pub status: UnitStatus,
    /// Why it is not done (dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Files written in this run.
    pub files_written: u64,
    /// Files a previous, interrupted run had already finished (kept, not rewritten).
    pub files_kept: u64,
    /// Bytes written in this run.
    pub bytes_written: u64,
}

/// The `--json` summary of a repack run.
#[derive(Debug, Clone, Serialize)]
pub struct RepackSummary {
    /// The plan's name.
    pub plan: String,
    /// Units in selection order.
    pub units: Vec<UnitReport>,
    /// Whether the release-wide files were (re)written and are current.
    pub finalized: bool,
}

impl crate::cli::Report for RepackSummary {
    fn text(&self) -> String {
        self.render()
    }
}

impl RepackSummary {
    /// One readable line per unit and a total.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for u in &self.units {
            s.push_str(&format!(
                "{:<12} {:<12} wrote {} files ({} B), kept {}{}\n",
                u.unit,
                u.status,
                u.files_written,
                u.bytes_written,
                u.files_kept,
                u.reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ));
        }
        s.push_str(&format!(
            "repack {}: {} units{}\n",
            self.plan,
            self.units.len(),
            if self.finalized {
                ", release finalized"
            } else {
                ""
            }
        ));
        s
    }
}

/// A unit another process was repacking: wait for it, then take its journal's word or repack
/// what it left (a unit it finished is not repacked twice).
fn repack_after_wait(
    work: &WorkDir,
    upstream: &fetch::discover::Upstream,
    ru: &crate::plan::ResolvedUnit,
    mut why: ledger::LedgerError,
    progress: crate::progress::ProgressMode,
) -> Result<UnitReport, RepackError> {
    let unit = ru.name.as_str();
    loop {
        crate::work::wait_for_unit(&work.ledger(), STAGE, unit, &why, progress)?;
        if unit::done_reason(&work.ledger(), work, unit, false)?.is_none() {
            return Ok(UnitReport::new(
                unit,
                UnitStatus::AlreadyDone,
                Some(fetch::DONE_BY_OTHER.into()),
            ));
        }
        match unit::repack_unit(work, upstream, ru, false) {
            Err(RepackError::Ledger(e)) if crate::work::is_busy(&e) => why = e,
            r => return r,
        }
    }
}

/// Run the repack stage of `plan`. A unit another process holds is left until the others are
/// done, then waited for; both runs end with every unit done.
pub fn run(plan: &Plan, opts: &RepackOpts) -> Result<RepackSummary, RepackError> {
    plan.ensure_runnable()?;
    let work = WorkDir::of_plan(plan, opts.work_dir.as_deref());
    fetch::discover::check_pins(plan, &work).map_err(FetchError::from)?;
    if opts.finalize_only {
        let written = match &opts.records {
            Some(dir) if !opts.dry_run => {
                crate::distributed::finalize_from_records(plan, &work, dir)?;
                true
            }
            Some(dir) => {
                crate::distributed::load_all(plan, dir)?;
                false
            }
            None => finalize(plan, &work, opts.dry_run)?,
        };
        return Ok(RepackSummary {
            plan: plan.name.clone(),
            units: Vec::new(),
            finalized: written,
        });
    }
    let selected = plan.select_units(opts.units.as_deref())?;
    let ledger_dir = work.ledger();
    let mut reports = Vec::new();
    let mut pending = Vec::new();
    for u in &selected {
        let name = u.as_str();
        if crate::distributed::reclaim::reclaimed(&work, name)?.is_some() {
            reports.push(UnitReport::new(name, UnitStatus::Reclaimed, None));
            continue;
        }
        match unit::done_reason(&ledger_dir, &work, name, opts.verify)? {
            None => reports.push(UnitReport::new(name, UnitStatus::AlreadyDone, None)),
            Some(why) => {
                reports.push(UnitReport::new(name, UnitStatus::Pending, Some(why)));
                pending.push(name.to_owned());
            }
        }
    }
    if opts.dry_run {
        return Ok(RepackSummary {
            plan: plan.name.clone(),
            units: reports,
            finalized: false,
        });
    }
    if !pending.is_empty() {
        // A release is the fetched tensors re-tiled byte for byte (plus containers' alignment
        // padding), less what a killed run left.
        let need: u64 = pending
            .iter()
            .map(|u| {
                let fetched = crate::space::allocated(&work.upstream_unit(u));
                fetched.saturating_sub(crate::space::allocated(&work.release().join(u)))
            })
            .sum();
        let what = format!("repack of {} pending unit(s)", pending.len());
        crate::space::expect_at_least(&work.release(), need, what);
        let upstream = fetch::discover::load_offline(plan, &work)?;
        let resolution = plan.resolve(&upstream.tensors)?;
        let mut jobs = Vec::new();
        for (i, report) in reports
            .iter()
            .enumerate()
            .filter(|(_, r)| r.status == UnitStatus::Pending)
        {
            let ru = resolution
                .unit(&report.unit)
                .ok_or_else(|| RepackError::NotFetched {
                    unit: report.unit.clone(),
                    reason: "the unit holds no tensor".into(),
                })?;
            jobs.push((i, ru));
        }
        // Units are repacked on all cores (hashing dominates); each has its own lock and journal,
        // exactly as disjoint `--units` processes would. Four workers per core: a worker blocks
        // in its direct writes and in reads of upstream bytes that are not cached, and with two
        // per core the cores idled. A/B at --scale 14 --wide, 2 cores, page cache dropped, three
        // runs each: 3.69-3.90 s with two per core, 3.06-3.42 s with four; no difference at
        // --scale 64. Memory: at most one 16 MiB assembly buffer per worker.
        let progress = Counter::new("repack", "units", jobs.len() as u64, opts.progress);
        let results: Vec<(usize, Result<UnitReport, RepackError>)> =
            crate::work::par_map_per_core(4, &jobs, |(i, ru)| {
                let r = unit::repack_unit(&work, &upstream, ru, !opts.verify);
                progress.done(ru.name.as_str(), || match &r {
                    Ok(u) => format!(
                        "repacked: {} files, {} B written, {} files kept",
                        u.files_written, u.bytes_written, u.files_kept
                    ),
                    Err(_) => "failed".into(),
                });
                (*i, r)
            });
        progress.finish();
        let held = |e| match e {
            RepackError::Ledger(l) if crate::work::is_busy(&l) => Ok(l),
            e => Err(e),
        };
        let busy = crate::units::merge(results, &mut reports, held)?;
        for (i, why) in busy {
            let (_, ru) =
                jobs[..]
                    .iter()
                    .find(|(j, _)| *j == i)
                    .ok_or_else(|| RepackError::NotFetched {
                        unit: reports[i].unit.clone(),
                        reason: "the unit holds no tensor".into(),
                    })?;
            reports[i] = repack_after_wait(&work, &upstream, ru, why, opts.progress)?;
        }
    }
    // Release-wide files follow automatically once every unit of the plan is done and on disk;
    // with a unit reclaimed, the join finalizes from the records (`--finalize --records`).
    let all_done = plan
        .units
        .iter()
        .map(|u| unit::done_reason(&ledger_dir, &work, u.name.as_str(), false))
        .collect::<Result<Vec<_>, _>>()?
        .iter()
        .all(Option::is_none);
    let finalized = if all_done && finalize::reclaimed_units(plan, &work)?.is_empty() {
        finalize(plan, &work, false)?
    } else {
        false
    };
    Ok(RepackSummary {
        plan: plan.name.clone(),
        units: reports,
        finalized,
    })
}

impl UnitReport {
    fn new(unit: &str, status: UnitStatus, reason: Option<String>) -> Self {
        UnitReport {
            unit: unit.to_owned(),
            status,
            reason,
            files_written: 0,
            files_kept: 0,
            bytes_written: 0,
        }
    }
}
