//! `minirun-promote`: one commit on the public branch copying the complete release from the
//! immutable candidate commit, guarded by the head it observed (seed 001, "The Hub protocol";
//! hub-protocol.md §8; `docs/publish.md` §4).
//!
//! Needs only the plan and the token. The candidate is `--candidate NAME` or found from the plan:
//! every `candidate-*` branch whose release record matches the plan (plan name, family, target
//! repo and branch, upstream `repo@revision`s) and whose tree recomputes its own name. LFS files
//! become `lfsFile` lines reusing the candidate's oids (no size: a same-repo copy), regular files
//! are re-sent from the candidate's bytes (their git SHA-1 checked), and public paths outside the
//! release are deleted. More than [`MAX_OPERATIONS`] operations are refused before anything is
//! sent; a 412 (the head moved) is exit 1 and never retried; the returned commit is inventoried.
//! If the public head, as observed by this run, already holds exactly the chosen candidate's
//! release, nothing is sent (a re-run after a lost response). Promote keeps no journal of its own:
//! what the public branch holds is asked of the hub on every run, never remembered. Before the
//! branch moves (and on a re-run that finds it published), the candidate's index and unit
//! manifests are reopened through the production readers and checked against its tree without
//! downloading its LFS payloads ([`reread`]).

pub mod reread;

use std::collections::BTreeMap;

use hub::client::{CommitOperation, CommitRequest, HubClient, HubError};
use hub::protocol::RepoId;
use serde::Serialize;

use crate::candidate::record::{
    self, Inventory, ReleaseRecord, GITATTRIBUTES, PREFIX, RECORD_PATH,
};
use crate::plan::{Plan, PlanError};
use crate::progress::Counter;

/// The checked platform commit limit the protocol fails closed above (seed 001).
pub const MAX_OPERATIONS: usize = 25_000;

/// Options of one promotion.
#[derive(Default)]
pub struct PromoteOpts {
    /// `--endpoint`, else the plan's, else `HF_ENDPOINT`.
    pub endpoint: Option<String>,
    /// `--work-dir`, else the plan's: only to read which candidate this directory uploaded
    /// (its candidate journal), which picks among several candidates matching the plan.
    pub work_dir: Option<std::path::PathBuf>,
    /// `--candidate NAME`, else found from the plan.
    pub candidate: Option<String>,
    /// `--dry-run`: say what would be committed, send nothing that writes.
    pub dry_run: bool,
    /// Test hook: runs after the head was observed and before the commit is sent.
    pub before_commit: Option<Box<dyn Fn() + Send + Sync>>,
    /// Progress on stderr: each step, and the regular files copied through the client.
    pub progress: crate::progress::ProgressMode,
    /// `--rate-limit-wait` (`None`: [`crate::patience::DEFAULT_WAIT`]): how long the commit may
    /// wait out the hub's long rate limits.
    pub rate_limit_wait: Option<std::time::Duration>,
}

/// What a promotion did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PromoteReport {
    /// The repository.
    pub repo: String,
    /// The public branch.
    pub branch: String,
    /// The candidate branch used.
    pub candidate: String,
    /// Its immutable commit.
    pub candidate_commit: String,
    /// The head observed before the commit.
    pub observed_head: String,
    /// The public commit holding the release.
    pub commit: String,
    /// Files copied.
    pub copied: usize,
    /// Stale paths deleted.
    pub deleted: usize,
    /// True when the release already was the head (no commit sent).
    pub already_published: bool,
    /// `--dry-run`: the report says what would be committed; nothing was sent.
    pub dry_run: bool,
    /// The metadata re-read: the index and unit manifests reopened, the files they vouch for.
    pub reread: reread::Reread,
}

impl crate::cli::Report for PromoteReport {
    fn text(&self) -> String {
        self.render()
    }
}

