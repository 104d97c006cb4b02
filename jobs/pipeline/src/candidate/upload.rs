//! The candidate upload itself: name, upload batches, resolve and inventory.

use std::collections::BTreeMap;
use std::io::Read;

use base64::Engine as _;
use bytes::Bytes;
use hub::client::{CommitOperation, CommitRequest, HubClient, LfsObject, UploadSource};
use hub::protocol::{PreuploadFile, RepoId};
use ledger::{FileRecord, Journal};

use super::record::{self, Inventory, InventoryEntry, RECORD_PATH};
use super::{CandidateError, CandidateOpts, CandidateReport, FILES_PER_COMMIT, STAGE};
use crate::plan::Plan;
use crate::progress::Progress;
use crate::stage;
use crate::work::WorkDir;

const UNIT: &str = "release";

fn first_bytes(path: &std::path::Path, n: usize) -> Result<Vec<u8>, CandidateError> {
    let io = |source| CandidateError::Io {
        path: path.to_path_buf(),
        source,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    let mut buf = Vec::with_capacity(n);
    f.take(n as u64).read_to_end(&mut buf).map_err(io)?;
    Ok(buf)
}

/// Run the candidate upload.
pub fn run(plan: &Plan, opts: &CandidateOpts) -> Result<CandidateReport, CandidateError> {
    let work = stage::work_of(plan, opts.work_dir.as_ref());
    let staged = stage::staged_release(&work)?.ok_or(CandidateError::NotStaged)?;
    let repo = super::target_repo(plan).map_err(CandidateError::Repo)?;
    let inputs: BTreeMap<String, FileRecord> = staged
        .outputs
        .iter()
        .map(|(k, r)| {
            (
                k.clone(),
                FileRecord {
                    size: r.size,
                    sha256: r.sha256.clone(),
                    identity: None,
                },
            )
        })
        .collect();
    let endpoint = opts.endpoint.clone().or_else(|| plan.run.endpoint.clone());
    let client = HubClient::from_env(endpoint.as_deref())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CandidateError::Runtime)?;
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
    let report = rt.block_on(upload(plan, &work, &client, &repo, &inputs, opts))?;
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

async fn modes(
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
    let ans = client.preupload(repo, rev, &pre, false).await?;
    let mut out = BTreeMap::new();
    for (p, size, _) in files {
        let m = ans
            .iter()
            .find(|m| &m.path == p)
            .ok_or_else(|| CandidateError::Preupload(p.clone()))?;
        // The client forces empty files to regular (hub-protocol.md §7.2).
        out.insert(p.clone(), m.upload_mode == "lfs" && *size > 0);
    }
    Ok(out)
}

async fn upload(
    plan: &Plan,
    work: &WorkDir,
    client: &HubClient,
    repo: &RepoId,
    inputs: &BTreeMap<String, FileRecord>,
    opts: &CandidateOpts,
) -> Result<CandidateReport, CandidateError> {
    let dry_run = opts.dry_run;
    let staging = work.staging();
    let branch = plan.target.branch.as_str();
    if dry_run {
        // a first publish: the repository is made by the real run, and how the hub stores each
        // file (which names the candidate) can only be asked once it exists
        if let Err(e) = client.list_refs(repo, false).await {
            if !e.is_not_found() {
                return Err(e.into());
            }
            return Ok(CandidateReport {
                repo: repo.id(),
                files: inputs.len() + 1,
                dry_run: true,
                new_repo: true,
                ..CandidateReport::default()
            });
        }
    } else {
        client.create_repo(repo, false, true).await?;
    }
    // 1. How the hub stores each file (its preupload rule), then the hub oid of each.
    let mut samples = Vec::new();
    for (rel, rec) in inputs {
        samples.push((rel.clone(), rec.size, first_bytes(&staging.join(rel), 512)?));
    }
    let lfs = modes(client, repo, branch, &samples).await?;
    let mut files = Inventory::new();
    for (rel, rec) in inputs {
        let is_lfs = lfs.get(rel).copied().unwrap_or(true);
        let oid = if is_lfs {
            rec.sha256.clone()
        } else {
            // Regular files are small (the hub refuses them above 10 MiB): hash their bytes.
            let p = staging.join(rel);
            let data =
                std::fs::read(&p).map_err(|source| CandidateError::Io { path: p, source })?;
            hub::protocol::git_blob_sha1(&data)
        };
        files.insert(
            rel.clone(),
            InventoryEntry {
                path: rel.clone(),
                size: rec.size,
                oid,
                lfs: is_lfs,
            },
        );
    }
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
    let mut report = CandidateReport {
        repo: repo.id(),
        candidate: name.clone(),
        files: expected.len(),
        ..CandidateReport::default()
    };
    if dry_run {
        report.dry_run = true;
        return Ok(report);
    }
    // 2. The branch (kept forever), and what it already holds.
    client.create_branch(repo, &name, None, true).await?;
    let mut head = client
        .revision_info(repo, &name, false)
        .await?
        .sha
        .unwrap_or_default();
    let remote = record::tree_inventory(&client.list_tree(repo, &name, None, true).await?);
    let mut todo: Vec<&InventoryEntry> = Vec::new();
    for e in expected.values() {
        match remote.get(&e.path) {
            Some(r) if r.oid == e.oid && r.size == e.size => report.present += 1,
            _ => todo.push(e),
        }
    }
    let mut deletes: Vec<CommitOperation> = remote
        .keys()
        .filter(|p| !expected.contains_key(*p))
        .map(|p| CommitOperation::DeleteFile { path: p.clone() })
        .collect();
    // 3. Batches: LFS objects first (batch → PUT → verify), then one guarded commit.
    let mut batches: Vec<&[&InventoryEntry]> = todo.chunks(FILES_PER_COMMIT).collect();
    if batches.is_empty() && !deletes.is_empty() {
        batches.push(&[]);
    }
    let progress = Progress::new("candidate-upload", "files", opts.progress);
    progress.plan(todo.iter().map(|e| e.size).sum());
    for batch in batches {
        let mut objs = Vec::new();
        let mut ops = std::mem::take(&mut deletes);
        for e in batch {
            let source = if e.path == RECORD_PATH {
                UploadSource::Bytes(Bytes::from(rec_bytes.clone()))
            } else {
                UploadSource::File(staging.join(&e.path))
            };
            if e.lfs {
                objs.push(LfsObject {
                    oid: e.oid.clone(),
                    size: e.size,
                    source,
                });
                ops.push(CommitOperation::Lfs {
                    path: e.path.clone(),
                    sha256: e.oid.clone(),
                    size: Some(e.size),
                });
            } else {
                let content = match source {
                    UploadSource::Bytes(b) => b,
                    UploadSource::File(p) => Bytes::from(
                        std::fs::read(&p)
                            .map_err(|source| CandidateError::Io { path: p, source })?,
                    ),
                };
                report.regular_sent += 1;
                ops.push(CommitOperation::Regular {
                    path: e.path.clone(),
                    content,
                });
            }
        }
        report.lfs_sent += client.upload_lfs(repo, Some(&name), &objs).await?;
        let req = CommitRequest {
            summary: format!("minirun candidate: {} files", ops.len()),
            description: String::new(),
            parent_commit: Some(head.clone()),
            operations: ops,
            create_pr: false,
        };
        head = client.commit_guarded(repo, &name, &req).await?.commit_oid;
        report.commits += 1;
        for e in batch {
            progress.advance(e.size);
            progress.item_done();
        }
    }
    progress.finish();
    // 4. Resolve to an immutable commit and require exactly the release there.
    let commit = client
        .revision_info(repo, &name, false)
        .await?
        .sha
        .unwrap_or_default();
    let got = record::tree_inventory(&client.list_tree(repo, &commit, None, true).await?);
    let diffs = record::differences(&expected, &got, 5);
    if !diffs.is_empty() || record::candidate_name(&got) != name {
        return Err(CandidateError::Inventory {
            candidate: name,
            commit,
            diffs: diffs.join("; "),
        });
    }
    report.commit = commit;
    Ok(report)
}
