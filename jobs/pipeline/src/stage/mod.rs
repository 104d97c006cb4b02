//! `minirun-stage`: reconcile `<work>/staging/` in place so its file set equals the gated release
//! exactly, then reopen the public index, the manifests and every container tile from the staging
//! tree through the production reader (seed 001, "The Hub protocol", first paragraph;
//! `docs/publish.md` §1).
//!
//! Links, not copies: where the release and staging share a filesystem each staged file is a hard
//! link to its release file, hashed once against the journaled digest (`place`); a copy only
//! across filesystems, with the reason in the report.
//!
//! Identity, not re-reading: the stage journal (`ledger/stage/release.json`) records, for every
//! release file, the release file's size/SHA-256/filesystem identity (inputs) and the staged
//! copy's (outputs). A staged file whose identity (device, inode, size, ns mtime, ns ctime) still
//! equals its record is identical and is neither read nor copied; one whose identity moved is
//! re-hashed alone (a same-size replacement with `touch -r` keeps the mtime but not the inode or
//! ctime). A re-run that changes nothing writes nothing, the journal included.

mod place;
mod reconcile;
mod roundtrip;

use std::path::PathBuf;

use serde::Serialize;

use crate::plan::{Plan, PlanError};
use crate::work::WorkDir;

/// The stage's journal stage name.
pub const STAGE: &str = "stage";
/// The stage's one journal unit: the whole release.
pub const UNIT: &str = "release";

/// Options of one stage run.
#[derive(Debug, Clone, Default)]
pub struct StageOpts {
    /// `--work-dir`, else the plan's.
    pub work_dir: Option<PathBuf>,
    /// `--dry-run`: say what would change, change nothing.
    pub dry_run: bool,
    /// Progress on stderr: files reconciled, then units read back (a bar on a terminal).
    pub progress: crate::progress::ProgressMode,
    /// `--units`: a distributed worker's slice — the gate report must cover these units, and only
    /// they are read back (a slice has no `index.json`; `docs/publish.md` §9).
    pub units: Option<String>,
    /// `--records DIR`: the distributed join — the release holds only the release-wide files; the
    /// units are the workers' records, which must cover the plan exactly with PASS gates.
    pub records: Option<PathBuf>,
}

/// What one stage run covers.
pub(crate) enum Scope {
    /// The whole release on disk.
    Release(Vec<String>),
    /// A worker's units on disk (no `index.json`).
    Slice(Vec<String>),
    /// The join: release-wide files on disk, units in records.
    Join(std::collections::BTreeMap<String, crate::distributed::UnitRecord>),
}

fn scope(plan: &Plan, opts: &StageOpts) -> Result<Scope, StageError> {
    if let Some(dir) = &opts.records {
        return Ok(Scope::Join(crate::distributed::load_all(plan, dir)?));
    }
    let units: Vec<String> = plan
        .select_units(opts.units.as_deref())?
        .iter()
        .map(|u| u.as_str().to_owned())
        .collect();
    Ok(match opts.units {
        Some(_) => Scope::Slice(units),
        None => Scope::Release(units),
    })
}

/// What a stage run did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StageReport {
    /// The plan.
    pub plan: String,
    /// Files in the release (= in staging afterwards).
    pub files: usize,
    /// Total release bytes.
    pub bytes: u64,
    /// Staged files kept because their identity still matched the journal (not read).
    pub kept: usize,
    /// Staged files re-hashed because their identity moved.
    pub rehashed: Vec<String>,
    /// Release files hashed because their identity no longer matched any journal.
    pub release_hashed: Vec<String>,
    /// Files (re)placed as hard links to their release files (no bytes written).
    pub linked: Vec<String>,
    /// Files (re)copied from the release (release and staging on different filesystems).
    pub copied: Vec<String>,
    /// Why files were copied instead of linked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy_reason: Option<String>,
    /// Repack journal records whose identity this run refreshed (a link moves the shared
    /// inode's ctime; the file was hashed and matched the recorded digest).
    pub repack_refreshed: usize,
    /// Paths removed from staging (not in the release).
    pub removed: Vec<String>,
    /// Bytes written into staging.
    pub bytes_written: u64,
    /// Whether the journal was rewritten.
    pub journal_written: bool,
    /// Manifests reopened from staging.
    pub manifests: usize,
    /// Containers reopened through the production reader.
    pub containers: usize,
    /// Tiles read (each with its digest checked).
    pub tiles: u64,
    /// Plain streams checked against their manifest entries.
    pub plain: usize,
    /// `--dry-run`: the lists say what would change; nothing was written and no round trip run.
    pub dry_run: bool,
    /// Units of the slice whose bytes were reclaimed (a disk-budgeted run): nothing to stage.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reclaimed: Vec<String>,
}

