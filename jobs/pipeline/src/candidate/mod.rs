//! `minirun-candidate-upload`: upload the staged release to its deterministic candidate branch,
//! resumably, then resolve the candidate to an immutable commit and require its remote inventory to
//! be exactly the release (seed 001, "The Hub protocol"; `docs/publish.md` §2–§3).
//!
//! The name comes from digests already recorded by stage (LFS SHA-256) or from the small regular
//! files themselves (git blob SHA-1), never from re-reading payloads. Upload only ever targets the
//! candidate branch: preupload → LFS batch (the hub answers no action for objects it already holds,
//! so a verified object is never sent again) → PUT → verify → commits of at most
//! [`FILES_PER_COMMIT`] files, each guarded by the branch head it follows. Files already on the
//! branch with the same oid are not sent. Candidate branches are never deleted.

pub mod record;
pub(crate) mod upload;

use std::path::PathBuf;

use serde::Serialize;

use crate::plan::{Plan, PlanError};

pub use record::{candidate_name, Inventory, InventoryEntry, ReleaseRecord, RECORD_PATH};
pub use upload::{modes, run};

/// Journal stage name.
pub const STAGE: &str = "candidate";
/// Files per commit on the candidate branch: the Hub's recommendation (docs/publish.md "A real
/// release on the Hub"; its hard limit is 25,000 LFS files a commit). A real V4 release is 649
/// files, 7 commits.
pub const FILES_PER_COMMIT: usize = 100;
/// Inline (regular-file) bytes per commit at most: the Hub takes up to 1 GB of inline content a
/// commit; a batch closes before passing this (every regular file of a release is small).
pub const INLINE_BYTES_PER_COMMIT: u64 = 256 << 20;

/// Options of one candidate upload.
#[derive(Debug, Clone)]
pub struct CandidateOpts {
    /// `--work-dir`, else the plan's.
    pub work_dir: Option<PathBuf>,
    /// `--endpoint`, else the plan's, else `HF_ENDPOINT`.
    pub endpoint: Option<String>,
    /// Compute and print the name; send nothing that writes.
    pub dry_run: bool,
    /// Progress on stderr while files are sent (committed batches: files and bytes).
    pub progress: crate::progress::ProgressMode,
    /// `--records DIR` (the distributed join): the units come from the workers' records, their LFS
    /// objects already on the hub; the staged tree holds only the release-wide files.
    pub records: Option<PathBuf>,
    /// `--rate-limit-wait`: how long in all to wait out long rate limits (`crate::patience`).
    pub rate_limit_wait: std::time::Duration,
    /// The hub client's retry policy, when not its default (tests shorten the longest backoff).
    pub retry: Option<hub::client::RetryPolicy>,
}

impl Default for CandidateOpts {
    fn default() -> Self {
        CandidateOpts {
            work_dir: None,
            endpoint: None,
            dry_run: false,
            progress: Default::default(),
            records: None,
            rate_limit_wait: crate::patience::DEFAULT_WAIT,
            retry: None,
        }
    }
}

/// What a candidate upload did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CandidateReport {
    /// The target repository.
    pub repo: String,
    /// The candidate branch.
    pub candidate: String,
    /// The immutable commit the candidate resolved to.
    pub commit: String,
    /// Files in the candidate (release + record).
    pub files: usize,
    /// Files already on the branch with the right oid (not sent).
    pub present: usize,
    /// LFS objects actually transferred.
    pub lfs_sent: usize,
    /// Regular files sent inline.
    pub regular_sent: usize,
    /// Commits made on the candidate branch.
    pub commits: usize,
    /// True when the journal named the candidate and the hub's branch still held exactly it: only
    /// one refs call and one tree listing were sent, nothing that writes.
    pub from_journal: bool,
    /// `--dry-run`: the report says what would be uploaded; nothing was sent.
    pub dry_run: bool,
    /// The target repository does not exist yet (a first publish): a real run creates it.
    pub new_repo: bool,
    /// Files per commit ([`FILES_PER_COMMIT`]).
    pub files_per_commit: usize,
    /// Seconds spent waiting out the hub's rate limits.
    pub rate_limited_s: u64,
}

impl crate::cli::Report for CandidateReport {
    fn text(&self) -> String {
        self.render()
    }
}

impl CandidateReport {
    /// A readable summary.
    pub fn render(&self) -> String {
        if self.dry_run && self.new_repo {
            return format!(
                "candidate-upload (dry run): `{}` does not exist yet: it would be created and {} files (the release and its record) uploaded to a new candidate branch, named once the hub says how it stores each file; nothing sent\n",
                self.repo, self.files
            );
        }
        if self.dry_run {
            return format!(
                "candidate-upload (dry run): would upload {} files to candidate {} of `{}`; nothing sent\n",
                self.files, self.candidate, self.repo
            );
        }
        format!(
            "candidate {} of `{}` at commit {}: {} files ({} already present, {} LFS objects sent, {} regular files sent, {} commits of at most {} files){}{}\n",
            self.candidate, self.repo, self.commit, self.files, self.present, self.lfs_sent,
            self.regular_sent, self.commits, self.files_per_commit,
            if self.rate_limited_s > 0 { format!("; {} s waiting out rate limits", self.rate_limited_s) } else { String::new() },
            if self.from_journal { "; journal up to date and the branch still holds it: nothing sent" } else { "" }
        )
    }
}

