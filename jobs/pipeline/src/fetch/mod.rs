//! The fetch stage: HTTP Range reads of exactly the bytes each selected unit needs from the plan's
//! pinned upstream revision, made durable chunk by chunk (`docs/fetch.md`).
//!
//! A run (1) checks every selected unit's journal and stops with zero hub requests when all are
//! done; (2) resolves each source's pinned revision and refuses a tree that is incomplete or
//! disagrees with the revision's sizes; (3) reads each weight file's safetensors header with two
//! Range requests (cached); (4) binds the plan to the tensors; (5) per unit, fetches the header and
//! tensor ranges it needs into sparse copies of the upstream files, chunk by chunk through the
//! ledger's durable chunk log, never re-fetching a chunk the log proves; (6) checks every tensor
//! against the properties real data of its dtype has and runs the negative controls; (7) verifies
//! a file's LFS SHA-256 (or git-blob SHA-1) whenever the unit covers the whole file; (8) journals
//! the unit as done.

mod controls;
pub mod discover;
mod ordered;
pub mod plausible;
pub mod proof;
pub mod ranges;
pub mod root;
mod transfer;
mod unit;

use std::path::PathBuf;

use futures_util::StreamExt;
use serde::Serialize;

use crate::plan::{Plan, PlanError};
use crate::units::{self, UnitStatus};
use crate::work::WorkDir;

pub use crate::progress::ProgressMode;
pub use discover::Upstream;

/// The stage name in journals.
pub const STAGE: &str = "fetch";

/// Options of one fetch run (the common stage flags plus `--units` and `--verify`).
#[derive(Debug, Clone, Default)]
pub struct FetchOpts {
    /// `--work-dir`, else the plan's.
    pub work_dir: Option<PathBuf>,
    /// `--endpoint`, else the plan's, else `HF_ENDPOINT`.
    pub endpoint: Option<String>,
    /// `--units`.
    pub units: Option<String>,
    /// `--dry-run`: say what remains, change nothing, send nothing.
    pub dry_run: bool,
    /// `--verify`: a finished unit counts as done only after re-hashing its files.
    pub verify: bool,
    /// Progress on stderr: bars on a terminal, plain lines otherwise, or none.
    pub progress: ProgressMode,
    /// `--root-files-only`: discovery and the root files, no unit (the distributed join).
    pub root_only: bool,
    /// `--disk-budget`: before writing a byte of the pending units, reserve their peak (fetched,
    /// release and ledger bytes, as `minirun-plan slices` prices them) on top of what the work
    /// directory holds; refused when that passes the budget (a disk-budgeted run, issue 52).
    pub disk_budget: Option<u64>,
}

