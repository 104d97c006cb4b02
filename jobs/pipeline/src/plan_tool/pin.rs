//! `minirun-plan pin`: resolve each upstream's revision on the hub to its 40-hex commit and
//! rewrite the plan with it, keeping every comment and the layout (`toml_edit`). It resolves only
//! what it is given — a `--revision` (branch, tag or commit) or the commit already in the plan —
//! and never guesses a branch; a repository or revision the hub does not have is refused.

use std::path::{Path, PathBuf};

use serde::Serialize;

use hub::client::HubClient;
use hub::RepoId;

use super::PlanToolError;
use crate::plan::{Plan, NULL_COMMIT};

/// Options of one pin run.
#[derive(Debug, Clone, Default)]
pub struct PinOpts {
    /// The branch, tag or commit to resolve (every selected source); `None`: re-confirm the
    /// commit each source already pins.
    pub revision: Option<String>,
    /// Only these sources (`[sources.NAME]`; `main` for a `[source]` plan); empty: all.
    pub sources: Vec<String>,
    /// `--endpoint`, else the plan's, else `HF_ENDPOINT`.
    pub endpoint: Option<String>,
    /// Resolve and print, write nothing.
    pub dry_run: bool,
}

/// What pin did to one source.
#[derive(Debug, Clone, Serialize)]
pub struct PinnedSource {
    /// Source name.
    pub source: String,
    /// The plan key that holds its revision (`source.revision`, `sources.dit.revision`).
    pub key: String,
    /// Repository id.
    pub repo: String,
    /// The revision that was resolved.
    pub requested: String,
    /// The commit before.
    pub from: String,
    /// The commit the hub resolved it to.
    pub to: String,
    /// Whether the plan changes.
    pub changed: bool,
}

/// The outcome of one pin run.
#[derive(Debug, Clone, Serialize)]
pub struct PinReport {
    /// The plan file.
    pub plan: PathBuf,
    /// The hub asked.
    pub endpoint: String,
    /// Each selected source.
    pub sources: Vec<PinnedSource>,
    /// Whether the plan file was rewritten (false on a dry run or when nothing changed).
    pub written: bool,
    /// A dry run.
    pub dry_run: bool,
}

impl PinReport {
    /// The readable form.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for s in &self.sources {
            let what = if s.changed {
                format!("{} → {}", short(&s.from), s.to)
            } else {
                format!("{} (unchanged)", s.to)
            };
            let via = if s.requested == s.to {
                String::new()
            } else {
                format!(" (resolved `{}`)", s.requested)
            };
            out.push_str(&format!("{} {}: {what}{via}\n", s.key, s.repo));
        }
        let plan = self.plan.display();
        out.push_str(&match (self.dry_run, self.written) {
            (true, _) => format!("dry run: `{plan}` not written\n"),
            (false, true) => format!("wrote `{plan}`\n"),
            (false, false) => format!("`{plan}` already pins these commits; nothing written\n"),
        });
        out.push_str(&format!(
            "next: minirun-plan check {plan} (reads the pinned tree and headers)\n"
        ));
        out
    }
}

fn short(commit: &str) -> String {
    if commit == NULL_COMMIT {
        "(null commit)".into()
    } else {
        commit.to_owned()
    }
}

