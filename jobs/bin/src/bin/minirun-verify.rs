//! `minirun-verify`: discover (`--list OWNER`), `pull`, `check [--repair]` a local copy against a
//! pinned commit, or verify `offline` from the unit manifests. Exit 0 verified, 1 contradicted,
//! 2 no evidence / incomplete, 77 unsupported (docs/verify.md). `--list`'s chat-capable column
//! asks the runner's registry (`runner::open::chat_here`).
use std::process::ExitCode;

use pipeline::cli;
use pipeline::verify::cli::{main_with, Args};

fn main() -> ExitCode {
    match cli::parse_args::<Args>() {
        Ok(a) => main_with(&a, &runner::open::chat_here),
        Err(code) => code,
    }
}