/// Why fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The plan was refused.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The work directory was fetched for another pin of the plan's upstream.
    #[error(transparent)]
    OtherPin(#[from] crate::fetch::discover::OtherPin),
    /// A journal, chunk log or lock failed.
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
    /// `--disk-budget`: the pending units do not fit on top of what the work directory holds.
    #[error("the disk budget of {budget} B cannot take units {units}: they need {need} B at their peak and the work directory holds {held} B")]
    OverBudget {
        /// The pending units.
        units: String,
        /// Their peak, less what they hold.
        need: u64,
        /// What the work directory holds now.
        held: u64,
        /// The budget.
        budget: u64,
    },
    /// A hub request failed.
    #[error("{what}")]
    Hub {
        /// What was being asked.
        what: String,
        /// The client's error (status, URL, request id, server message).
        #[source]
        source: hub::client::HubError,
    },
    /// The hub's answer contradicts the pin or itself.
    #[error("upstream `{repo}`{at}: {detail}", at = at_revision(.revision))]
    Upstream {
        /// The repository.
        repo: String,
        /// The pinned revision.
        revision: String,
        /// What is wrong.
        detail: String,
    },
    /// The work directory holds no discovery record yet (nothing was fetched).
    #[error("plan `{plan}`: `{}` is missing", path.display())]
    NoDiscovery {
        /// The plan.
        plan: String,
        /// Where the record belongs.
        path: PathBuf,
    },
    /// A selected unit holds no tensor of the resolved plan.
    #[error("unit `{unit}` holds no tensor")]
    EmptyUnit {
        /// The unit.
        unit: String,
    },
    /// The discovery record lacks a weight file a unit needs (it is older than the plan).
    #[error("unit `{unit}` needs `{path}`, which is not a weight file of source `{source_name}` in the discovery record")]
    NotDiscovered {
        /// The unit.
        unit: String,
        /// The plan's source.
        source_name: String,
        /// The repository path.
        path: String,
    },
    /// The discovery record names a source the plan does not have (the plan changed).
    #[error("the discovery record names source `{source_name}` for `{path}`, which the plan does not have")]
    UnknownSource {
        /// The source the record names.
        source_name: String,
        /// The repository path.
        path: String,
    },
    /// A safetensors header did not parse.
    #[error("safetensors header of `{file}` in `{repo}`")]
    Header {
        /// The repository.
        repo: String,
        /// The file.
        file: String,
        /// The parser's error.
        #[source]
        source: artifact::safetensors::SafetensorsError,
    },
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
    /// Fetched bytes do not look like real data of the tensor's dtype; they were discarded.
    #[error("unit `{unit}`: tensor `{tensor}` in `{file}` failed its arrival check; the fetched bytes were discarded")]
    Implausible {
        /// The unit.
        unit: String,
        /// The tensor.
        tensor: String,
        /// The upstream file.
        file: String,
        /// The rule that failed.
        #[source]
        source: plausible::Implausible,
    },
    /// A wholly fetched file does not hash to the hub's record; it was discarded.
    #[error("unit `{unit}`: `{file}` hashes to {algo} {actual}, the hub records {expected}; the fetched bytes were discarded")]
    Digest {
        /// The unit.
        unit: String,
        /// The upstream file.
        file: String,
        /// `sha256` (LFS) or `git-sha1`.
        algo: &'static str,
        /// The hub's record.
        expected: String,
        /// What the bytes hash to.
        actual: String,
    },
    /// Repeated reads of bytes no hub digest covers never agreed (a corrupting link or mirror).
    #[error("the hub's answers for the {what} of `{file}` in `{repo}` disagree: {why}")]
    Disagree {
        /// The repository.
        repo: String,
        /// The upstream file.
        file: String,
        /// What was read (`safetensors header`, `bytes A..B`).
        what: String,
        /// The reads and the last failure.
        why: String,
    },
    /// A checkpoint's index contradicts a shard's header (or is not an index).
    #[error("`{index}` in `{repo}`: {detail}")]
    Index {
        /// The repository.
        repo: String,
        /// The index file.
        index: String,
        /// What disagrees.
        detail: String,
    },
    /// A cached header is not the one the discovery record proves (repack, gate, resume).
    #[error("the cached header of `{file}` (`{}`) is not proven: {why}", cache.display())]
    HeaderUnproven {
        /// The upstream file.
        file: String,
        /// The cache file.
        cache: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A unit's proven copy of a header differs from the cached header; the cache was removed.
    #[error("unit `{unit}`: the proven header of `{file}` (SHA-256 {proven}) differs from the cached one ({cached}); the cache was removed")]
    HeaderMismatch {
        /// The unit.
        unit: String,
        /// The upstream file.
        file: String,
        /// The cache's SHA-256.
        cached: String,
        /// The unit's proven copy's SHA-256.
        proven: String,
    },
    /// The async runtime could not start.
    #[error("failed to start the async runtime")]
    Runtime(#[source] std::io::Error),
}

impl crate::cli::Hint for FetchError {
    fn hint(&self) -> Option<String> {
        match self {
            FetchError::OtherPin(e) => Some(e.hint()),
            FetchError::OverBudget { .. } => Some(
                "reclaim the units already uploaded (`minirun-candidate-upload --units … --records DIR --reclaim`), fetch fewer units at a time (`minirun-plan slices`), or raise the budget"
                    .into(),
            ),
            FetchError::Hub { .. } => Some(
                "check `--endpoint`/`HF_ENDPOINT` and `HF_TOKEN`; re-run fetch to resume from the journals"
                    .into(),
            ),
            FetchError::Implausible { .. } | FetchError::Digest { .. } => {
                Some("re-run fetch: only the discarded unit is fetched again".into())
            }
            FetchError::Ledger(_) => Some("another fetch may hold the unit; wait or remove a stale lock only if no fetch runs".into()),
            FetchError::NoDiscovery { .. } => Some("run minirun-fetch first".into()),
            FetchError::HeaderUnproven { .. } | FetchError::HeaderMismatch { .. } => Some(
                "re-run minirun-fetch: it reads the header again until two reads agree and proves it against the units' bytes".into(),
            ),
            FetchError::Disagree { .. } => Some(
                "re-run fetch; if it persists, a link, proxy or mirror corrupts the answers: use an https endpoint or another mirror".into(),
            ),
            FetchError::NotDiscovered { .. } | FetchError::UnknownSource { .. } => Some(
                "the plan changed since the last fetch: re-run minirun-fetch (it discovers again)".into(),
            ),
            _ => None,
        }
    }
}

/// What one unit's fetch did.
#[derive(Debug, Clone, Serialize)]
pub struct UnitReport {
    /// The unit.
    pub unit: String,
    /// `already-done`, `fetched`, or `pending` (dry run).
    pub status: UnitStatus,
    /// Why it is not done (dry run / before fetching).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Bytes requested from the hub in this run.
    pub bytes_fetched: u64,
    /// Chunks requested in this run.
    pub chunks_fetched: u64,
    /// Chunks a previous, interrupted run had already proven.
    pub chunks_kept: u64,
    /// Upstream files verified whole against the hub's digest.
    pub files_verified: Vec<String>,
    /// Negative controls run, and how many of them the arrival checks rejected.
    pub controls_run: u64,
    /// Negative controls rejected (a control that is not rejected is reported, not fatal).
    pub controls_rejected: u64,
}

/// The `--json` summary of a fetch run.
#[derive(Debug, Clone, Serialize)]
pub struct FetchSummary {
    /// The plan's name.
    pub plan: String,
    /// Units in selection order.
    pub units: Vec<UnitReport>,
    /// Bytes fetched in this run.
    pub bytes_fetched: u64,
    /// True when nothing was sent to the hub.
    pub no_requests: bool,
}

impl crate::cli::Report for FetchSummary {
    fn text(&self) -> String {
        self.render()
    }
}

impl FetchSummary {
    /// One readable line per unit and a total.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for u in &self.units {
            s.push_str(&format!(
                "{:<12} {:<12} fetched {} B in {} chunks, kept {} chunks, {} files verified whole, controls {}/{} rejected{}\n",
                u.unit,
                u.status,
                u.bytes_fetched,
                u.chunks_fetched,
                u.chunks_kept,
                u.files_verified.len(),
                u.controls_rejected,
                u.controls_run,
                u.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default(),
            ));
        }
        s.push_str(&format!(
            "fetch {}: {} units, {} bytes fetched{}\n",
            self.plan,
            self.units.len(),
            self.bytes_fetched,
            if self.no_requests {
                ", no hub requests"
            } else {
                ""
            }
        ));
        s
    }
}

