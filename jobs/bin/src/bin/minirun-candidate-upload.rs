//! `minirun-candidate-upload`: upload the staged release to its deterministic candidate branch
//! (resumable), resolve it to an immutable commit and require exactly the release there. Exit 0
//! done, 1 refused or failed (docs/publish.md).
use std::process::ExitCode;

use clap::Parser;
use pipeline::candidate::{self, CandidateOpts};
use pipeline::cli::{self, Exit, HubArgs, StageArgs};
use pipeline::plan::Plan;

/// Upload the staged release to its candidate branch.
#[derive(Debug, Parser)]
#[command(name = "minirun-candidate-upload", version, after_help = pipeline::cli::ENV_HUB)]
struct Args {
    #[command(flatten)]
    stage: StageArgs,
    #[command(flatten)]
    hub: HubArgs,
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let run = || -> Result<candidate::CandidateReport, candidate::CandidateError> {
        let plan = Plan::load(&args.stage.plan)?;
        let opts = CandidateOpts {
            work_dir: args.stage.work_dir.clone(),
            endpoint: args.hub.endpoint.clone(),
            dry_run: args.stage.dry_run,
            progress: cli::progress_mode(args.stage.json),
        };
        candidate::run(&plan, &opts)
    };
    cli::finish(
        "candidate-upload",
        run(),
        args.stage.json,
        |r| r.render(),
        |_| Exit::Ok,
    )
}
