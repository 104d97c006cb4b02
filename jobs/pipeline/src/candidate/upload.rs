//! The candidate upload itself: name, upload batches, resolve and inventory.

use std::collections::BTreeMap;
use std::io::Read;

use base64::Engine as _;
use bytes::Bytes;
use hub::client::{CommitOperation, CommitRequest, HubClient, LfsObject, UploadSource};
use hub::protocol::{PreuploadFile, RepoId};
use ledger::{FileRecord, Journal};

use super::record::{self, Inventory, InventoryEntry, RECORD_PATH};
use super::{
    CandidateError, CandidateOpts, CandidateReport, FILES_PER_COMMIT, INLINE_BYTES_PER_COMMIT,
    STAGE,
};
use crate::plan::Plan;
use crate::progress::Progress;
use crate::stage;

const UNIT: &str = "release";

pub(crate) fn first_bytes(path: &std::path::Path, n: usize) -> Result<Vec<u8>, CandidateError> {
    let io = |source| CandidateError::Io {
        path: path.to_path_buf(),
        source,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    let mut buf = Vec::with_capacity(n);
    f.take(n as u64).read_to_end(&mut buf).map_err(io)?;
    Ok(buf)
}

/// Where the bytes of a candidate file are.
#[derive(Debug, Clone)]
pub enum Src {
    /// A staged file.
    Staged(std::path::PathBuf),
    /// Bytes carried by a unit record (a regular file of a distributed worker's unit).
    Bytes(Bytes),
    /// An LFS object a distributed worker uploaded (its unit named): committed by oid, never sent.
    OnHub {
        /// The worker's unit.
        unit: String,
    },
}

/// One file of the candidate.
#[derive(Debug, Clone)]
pub struct Item {
    /// Size.
    pub size: u64,
    /// SHA-256 of the bytes.
    pub sha256: String,
    /// Whether the hub stores it as LFS, when already known (a unit record); else asked.
    pub lfs: Option<bool>,
    /// Where the bytes are.
    pub src: Src,
}

/// Run the candidate upload: the staged tree, plus with `--records` the workers' unit records.
pub fn run(plan: &Plan, opts: &CandidateOpts) -> Result<CandidateReport, CandidateError> {
    let work = crate::work::WorkDir::of_plan(plan, opts.work_dir.as_deref());
    crate::fetch::discover::check_pins(plan, &work)?;
    let staged = stage::staged_release(&work)?.ok_or(CandidateError::NotStaged)?;
    let repo = super::target_repo(plan).map_err(CandidateError::Repo)?;
    let mut items: BTreeMap<String, Item> = staged
        .outputs
        .iter()
        .map(|(k, r)| {
            (
                k.clone(),
                Item {
                    size: r.size,
                    sha256: r.sha256.to_string(),
                    lfs: None,
                    src: Src::Staged(work.staging().join(k)),
                },
            )
        })
        .collect();
    if let Some(dir) = &opts.records {
        let records = crate::distributed::load_all(plan, dir)?;
        for (path, item) in crate::distributed::join_items(&records, dir)? {
            if items.insert(path.clone(), item).is_some() {
                return Err(CandidateError::Worker(format!(
                    "`{path}` is both a staged release-wide file and in a unit record"
                )));
            }
        }
    }
    let inputs: BTreeMap<String, FileRecord> = items
        .iter()
        .map(|(k, it)| {
            (
                k.clone(),
                FileRecord {
                    size: it.size,
                    sha256: it.sha256.clone(),
                    identity: None,
                },
            )
        })
        .collect();
    let (client, rt) =
        super::client_and_runtime(plan, opts.endpoint.as_deref(), opts.retry.as_ref())?;
    // A finished journal saves the work (preupload, naming, uploads), never the hub's answer:
    // the branch and its tree are asked whether they still hold exactly the journaled candidate.
    if let Some(prev) = Journal::load(&work.ledger(), STAGE, UNIT)? {
        if prev.status == ledger::Status::Done
            && prev.input_mismatch(&inputs).is_none()
            && !opts.dry_run
        {
            let name = prev
                .extra
                .get("candidate")
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_owned();
            if let Some(commit) = rt.block_on(still_holds(&client, &repo, &name))? {
                return Ok(CandidateReport {
                    repo: repo.id(),
                    candidate: name,
                    commit,
                    files: inputs.len() + 1,
                    present: inputs.len() + 1,
                    from_journal: true,
                    ..CandidateReport::default()
                });
            }
            tracing::warn!(candidate = %name, "the journaled candidate is not on the hub as recorded; uploading again");
        }
    }
    let report = match rt.block_on(upload(plan, &client, &repo, &items, opts)) {
        Err(CandidateError::ObjectMissing {
            path,
            unit,
            oid,
            units,
            ..
        }) => {
            let mut reopened = Vec::new();
            for u in &units {
                let why = "the join found an object of the unit missing on the hub: fetch it again";
                if crate::distributed::reclaim::reopen(&work, u, why)? {
                    reopened.push(u.clone());
                }
            }
            return Err(CandidateError::ObjectMissing {
                path,
                unit,
                oid,
                units,
                reopened,
            });
        }
        r => r?,
    };
    if !opts.dry_run {
        let mut j = Journal::new(STAGE, UNIT)?;
        j.inputs = inputs;
        j.extra
            .insert("candidate".into(), report.candidate.clone().into());
        j.extra
            .insert("commit".into(), report.commit.clone().into());
        j.extra.insert("repo".into(), report.repo.clone().into());
        j.mark_done();
        j.store(&work.ledger())?;
    }
    Ok(report)
}

/// The commit `name`'s branch points at, when its tree still digests to `name` (so it holds
/// exactly the candidate: the name is a digest of the whole inventory); one refs call and one
/// tree listing.
async fn still_holds(
    client: &HubClient,
    repo: &RepoId,
    name: &str,
) -> Result<Option<String>, CandidateError> {
    if name.is_empty() {
        return Ok(None);
    }
    let head = match client.branch_head(repo, name).await {
        Ok(h) => h,
        Err(e) if e.is_not_found() => None, // the repo is gone (or another hub): upload again
        Err(e) => return Err(e.into()),
    };
    let Some(head) = head else {
        return Ok(None);
    };
    let got = record::tree_inventory(&client.list_tree(repo, &head, None, true).await?);
    Ok((record::candidate_name(&got) == name).then_some(head))
}

/// Preupload calls at most, until two answers agree.
const MODE_ASKS: usize = 4;

/// How the hub stores each file (`true`: LFS), by its preupload rule. No digest covers the
/// request or the answer, and a flipped byte in either (a size digit, the sample's NUL bytes, an
/// `uploadMode`) would silently store a file the other way — a release that differs from the
/// clean one's tree — so the hub is asked until two answers agree (docs/fetch.md "Bytes no
/// digest covers").
pub async fn modes(
    client: &HubClient,
    repo: &RepoId,
    rev: &str,
    files: &[(String, u64, Vec<u8>)],
) -> Result<BTreeMap<String, bool>, CandidateError> {
    let pre: Vec<PreuploadFile> = files
        .iter()
        .map(|(p, size, sample)| PreuploadFile {
            path: p.clone(),
            sample: base64::engine::general_purpose::STANDARD.encode(sample),
            size: *size,
        })
        .collect();
    let mut last: Option<BTreeMap<String, bool>> = None;
    for _ in 0..MODE_ASKS {
        let ans = client.preupload(repo, rev, &pre, false).await?;
        let mut now = BTreeMap::new();
        for (p, size, _) in files {
            let m = ans
                .iter()
                .find(|m| &m.path == p)
                .ok_or_else(|| CandidateError::Preupload(p.clone()))?;
            // The client forces empty files to regular (hub-protocol.md §7.2).
            now.insert(p.clone(), m.upload_mode == "lfs" && *size > 0);
        }
        if last.as_ref() == Some(&now) {
            return Ok(now);
        }
        last = Some(now);
    }
    Err(CandidateError::PreuploadDisagrees { asks: MODE_ASKS })
}

async fn upload(
    plan: &Plan,
    client: &HubClient,
    repo: &RepoId,
    inputs: &BTreeMap<String, Item>,
    opts: &CandidateOpts,
) -> Result<CandidateReport, CandidateError> {
    if let Some(report) = prepare_repo(client, repo, inputs, opts.dry_run).await? {
        return Ok(report);
    }
    // 1. How the hub stores each file (its preupload rule), then the hub oid of each.
    let cand = name_candidate(plan, client, repo, inputs).await?;
    let mut report = CandidateReport {
        repo: repo.id(),
        candidate: cand.name.clone(),
        files: cand.expected.len(),
        ..CandidateReport::default()
    };
    if opts.dry_run {
        report.dry_run = true;
        return Ok(report);
    }
    // 2. The branch (kept forever), and what it already holds.
    let pending = branch_state(client, repo, &cand, &mut report).await?;
    // 3. Batches: LFS objects first (batch → PUT → verify), then one guarded commit.
    send_batches(client, repo, inputs, opts, &cand, pending, &mut report).await?;
    // 4. Resolve to an immutable commit and require exactly the release there.
    report.commit = resolve_commit(client, repo, cand).await?;
    Ok(report)
}

/// Before step 1: a real run makes the repository; a dry run of a first publish ends here.
async fn prepare_repo(
    client: &HubClient,
    repo: &RepoId,
    inputs: &BTreeMap<String, Item>,
    dry_run: bool,
) -> Result<Option<CandidateReport>, CandidateError> {
    if dry_run {
        // a first publish: the repository is made by the real run, and how the hub stores each
        // file (which names the candidate) can only be asked once it exists
        if let Err(e) = client.list_refs(repo, false).await {
            if !e.is_not_found() {
                return Err(e.into());
            }
            return Ok(Some(CandidateReport {
                repo: repo.id(),
                files: inputs.len() + 1,
                dry_run: true,
                new_repo: true,
                ..CandidateReport::default()
            }));
        }
    } else {
        client.create_repo(repo, false, true).await?;
    }
    Ok(None)
}

/// The candidate named in step 1: its expected inventory, its name and the record's bytes.
struct Candidate {
    expected: Inventory,
    name: String,
    rec_bytes: Vec<u8>,
}

/// Step 1: the files' inventory, the release record's own entry, and the candidate's name.
async fn name_candidate(
    plan: &Plan,
    client: &HubClient,
    repo: &RepoId,
    inputs: &BTreeMap<String, Item>,
) -> Result<Candidate, CandidateError> {
    let branch = plan.target.branch.as_str();
    let files = hub_inventory(client, repo, branch, inputs).await?;
    let rec = record::for_plan(plan, &files);
    let rec_bytes = rec.to_bytes();
    let rec_lfs = modes(
        client,
        repo,
        branch,
        &[(
            RECORD_PATH.to_owned(),
            rec_bytes.len() as u64,
            rec_bytes.clone(),
        )],
    )
    .await?
    .get(RECORD_PATH)
    .copied()
    .unwrap_or(false);
    let rec_entry = InventoryEntry {
        path: RECORD_PATH.into(),
        size: rec_bytes.len() as u64,
        oid: if rec_lfs {
            hub::protocol::sha256_hex(&rec_bytes)
        } else {
            hub::protocol::git_blob_sha1(&rec_bytes)
        },
        lfs: rec_lfs,
    };
    let expected = rec.expected(rec_entry);
    let name = record::candidate_name(&expected);
    Ok(Candidate {
        expected,
        name,
        rec_bytes,
    })
}

/// Step 1, the files: how the hub stores each (its preupload rule), then the hub oid of each.
async fn hub_inventory(
    client: &HubClient,
    repo: &RepoId,
    branch: &str,
    inputs: &BTreeMap<String, Item>,
) -> Result<Inventory, CandidateError> {
    let mut samples = Vec::new();
    for (rel, it) in inputs {
        if let (None, Src::Staged(p)) = (it.lfs, &it.src) {
            samples.push((rel.clone(), it.size, first_bytes(p, 512)?));
        }
    }
    let lfs = modes(client, repo, branch, &samples).await?;
    let mut files = Inventory::new();
    for (rel, it) in inputs {
        let is_lfs = it.lfs.or_else(|| lfs.get(rel).copied()).unwrap_or(true);
        let oid = if is_lfs {
            it.sha256.clone()
        } else {
            // Regular files are small (the hub refuses them above 10 MiB): hash their bytes.
            hub::protocol::git_blob_sha1(&bytes_of(rel, &it.src)?)
        };
        files.insert(
            rel.clone(),
            InventoryEntry {
                path: rel.clone(),
                size: it.size,
                oid,
                lfs: is_lfs,
            },
        );
    }
    Ok(files)
}

/// What step 2 finds on the branch: its head, the entries still to send, the stale paths.
struct Pending<'a> {
    head: String,
    todo: Vec<&'a InventoryEntry>,
    deletes: Vec<CommitOperation>,
}