/// ` at `REV`` for an error message, or nothing when the revision is not known.
fn at_revision(revision: &str) -> String {
    if revision.is_empty() {
        String::new()
    } else {
        format!(" at `{revision}`")
    }
}

/// A fetch error as the lock error of a unit another process holds (`Ok`), or as itself.
fn held(e: FetchError) -> Result<ledger::LedgerError, FetchError> {
    match e {
        FetchError::Ledger(l) if crate::work::is_busy(&l) => Ok(l),
        e => Err(e),
    }
}

/// The reason of a unit that another process finished while this run waited for it.
pub const DONE_BY_OTHER: &str = "finished by another process while this run waited for it";

/// Run the fetch stage of `plan`. A unit another process holds is left until the others are
/// done, then waited for; both runs end with every unit done.
pub fn run(plan: &Plan, opts: &FetchOpts) -> Result<FetchSummary, FetchError> {
    plan.ensure_runnable()?;
    let selected = if opts.root_only {
        Vec::new()
    } else {
        plan.select_units(opts.units.as_deref())?
    };
    let work = WorkDir::of_plan(plan, opts.work_dir.as_deref());
    let ledger_dir = work.ledger();

    let mut reports = Vec::new();
    let mut pending = Vec::new();
    // A done unit also needs its journaled headers to be the ones the discovery record proves,
    // and the record to be of this plan's pins.
    let discovery = discover::Discovery::load(&work).ok().flatten();
    if let Some(d) = &discovery {
        d.check_pins(plan, &work)?;
    }
    for unit in &selected {
        let name = unit.as_str();
        let mut state = unit_done(&ledger_dir, &work, name, opts.verify, false, opts.dry_run)?;
        if matches!(state, UnitState::Done | UnitState::ByContent { .. }) {
            if let Some(why) = proof::stale_headers(&ledger_dir, name, discovery.as_ref())? {
                state = UnitState::Pending(why);
            }
        }
        if !state.is_done() {
            pending.push(name.to_owned());
        }
        reports.push(state.report(name));
    }
    let nothing_to_do = pending.is_empty()
        && root::root_files_present(plan, &work)
        && proof::cached_headers_hold(plan, &work, discovery.as_ref());
    if nothing_to_do || opts.dry_run {
        return Ok(FetchSummary {
            plan: plan.name.clone(),
            units: reports,
            bytes_fetched: 0,
            no_requests: true,
        });
    }

    let endpoint = opts.endpoint.clone().or_else(|| plan.run.endpoint.clone());
    let client = hub::client::HubClient::from_env(endpoint.as_deref()).map_err(|source| {
        FetchError::Hub {
            what: "failed to configure the hub client".into(),
            source,
        }
    })?;
    let rt = crate::runtime().map_err(FetchError::Runtime)?;
    rt.block_on(async {
        let upstream = discover::discover(&client, plan, &work).await?;
        let resolution = plan.resolve(&upstream.tensors)?;
        if let Some(budget) = opts.disk_budget {
            reserve(&upstream, &resolution, &work, &pending, budget)?;
        }
        let need = pending_bytes(&upstream, &resolution, &work, &pending);
        crate::space::expect(
            &work.root().join("upstream"),
            need,
            format!("fetch of {} pending unit(s)", pending.len()),
        );
        // Units run concurrently, their chunk transfers drawn from one pool of `concurrency`
        // permits, so small units (one chunk each) still keep several transfers in flight and
        // one unit's checks overlap the others' transfers.
        let sem = std::sync::Arc::new(transfer::Transfers::new(
            plan.run.concurrency.max(1) as usize,
            opts.progress,
        ));
        let mut jobs = Vec::new();
        for (i, report) in reports
            .iter()
            .enumerate()
            .filter(|(_, r)| r.status == UnitStatus::Pending)
        {
            let ru = resolution
                .unit(&report.unit)
                .ok_or_else(|| FetchError::EmptyUnit {
                    unit: report.unit.clone(),
                })?;
            jobs.push((i, ru));
        }
        let in_flight = plan.run.concurrency.max(1) as usize;
        let results: Vec<(usize, Result<UnitReport, FetchError>)> =
            futures_util::stream::iter(jobs)
                .map(|(i, ru)| {
                    let (client, upstream, work, sem) = (&client, &upstream, &work, &sem);
                    async move {
                        (
                            i,
                            unit::fetch_unit(client, plan, work, upstream, ru, sem, !opts.verify)
                                .await,
                        )
                    }
                })
                .buffer_unordered(in_flight)
                .collect()
                .await;
        let busy = match crate::units::merge(results, &mut reports, held) {
            Ok(busy) => busy,
            Err(e) => {
                sem.progress.finish();
                return Err(e);
            }
        };
        // Units another process was fetching: wait for each, then take its journal's word or
        // fetch what it left (a unit it finished is not fetched twice).
        for (i, mut why) in busy {
            let unit = reports[i].unit.clone();
            let ru = resolution
                .unit(&unit)
                .ok_or_else(|| FetchError::EmptyUnit { unit: unit.clone() })?;
            reports[i] = loop {
                tokio::task::block_in_place(|| {
                    crate::work::wait_for_unit(&ledger_dir, STAGE, &unit, &why, opts.progress)
                })?;
                if unit_done(&ledger_dir, &work, &unit, false, false, false)?.is_done() {
                    break UnitReport::new(
                        &unit,
                        UnitStatus::AlreadyDone,
                        Some(DONE_BY_OTHER.into()),
                    );
                }
                match unit::fetch_unit(&client, plan, &work, &upstream, ru, &sem, false).await {
                    Err(FetchError::Ledger(e)) if crate::work::is_busy(&e) => why = e,
                    r => break r?,
                }
            };
        }
        sem.progress.finish();
        Ok::<(), FetchError>(())
    })?;
    let bytes_fetched = reports.iter().map(|r| r.bytes_fetched).sum();
    Ok(FetchSummary {
        plan: plan.name.clone(),
        units: reports,
        bytes_fetched,
        no_requests: false,
    })
}