impl PromoteReport {
    /// A readable summary.
    pub fn render(&self) -> String {
        let mut out = self.render_outcome();
        let r = &self.reread;
        out.push_str(&format!(
            "promote: metadata re-read: `index.json` ({}) and {} unit manifests reopened; {} files ({} B) agree with them, {} B downloaded\n",
            r.index_shape, r.units, r.files, r.bytes_vouched, r.bytes_downloaded
        ));
        out
    }

    fn render_outcome(&self) -> String {
        if self.dry_run {
            return format!(
                "promote (dry run): would commit the release of {} ({}) onto `{}` branch `{}` at {}: {} files copied, {} stale paths deleted; nothing sent\n",
                self.candidate,
                self.candidate_commit,
                self.repo,
                self.branch,
                if self.observed_head.is_empty() { "(no head yet)" } else { self.observed_head.as_str() },
                self.copied,
                self.deleted
            );
        }
        if self.already_published {
            format!(
                "promote: `{}` branch `{}` already holds the release of {} at {}; nothing sent\n",
                self.repo, self.branch, self.candidate, self.commit
            )
        } else {
            format!(
                "promote: `{}` branch `{}` {} → {}: {} files copied from {} ({}), {} stale paths deleted; inventory of the new head verified\n",
                self.repo, self.branch, self.observed_head, self.commit, self.copied,
                self.candidate, self.candidate_commit, self.deleted
            )
        }
    }
}

/// Why promotion failed (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum PromoteError {
    /// The plan was refused.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A hub call failed (a 412 is [`HubError::HeadMoved`]).
    #[error("hub request failed")]
    Hub(#[from] HubError),
    /// The target repo id is invalid.
    #[error("target repo `{0}` is invalid")]
    Repo(String),
    /// No candidate branch matches the plan.
    #[error("no candidate branch of `{0}` carries a release record matching this plan")]
    NoCandidate(String),
    /// The target repository does not exist (or this token cannot see it): nothing was uploaded
    /// for this plan.
    #[error("the target repository `{repo}` does not exist on {endpoint} (or the token cannot see it): no candidate of this plan was uploaded there")]
    NoRepository { repo: String, endpoint: String },
    /// Several do.
    #[error("several candidate branches match this plan: {0}")]
    Ambiguous(String),
    /// The candidate is not a complete, self-consistent release.
    #[error("candidate `{candidate}` is not a complete release: {why}")]
    BadCandidate {
        /// The branch.
        candidate: String,
        /// What is wrong.
        why: String,
    },
    /// Too many operations for one commit.
    #[error(
        "promotion needs {0} operations, above the limit of {MAX_OPERATIONS}; nothing was sent"
    )]
    TooManyOperations(usize),
    /// The returned commit is not the release.
    #[error("the public commit {commit} is not the expected release: {diffs}")]
    NotTheRelease {
        /// The commit.
        commit: String,
        /// The first differences.
        diffs: String,
    },
    /// The hub rate-limits the repository beyond `--rate-limit-wait`.
    #[error(transparent)]
    RateLimited(#[from] crate::patience::RateLimited),
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
}

impl From<crate::patience::Stopped> for PromoteError {
    fn from(s: crate::patience::Stopped) -> Self {
        match s {
            crate::patience::Stopped::Hub(e) => PromoteError::Hub(e),
            crate::patience::Stopped::RateLimited(r) => PromoteError::RateLimited(r),
        }
    }
}

impl crate::cli::Hint for PromoteError {
    fn hint(&self) -> Option<String> {
        match self {
            PromoteError::Hub(HubError::HeadMoved { .. }) => Some(
                "the public branch moved since it was observed; nothing was overwritten. Review the new head, then re-run promote".into(),
            ),
            PromoteError::Hub(HubError::CommitOutcomeUnknown { .. }) => Some(
                "the commit may or may not have happened; re-run promote: it detects a release that is already the head".into(),
            ),
            PromoteError::Ambiguous(_) => Some("name one with `--candidate NAME`".into()),
            PromoteError::NoCandidate(_) => Some("run `minirun-candidate-upload --plan P` first".into()),
            PromoteError::NoRepository { .. } => Some(
                "upload a candidate first: `minirun-candidate-upload --plan P` (after fetch, repack, gate and stage); check `--endpoint`/`HF_ENDPOINT`, the token and the plan's `[target] repo` if it was uploaded".into(),
            ),
            _ => None,
        }
    }
}

