//! The `minirun-verify` command line (`docs/verify.md`): arguments and dispatch, so the binary
//! stays a thin wrapper.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use super::list::ChatProbe;
use crate::cli::{self, Exit, Hint};

/// Verify a published Minirun artifact as a consumer.
#[derive(Debug, Parser)]
#[command(name = "minirun-verify", version, after_help = crate::cli::ENV_HUB)]
pub struct Args {
    /// List OWNER's repositories whose name ends in `-minirun` (all pages), each with whether it
    /// is verified here (in the Hugging Face cache, at the commit `main` names now) and
    /// chat-capable here (a runner for its family in this build). Reads; downloads nothing.
    #[arg(long, value_name = "OWNER")]
    pub list: Option<String>,
    /// Hub endpoint; else `HF_ENDPOINT`.
    #[arg(long, value_name = "URL", global = true)]
    pub endpoint: Option<String>,
    /// Print the report as JSON.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Resolve, download what is missing or failing, verify and record evidence.
    Pull {
        /// `owner/name`.
        repo: String,
        /// Branch, tag or commit (default `main`).
        #[arg(long, default_value = "main")]
        revision: String,
        /// The local copy (default: the Hugging Face cache, `$HF_HOME/hub/models--OWNER--NAME/
        /// snapshots/COMMIT`, where `minirun-run --repo` and `--list` look).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Downloads at once.
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=64))]
        workers: u16,
    },
    /// Verify a local copy against the pinned commit (no download unless `--repair`).
    Check {
        /// Re-download only the files that are missing or fail, then verify again.
        #[arg(long)]
        repair: bool,
        /// `owner/name`.
        repo: String,
        /// Branch, tag or commit (default `main`).
        #[arg(long, default_value = "main")]
        revision: String,
        /// The local copy.
        #[arg(long)]
        dir: PathBuf,
        /// Downloads at once (with `--repair`).
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=64))]
        workers: u16,
    },
    /// Verify a local copy from its unit manifests' digests (no network).
    Offline {
        /// The local copy.
        #[arg(long)]
        dir: PathBuf,
    },
}

/// Run `minirun-verify` with parsed arguments; the exit code follows `docs/verify.md` §1. `chat`
/// answers `--list`'s chat-capable column (the binary passes the runner's registry check).
pub fn main_with(args: &Args, chat: ChatProbe<'_>) -> ExitCode {
    let ep = args.endpoint.as_deref();
    if let Some(owner) = &args.list {
        let cache = super::cache::hub_cache(|k| std::env::var(k).ok());
        return match super::list::list_here(ep, owner, cache.as_deref(), chat) {
            Ok(repos) if args.json => {
                let v = serde_json::json!({"schema": "minirun.verify-list/2", "owner": owner, "repos": repos});
                cli::emit(&(serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"));
                Exit::Ok.into()
            }
            Ok(repos) => {
                cli::emit(&super::list::render(owner, &repos));
                Exit::Ok.into()
            }
            Err(e) => {
                cli::print_error(&e, e.hint());
                Exit::Failure.into()
            }
        };
    }
    let opts = |workers: u16| super::PullOpts {
        workers: usize::from(workers),
        progress: cli::progress_mode(args.json),
    };
    let result = match &args.cmd {
        Some(Cmd::Pull {
            repo,
            revision,
            dir: Some(dir),
            workers,
        }) => super::pull(ep, repo, revision, dir, true, &opts(*workers)),
        Some(Cmd::Pull {
            repo,
            revision,
            dir: None,
            workers,
        }) => super::cache::pull_cached(ep, repo, revision, &opts(*workers)).map(|c| {
            eprintln!("pulled into `{}`", c.dir.display());
            c.report
        }),
        Some(Cmd::Check {
            repo,
            revision,
            dir,
            repair,
            workers,
        }) => super::pull(ep, repo, revision, dir, *repair, &opts(*workers)),
        Some(Cmd::Offline { dir }) => super::verify_offline(dir),
        None => {
            eprintln!("error: give `--list OWNER` or a subcommand (pull, check, offline)");
            return Exit::Usage.into();
        }
    };
    match result {
        Ok(r) => {
            if args.json {
                let v = cli::with_schema("verify", 1, &r);
                cli::emit(&(serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"));
            } else {
                cli::emit(&r.render());
            }
            r.verdict.exit().into()
        }
        Err(e) => {
            cli::print_error(&e, e.hint());
            Exit::Failure.into()
        }
    }
}