impl UnitReport {
    pub(crate) fn new(unit: &str, status: UnitStatus, reason: Option<String>) -> Self {
        UnitReport {
            unit: unit.to_owned(),
            status,
            reason,
            bytes_fetched: 0,
            chunks_fetched: 0,
            chunks_kept: 0,
            files_verified: Vec::new(),
            controls_run: 0,
            controls_rejected: 0,
        }
    }
}

/// What a unit's fetch journal proves about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UnitState {
    /// Done: every file has its recorded size and filesystem identity (`--verify`: SHA-256).
    Done,
    /// Done by content: the files were other filesystem objects than journaled (a copied or moved
    /// work directory), so they were re-hashed against the journal and their identities refreshed.
    ByContent { files: usize, bytes: u64 },
    /// Done, then its bytes reclaimed once the hub stored its objects: nothing to fetch.
    Reclaimed,
    /// Not done, and why.
    Pending(String),
}

impl UnitState {
    /// Done, by identity or by content.
    pub(crate) fn is_done(&self) -> bool {
        !matches!(self, UnitState::Pending(_))
    }

    /// `already-done` with its note, or `pending` with its reason.
    fn report(&self, unit: &str) -> UnitReport {
        match self {
            UnitState::Done => UnitReport::new(unit, UnitStatus::AlreadyDone, None),
            UnitState::ByContent { files, bytes } => UnitReport::new(
                unit,
                UnitStatus::AlreadyDone,
                Some(format!(
                    "accepted by content: {files} files were other filesystem objects than journaled (copied or moved), re-hashed {bytes} B against the journal"
                )),
            ),
            UnitState::Reclaimed => UnitReport::new(
                unit,
                UnitStatus::Reclaimed,
                Some("its bytes were reclaimed once the hub stored its objects".into()),
            ),
            UnitState::Pending(why) => {
                UnitReport::new(unit, UnitStatus::Pending, Some(why.clone()))
            }
        }
    }
}