/// Run the promotion.
pub fn run(plan: &Plan, opts: &PromoteOpts) -> Result<PromoteReport, PromoteError> {
    let repo = crate::candidate::target_repo(plan).map_err(PromoteError::Repo)?;
    let work = crate::work::WorkDir::of_plan(plan, opts.work_dir.as_deref());
    let ledger_dir = work.ledger();
    // The work directory's own candidate, when its upload finished there: it picks among several
    // candidates matching the plan. It never answers for the hub: the branch and the public head
    // are asked below on every run.
    let own = ledger::Journal::load(&ledger_dir, crate::candidate::STAGE, "release")
        .ok()
        .flatten()
        .filter(|j| j.status == ledger::Status::Done)
        .and_then(|j| {
            j.extra
                .get("candidate")
                .and_then(|v| v.as_str())
                .map(String::from)
        });
    let endpoint = opts.endpoint.clone().or_else(|| plan.run.endpoint.clone());
    let client = HubClient::from_env(endpoint.as_deref())?;
    let rt = crate::runtime().map_err(PromoteError::Runtime)?;
    rt.block_on(promote(plan, opts, own.as_deref(), &client, &repo))
}

/// A candidate resolved to its commit, with its record and expected inventory.
struct Resolved {
    name: String,
    commit: String,
    expected: Inventory,
}

async fn resolve_candidate(
    client: &HubClient,
    repo: &RepoId,
    name: &str,
    commit: &str,
) -> Result<(ReleaseRecord, Resolved), PromoteError> {
    let bad = |why: String| PromoteError::BadCandidate {
        candidate: name.to_owned(),
        why,
    };
    let got = record::tree_inventory(&client.list_tree(repo, commit, None, true).await?);
    let rec_entry = got
        .get(RECORD_PATH)
        .cloned()
        .ok_or_else(|| bad(format!("it has no `{RECORD_PATH}`")))?;
    let (_, bytes) = client.download_bytes(repo, commit, RECORD_PATH).await?;
    let rec = ReleaseRecord::parse(&bytes).map_err(|e| bad(format!("`{RECORD_PATH}`: {e}")))?;
    let expected = rec.expected(rec_entry);
    let diffs = record::differences(&expected, &got, 5);
    if !diffs.is_empty() {
        return Err(bad(diffs.join("; ")));
    }
    if record::candidate_name(&got) != name {
        return Err(bad(format!(
            "its tree digests to `{}`, not its name",
            record::candidate_name(&got)
        )));
    }
    Ok((
        rec,
        Resolved {
            name: name.to_owned(),
            commit: commit.to_owned(),
            expected,
        },
    ))
}

/// The candidate (step 1), resolved to its immutable commit: `--candidate NAME`; else the one
/// branch whose release record matches the plan; where several match, the one this work
/// directory uploaded (`own`, from its candidate journal).
async fn choose_candidate(
    plan: &Plan,
    opts: &PromoteOpts,
    own: Option<&str>,
    client: &HubClient,
    repo: &RepoId,
    refs: &hub::protocol::Refs,
) -> Result<Resolved, PromoteError> {
    let mut found = Vec::new();
    for r in refs.branches.iter().filter(|r| r.name.starts_with(PREFIX)) {
        if opts.candidate.as_deref().is_some_and(|c| c != r.name) {
            continue;
        }
        match resolve_candidate(client, repo, &r.name, &r.target_commit).await {
            Ok((rec, res)) if record::matches_plan(&rec, plan) || opts.candidate.is_some() => {
                found.push(res)
            }
            Ok(_) => {}
            Err(e) if opts.candidate.is_some() => return Err(e),
            Err(e) => tracing::warn!(candidate = %r.name, error = %e, "skipping candidate"),
        }
    }
    if found.len() > 1 {
        if let Some(i) = found.iter().position(|c| Some(c.name.as_str()) == own) {
            return Ok(found.swap_remove(i));
        }
    }
    match found.len() {
        0 => Err(match &opts.candidate {
            Some(c) => PromoteError::BadCandidate {
                candidate: c.clone(),
                why: "no such branch".into(),
            },
            None => PromoteError::NoCandidate(repo.id()),
        }),
        1 => Ok(found.remove(0)),
        _ => Err(PromoteError::Ambiguous(
            found
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        )),
    }
}