impl crate::cli::Report for StageReport {
    /// 2: `copied` lists only copies; links are `linked` (in /1 every placed file was `copied`).
    const VERSION: u32 = 2;

    fn text(&self) -> String {
        self.render()
    }
}

impl StageReport {
    /// One readable summary (in the conditional under `--dry-run`).
    pub fn render(&self) -> String {
        let list = |what: &str, v: &[String]| {
            if v.is_empty() {
                String::new()
            } else {
                format!("{what}: {}\n", crate::cli::join_limited(v, 8))
            }
        };
        let [removed, rehashed, linked, copied] = if self.dry_run {
            [
                "would remove",
                "would re-hash (identity changed)",
                "would link",
                "would copy",
            ]
        } else {
            [
                "removed",
                "re-hashed (identity changed)",
                "linked",
                "copied",
            ]
        };
        let mut s = list("reclaimed (on the hub, nothing to stage)", &self.reclaimed);
        s.push_str(&list(removed, &self.removed));
        s.push_str(&list(rehashed, &self.rehashed));
        s.push_str(&list(
            "release files hashed (no journal vouched)",
            &self.release_hashed,
        ));
        s.push_str(&list(linked, &self.linked));
        s.push_str(&list(copied, &self.copied));
        if let Some(why) = &self.copy_reason {
            s.push_str(&format!("copies, not links: {why}\n"));
        }
        if self.dry_run {
            s.push_str(&format!(
                "stage (dry run) {}: would stage {} files ({} bytes): {} kept unread, {} to re-hash, {} to link, {} to copy, {} to remove; nothing changed, no round trip run\n",
                self.plan, self.files, self.bytes, self.kept, self.rehashed.len(),
                self.linked.len(), self.copied.len(), self.removed.len()
            ));
        } else {
            s.push_str(&format!(
                "stage {}: {} files ({} bytes) staged; {} kept unread, {} re-hashed, {} linked, {} copied ({} bytes written), {} removed; round trip: {} manifests, {} containers ({} tiles), {} plain streams\n",
                self.plan, self.files, self.bytes, self.kept, self.rehashed.len(), self.linked.len(),
                self.copied.len(), self.bytes_written, self.removed.len(), self.manifests,
                self.containers, self.tiles, self.plain
            ));
        }
        s
    }
}

/// Why staging failed (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The plan was refused.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The journal could not be read or written.
    #[error("stage journal")]
    Ledger(#[from] ledger::LedgerError),
    /// The gate has not passed on the whole release.
    #[error("the release is not validated: {0}")]
    NotGated(String),
    /// The work directory was fetched for another pin of the plan's upstream.
    #[error(transparent)]
    OtherPin(#[from] crate::fetch::discover::OtherPin),
    /// The distributed join's unit records are missing, malformed, not this plan's, or carry a
    /// gate other than PASS.
    #[error(transparent)]
    Records(#[from] crate::distributed::RecordsError),
    /// A filesystem operation failed.
    #[error("cannot {what} `{path}`")]
    Io {
        /// The operation.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The release tree holds something that is not a regular file or directory.
    #[error(
        "`{0}` in the release is not a regular file (symbolic links and special files are refused)"
    )]
    NotRegular(PathBuf),
    /// A release file changed while it was being copied.
    #[error(
        "release file `{path}` changed while staging: expected sha256 {expected}, copied {found}"
    )]
    ReleaseChanged {
        /// The file.
        path: String,
        /// What the journal or first read said.
        expected: String,
        /// What was copied.
        found: String,
    },
    /// The round trip through the production reader refused the staged tree.
    #[error("the staged tree failed its round trip: {0}")]
    RoundTrip(String),
    /// The whole release cannot be staged from disk: units were reclaimed.
    #[error("units {0} were reclaimed (their bytes are on the hub, their files in their unit records): stage the join with `--records DIR`")]
    Reclaimed(String),
    /// A reclaimed unit's journal could not be read.
    #[error(transparent)]
    Reclaim(#[from] crate::distributed::reclaim::ReclaimError),
    /// The round trip found nothing to check.
    #[error("the staged tree produced zero evidence (no manifest, no container, no stream)")]
    ZeroEvidence,
}

impl crate::cli::Hint for StageError {
    fn hint(&self) -> Option<String> {
        match self {
            StageError::OtherPin(e) => Some(e.hint()),
            StageError::NotGated(_) => {
                Some("run `minirun-gate --plan P` on the whole release first".into())
            }
            StageError::RoundTrip(_) | StageError::ReleaseChanged { .. } => {
                Some("re-run `minirun-repack` and `minirun-gate`, then `minirun-stage`".into())
            }
            _ => None,
        }
    }
}