/// What the unit's fetch journal proves. A done journal whose files differ only in filesystem
/// identity is accepted by content: its files are re-hashed under the unit's lock (`held`: the
/// caller holds it; else it is taken here, and a unit another run holds stays pending) and the
/// refreshed journal stored. `dry_run` reads and writes nothing: it says what would be re-hashed.
fn unit_done(
    ledger_dir: &std::path::Path,
    work: &WorkDir,
    unit: &str,
    verify: bool,
    held: bool,
    dry_run: bool,
) -> Result<UnitState, FetchError> {
    let root = work.upstream_unit(unit);
    let why = match units::journal_done(ledger_dir, STAGE, unit, &root, verify)? {
        units::JournalDone::NoJournal => return Ok(UnitState::Pending(units::NO_JOURNAL.into())),
        units::JournalDone::Done => return Ok(UnitState::Done),
        units::JournalDone::Reclaimed => return Ok(UnitState::Reclaimed),
        units::JournalDone::NotDone(why) => why,
    };
    let reason = units::not_done_reason(&why);
    if verify || !why.iter().all(ledger::NotDone::identity_only) {
        return Ok(UnitState::Pending(reason));
    }
    if dry_run {
        return Ok(UnitState::Pending(format!(
            "{reason}; a run re-hashes these {} files and accepts them if their bytes match the journal",
            why.len()
        )));
    }
    let _lock = if held {
        None
    } else {
        match ledger::UnitLock::acquire(ledger_dir, STAGE, unit) {
            Ok(l) => Some(l),
            Err(e) if crate::work::is_busy(&e) => return Ok(UnitState::Pending(reason)),
            Err(e) => return Err(e.into()),
        }
    };
    // Re-read under the lock: another run may have changed the journal meanwhile.
    let Some(mut journal) = ledger::Journal::load(ledger_dir, STAGE, unit)? else {
        return Ok(UnitState::Pending(units::NO_JOURNAL.into()));
    };
    let by = journal.accept_by_content(&root)?;
    Ok(match by.check {
        ledger::DoneCheck::Reclaimed => UnitState::Reclaimed,
        ledger::DoneCheck::Done if by.rehashed == 0 => UnitState::Done,
        ledger::DoneCheck::Done => {
            journal.store(ledger_dir)?;
            UnitState::ByContent {
                files: by.rehashed,
                bytes: by.bytes,
            }
        }
        ledger::DoneCheck::NotDone(why) => UnitState::Pending(units::not_done_reason(&why)),
    })
}

