//! `minirun-mega`'s command line: convert a safetensors checkpoint into a MEGA release, inspect a
//! release the way the hub card does (headers and index only), verify payload hashes with trust
//! reported apart. Thin layer over `tooling::mega::ops` (docs/mega.md §11). Exit: 0 ok,
//! 1 failure, 64 usage.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{convert::ConvertOptions, ops};
use artifact::mega::{MegaError, DEFAULT_ALIGNMENT};
use clap::{Parser, Subcommand};
use contract::{parse_args, print_error, Exit};

#[derive(Debug, Parser)]
#[command(
    name = "minirun-mega",
    version,
    about = "MEGA artifacts: convert, inspect, verify",
    after_help = contract::ENV_NONE
)]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Convert a safetensors file, `*.safetensors.index.json` or checkpoint directory.
    Convert {
        src: PathBuf,
        #[arg(long, value_name = "DIR")]
        output_dir: PathBuf,
        /// Payload alignment in bytes (power of two, 8..=2^30).
        #[arg(long, default_value_t = DEFAULT_ALIGNMENT, value_parser = ops::parse_alignment)]
        alignment: u64,
        /// Largest payload per shard in bytes (default: one shard).
        #[arg(long, value_name = "BYTES")]
        max_shard_size: Option<u64>,
        /// `general.name` (default: the source directory name).
        #[arg(long)]
        name: Option<String>,
    },
    /// Print the card of a release (directory, `.mega` or `.mega.index.json`).
    Inspect {
        path: PathBuf,
        /// Repository identity for the fallbacks (default: last two path components).
        #[arg(long)]
        repo: Option<String>,
    },
    /// Check every shard's payload CRC-32 and SHA-256; report trust separately.
    Verify { path: PathBuf },
}

fn run(cmd: Cmd) -> Result<ops::Outcome, MegaError> {
    match cmd {
        Cmd::Convert {
            src,
            output_dir,
            alignment,
            max_shard_size,
            name,
        } => {
            let opts = ConvertOptions {
                alignment,
                max_shard_size,
                name,
            };
            ops::convert_op(&src, &output_dir, &opts)
        }
        Cmd::Inspect { path, repo } => ops::inspect_op(&path, repo.as_deref()),
        Cmd::Verify { path } => ops::verify_op(&path),
    }
}

/// `minirun-mega`'s whole command line: parse, run, print, exit code.
pub fn main() -> ExitCode {
    let args: Args = match parse_args() {
        Ok(a) => a,
        Err(code) => return code,
    };
    match run(args.cmd) {
        Ok(out) => {
            print!("{}", out.text);
            if out.ok { Exit::Ok } else { Exit::Failure }.into()
        }
        Err(err) => {
            print_error(&err, err.hint());
            Exit::Failure.into()
        }
    }
}