/// Step 2: the branch (kept forever), and what it already holds.
async fn branch_state<'a>(
    client: &HubClient,
    repo: &RepoId,
    cand: &'a Candidate,
    report: &mut CandidateReport,
) -> Result<Pending<'a>, CandidateError> {
    let name = cand.name.as_str();
    client.create_branch(repo, name, None, true).await?;
    let head = client
        .revision_info(repo, name, false)
        .await?
        .sha
        .unwrap_or_default();
    let remote = record::tree_inventory(&client.list_tree(repo, name, None, true).await?);
    let mut todo: Vec<&InventoryEntry> = Vec::new();
    for e in cand.expected.values() {
        match remote.get(&e.path) {
            Some(r) if r.oid == e.oid && r.size == e.size => report.present += 1,
            _ => todo.push(e),
        }
    }
    let deletes: Vec<CommitOperation> = remote
        .keys()
        .filter(|p| !cand.expected.contains_key(*p))
        .map(|p| CommitOperation::DeleteFile { path: p.clone() })
        .collect();
    Ok(Pending {
        head,
        todo,
        deletes,
    })
}

/// Step 3: batches: LFS objects first (batch → PUT → verify), then one guarded commit.
async fn send_batches(
    client: &HubClient,
    repo: &RepoId,
    inputs: &BTreeMap<String, Item>,
    opts: &CandidateOpts,
    cand: &Candidate,
    pending: Pending<'_>,
    report: &mut CandidateReport,
) -> Result<(), CandidateError> {
    let Pending {
        mut head,
        todo,
        mut deletes,
    } = pending;
    let name = cand.name.as_str();
    let mut batches = commit_batches(&todo);
    if batches.is_empty() && !deletes.is_empty() {
        batches.push(&[]);
    }
    report.files_per_commit = FILES_PER_COMMIT;
    let progress = Progress::new("candidate-upload", "files", opts.progress);
    progress.plan(todo.iter().map(|e| e.size).sum());
    check_on_hub(client, repo, name, inputs, &todo).await?;
    // A long 429 (an hourly commit quota) is waited out between attempts of a batch, up to
    // `--rate-limit-wait`; a batch already committed is never sent again.
    let mut patience = crate::patience::Patience::new(
        "candidate-upload",
        opts.rate_limit_wait,
        client.retry_policy().max_delay,
        opts.progress,
    );
    for batch in batches {
        let ops = std::mem::take(&mut deletes);
        let (objs, ops) = batch_ops(inputs, cand, batch, ops, report)?;
        report.lfs_sent += patience
            .run(|| client.upload_lfs(repo, Some(name), &objs))
            .await?;
        let req = CommitRequest {
            summary: format!("minirun candidate: {} files", ops.len()),
            description: String::new(),
            parent_commit: Some(head.clone()),
            operations: ops,
            create_pr: false,
        };
        head = patience
            .run(|| client.commit_guarded(repo, name, &req))
            .await?
            .commit_oid;
        report.commits += 1;
        report.rate_limited_s = patience.waited().as_secs();
        for e in batch {
            progress.advance(e.size);
            progress.item_done();
        }
    }
    progress.finish();
    Ok(())
}

