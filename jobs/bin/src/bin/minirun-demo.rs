//! `minirun-demo [--work-dir DIR]`: the whole publication against an in-process hub, then a
//! consumer verification (docs/publish.md §6). DIR is kept; every stage can be re-run on it with
//! `--work-dir DIR`.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use pipeline::cli::{self, Exit, Hint};

/// Run fetch → repack → gate → stage → candidate-upload → promote → verify on a local hub.
#[derive(Debug, Parser)]
#[command(name = "minirun-demo", version)]
struct Args {
    /// Work directory (kept); default `work/demo`.
    #[arg(long, value_name = "DIR", default_value = "work/demo")]
    work_dir: PathBuf,
    /// The plan.
    #[arg(long, value_name = "PLAN", default_value = "plans/deepseek-v4.toml")]
    plan: PathBuf,
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let mut progress = |line: &str| eprintln!("[demo] {line}");
    match pipeline::demo::run(&args.plan, &args.work_dir, &mut progress) {
        Ok(s) => {
            cli::emit(&format!(
                "demo: published {} files as {} (candidate {}); consumer verdict {:?}\nwork dir kept: {} (re-run any stage with --work-dir; serve the hub again with `minirun-hub serve --root {}`)\n",
                s.files, s.commit, s.candidate, s.verdict, s.work_dir.display(), s.hub_root.display()
            ));
            s.verdict.exit().into()
        }
        Err(e) => {
            cli::print_error(&e, e.hint());
            Exit::Failure.into()
        }
    }
}
