//! A worker's last step (`minirun-candidate-upload --units SEL --records DIR`): after its own
//! fetch → repack → gate → stage of the slice, upload the slice's LFS objects straight to the hub
//! and write one unit record per unit. Nothing is committed: objects are content-addressed, so
//! workers never conflict, and the join commits them once.

use std::collections::BTreeMap;
use std::path::PathBuf;

use artifact::container::ContainerReader;
use artifact::manifest::{FileKind, Manifest, MANIFEST_FILE_NAME};
use base64::Engine as _;
use hub::client::{LfsObject, UploadSource};
use serde::Serialize;

use super::{record_path, GateWord, RecordFile, UnitRecord, RECORD_SCHEMA};
use crate::candidate::{upload, CandidateError};
use crate::plan::Plan;
use crate::stage;

/// Options of a worker's upload.
#[derive(Debug, Clone, Default)]
pub struct WorkerOpts {
    /// `--work-dir`, else the plan's.
    pub work_dir: Option<PathBuf>,
    /// `--endpoint`, else the plan's, else `HF_ENDPOINT`.
    pub endpoint: Option<String>,
    /// `--units`: the slice this worker fetched, repacked, gated and staged.
    pub units: String,
    /// `--records`: where the unit records go (shared with the join).
    pub records: PathBuf,
    /// Say what would be uploaded; send and write nothing.
    pub dry_run: bool,
    /// `--reclaim` (a disk-budgeted run, issue 52): once the records are written and the hub
    /// confirms every LFS object of a unit, remove the unit's fetched and release bytes.
    pub reclaim: bool,
}

/// What a worker's upload did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WorkerReport {
    /// The target repository.
    pub repo: String,
    /// The units recorded.
    pub units: Vec<String>,
    /// Files in those units.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// LFS objects among them.
    pub lfs_objects: usize,
    /// LFS objects actually transferred (the hub held the others).
    pub lfs_sent: usize,
    /// Bytes of the records handed to the join.
    pub record_bytes: u64,
    /// Records whose bytes changed (written).
    pub records_written: usize,
    /// `--dry-run`.
    pub dry_run: bool,
    /// Units reclaimed before this run (their records stand; nothing read or sent for them).
    pub already_reclaimed: Vec<String>,
    /// Units this run reclaimed (`--reclaim`).
    pub reclaimed: Vec<String>,
    /// Bytes this run's reclaim freed in the work directory.
    pub reclaimed_bytes: u64,
}

impl crate::cli::Report for WorkerReport {
    fn text(&self) -> String {
        self.render()
    }
}

impl WorkerReport {
    /// A readable summary.
    pub fn render(&self) -> String {
        let share = if self.bytes == 0 {
            0.0
        } else {
            100.0 * self.record_bytes as f64 / self.bytes as f64
        };
        if self.dry_run {
            return format!(
                "candidate-upload (dry run) of units {}: would upload up to {} LFS objects of {} files ({} B) to `{}` and write {} unit records; nothing sent\n",
                crate::cli::join_limited(&self.units, 6),
                self.lfs_objects,
                self.files,
                self.bytes,
                self.repo,
                self.units.len()
            );
        }
        let mut s = format!(
            "worker upload to `{}`: {} units, {} files ({} B), {} LFS objects ({} sent, the rest already on the hub); {} unit records ({} B, {share:.3}% of the units' bytes, {} rewritten)\n",
            self.repo,
            self.units.len(),
            self.files,
            self.bytes,
            self.lfs_objects,
            self.lfs_sent,
            self.units.len() - self.already_reclaimed.len(),
            self.record_bytes,
            self.records_written
        );
        if !self.already_reclaimed.is_empty() {
            s.push_str(&format!(
                "already reclaimed (records stand, nothing sent): {}\n",
                crate::cli::join_limited(&self.already_reclaimed, 6)
            ));
        }
        if !self.reclaimed.is_empty() {
            s.push_str(&format!(
                "reclaimed {} units ({} B freed): the hub confirmed every object\n",
                self.reclaimed.len(),
                self.reclaimed_bytes
            ));
        }
        s
    }
}

/// The staged files of each unit: (path, size, SHA-256), from the finished stage journal.
type Staged = BTreeMap<String, Vec<(String, u64, String)>>;