/// The commits `todo` is sent in: at most [`FILES_PER_COMMIT`] files and
/// [`INLINE_BYTES_PER_COMMIT`] bytes of regular (inline) files each, in order.
fn commit_batches<'t, 'e>(todo: &'t [&'e InventoryEntry]) -> Vec<&'t [&'e InventoryEntry]> {
    let mut out = Vec::new();
    let (mut start, mut inline) = (0, 0u64);
    for (i, e) in todo.iter().enumerate() {
        let add = if e.lfs { 0 } else { e.size };
        if i > start && (i - start == FILES_PER_COMMIT || inline + add > INLINE_BYTES_PER_COMMIT) {
            out.extend(todo.get(start..i));
            (start, inline) = (i, 0);
        }
        inline += add;
    }
    if start < todo.len() {
        out.extend(todo.get(start..));
    }
    out
}

/// Step 3, one batch: the LFS objects to send and the commit's operations after `ops`.
fn batch_ops(
    inputs: &BTreeMap<String, Item>,
    cand: &Candidate,
    batch: &[&InventoryEntry],
    mut ops: Vec<CommitOperation>,
    report: &mut CandidateReport,
) -> Result<(Vec<LfsObject>, Vec<CommitOperation>), CandidateError> {
    let mut objs = Vec::new();
    for e in batch {
        let src = if e.path == RECORD_PATH {
            Src::Bytes(Bytes::from(cand.rec_bytes.clone()))
        } else {
            inputs
                .get(&e.path)
                .map(|it| it.src.clone())
                .ok_or_else(|| CandidateError::Preupload(e.path.clone()))?
        };
        if e.lfs {
            let source = match src {
                Src::Staged(p) => Some(UploadSource::File(p)),
                Src::Bytes(b) => Some(UploadSource::Bytes(b)),
                Src::OnHub { .. } => None,
            };
            objs.extend(source.map(|source| LfsObject {
                oid: e.oid.clone(),
                size: e.size,
                source,
            }));
            ops.push(CommitOperation::Lfs {
                path: e.path.clone(),
                sha256: e.oid.clone(),
                size: Some(e.size),
            });
        } else {
            let content = Bytes::from(bytes_of(&e.path, &src)?);
            report.regular_sent += 1;
            ops.push(CommitOperation::Regular {
                path: e.path.clone(),
                content,
            });
        }
    }
    Ok((objs, ops))
}

