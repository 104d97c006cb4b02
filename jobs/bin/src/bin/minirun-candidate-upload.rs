//! `minirun-candidate-upload`: upload the staged release to its deterministic candidate branch
//! (resumable), resolve it to an immutable commit and require exactly the release there. Exit 0
//! done, 1 refused or failed (docs/publish.md).
use std::process::ExitCode;

use clap::Parser;
use pipeline::candidate::{self, CandidateOpts};
use pipeline::cli::{self, HubArgs, RateLimitArgs, StageArgs};
use pipeline::distributed;
use pipeline::plan::Plan;

/// Upload the staged release to its candidate branch.
#[derive(Debug, Parser)]
#[command(name = "minirun-candidate-upload", version, after_help = pipeline::cli::ENV_PUBLISH)]
struct Args {
    #[command(flatten)]
    stage: StageArgs,
    #[command(flatten)]
    hub: HubArgs,
    #[command(flatten)]
    rate_limit: RateLimitArgs,
    /// A distributed worker: upload the LFS objects of these staged units and write their unit
    /// records to `--records` (no commit; docs/publish.md §9).
    #[arg(long, value_name = "SEL", requires = "records")]
    units: Option<String>,
    /// Where unit records are written (with `--units`) or read (the join, without `--units`).
    #[arg(long, value_name = "DIR")]
    records: Option<std::path::PathBuf>,
    /// A disk-budgeted run (docs/publish.md §12): once the records are written and the hub's LFS
    /// batch confirms every object of a unit, remove the unit's fetched and release bytes; its
    /// journals say `reclaimed`.
    #[arg(long, requires = "units")]
    reclaim: bool,
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
    if let (Some(units), Some(records)) = (&args.units, &args.records) {
        let run = || -> Result<distributed::WorkerReport, candidate::CandidateError> {
            let plan = Plan::load(&args.stage.plan)?;
            let opts = distributed::WorkerOpts {
                work_dir: args.stage.work_dir.clone(),
                endpoint: args.hub.endpoint.clone(),
                units: units.clone(),
                records: records.clone(),
                dry_run: args.stage.dry_run,
                reclaim: args.reclaim,
            };
            distributed::publish_units(&plan, &opts)
        };
        return cli::finish_report("candidate-upload-worker", run(), args.stage.json);
    }
    let run = || -> Result<candidate::CandidateReport, candidate::CandidateError> {
        let plan = Plan::load(&args.stage.plan)?;
        let opts = CandidateOpts {
            work_dir: args.stage.work_dir.clone(),
            endpoint: args.hub.endpoint.clone(),
            dry_run: args.stage.dry_run,
            progress: cli::progress_mode(args.stage.json),
            records: args.records.clone(),
            rate_limit_wait: wait,
            retry: None,
        };
        candidate::run(&plan, &opts)
    };
    cli::finish_report("candidate-upload", run(), args.stage.json)
}
