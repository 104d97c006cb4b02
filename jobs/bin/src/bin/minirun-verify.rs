//! `minirun-verify`: discover (`--list OWNER`), `pull`, `check` a local copy against a pinned
//! commit, or verify `offline` from the unit manifests. Exit 0 verified, 1 contradicted,
//! 2 no evidence / incomplete, 77 unsupported (docs/verify.md).
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use pipeline::cli::{self, Exit, Hint};
use pipeline::verify;

/// Verify a published Minirun artifact as a consumer.
#[derive(Debug, Parser)]
#[command(name = "minirun-verify", version)]
struct Args {
    /// List OWNER's repositories whose name ends in `-minirun` (all pages).
    #[arg(long, value_name = "OWNER")]
    list: Option<String>,
    /// Hub endpoint; else `HF_ENDPOINT`.
    #[arg(long, value_name = "URL", global = true)]
    endpoint: Option<String>,
    /// Print the report as JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Resolve, download what is missing or failing, verify and record evidence.
    Pull {
        /// `owner/name`.
        repo: String,
        /// Branch, tag or commit (default `main`).
        #[arg(long, default_value = "main")]
        revision: String,
        /// The local copy.
        #[arg(long)]
        dir: PathBuf,
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
    },
    /// Verify a local copy from its unit manifests' digests (no network).
    Offline {
        /// The local copy.
        #[arg(long)]
        dir: PathBuf,
    },
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let ep = args.endpoint.as_deref();
    if let Some(owner) = &args.list {
        return match verify::list(ep, owner) {
            Ok(repos) => {
                cli::emit(&repos.iter().map(|r| format!("{r}\n")).collect::<String>());
                Exit::Ok.into()
            }
            Err(e) => {
                cli::print_error(&e, e.hint());
                Exit::Failure.into()
            }
        };
    }
    let result = match &args.cmd {
        Some(Cmd::Pull {
            repo,
            revision,
            dir,
        }) => verify::pull(ep, repo, revision, dir, true),
        Some(Cmd::Check {
            repo,
            revision,
            dir,
            repair,
        }) => verify::pull(ep, repo, revision, dir, *repair),
        Some(Cmd::Offline { dir }) => verify::verify_offline(dir),
        None => {
            eprintln!("error: give `--list OWNER` or a subcommand (pull, check, offline)");
            return Exit::Usage.into();
        }
    };
    match result {
        Ok(r) => {
            if args.json {
                cli::emit(&(serde_json::to_string_pretty(&r).unwrap_or_default() + "\n"));
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