pub(crate) fn io_err(
    what: &'static str,
    path: &std::path::Path,
) -> impl FnOnce(std::io::Error) -> StageError {
    let path = path.to_path_buf();
    move |source| StageError::Io { what, path, source }
}

/// Require `reports/gate.json` to say PASS (exit 0) for every one of `units`.
pub(crate) fn require_gate(work: &WorkDir, units: &[String]) -> Result<(), StageError> {
    let path = work.reports().join("gate.json");
    let bytes = std::fs::read(&path)
        .map_err(|e| StageError::NotGated(format!("`{}`: {e}", path.display())))?;
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| StageError::NotGated(format!("`{}` is not JSON: {e}", path.display())))?;
    let verdict = v.get("verdict").and_then(|x| x.as_str()).unwrap_or("");
    let code = v.get("exit_code").and_then(|x| x.as_u64());
    if verdict != "PASS" || code != Some(0) {
        let code = code.map_or_else(|| "no exit code".to_string(), |c| format!("exit {c}"));
        return Err(StageError::NotGated(format!(
            "`{}` says {verdict:?} ({code}), not PASS",
            path.display()
        )));
    }
    let listed = |key: &str| -> Vec<&str> {
        v.get(key)
            .and_then(|u| u.as_array())
            .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
            .unwrap_or_default()
    };
    let (gated, unread) = (listed("units"), listed("reclaimed"));
    for u in units {
        if !gated.contains(&u.as_str()) || unread.contains(&u.as_str()) {
            return Err(StageError::NotGated(format!(
                "the gate report does not cover unit `{u}` with bytes it read"
            )));
        }
    }
    Ok(())
}

/// `scope` without the units whose bytes were reclaimed, which go to `report.reclaimed`: a slice
/// stages the rest; the whole release cannot be staged from disk with any reclaimed.
fn drop_reclaimed(
    work: &WorkDir,
    scope: Scope,
    report: &mut StageReport,
) -> Result<Scope, StageError> {
    let (units, slice) = match scope {
        Scope::Release(u) => (u, false),
        Scope::Slice(u) => (u, true),
        join => return Ok(join),
    };
    let mut live = Vec::new();
    for u in units {
        match crate::distributed::reclaim::reclaimed(work, &u)? {
            Some(_) => report.reclaimed.push(u),
            None => live.push(u),
        }
    }
    match slice {
        true => Ok(Scope::Slice(live)),
        false if report.reclaimed.is_empty() => Ok(Scope::Release(live)),
        false => Err(StageError::Reclaimed(crate::cli::join_limited(
            &report.reclaimed,
            8,
        ))),
    }
}

/// Run the stage.
pub fn run(plan: &Plan, opts: &StageOpts) -> Result<StageReport, StageError> {
    let work = crate::work::WorkDir::of_plan(plan, opts.work_dir.as_deref());
    crate::fetch::discover::check_pins(plan, &work)?;
    let mut report = StageReport {
        plan: plan.name.clone(),
        ..StageReport::default()
    };
    let scope = drop_reclaimed(&work, scope(plan, opts)?, &mut report)?;
    match &scope {
        Scope::Slice(units) if units.is_empty() => {
            report.dry_run = opts.dry_run;
            return Ok(report); // every unit of the slice was reclaimed: nothing to do
        }
        Scope::Release(units) | Scope::Slice(units) => require_gate(&work, units)?,
        Scope::Join(_) => {}
    }
    let slice = match &scope {
        Scope::Slice(units) => Some(units.as_slice()),
        _ => None,
    };
    let journal = reconcile::reconcile(&work, slice, opts.dry_run, opts.progress, &mut report)?;
    if opts.dry_run {
        report.dry_run = true;
        return Ok(report);
    }
    roundtrip::roundtrip(plan, &work, &journal, &scope, opts.progress, &mut report)?;
    if report.journal_written {
        // stored in progress by `reconcile`; done only now that the round trip passed
        journal.store(&work.ledger())?;
    }
    Ok(report)
}

/// The finished stage journal of `work`, if staging still matches it (sizes and identities).
pub fn staged_release(work: &WorkDir) -> Result<Option<ledger::Journal>, StageError> {
    let Some(j) = ledger::Journal::load(&work.ledger(), STAGE, UNIT)? else {
        return Ok(None);
    };
    Ok(j.is_done(&work.staging(), false)?.is_done().then_some(j))
}