/// Step 4: resolve to an immutable commit and require exactly the release there.
async fn resolve_commit(
    client: &HubClient,
    repo: &RepoId,
    cand: Candidate,
) -> Result<String, CandidateError> {
    let commit = client
        .revision_info(repo, &cand.name, false)
        .await?
        .sha
        .unwrap_or_default();
    let got = record::tree_inventory(&client.list_tree(repo, &commit, None, true).await?);
    let diffs = record::differences(&cand.expected, &got, 5);
    if !diffs.is_empty() || record::candidate_name(&got) != cand.name {
        return Err(CandidateError::Inventory {
            candidate: cand.name,
            commit,
            diffs: diffs.join("; "),
        });
    }
    Ok(commit)
}

/// The bytes of a regular file of the candidate (a staged file, or carried by a unit record).
fn bytes_of(rel: &str, src: &Src) -> Result<Vec<u8>, CandidateError> {
    match src {
        Src::Staged(p) => std::fs::read(p).map_err(|source| CandidateError::Io {
            path: p.clone(),
            source,
        }),
        Src::Bytes(b) => Ok(b.to_vec()),
        Src::OnHub { unit } => Err(CandidateError::Worker(format!(
            "`{rel}` of unit `{unit}` is a regular file, but its record carries no bytes"
        ))),
    }
}

