//! `minirun-verify --list OWNER`: the owner's publications, each with the seeds' three separate
//! capabilities (seed 001, "What the app requires of a publication"; docs/verify.md §7b):
//!
//! - **discoverable**: owned by OWNER and named `*-minirun` (every listed repository is);
//! - **verified here**: the Hugging Face cache holds a snapshot of the commit `main` resolves to
//!   now, with complete evidence for that commit, and that evidence still holds for the current
//!   tree (a tree that gained a file makes an older copy incomplete; nothing is inherited);
//! - **chat-capable here**: verified here, and this build has a runner registered for the family
//!   the verified copy declares. That is runner code, so the binary passes the check in
//!   ([`ChatProbe`]); the pipeline knows no family.
//!
//! Nothing is downloaded or written: a copy without evidence is reported, not hashed.

use std::path::{Path, PathBuf};

use hub::client::HubClient;
use hub::protocol::RepoId;
use serde::Serialize;

#[cfg(doc)]
use super::cache::hub_cache;
use super::cache::repo_folder;
use super::{pin, Evidence, Pinned, Verdict, VerifyError};

/// Asks the runner whether the verified copy in `dir`, at `commit`, can be used for chat: the
/// family it runs as, or why not.
pub type ChatProbe<'a> = &'a dyn Fn(&Path, &str) -> Result<String, String>;

/// One capability: held or not, with what holds it (a commit, a family) or why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capability {
    /// Whether it holds.
    pub ok: bool,
    /// What holds it, or the reason it does not (with the command that would change that).
    pub detail: String,
}

impl Capability {
    fn yes(detail: impl Into<String>) -> Self {
        Capability {
            ok: true,
            detail: detail.into(),
        }
    }

    fn no(detail: impl Into<String>) -> Self {
        Capability {
            ok: false,
            detail: detail.into(),
        }
    }
}

/// One repository of the listing.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    /// `OWNER/NAME-minirun`.
    pub repo: String,
    /// The commit `main` resolves to now (`None` when it could not be pinned).
    pub commit: Option<String>,
    pub discoverable: Capability,
    pub verified_here: Capability,
    pub chat_here: Capability,
    /// The snapshot folder that was examined.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
}

/// Lists OWNER's `-minirun` repositories (all pages) and examines each against the Hugging Face
/// cache at `cache` (the CLI passes [`hub_cache`] of the environment; `None`: there is none).
pub fn list_here(
    endpoint: Option<&str>,
    owner: &str,
    cache: Option<&Path>,
    chat: ChatProbe<'_>,
) -> Result<Vec<Listed>, VerifyError> {
    let client = HubClient::from_env(endpoint)?;
    let ids = super::list_with(&client, owner)?;
    let rt = crate::runtime().map_err(VerifyError::Runtime)?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let repo = RepoId::model(&id).map_err(VerifyError::Repo)?;
        let pinned = rt.block_on(pin(&client, &repo, "main"));
        out.push(match pinned {
            Ok(p) => examine(&p, cache, chat)?,
            Err(e) => Listed {
                commit: None,
                discoverable: Capability::yes("listed"),
                verified_here: Capability::no(format!("`main` cannot be pinned: {e}")),
                chat_here: Capability::no("not verified here"),
                dir: None,
                repo: id,
            },
        });
    }
    Ok(out)
}

/// The capabilities of one pinned repository against the cache.
fn examine(
    pinned: &Pinned,
    cache: Option<&Path>,
    chat: ChatProbe<'_>,
) -> Result<Listed, VerifyError> {
    let id = pinned.repo.id();
    let dir = cache.map(|c| {
        repo_folder(c, &pinned.repo)
            .join("snapshots")
            .join(&pinned.commit)
    });
    let verified = match &dir {
        None => Capability::no("no Hugging Face cache: set HF_HOME or HF_HUB_CACHE"),
        Some(d) => verified_here(d, pinned)?,
    };
    let chat_here = match (&dir, verified.ok) {
        (Some(d), true) => match chat(d, &pinned.commit) {
            Ok(family) => Capability::yes(family),
            Err(why) => Capability::no(why),
        },
        _ => Capability::no("not verified here"),
    };
    Ok(Listed {
        repo: id,
        commit: Some(pinned.commit.clone()),
        discoverable: Capability::yes("listed"),
        verified_here: verified,
        chat_here,
        dir,
    })
}

/// Whether `dir` holds complete, still-holding evidence for the pinned tree.
fn verified_here(dir: &Path, pinned: &Pinned) -> Result<Capability, VerifyError> {
    let id = pinned.repo.id();
    let short = &pinned.commit[..pinned.commit.len().min(12)];
    let pull = format!("`minirun-verify pull {id}` or `minirun-run --repo {id}` makes one");
    if !dir.is_dir() {
        return Ok(Capability::no(format!("no copy of {short} here: {pull}")));
    }
    if Evidence::read(dir, &pinned.commit).is_err() {
        return Ok(Capability::no(format!(
            "the copy of {short} holds no complete evidence: {pull}"
        )));
    }
    let outcome = super::verify_local(dir, pinned, false, &Default::default())?;
    Ok(match outcome.report.verdict {
        Verdict::Verified => Capability::yes(pinned.commit.clone()),
        v => Capability::no(format!(
            "{}: {}; `minirun-verify check {id} --dir {} --repair` mends it",
            v.name(),
            outcome.report.problems.join("; "),
            dir.display()
        )),
    })
}

/// The listing as a table: one row per repository, then the reason behind each `no`.
pub fn render(owner: &str, rows: &[Listed]) -> String {
    if rows.is_empty() {
        return format!("no `-minirun` repositories under `{owner}`\n");
    }
    let w = rows.iter().map(|r| r.repo.len()).max().unwrap_or(4).max(4);
    let yn = |c: &Capability| if c.ok { "yes" } else { "no" };
    let mut out = format!("{:<w$}  DISCOVERABLE  VERIFIED HERE  CHAT HERE\n", "REPO");
    for r in rows {
        let chat = if r.chat_here.ok {
            format!("yes ({})", r.chat_here.detail)
        } else {
            "no".to_owned()
        };
        out.push_str(&format!(
            "{:<w$}  {:<12}  {:<13}  {chat}\n",
            r.repo,
            yn(&r.discoverable),
            yn(&r.verified_here)
        ));
    }
    // The reason behind each `no` (chat's only when the copy is verified: otherwise it is that).
    for r in rows {
        let why = if r.verified_here.ok {
            (!r.chat_here.ok).then_some(("chat-capable", &r.chat_here.detail))
        } else {
            Some(("verified", &r.verified_here.detail))
        };
        if let Some((what, detail)) = why {
            out.push_str(&format!("{}: not {what} here: {detail}\n", r.repo));
        }
    }
    out
}