/// What the pending units still have to write under `upstream/`: [`unit_bytes`] of each, less
/// what their directories already hold (a resumed unit keeps its proven chunks).
fn pending_bytes(
    upstream: &discover::Upstream,
    resolution: &crate::plan::Resolution,
    work: &WorkDir,
    pending: &[String],
) -> u64 {
    let header_of = |source: &str, file: &str| upstream.file(source, file).map(|f| &f.header);
    pending
        .iter()
        .filter_map(|name| resolution.unit(name).map(|ru| (name, ru)))
        .map(|(name, ru)| {
            unit_bytes(ru, header_of)
                .saturating_sub(crate::space::allocated(&work.upstream_unit(name)))
        })
        .sum()
}

/// `--disk-budget`: the pending units' peak (less what their directories already hold) on top of
/// what the whole work directory holds now must fit `budget`.
fn reserve(
    upstream: &discover::Upstream,
    resolution: &crate::plan::Resolution,
    work: &WorkDir,
    pending: &[String],
    budget: u64,
) -> Result<(), FetchError> {
    let mut need = 0u64;
    for name in pending {
        let Some(ru) = resolution.unit(name) else {
            continue;
        };
        let (fetched, release) = crate::space::unit_peak(ru, upstream);
        let have = crate::space::allocated(&work.upstream_unit(name))
            + crate::space::allocated(&work.release().join(name));
        need += (fetched + release + crate::space::LEDGER_BYTES_PER_UNIT).saturating_sub(have);
    }
    let held = crate::space::allocated(work.root());
    if held + need <= budget {
        return Ok(());
    }
    Err(FetchError::OverBudget {
        units: crate::cli::join_limited(pending, 6),
        need,
        held,
        budget,
    })
}

/// The bytes fetch writes for unit `ru` under its upstream directory: each of its files' header
/// and every tensor range it needs. `header_of(source, file)` is the file's safetensors header (a
/// file it cannot name counts nothing).
pub fn unit_bytes<'h>(
    ru: &crate::plan::ResolvedUnit,
    header_of: impl Fn(&str, &str) -> Option<&'h artifact::safetensors::Header>,
) -> u64 {
    let mut files = std::collections::BTreeSet::new();
    let mut total = 0u64;
    for t in ru.tensors() {
        let Some(h) = header_of(&t.source, &t.file) else {
            continue;
        };
        if files.insert((&t.source, &t.file)) {
            total += h.data_start;
        }
        total += h.file_range(&t.name).map_or(0, |r| r.end - r.start);
    }
    total
}
