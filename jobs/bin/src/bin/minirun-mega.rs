//! `minirun-mega convert | inspect | verify` — MEGA artifacts (docs/mega.md). Thin: the command
//! line is `tooling::mega::cli`, the operations `tooling::mega::ops`.

use std::process::ExitCode;

fn main() -> ExitCode {
    tooling::mega::cli::main()
}