async fn promote(
    plan: &Plan,
    opts: &PromoteOpts,
    own: Option<&str>,
    client: &HubClient,
    repo: &RepoId,
) -> Result<PromoteReport, PromoteError> {
    let branch = plan.target.branch.as_str();
    let steps = Counter::new("promote", "steps", 0, opts.progress);
    let refs = client.list_refs(repo, false).await.map_err(|e| {
        if e.is_repo_not_found() {
            PromoteError::NoRepository {
                repo: repo.id(),
                endpoint: client.endpoint().to_owned(),
            }
        } else {
            e.into()
        }
    })?;
    let cand = choose_candidate(plan, opts, own, client, repo, &refs).await?;
    steps.note(&format!(
        "candidate {} resolved to {}: {} files, inventory checked",
        cand.name,
        cand.commit,
        cand.expected.len()
    ));
    let (reread, fetched) = reread_candidate(client, repo, &cand).await?;
    steps.note(&format!(
        "metadata re-read: {} unit manifests, {} files agree",
        reread.units, reread.files
    ));
    // 2. The public head and its inventory, as observed now (never as remembered).
    let head = refs
        .branches
        .iter()
        .find(|r| r.name == branch)
        .map(|r| r.target_commit.clone())
        .unwrap_or_default();
    let public = if head.is_empty() {
        Inventory::new()
    } else {
        record::tree_inventory(&client.list_tree(repo, &head, None, true).await?)
    };
    if record::differences(&cand.expected, &public, 1).is_empty() {
        return Ok(PromoteReport {
            repo: repo.id(),
            branch: branch.into(),
            candidate: cand.name,
            candidate_commit: cand.commit,
            observed_head: head.clone(),
            commit: head,
            already_published: true,
            reread,
            ..PromoteReport::default()
        });
    }
    // 3. The operations, counted before anything is sent.
    let stale: Vec<String> = public
        .keys()
        .filter(|p| !cand.expected.contains_key(*p) && p.as_str() != GITATTRIBUTES)
        .cloned()
        .collect();
    let n_ops = cand.expected.len() + stale.len();
    if n_ops > MAX_OPERATIONS {
        return Err(PromoteError::TooManyOperations(n_ops));
    }
    let mut report = PromoteReport {
        repo: repo.id(),
        branch: branch.into(),
        candidate: cand.name.clone(),
        candidate_commit: cand.commit.clone(),
        observed_head: head.clone(),
        copied: cand.expected.len(),
        deleted: stale.len(),
        reread,
        ..PromoteReport::default()
    };
    if opts.dry_run {
        report.dry_run = true;
        return Ok(report);
    }
    steps.note(&format!(
        "branch `{branch}` at {}: {} files; {} to copy, {} to delete",
        if head.is_empty() {
            "(none)"
        } else {
            head.as_str()
        },
        public.len(),
        report.copied,
        report.deleted
    ));
    let mut ops = copy_operations(client, repo, &cand, fetched, opts.progress).await?;
    ops.extend(
        stale
            .into_iter()
            .map(|path| CommitOperation::DeleteFile { path }),
    );
    if let Some(hook) = &opts.before_commit {
        hook();
    }
    let req = CommitRequest {
        summary: format!("minirun: publish {}", cand.name),
        description: format!(
            "Release {} copied from candidate {} at {}.",
            plan.name, cand.name, cand.commit
        ),
        parent_commit: (!head.is_empty()).then(|| head.clone()),
        operations: ops,
        create_pr: false,
    };
    steps.note(&format!("sending one commit of {n_ops} operations"));
    // A long 429 is waited out (the commit still guarded by the head observed: if it moved
    // meanwhile, the commit is refused and nothing is overwritten).
    let mut patience = crate::patience::Patience::new(
        "promote",
        opts.rate_limit_wait
            .unwrap_or(crate::patience::DEFAULT_WAIT),
        client.retry_policy().max_delay,
        opts.progress,
    );
    let ans = patience
        .run(|| client.commit_guarded(repo, branch, &req))
        .await?;
    steps.note(&format!("committed {}; listing its tree", ans.commit_oid));
    // 4. Inventory the returned commit.
    let got = record::tree_inventory(&client.list_tree(repo, &ans.commit_oid, None, true).await?);
    let diffs = record::differences(&cand.expected, &got, 5);
    if !diffs.is_empty() {
        return Err(PromoteError::NotTheRelease {
            commit: ans.commit_oid,
            diffs: diffs.join("; "),
        });
    }
    report.commit = ans.commit_oid;
    Ok(report)
}

