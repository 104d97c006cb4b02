//! `minirun-promote`: one guarded commit copying the complete release from its immutable
//! candidate onto the public branch. Needs only the plan and the token. Exit 0 published (or
//! already published), 1 refused or failed (docs/publish.md).
use std::process::ExitCode;

use clap::Parser;
use pipeline::cli::{self, HubArgs, RateLimitArgs, StageArgs};
use pipeline::plan::Plan;
use pipeline::promote::{self, PromoteOpts};

/// Promote the plan's candidate to the public branch.
#[derive(Debug, Parser)]
#[command(name = "minirun-promote", version, after_help = pipeline::cli::ENV_PUBLISH)]
struct Args {
    #[command(flatten)]
    stage: StageArgs,
    #[command(flatten)]
    hub: HubArgs,
    #[command(flatten)]
    rate_limit: RateLimitArgs,
    /// The candidate branch; default: the one whose release record matches the plan.
    #[arg(long, value_name = "NAME")]
    candidate: Option<String>,
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let wait = match args.rate_limit.wait() {
        Ok(w) => w,
        Err(e) => return cli::usage_error(&e),
    };
    let run = || -> Result<promote::PromoteReport, promote::PromoteError> {
        let plan = Plan::load(&args.stage.plan)?;
        let opts = PromoteOpts {
            endpoint: args.hub.endpoint.clone(),
            work_dir: args.stage.work_dir.clone(),
            candidate: args.candidate.clone(),
            dry_run: args.stage.dry_run,
            before_commit: None,
            progress: cli::progress_mode(args.stage.json),
            rate_limit_wait: Some(wait),
        };
        promote::run(&plan, &opts)
    };
    cli::finish_report("promote", run(), args.stage.json)
}
