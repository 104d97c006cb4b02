//! `minirun-verify`: the consumer side of publication (seed 001, "What the app requires of a
//! publication"; `docs/verify.md`). Discovery (`--list OWNER`), `pull` (resolve to an immutable
//! commit, download the complete tree resumably, verify, record evidence), `check` (verify a local
//! copy against a pinned commit), and `offline` (verify from the unit manifests' digests).
//!
//! Verdicts follow the gate table: 0 verified, 1 contradicted, 2 no evidence (or incomplete),
//! 77 unsupported here. Evidence is bound to filesystem objects ([`artifact::fsid`]) and to one commit.

pub mod cache;
pub mod cli;
pub mod list;
mod local;
mod pull;

use std::collections::BTreeSet;
use std::path::PathBuf;

use hub::client::{HubClient, HubError};
use hub::protocol::{RepoId, TreeEntry};
use serde::Serialize;

use crate::cli::Exit;

pub use local::{evidence_path, verify_local, verify_offline, Evidence, EvidenceFile};
pub use pull::{pull, pull_journal_path, PullOpts};

/// The verdict of a verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    /// Every file agreed.
    Verified,
    /// Unsupported on this system.
    Unsupported,
    /// No evidence, or the local copy is incomplete.
    NoEvidence,
    /// A file contradicted the published digest, or the tree is inconsistent.
    Contradicted,
}

impl Verdict {
    /// The exit code.
    pub fn exit(self) -> Exit {
        match self {
            Verdict::Verified => Exit::Ok,
            Verdict::Contradicted => Exit::Failure,
            Verdict::NoEvidence => Exit::Inconclusive,
            Verdict::Unsupported => Exit::Skip,
        }
    }
}

/// A verification report.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    /// The repository (`offline`: none).
    pub repo: Option<String>,
    /// The pinned commit.
    pub commit: Option<String>,
    /// The verdict.
    pub verdict: Verdict,
    /// Files checked by SHA-256 (LFS, or manifest entries offline).
    pub sha256_checked: usize,
    /// Files checked by git blob SHA-1 (regular files).
    pub git_sha1_checked: usize,
    /// Files whose evidence for this commit (or a killed pull's journal) still held (not re-read).
    pub evidence_reused: usize,
    /// Files this pull hashed as it wrote them, through the descriptor the evidence records.
    pub hashed_on_write: usize,
    /// Files downloaded.
    pub downloaded: usize,
    /// Bytes read and hashed from the local copy (files whose evidence held are not read).
    pub bytes_hashed: u64,
    /// Bytes of the files downloaded (hashed as written, not counted in `bytes_hashed`).
    pub bytes_downloaded: u64,
    /// Whether this run recorded the evidence the runner executes from: only `pull`/`check`
    /// against the hub's pinned tree can; `offline` never does.
    pub execution_authority: bool,
    /// Problems, one line each.
    pub problems: Vec<String>,
}

impl Verdict {
    /// The verdict as the gate table and the JSON report spell it (`VERIFIED`, …).
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Verified => "VERIFIED",
            Verdict::Unsupported => "UNSUPPORTED",
            Verdict::NoEvidence => "NOEVIDENCE",
            Verdict::Contradicted => "CONTRADICTED",
        }
    }
}

impl VerifyReport {
    /// An empty report for `repo` at `commit` (both `None` offline), verdict `VERIFIED` until a
    /// check says otherwise.
    pub fn new(repo: Option<String>, commit: Option<String>) -> VerifyReport {
        VerifyReport {
            repo,
            commit,
            verdict: Verdict::Verified,
            sha256_checked: 0,
            git_sha1_checked: 0,
            evidence_reused: 0,
            hashed_on_write: 0,
            downloaded: 0,
            bytes_hashed: 0,
            bytes_downloaded: 0,
            execution_authority: false,
            problems: Vec::new(),
        }
    }