/// Before anything is committed: every LFS object a worker uploaded (and the join commits by oid
/// alone) must be on the hub; the first missing one is named with its unit.
async fn check_on_hub(
    client: &HubClient,
    repo: &RepoId,
    branch: &str,
    inputs: &BTreeMap<String, Item>,
    todo: &[&InventoryEntry],
) -> Result<(), CandidateError> {
    let remote: Vec<(&InventoryEntry, &str)> = todo
        .iter()
        .filter(|e| e.lfs)
        .filter_map(|e| match inputs.get(&e.path).map(|it| &it.src) {
            Some(Src::OnHub { unit }) => Some((*e, unit.as_str())),
            _ => None,
        })
        .collect();
    if remote.is_empty() {
        return Ok(());
    }
    let asked: Vec<(String, u64)> = remote
        .iter()
        .map(|(e, _)| (e.oid.clone(), e.size))
        .collect();
    let missing = client.lfs_missing(repo, Some(branch), &asked).await?;
    let gone: Vec<&(&InventoryEntry, &str)> = remote
        .iter()
        .filter(|(e, _)| missing.contains(&e.oid))
        .collect();
    match gone.first() {
        Some((e, unit)) => {
            let units: std::collections::BTreeSet<String> =
                gone.iter().map(|(_, u)| (*u).to_owned()).collect();
            let units: Vec<String> = units.into_iter().collect();
            Err(CandidateError::ObjectMissing {
                path: e.path.clone(),
                unit: (*unit).to_owned(),
                oid: e.oid.clone(),
                units,
                reopened: Vec::new(),
            })
        }
        None => Ok(()),
    }
}
