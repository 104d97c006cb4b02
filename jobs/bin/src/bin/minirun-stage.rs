//! `minirun-stage`: reconcile `<work>/staging/` with the gated release (by recorded identities,
//! nothing identical re-copied) and reopen it through the production reader. Exit 0 staged,
//! 1 refused (docs/publish.md).
use std::process::ExitCode;

use clap::Parser;
use pipeline::cli::{self, StageArgs};
use pipeline::plan::Plan;
use pipeline::stage::{self, StageOpts};

/// Stage the plan's gated release.
#[derive(Debug, Parser)]
#[command(name = "minirun-stage", version, after_help = pipeline::cli::ENV_NONE)]
struct Args {
    #[command(flatten)]
    stage: StageArgs,
    /// A distributed worker's slice: stage and read back only these units (docs/publish.md §9).
    #[arg(long, value_name = "SEL", conflicts_with = "records")]
    units: Option<String>,
    /// The distributed join: the units are the workers' unit records in DIR; the release holds
    /// only the release-wide files.
    #[arg(long, value_name = "DIR")]
    records: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let run = || -> Result<stage::StageReport, stage::StageError> {
        let plan = Plan::load(&args.stage.plan)?;
        let opts = StageOpts {
            work_dir: args.stage.work_dir.clone(),
            dry_run: args.stage.dry_run,
            progress: cli::progress_mode(args.stage.json),
            units: args.units.clone(),
            records: args.records.clone(),
        };
        stage::run(&plan, &opts)
    };
    cli::finish_report("stage", run(), args.stage.json)
}
