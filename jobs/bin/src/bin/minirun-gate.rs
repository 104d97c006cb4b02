//! `minirun-gate`: read everything back against recorded digests, reopen it through the production
//! reader and compare every tensor with the upstream bytes. Exit 0 PASS / 1 FAIL /
//! 2 INCONCLUSIVE / 77 SKIP (docs/gate.md).
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use pipeline::cli::{self, StageArgs, UnitArgs};
use pipeline::gate::{self, GateOpts};
use pipeline::plan::Plan;

/// Gate the plan's repacked units.
#[derive(Debug, Parser)]
#[command(name = "minirun-gate", version, after_help = pipeline::cli::ENV_NONE)]
struct Args {
    #[command(flatten)]
    stage: StageArgs,
    #[command(flatten)]
    units: UnitArgs,
    /// Where to write the JSON report (default: <work>/reports/gate.json).
    #[arg(long, value_name = "PATH")]
    report: Option<PathBuf>,
    /// Disable the central byte comparison with the upstream bytes (exit 77 at best).
    #[arg(long)]
    no_upstream_compare: bool,
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let run = || -> Result<gate::GateReport, gate::GateError> {
        let plan = Plan::load(&args.stage.plan)?;
        let opts = GateOpts {
            work_dir: args.stage.work_dir.clone(),
            units: args.units.units.clone(),
            report: args.report.clone(),
            no_upstream_compare: args.no_upstream_compare,
            dry_run: args.stage.dry_run,
            progress: cli::progress_mode(args.stage.json),
        };
        gate::run(&plan, &opts)
    };
    cli::finish_report("gate", run(), args.stage.json)
}