    /// A readable summary.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for p in &self.problems {
            s.push_str(&format!("problem: {p}\n"));
        }
        if self.repo.is_none() {
            s.push_str(&format!(
                "verify offline: {} — {} files against their unit manifests' SHA-256, {} B hashed\n",
                self.verdict.name(),
                self.sha256_checked,
                self.bytes_hashed
            ));
            s.push_str("offline verification grants no execution authority: the runner runs only a copy with `minirun-verify pull` or `check` evidence against the hub's pinned tree\n");
            return s;
        }
        s.push_str(&format!(
            "verify {}@{}: {} — {} files by SHA-256 (LFS), {} by git blob SHA-1 (regular), {} by still-valid evidence, {} hashed as downloaded; {} B re-hashed locally, {} downloaded ({} B)\n",
            self.repo.as_deref().unwrap_or("-"),
            self.commit.as_deref().unwrap_or("-"),
            self.verdict.name(),
            self.sha256_checked,
            self.git_sha1_checked,
            self.evidence_reused,
            self.hashed_on_write,
            self.bytes_hashed,
            self.downloaded,
            self.bytes_downloaded
        ));
        if self.execution_authority {
            s.push_str("evidence recorded: the runner accepts this copy while its files stay the objects verified\n");
        }
        s
    }
}

/// Why verification could not run (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// A hub call failed.
    #[error("hub request failed")]
    Hub(#[from] HubError),
    /// A bad repo id.
    #[error("`{0}` is not a repository id")]
    Repo(String),
    /// Local I/O failed.
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
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// No cache directory can be named.
    #[error(
        "no Hugging Face cache: none of HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME and HOME is set"
    )]
    NoCache,
}

impl crate::cli::Hint for VerifyError {
    fn hint(&self) -> Option<String> {
        let VerifyError::Hub(e) = self else {
            return None;
        };
        if e.error_code() == Some("RevisionNotFound") {
            return Some("the repository has no such revision: leave `--revision` out for its `main` branch, or name a branch or full commit it has".into());
        }
        e.is_repo_not_found().then(|| {
            "nothing is published under that id here: check the id and `--endpoint`/`HF_ENDPOINT` (`minirun-verify --list OWNER` lists an owner's `-minirun` repositories); a release appears once `minirun-promote --plan P` has run".into()
        })
    }
}

/// A pinned remote tree: the commit, its files, and whether the tree equals the siblings.
pub struct Pinned {
    /// The repository.
    pub repo: RepoId,
    /// The immutable commit.
    pub commit: String,
    /// Its files (paginated tree, recursive).
    pub files: Vec<TreeEntry>,
    /// Why the tree and the siblings disagree, if they do.
    pub mismatch: Option<String>,
}

/// Resolve `rev` to an immutable commit and read its complete tree, checking that the paginated
/// tree's path set equals the revision's siblings set at that commit.
pub async fn pin(client: &HubClient, repo: &RepoId, rev: &str) -> Result<Pinned, HubError> {
    let info = client.revision_info(repo, rev, false).await?;
    let commit = info.sha.clone().unwrap_or_default();
    let at = client.revision_info(repo, &commit, true).await?;
    let tree: Vec<TreeEntry> = client
        .list_tree(repo, &commit, None, true)
        .await?
        .into_iter()
        .filter(TreeEntry::is_file)
        .collect();
    let a: BTreeSet<&str> = tree.iter().map(|e| e.path.as_str()).collect();
    let b: BTreeSet<&str> = at.siblings.iter().map(|s| s.rfilename.as_str()).collect();
    let mismatch = (a != b).then(|| {
        let only_tree: Vec<_> = a.difference(&b).take(3).collect();
        let only_sib: Vec<_> = b.difference(&a).take(3).collect();
        format!(
            "the tree ({} paths) and the siblings ({} paths) differ: only in the tree {only_tree:?}, only in the siblings {only_sib:?}",
            a.len(),
            b.len()
        )
    });
    Ok(Pinned {
        repo: repo.clone(),
        commit,
        files: tree,
        mismatch,
    })
}

/// `--list OWNER`: the owner's repositories whose name ends in `-minirun`, all pages.
pub fn list(endpoint: Option<&str>, owner: &str) -> Result<Vec<String>, VerifyError> {
    list_with(&HubClient::from_env(endpoint)?, owner)
}

/// [`list`] with a client the caller already has (`list::list_here` pins each repository with it).
fn list_with(client: &HubClient, owner: &str) -> Result<Vec<String>, VerifyError> {
    let rt = runtime()?;
    let all = rt.block_on(client.list_models(Some(owner), Some("-minirun")))?;
    Ok(all
        .into_iter()
        .filter(|m| {
            m.id.split_once('/')
                .is_some_and(|(o, n)| o == owner && n.ends_with("-minirun"))
        })
        .map(|m| m.id)
        .collect())
}

fn runtime() -> Result<&'static tokio::runtime::Runtime, VerifyError> {
    crate::runtime().map_err(VerifyError::Runtime)
}
