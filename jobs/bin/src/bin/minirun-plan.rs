//! `minirun-plan pin | check | slices`: from a draft plan to a runnable one (docs/plan-tool.md).
//! `pin` resolves each upstream's revision on the hub to a commit and rewrites the plan with it,
//! comments kept; `check` reads the pinned upstream's tree and safetensors headers and reports what
//! the plan's units and rules match — exit 0 only when the plan would run; `slices` cuts the units
//! into worker slices whose peak disk fits a budget (docs/publish.md §9).
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use pipeline::cli::{self, Exit, HubArgs};
use pipeline::plan_tool::{self, check, pin, slices};

/// Pin a plan's upstream revisions, check a plan against its pinned upstream, and cut its units
/// into worker slices that fit a disk budget.
#[derive(Debug, Parser)]
#[command(name = "minirun-plan", version, after_help = pipeline::cli::ENV_HUB)]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Resolve each source's revision to a 40-hex commit on the hub and write it into the plan.
    Pin {
        /// The plan (TOML) to rewrite.
        plan: PathBuf,
        /// The branch, tag or commit to resolve for every selected source (default: re-confirm
        /// the commit the plan already pins; pin never guesses a branch).
        #[arg(long, value_name = "BRANCH_OR_COMMIT")]
        revision: Option<String>,
        /// Only this source (repeatable; `main` in a `[source]` plan).
        #[arg(long = "source", value_name = "NAME")]
        sources: Vec<String>,
        #[command(flatten)]
        hub: HubArgs,
        /// Resolve and print what would change; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print a JSON report (`minirun.plan-pin/1`).
        #[arg(long)]
        json: bool,
    },
    /// Read the pinned upstream's tree and headers and report what the plan's units and rules
    /// match; exit 0 only when the plan would run.
    Check {
        /// The plan (TOML) to check.
        plan: PathBuf,
        #[command(flatten)]
        hub: HubArgs,
        /// Print a JSON report (`minirun.plan-check/1`).
        #[arg(long)]
        json: bool,
    },
    /// Cut the plan's units into contiguous slices (`--units` selections) whose worker peak disk
    /// fits the budget: the fewest that fit, balanced. Reads the pinned tree and headers.
    Slices {
        /// The plan (TOML).
        plan: PathBuf,
        /// The most bytes one worker's work directory may hold (bytes, or K/M/G/T binary: 100G);
        /// default: the plan's `[run] disk_budget`.
        #[arg(long, value_name = "SIZE", value_parser = cli::parse_size)]
        disk_budget: Option<u64>,
        /// The most slices wanted (the matrix's width); refused, with the budget that would do,
        /// when the budget needs more.
        #[arg(long, value_name = "N")]
        max_slices: Option<usize>,
        /// Cut for one machine's disk-budgeted window (`ci/publish/step.sh PLAN window`), whose
        /// work directory keeps every reclaimed unit's journals and record: their allowance
        /// joins the fixed part.
        #[arg(long)]
        window: bool,
        #[command(flatten)]
        hub: HubArgs,
        /// Print only the selections, one per line (for a shell loop).
        #[arg(long, conflicts_with = "json")]
        lines: bool,
        /// Print a JSON report (`minirun.plan-slices/1`; `matrix` is a CI matrix).
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    match args.cmd {
        Cmd::Pin {
            plan,
            revision,
            sources,
            hub,
            dry_run,
            json,
        } => {
            let opts = pin::PinOpts {
                revision,
                sources,
                endpoint: hub.endpoint,
                dry_run,
            };
            plan_tool::finish(
                "plan-pin",
                pin::run(&plan, &opts),
                json,
                |r| r.render(),
                |_| Exit::Ok,
            )
        }
        Cmd::Check { plan, hub, json } => {
            let opts = check::CheckOpts {
                endpoint: hub.endpoint,
            };
            plan_tool::finish(
                "plan-check",
                check::run(&plan, &opts),
                json,
                |r| r.render(),
                |r| {
                    if r.would_run {
                        Exit::Ok
                    } else {
                        Exit::Failure
                    }
                },
            )
        }
        Cmd::Slices {
            plan,
            disk_budget,
            max_slices,
            window,
            hub,
            lines,
            json,
        } => {
            let opts = slices::SlicesOpts {
                disk_budget,
                max_slices,
                endpoint: hub.endpoint,
                window,
            };
            plan_tool::finish(
                "plan-slices",
                slices::run(&plan, &opts),
                json,
                |r| if lines { r.lines() } else { r.render() },
                |_| Exit::Ok,
            )
        }
    }
}
