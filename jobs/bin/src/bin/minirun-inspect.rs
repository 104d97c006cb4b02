//! `minirun-inspect PATH [--json]`: show a plan (`.toml`: validated and expanded — units, rules,
//! draft status — or refused with its `file:line: key` error and exit 1). Containers, manifests
//! and index.json are dispatched here as their readers land; until then they are refused.
use clap::Parser;
use pipeline::cli::{parse_args, print_error, Exit, Hint};
use std::path::PathBuf;
use std::process::ExitCode;

/// Inspect a Minirun plan or artifact file.
#[derive(Debug, Parser)]
#[command(name = "minirun-inspect", version)]
struct Args {
    /// The file to inspect (`.toml` plan).
    path: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let args: Args = match parse_args() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let is_plan = args.path.extension().is_some_and(|e| e == "toml");
    if !is_plan {
        eprintln!(
            "error: `{}`: minirun-inspect reads plans (`.toml`) in this build; container, \
             manifest and index.json inspection is not available yet",
            args.path.display()
        );
        return Exit::Failure.into();
    }
    match pipeline::inspect::inspect_plan(&args.path, args.json) {
        Ok(text) => {
            print!("{text}");
            Exit::Ok.into()
        }
        Err(e) => {
            print_error(&e, e.hint());
            Exit::Failure.into()
        }
    }
}
