//! `minirun-fetch`: HTTP Range reads of exactly the bytes each selected unit of the plan needs,
//! journaled chunk by chunk so a killed run resumes from what the disk proves.
use std::process::ExitCode;

use clap::Parser;
use pipeline::cli::{self, HubArgs, StageArgs, UnitArgs};
use pipeline::fetch::{self, FetchOpts};
use pipeline::plan::Plan;

/// Fetch the byte ranges the plan's units need from its pinned upstream revision.
#[derive(Debug, Parser)]
#[command(name = "minirun-fetch", version, after_help = pipeline::cli::ENV_HUB)]
struct Args {
    #[command(flatten)]
    stage: StageArgs,
    #[command(flatten)]
    hub: HubArgs,
    #[command(flatten)]
    units: UnitArgs,
    /// Count a finished unit as done only after re-hashing its files.
    #[arg(long)]
    verify: bool,
    /// Fetch only the release-wide root files (tokenizer, configuration, licences, the plan's
    /// `files`) and the discovery record, no unit: the distributed join (docs/publish.md §9).
    #[arg(long, conflicts_with = "units")]
    root_files_only: bool,
    /// A disk-budgeted run (docs/publish.md §12): reserve the pending units' peak (fetched,
    /// release and ledger bytes) on top of what the work directory holds, before writing a byte;
    /// refused (exit 1) when that passes SIZE (bytes, or K/M/G/T binary: 100G).
    #[arg(long, value_name = "SIZE", value_parser = cli::parse_size)]
    disk_budget: Option<u64>,
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let run = || -> Result<fetch::FetchSummary, fetch::FetchError> {
        let plan = Plan::load(&args.stage.plan)?;
        let opts = FetchOpts {
            work_dir: args.stage.work_dir.clone(),
            endpoint: args.hub.endpoint.clone(),
            units: args.units.units.clone(),
            dry_run: args.stage.dry_run,
            verify: args.verify,
            progress: cli::progress_mode(args.stage.json),
            root_only: args.root_files_only,
            disk_budget: args.disk_budget,
        };
        fetch::run(&plan, &opts)
    };
    cli::finish_report("fetch", run(), args.stage.json)
}