/// Resolve and rewrite the plan at `path`.
pub fn run(path: &Path, opts: &PinOpts) -> Result<PinReport, PlanToolError> {
    let plan = Plan::load(path)?;
    let text = std::fs::read_to_string(path).map_err(|source| PlanToolError::Io {
        what: "read",
        path: path.to_owned(),
        source,
    })?;
    for name in &opts.sources {
        if plan.source(name).is_none() {
            let known: Vec<&str> = plan.sources.iter().map(|s| s.name.as_str()).collect();
            return Err(PlanToolError::Usage(format!(
                "plan `{}` has no source `{name}` (its sources: {})",
                path.display(),
                known.join(", ")
            )));
        }
    }
    let (client, rt) = super::connect(&plan, opts.endpoint.as_deref())?;
    let mut sources = Vec::new();
    for src in &plan.sources {
        if !opts.sources.is_empty() && !opts.sources.contains(&src.name) {
            continue;
        }
        let current = src.revision.as_str();
        let requested = match (&opts.revision, current == NULL_COMMIT) {
            (Some(r), _) => r.clone(),
            (None, false) => current.to_owned(),
            (None, true) => {
                return Err(PlanToolError::Usage(format!(
                    "`{}`: `{}.revision` is the null commit, so there is nothing to resolve; pass --revision BRANCH_OR_COMMIT (pin never guesses a branch)",
                    path.display(),
                    src.key
                )))
            }
        };
        let to = rt.block_on(resolve(&client, src.repo.as_str(), &requested))?;
        sources.push(PinnedSource {
            source: src.name.clone(),
            key: format!("{}.revision", src.key),
            repo: src.repo.as_str().to_owned(),
            changed: to != current,
            requested,
            from: current.to_owned(),
            to,
        });
    }
    let changed = sources.iter().any(|s| s.changed);
    let mut written = false;
    if changed {
        let new_text = rewrite(&text, path, &sources)?;
        // The rewritten plan must still be a plan: refuse to write one that is not.
        Plan::parse(&new_text, path)?;
        if !opts.dry_run {
            ledger::write_atomic(path, new_text.as_bytes())?;
            written = true;
        }
    }
    Ok(PinReport {
        plan: path.to_owned(),
        endpoint: client.endpoint().to_owned(),
        sources,
        written,
        dry_run: opts.dry_run,
    })
}

/// The commit `revision` of `repo` resolves to on the hub.
async fn resolve(client: &HubClient, repo: &str, revision: &str) -> Result<String, PlanToolError> {
    let id = RepoId::model(repo).map_err(PlanToolError::Usage)?;
    let info = client
        .revision_info(&id, revision, false)
        .await
        .map_err(|source| PlanToolError::Hub {
            what: format!("failed to resolve revision `{revision}` of `{repo}`"),
            source: Box::new(source),
        })?;
    let sha = info.sha.unwrap_or_default();
    if crate::plan::CommitSha::new(&sha).is_err() {
        return Err(PlanToolError::Upstream(format!(
            "the hub answered revision `{revision}` of `{repo}` without a 40-hex commit (`{sha}`)"
        )));
    }
    if names::is_commit_id(revision) && sha != revision {
        return Err(PlanToolError::Upstream(format!(
            "the hub resolved commit `{revision}` of `{repo}` to a different commit `{sha}`"
        )));
    }
    Ok(sha)
}

/// `text` with each changed source's `revision` replaced, comments and layout kept.
fn rewrite(text: &str, path: &Path, sources: &[PinnedSource]) -> Result<String, PlanToolError> {
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| {
        PlanToolError::Usage(format!("`{}` does not parse as TOML: {e}", path.display()))
    })?;
    for s in sources.iter().filter(|s| s.changed) {
        let slot = revision_slot(&mut doc, &s.key).ok_or_else(|| {
            PlanToolError::Usage(format!(
                "`{}`: no `{}` string to rewrite (write it as `revision = \"…\"`)",
                path.display(),
                s.key
            ))
        })?;
        let decor = slot.decor().clone();
        *slot = toml_edit::Value::from(s.to.as_str());
        *slot.decor_mut() = decor;
    }
    Ok(doc.to_string())
}

/// The string value at dotted `key` (`source.revision`, `sources.dit.revision`).
fn revision_slot<'d>(
    doc: &'d mut toml_edit::DocumentMut,
    key: &str,
) -> Option<&'d mut toml_edit::Value> {
    let mut parts = key.split('.').peekable();
    let mut item = doc.as_item_mut();
    while let Some(part) = parts.next() {
        let next = item.get_mut(part)?;
        if parts.peek().is_none() {
            return next.as_value_mut().filter(|v| v.is_str());
        }
        item = next;
    }
    None
}