/// The slice's units split into those still on disk and those reclaimed before, whose records
/// must stand (they are all that is left of them here).
fn split_reclaimed(
    plan: &Plan,
    work: &crate::work::WorkDir,
    opts: &WorkerOpts,
) -> Result<(Vec<String>, Vec<String>), CandidateError> {
    let (mut live, mut gone) = (Vec::new(), Vec::new());
    for u in plan.select_units(Some(&opts.units))? {
        let unit = u.as_str().to_owned();
        let Some(note) = super::reclaim::reclaimed(work, &unit)? else {
            live.push(unit);
            continue;
        };
        let path = record_path(&opts.records, &unit);
        let stands = match super::load_one(plan, &unit, &path) {
            Ok((_, digest)) if digest == note.record_sha256 => Ok(()),
            Ok((_, digest)) => Err(format!(
                "sha256 {digest}, reclaimed with {}",
                note.record_sha256
            )),
            Err(e) => Err(crate::cli::render_error(&e, None)),
        };
        if let Err(why) = stands {
            return Err(CandidateError::Worker(format!(
                "unit `{unit}` was reclaimed but its record `{}` does not stand ({why}): its bytes must be fetched again (remove ledger/fetch/{unit}.json and ledger/repack/{unit}.json, then run the window again)",
                path.display()
            )));
        }
        gone.push(unit);
    }
    Ok((live, gone))
}

/// The staged files of the slice's `live` units, from the stage journal, which must be done for
/// them (sizes and identities); files of units reclaimed since the slice was staged (`gone`: a
/// killed reclaim) are passed over.
fn staged_units(
    work: &crate::work::WorkDir,
    live: &[String],
    gone: &[String],
    opts: &WorkerOpts,
) -> Result<Staged, CandidateError> {
    let unit_of = |rel: &str| rel.split_once('/').map(|(u, _)| u.to_owned());
    let mut staged = ledger::Journal::load(&work.ledger(), stage::STAGE, stage::UNIT)?
        .ok_or(CandidateError::NotStaged)?;
    staged
        .outputs
        .retain(|rel, _| !unit_of(rel).is_some_and(|u| gone.contains(&u)));
    if !staged.is_done(&work.staging(), false)?.is_done() {
        return Err(CandidateError::NotStaged);
    }
    stage::require_gate(work, live)?;
    let mut by_unit: Staged = live.iter().map(|u| (u.clone(), Vec::new())).collect();
    for (rel, r) in &staged.outputs {
        match unit_of(rel).and_then(|u| by_unit.get_mut(&u)) {
            Some(v) => v.push((rel.clone(), r.size, r.sha256.to_string())),
            None => {
                return Err(CandidateError::Worker(format!(
                    "staged `{rel}` is not in the worker's units {}: stage exactly the slice (`minirun-stage --units`)",
                    opts.units
                )))
            }
        }
    }
    Ok(by_unit)
}

/// Upload the slice's LFS objects and write its unit records (module docs).
pub fn publish_units(plan: &Plan, opts: &WorkerOpts) -> Result<WorkerReport, CandidateError> {
    let work = crate::work::WorkDir::of_plan(plan, opts.work_dir.as_deref());
    let repo = crate::candidate::target_repo(plan).map_err(CandidateError::Repo)?;
    let (live, gone) = split_reclaimed(plan, &work, opts)?;
    let mut report = WorkerReport {
        repo: repo.id(),
        units: plan
            .select_units(Some(&opts.units))?
            .iter()
            .map(|u| u.as_str().to_owned())
            .collect(),
        already_reclaimed: gone,
        dry_run: opts.dry_run,
        ..WorkerReport::default()
    };
    if opts.reclaim && !opts.dry_run {
        // what a killed reclaim left of units it had begun to mark
        for unit in &report.already_reclaimed {
            report.reclaimed_bytes += super::reclaim::finish(&work, unit)?;
        }
    }
    if live.is_empty() {
        return Ok(report); // every unit was reclaimed by an earlier run: nothing to read or send
    }
    let by_unit = staged_units(&work, &live, &report.already_reclaimed, opts)?;
    let staging = work.staging();
    report.files = by_unit.values().map(Vec::len).sum();
    report.bytes = by_unit.values().flatten().map(|f| f.1).sum();
    if opts.dry_run {
        report.lfs_objects = report.files;
        return Ok(report);
    }
    let (client, rt) = crate::candidate::client_and_runtime(plan, opts.endpoint.as_deref(), None)?;
    rt.block_on(client.create_repo(&repo, false, true))?;
    let mut samples = Vec::new();
    for (rel, size, _) in by_unit.values().flatten() {
        samples.push((
            rel.clone(),
            *size,
            upload::first_bytes(&staging.join(rel), 512)?,
        ));
    }
    let branch = plan.target.branch.as_str();
    let lfs = rt.block_on(upload::modes(&client, &repo, branch, &samples))?;
    let mut objs = Vec::new();
    let mut records = Vec::new();
    for (unit, files) in &by_unit {
        let mut out = Vec::new();
        for (rel, size, sha256) in files {
            let path = staging.join(rel);
            if lfs.get(rel).copied().unwrap_or(true) {
                objs.push(LfsObject {
                    oid: sha256.clone(),
                    size: *size,
                    source: UploadSource::File(path),
                });
                out.push(RecordFile {
                    path: rel.clone(),
                    size: *size,
                    sha256: sha256.clone(),
                    oid: sha256.clone(),
                    lfs: true,
                    content: None,
                });
            } else {
                let data = std::fs::read(&path).map_err(|source| CandidateError::Io {
                    path: path.clone(),
                    source,
                })?;
                out.push(RecordFile {
                    path: rel.clone(),
                    size: *size,
                    sha256: sha256.clone(),
                    oid: hub::protocol::git_blob_sha1(&data),
                    lfs: false,
                    content: Some(base64::engine::general_purpose::STANDARD.encode(&data)),
                });
            }
        }
        records.push(unit_record(plan, &work, unit, out)?);
    }
    report.lfs_objects = objs.len();
    report.lfs_sent = rt.block_on(client.upload_lfs(&repo, None, &objs))?;
    for rec in &records {
        let path = record_path(&opts.records, &rec.unit);
        let bytes = rec.to_bytes();
        report.record_bytes += bytes.len() as u64;
        if std::fs::read(&path).ok().as_deref() != Some(bytes.as_slice()) {
            std::fs::create_dir_all(&opts.records).map_err(|source| CandidateError::Io {
                path: opts.records.clone(),
                source,
            })?;
            ledger::write_atomic(&path, &bytes)?;
            report.records_written += 1;
        }
    }
    if opts.reclaim {
        reclaim(&client, rt, &repo, &work, &records, &mut report)?;
    }
    Ok(report)
}

