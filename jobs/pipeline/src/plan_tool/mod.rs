//! `minirun-plan`: the operator's tools between a draft plan and a runnable one — [`pin`]
//! resolves each upstream's revision to a commit and writes it into the plan, [`check`] reads
//! the pinned upstream's tree and headers and reports everything the plan's units and rules get
//! wrong, [`slices`] cuts the units into worker slices that fit a disk budget (docs/plan-tool.md).

pub mod check;
pub mod pin;
pub mod slices;

use std::path::{Path, PathBuf};

use crate::fetch::FetchError;
use crate::plan::{Plan, PlanError, PlanStatus, NULL_COMMIT};

/// The commands that turn draft `plan` (read from `path`) into a runnable one, in order: pin
/// (`--revision main` where a source holds the null commit — the operator may name another
/// branch or commit — else re-confirming the pinned commits or moving them), then check. Empty for a plan that
/// is not a draft. `minirun-inspect` prints them.
pub fn finish_commands(plan: &Plan, path: &Path) -> Vec<String> {
    if !matches!(plan.status, PlanStatus::Draft { .. }) {
        return Vec::new();
    }
    let p = path.display();
    let unpinned = plan
        .sources
        .iter()
        .any(|s| s.revision.as_str() == NULL_COMMIT);
    vec![
        if unpinned {
            format!("minirun-plan pin {p} --revision main")
        } else {
            format!("minirun-plan pin {p} [--revision BRANCH_OR_COMMIT]   (re-confirms the pinned commit, or moves it)")
        },
        format!("minirun-plan check {p}"),
    ]
}

/// Why a plan tool failed.
#[derive(Debug, thiserror::Error)]
pub enum PlanToolError {
    /// The plan was refused.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// What was asked cannot be done as asked (a source the plan lacks, nothing to resolve).
    #[error("{0}")]
    Usage(String),
    /// A hub request failed (a repository or revision the hub does not have, a network fault).
    #[error("{what}")]
    Hub {
        /// What was being asked.
        what: String,
        /// The client's error (boxed: it is large and rare).
        #[source]
        source: Box<hub::HubError>,
    },
    /// The disk budget cannot be met as asked (a unit alone exceeds it, or more slices than
    /// allowed would be needed); the message says the budget that works.
    #[error("{0}")]
    Budget(String),
    /// The hub's answer contradicts the request or itself.
    #[error("{0}")]
    Upstream(String),
    /// Listing the upstream or reading a header failed (boxed: it is large and rare).
    #[error(transparent)]
    Fetch(Box<FetchError>),
    /// Writing the plan failed.
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
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
    /// The async runtime could not start.
    #[error("failed to start the async runtime")]
    Runtime(#[source] std::io::Error),
}

impl From<FetchError> for PlanToolError {
    fn from(e: FetchError) -> Self {
        PlanToolError::Fetch(Box::new(e))
    }
}

impl crate::cli::Hint for PlanToolError {
    fn hint(&self) -> Option<String> {
        match self {
            PlanToolError::Plan(e) => e.hint(),
            PlanToolError::Hub { source, .. } => Some(match source.as_ref() {
                hub::HubError::Http { status: 401 | 403 | 404, .. } => "check the repository id and revision, and that `HF_TOKEN` can read the repository (the hub answers 401/404 for a private one without a token)".into(),
                _ => "check `--endpoint`/`HF_ENDPOINT` and the network, then re-run".into(),
            }),
            PlanToolError::Fetch(e) => e.hint(),
            _ => None,
        }
    }
}

/// End `minirun-plan`: [`crate::cli::finish`], except that a request that cannot be done as
/// asked (a source the plan lacks, nothing to resolve) is a usage error (64).
pub fn finish<T: serde::Serialize>(
    name: &str,
    result: Result<T, PlanToolError>,
    json: bool,
    render: impl Fn(&T) -> String,
    exit: impl Fn(&T) -> crate::cli::Exit,
) -> std::process::ExitCode {
    use crate::cli::Hint as _;
    match result {
        Err(e @ PlanToolError::Usage(_)) => {
            crate::cli::print_error(&e, e.hint());
            crate::cli::Exit::Usage.into()
        }
        other => crate::cli::finish(name, 1, other, json, render, exit),
    }
}

/// Refuse a plan with a source still at the null commit: the tools that read the upstream need
/// a pin (`minirun-plan pin` first).
fn require_pinned(plan: &Plan, path: &Path) -> Result<(), PlanToolError> {
    match plan
        .sources
        .iter()
        .find(|s| s.revision.as_str() == NULL_COMMIT)
    {
        Some(src) => Err(PlanToolError::Usage(format!(
            "`{}`: `{}.revision` is the null commit; pin it first: minirun-plan pin {} --revision BRANCH_OR_COMMIT",
            path.display(),
            src.key,
            path.display()
        ))),
        None => Ok(()),
    }
}

/// The hub client (`--endpoint`, else the plan's, else `HF_ENDPOINT`) and the one runtime of a
/// plan-tool process.
fn connect(
    plan: &Plan,
    endpoint: Option<&str>,
) -> Result<(hub::HubClient, &'static tokio::runtime::Runtime), PlanToolError> {
    let endpoint = endpoint.or(plan.run.endpoint.as_deref());
    let client = hub::HubClient::from_env(endpoint).map_err(|source| PlanToolError::Hub {
        what: "failed to configure the hub client".into(),
        source: Box::new(source),
    })?;
    let rt = crate::runtime().map_err(PlanToolError::Runtime)?;
    Ok((client, rt))
}
