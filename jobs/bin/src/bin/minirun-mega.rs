//! `minirun-mega`: convert a safetensors checkpoint into a MEGA release, inspect a release the way
//! the hub card does (headers and index only), verify payload hashes and report trust separately.
//! Thin layer over `artifact::mega` (docs/mega.md). Exit: 0 ok, 1 failure/mismatch, 64 usage.
use std::path::PathBuf;
use std::process::ExitCode;

use artifact::mega::{self, convert::ConvertOptions, MegaError};
use clap::{Parser, Subcommand};
use pipeline::cli::{parse_args, print_error, Exit};

#[derive(Debug, Parser)]
#[command(
    name = "minirun-mega",
    version,
    about = "MEGA artifacts: convert, inspect, verify"
)]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Convert a safetensors checkpoint (file, directory or `model.safetensors.index.json`).
    Convert {
        src: PathBuf,
        #[arg(long, value_name = "DIR")]
        output_dir: PathBuf,
        /// Payload alignment in bytes (power of two, 8..=2^30).
        #[arg(long, default_value_t = mega::DEFAULT_ALIGNMENT, value_parser = alignment)]
        alignment: u64,
        /// Largest payload per shard in bytes; default one shard.
        #[arg(long, value_name = "BYTES")]
        max_shard_size: Option<u64>,
        /// `general.name`; default the source directory name.
        #[arg(long)]
        name: Option<String>,
    },
    /// Print the hub card of a release (directory, `.mega` or `.mega.index.json`).
    Inspect {
        path: PathBuf,
        /// Repository identity for the fallbacks; default the last two path components.
        #[arg(long)]
        repo: Option<String>,
    },
    /// Check payload CRC-32 and SHA-256 of every shard; report trust separately.
    Verify { path: PathBuf },
}

fn alignment(s: &str) -> Result<u64, String> {
    let v: u64 = s.parse().map_err(|e| format!("{e}"))?;
    mega::layout::check_alignment(v).map_err(|e| e.to_string())?;
    Ok(v)
}

fn run(args: Args) -> Result<Exit, MegaError> {
    match args.cmd {
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
            let summary = mega::convert::convert(&src, &output_dir, &opts)?;
            print!("{}", mega::convert::render_summary(&summary));
            Ok(Exit::Ok)
        }
        Cmd::Inspect { path, repo } => {
            let card = mega::inspect(&path, repo.as_deref())?;
            print!("{}", card.render());
            Ok(if card.failure.is_some() {
                Exit::Failure
            } else {
                Exit::Ok
            })
        }
        Cmd::Verify { path } => {
            let report = mega::verify(&path)?;
            print!("{}", report.render());
            Ok(if report.ok() { Exit::Ok } else { Exit::Failure })
        }
    }
}

fn main() -> ExitCode {
    let args: Args = match parse_args() {
        Ok(a) => a,
        Err(code) => return code,
    };
    match run(args) {
        Ok(exit) => exit.into(),
        Err(err) => {
            print_error(&err, None);
            Exit::Failure.into()
        }
    }
}