/// Step 3 of the commit: one operation per candidate file — LFS files by oid, regular files with
/// the candidate's bytes (those the re-read fetched are not fetched twice), git SHA-1 checked.
async fn copy_operations(
    client: &HubClient,
    repo: &RepoId,
    cand: &Resolved,
    mut fetched: BTreeMap<String, Vec<u8>>,
    progress: crate::progress::ProgressMode,
) -> Result<Vec<CommitOperation>, PromoteError> {
    let regular = cand.expected.values().filter(|e| !e.lfs).count();
    let copies = Counter::new("promote", "regular files", regular as u64, progress);
    let mut ops = Vec::with_capacity(cand.expected.len());
    for e in cand.expected.values() {
        if e.lfs {
            ops.push(CommitOperation::Lfs {
                path: e.path.clone(),
                sha256: e.oid.clone(),
                size: None,
            });
            continue;
        }
        let data = match fetched.remove(&e.path) {
            Some(data) => data,
            None => client.download_bytes(repo, &cand.commit, &e.path).await?.1,
        };
        let oid = hub::protocol::git_blob_sha1(&data);
        if oid != e.oid {
            return Err(PromoteError::BadCandidate {
                candidate: cand.name.clone(),
                why: format!(
                    "`{}` downloaded with git oid {oid}, the tree says {}",
                    e.path, e.oid
                ),
            });
        }
        ops.push(CommitOperation::Regular {
            path: e.path.clone(),
            content: data.into(),
        });
        copies.done(&e.path, || "downloaded, git oid checked".into());
    }
    copies.finish();
    Ok(ops)
}

/// The candidate's index and unit manifests, and the regular files they name, downloaded from
/// its commit and checked ([`reread::check`]); the bytes are returned for the copy step.
async fn reread_candidate(
    client: &HubClient,
    repo: &RepoId,
    cand: &Resolved,
) -> Result<(reread::Reread, BTreeMap<String, Vec<u8>>), PromoteError> {
    let mut fetched = BTreeMap::new();
    for path in reread::metadata_paths(&cand.expected) {
        let (_, data) = client.download_bytes(repo, &cand.commit, &path).await?;
        fetched.insert(path, data);
    }
    let parsed = reread::Parsed::of(&fetched);
    for path in reread::regular_unit_files(&cand.expected, &parsed.manifests) {
        let (_, data) = client.download_bytes(repo, &cand.commit, &path).await?;
        fetched.insert(path, data);
    }
    let r = reread::check(&cand.expected, &fetched, parsed, 5).map_err(|problems| {
        PromoteError::BadCandidate {
            candidate: cand.name.clone(),
            why: format!(
                "its metadata does not read back through the production readers: {}",
                problems.join("; ")
            ),
        }
    })?;
    Ok((r, fetched))
}
