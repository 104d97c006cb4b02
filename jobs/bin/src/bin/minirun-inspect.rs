//! `minirun-inspect PATH [--json]`: show a plan (`.toml`: validated and expanded — units, rules,
//! draft status — or refused with its `file:line: key` error and exit 1), a tile container (header
//! and tiles), a unit manifest, an `index.json` (shape and identities), or the directory of one.
//! Exit 1 on anything it cannot read or recognise — an index.json of no known shape is still
//! printed first.
use clap::Parser;
use pipeline::cli::{emit, parse_args, print_error, Exit, Hint};
use std::path::PathBuf;
use std::process::ExitCode;

/// Inspect a Minirun plan or artifact file.
#[derive(Debug, Parser)]
#[command(name = "minirun-inspect", version, after_help = pipeline::cli::ENV_NONE)]
struct Args {
    /// The file to inspect: a plan (`.toml`), container (`.til`), `manifest.json`, `index.json`,
    /// or a unit/artifact directory.
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
    match pipeline::inspect_artifact::inspect_path(&args.path, args.json) {
        Ok(found) => {
            emit(&found.text);
            match found.refusal {
                None => Exit::Ok.into(),
                Some(e) => {
                    print_error(&e, e.hint());
                    Exit::Failure.into()
                }
            }
        }
        Err(e) => {
            print_error(&e, e.hint());
            Exit::Failure.into()
        }
    }
}
