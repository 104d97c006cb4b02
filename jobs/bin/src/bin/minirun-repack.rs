//! `minirun-repack`: fetched upstream ranges → tile containers, plain streams, unit manifests,
//! and (once every unit is done, or with `--finalize`) index.json and the identity root files.
use std::process::ExitCode;

use clap::Parser;
use pipeline::cli::{self, StageArgs, UnitArgs};
use pipeline::plan::Plan;
use pipeline::repack::{self, RepackOpts};

/// Repack the plan's fetched units into the artifact tree.
#[derive(Debug, Parser)]
#[command(name = "minirun-repack", version, after_help = pipeline::cli::ENV_NONE)]
struct Args {
    #[command(flatten)]
    stage: StageArgs,
    #[command(flatten)]
    units: UnitArgs,
    /// Only write the release-wide files (every unit must already be repacked).
    #[arg(long)]
    finalize: bool,
    /// Count a finished unit as done only after re-hashing its files.
    #[arg(long)]
    verify: bool,
    /// With `--finalize`: the distributed join — the unit totals come from the workers' unit
    /// records in DIR, not from units on disk (docs/publish.md §9).
    #[arg(long, value_name = "DIR", requires = "finalize")]
    records: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let run = || -> Result<repack::RepackSummary, repack::RepackError> {
        let plan = Plan::load(&args.stage.plan)?;
        let opts = RepackOpts {
            work_dir: args.stage.work_dir.clone(),
            units: args.units.units.clone(),
            dry_run: args.stage.dry_run,
            verify: args.verify,
            finalize_only: args.finalize,
            records: args.records.clone(),
            progress: cli::progress_mode(args.stage.json),
        };
        repack::run(&plan, &opts)
    };
    cli::finish_report("repack", run(), args.stage.json)
}