/// Why the candidate upload failed (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum CandidateError {
    /// The plan was refused.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// Journal trouble.
    #[error("candidate journal")]
    Ledger(#[from] ledger::LedgerError),
    /// Staging is not done or moved since.
    #[error("the staging tree is not reconciled (no finished stage journal, or a staged file changed since)")]
    NotStaged,
    /// The work directory was fetched for another pin of the plan's upstream.
    #[error(transparent)]
    OtherPin(#[from] crate::fetch::discover::OtherPin),
    /// Stage error while reading the stage journal.
    #[error(transparent)]
    Stage(#[from] crate::stage::StageError),
    /// A hub call failed.
    #[error("hub request failed")]
    Hub(#[from] hub::client::HubError),
    /// The repo id in the plan is not one the hub accepts.
    #[error("target repo `{0}` is invalid")]
    Repo(String),
    /// Reading a staged file failed.
    #[error("cannot read staged file `{path}`")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The hub did not answer for a file in preupload.
    #[error("preupload answer lacks `{0}`")]
    Preupload(String),
    /// No two of the hub's preupload answers agreed on how to store the files.
    #[error("{asks} preupload answers of the hub disagreed on how to store the files (a corrupting link or proxy?); run again")]
    PreuploadDisagrees {
        /// Calls made.
        asks: usize,
    },
    /// The resolved candidate is not exactly the release.
    #[error("candidate `{candidate}` at {commit} is not the release: {diffs}")]
    Inventory {
        /// The branch.
        candidate: String,
        /// The commit.
        commit: String,
        /// The first differences.
        diffs: String,
    },
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// The hub rate-limits the repository beyond `--rate-limit-wait`.
    #[error(transparent)]
    RateLimited(#[from] crate::patience::RateLimited),
    /// A distributed worker's slice is not what it should upload.
    #[error("distributed worker: {0}")]
    Worker(String),
    /// The join's unit records are missing, malformed or not this plan's.
    #[error(transparent)]
    Records(#[from] crate::distributed::RecordsError),
    /// Reclaiming a unit's bytes failed.
    #[error(transparent)]
    Reclaim(#[from] crate::distributed::reclaim::ReclaimError),
    /// LFS objects unit records name are not on the hub.
    #[error("the LFS object of `{path}` (sha256 {oid}) is not on the hub: {}", if .reopened.is_empty() {
            format!("re-run the worker of unit{} {} (`minirun-candidate-upload --units … --records …`)",
                if .units.len() > 1 { "s" } else { "" }, crate::cli::join_limited(.units, 8))
        } else {
            format!("units {} had been reclaimed in this work directory and are reopened: run the window again (`ci/publish/step.sh PLAN window`), which fetches them anew", crate::cli::join_limited(.reopened, 8))
        })]
    ObjectMissing {
        /// The first file missing.
        path: String,
        /// Its unit.
        unit: String,
        /// Its SHA-256.
        oid: String,
        /// Every unit with an object missing.
        units: Vec<String>,
        /// Those units that had been reclaimed in this work directory; their journals now say
        /// failed, so the next window fetches them again.
        reopened: Vec<String>,
    },
}

impl From<crate::patience::Stopped> for CandidateError {
    fn from(s: crate::patience::Stopped) -> Self {
        match s {
            crate::patience::Stopped::Hub(e) => CandidateError::Hub(e),
            crate::patience::Stopped::RateLimited(r) => CandidateError::RateLimited(r),
        }
    }
}

impl crate::cli::Hint for CandidateError {
    fn hint(&self) -> Option<String> {
        match self {
            CandidateError::NotStaged => Some("run `minirun-stage --plan P` first".into()),
            CandidateError::OtherPin(e) => Some(e.hint()),
            CandidateError::Hub(_) => Some(
                "check `--endpoint`/`HF_ENDPOINT` and `HF_TOKEN`; re-run to resume (what is on the branch is not sent again)".into(),
            ),
            _ => None,
        }
    }
}

/// The hub client for `endpoint` (else the plan's, else `HF_ENDPOINT`) and a current-thread
/// runtime to drive it.
pub(crate) fn client_and_runtime(
    plan: &Plan,
    endpoint: Option<&str>,
    retry: Option<&hub::client::RetryPolicy>,
) -> Result<(hub::client::HubClient, &'static tokio::runtime::Runtime), CandidateError> {
    let endpoint = endpoint
        .map(str::to_owned)
        .or_else(|| plan.run.endpoint.clone());
    let mut client = hub::client::HubClient::from_env(endpoint.as_deref())?;
    if let Some(r) = retry {
        client = client.with_retry(r.clone());
    }
    let rt = crate::runtime().map_err(CandidateError::Runtime)?;
    Ok((client, rt))
}

/// The hub repo id of the plan's target.
pub fn target_repo(plan: &Plan) -> Result<hub::protocol::RepoId, String> {
    hub::protocol::RepoId::model(plan.target.repo.as_str())
}
