//! `minirun-demo [--work-dir DIR]`: the whole publication against an in-process hub, then a
//! consumer verification (docs/publish.md §7). DIR is kept; every stage can be re-run on it with
//! `--work-dir DIR`.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use pipeline::cli::{self, Exit, Hint};

/// Run fetch → repack → gate → stage → candidate-upload → promote → verify on a local hub.
#[derive(Debug, Parser)]
#[command(name = "minirun-demo", version, after_help = pipeline::cli::ENV_DEMO)]
struct Args {
    /// Work directory (kept); default `work/demo`.
    #[arg(long, value_name = "DIR", default_value = "work/demo")]
    work_dir: PathBuf,
    /// The plan (default: `plans/deepseek-v4.toml` as compiled in, written to
    /// `DIR/demo/plan.toml` for re-running a stage with `--plan`).
    #[arg(long, value_name = "PLAN")]
    plan: Option<PathBuf>,
    /// Tokens to generate from the verified artifact at the end (0: none).
    #[arg(long, value_name = "N", default_value_t = 4)]
    generate: usize,
    /// The prompt for that generation.
    #[arg(long, value_name = "TEXT", default_value = "The model")]
    prompt: String,
    /// The graphics backends the generation may run on, comma-separated (`vulkan`, `metal`,
    /// `dx12`, `gl`; default WGPU_BACKEND, else Vulkan, Metal and DX12).
    #[arg(long, value_name = "LIST", value_parser = runner::open::parse_backend)]
    backend: Option<String>,
}

fn main() -> ExitCode {
    // First, before any thread exists (it may set an environment variable).
    runner::open::quiet_headless();
    let args = match cli::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let mut progress = |line: &str| eprintln!("[demo] {line}");
    // The device is checked before anything is published: a machine without one learns it in
    // seconds, not after the pipeline ran.
    if args.generate > 0 {
        match runner::open::probe(args.backend.as_deref()) {
            Ok(adapter) => progress(&format!(
                "{adapter}; the run step compiles the kernels' shaders first ({})",
                first_compile(&adapter)
            )),
            Err(e) => {
                cli::print_error(
                    &e,
                    Some("or run `minirun-demo --generate 0` to publish and verify without running the model".into()),
                );
                return Exit::Failure.into();
            }
        }
    }
    let plan = match args
        .plan
        .clone()
        .map_or_else(|| demo::write_default_plan(&args.work_dir), Ok)
    {
        Ok(p) => p,
        Err(e) => {
            cli::print_error(&e, None);
            return Exit::Failure.into();
        }
    };
    match demo::run(&plan, &args.work_dir, &mut progress) {
        Ok(s) => {
            cli::emit(&format!(
                "demo: published {} files as {} (candidate {}); consumer verdict {:?}\nwork dir kept: {} (re-run any stage with --work-dir; serve the hub again with `minirun-hub serve --root {}`)\n",
                s.files, s.commit, s.candidate, s.verdict, s.work_dir.display(), s.hub_root.display()
            ));
            if args.generate == 0 || s.verdict.exit() != Exit::Ok {
                return s.verdict.exit().into();
            }
            eprintln!(
                "[demo] run the verified artifact: minirun-run --artifact {} -p {:?} -n {}",
                s.consumer.display(),
                args.prompt,
                args.generate
            );
            match runner::run::generate(
                &s.consumer,
                &args.prompt,
                args.generate,
                args.backend.as_deref(),
            ) {
                Ok(o) => {
                    cli::emit(&format!(
                        "demo: generated {} tokens {:?} from the verified artifact: {:?} + {:?}\n",
                        o.tokens.len(),
                        o.tokens,
                        args.prompt,
                        o.text
                    ));
                    Exit::Ok.into()
                }
                Err(e) => {
                    cli::print_error(&e, Some("the artifact is verified; running it needs a wgpu adapter (Mesa lavapipe: apt-get install mesa-vulkan-drivers), or pass --generate 0".into()));
                    Exit::Failure.into()
                }
            }
        }
        Err(e) => {
            cli::print_error(&e, e.hint());
            Exit::Failure.into()
        }
    }
}

/// What a first run's shader compilation costs on `adapter`'s kind (measured on the demo's
/// artifact, docs/runner.md "Device and backend").
fn first_compile(adapter: &runner::open::Adapter) -> &'static str {
    match (adapter.backend, adapter.device_type) {
        ("gl", _) => "about 3 minutes on OpenGL, told every 5 s",
        (_, "cpu") => "about 2 s on a CPU adapter",
        _ => "about a second or less on a GPU",
    }
}