/// `--reclaim`: ask the hub's LFS batch about every object of the slice once more (after the
/// upload, so the answer is the hub's word now, not the upload's), and reclaim each unit whose
/// objects it all stores; one it lacks is refused, naming the unit, and nothing is reclaimed.
fn reclaim(
    client: &hub::client::HubClient,
    rt: &tokio::runtime::Runtime,
    repo: &hub::protocol::RepoId,
    work: &crate::work::WorkDir,
    records: &[UnitRecord],
    report: &mut WorkerReport,
) -> Result<(), CandidateError> {
    let asked: Vec<(String, u64)> = records
        .iter()
        .flat_map(|r| r.files.iter().filter(|f| f.lfs))
        .map(|f| (f.oid.clone(), f.size))
        .collect();
    let missing = rt.block_on(client.lfs_missing(repo, None, &asked))?;
    for rec in records {
        if let Some(f) = rec.files.iter().find(|f| missing.contains(&f.oid)) {
            return Err(CandidateError::ObjectMissing {
                path: f.path.clone(),
                unit: rec.unit.clone(),
                oid: f.oid.clone(),
                units: vec![rec.unit.clone()],
                reopened: Vec::new(),
            });
        }
    }
    for rec in records {
        let digest = ledger::sha256_hex(&rec.to_bytes()).to_string();
        report.reclaimed_bytes += super::reclaim::reclaim_unit(work, rec, &repo.id(), &digest)?;
        report.reclaimed.push(rec.unit.clone());
    }
    Ok(())
}

/// The record of `unit` over its files: totals and the container format version from its staged
/// manifest and container headers (what the join's `index.json` needs).
fn unit_record(
    plan: &Plan,
    work: &crate::work::WorkDir,
    unit: &str,
    files: Vec<RecordFile>,
) -> Result<UnitRecord, CandidateError> {
    let dir = work.staging().join(unit);
    let m = Manifest::read(&dir)
        .map_err(|e| CandidateError::Worker(format!("manifest of unit `{unit}`: {e}")))?;
    let mut format_version = 0u64;
    for e in m.files.iter().filter(|e| e.kind == FileKind::Container) {
        let r = ContainerReader::open(&dir.join(&e.path)).map_err(|err| {
            CandidateError::Worker(format!("container `{unit}/{}`: {err}", e.path))
        })?;
        format_version = format_version.max(u64::from(r.layout().version));
    }
    let man = format!("{unit}/{MANIFEST_FILE_NAME}");
    if !files.iter().any(|f| f.path == man) {
        return Err(CandidateError::Worker(format!(
            "unit `{unit}` has no staged `{man}`"
        )));
    }
    let rec = crate::candidate::record::for_plan(plan, &Default::default());
    Ok(UnitRecord {
        schema: RECORD_SCHEMA.into(),
        plan: rec.plan,
        target_repo: rec.target_repo,
        sources: rec.sources,
        unit: unit.to_owned(),
        gate: GateWord {
            verdict: "PASS".into(),
            exit_code: 0,
        },
        files_total: files.len() as u64,
        bytes_total: files.iter().map(|f| f.size).sum(),
        format_version,
        files,
    })
}
