//! `minirun-stage`: reconcile `<work>/staging/` with the gated release (by recorded identities,
//! nothing identical re-copied) and reopen it through the production reader. Exit 0 staged,
//! 1 refused (docs/publish.md).
use std::process::ExitCode;

use clap::Parser;
use pipeline::cli::{self, Exit, StageArgs};
use pipeline::plan::Plan;
use pipeline::stage::{self, StageOpts};

/// Stage the plan's gated release.
#[derive(Debug, Parser)]
#[command(name = "minirun-stage", version, after_help = pipeline::cli::ENV_NONE)]
struct Args {
    #[command(flatten)]
    stage: StageArgs,
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
        };
        stage::run(&plan, &opts)
    };
    cli::finish(
        "stage",
        run(),
        args.stage.json,
        |r| r.render(),
        |_| Exit::Ok,
    )
}
