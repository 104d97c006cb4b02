//! `minirun-mega convert | inspect | verify` — MEGA artifacts (docs/mega.md). Thin: the command
//! line is `pipeline::mega_tool`, the operations `artifact::mega::ops`.

use std::process::ExitCode;

fn main() -> ExitCode {
    pipeline::mega_tool::main()
}
