//! `minirun-synth FAMILY --out DIR [--seed N] [--scale S] [--shape tiny|wide|real] [--json]`: write a
//! synthetic checkpoint in a family's real upstream layout (library: the `synth` crate; spec: docs/synth.md).

use clap::Parser;
use pipeline::cli::{self, Exit};
use std::path::PathBuf;
use std::process::ExitCode;
use synth::{Family, Shape};

/// Generate a deterministic synthetic checkpoint.
#[derive(Debug, Parser)]
#[command(name = "minirun-synth", version, after_help = pipeline::cli::ENV_NONE)]
struct Args {
    /// Checkpoint family.
    #[arg(value_enum)]
    family: Family,
    /// Output directory (created; must be empty).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Seed of every value; the same command gives byte-identical files.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Size multiplier for benchmarks (1 = tiny; 64 = a few GB).
    #[arg(long, default_value_t = 1)]
    scale: u64,
    /// Dimensions: `tiny` (tests), `wide` (DeepSeek V4 with hidden 1024 and real-sized
    /// 2048-wide experts, SCALE per layer: the pipeline benchmarks), `real` (the real per-layer
    /// dimensions, few layers, SCALE routed experts per MoE layer: the real-size runs),
    /// `experts` (DeepSeek V4: the tiny dimensions, four layers, exactly SCALE routed experts per
    /// layer: the stacked-expert publication test at 256).
    #[arg(long, value_enum, default_value_t = Shape::Tiny)]
    shape: Shape,
    /// Same as `--shape wide` (the benchmarks' recorded commands use it).
    #[arg(long, conflicts_with = "shape")]
    wide: bool,
    /// Print a JSON summary (every file with its size and SHA-256) on stdout.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let shape = if args.wide { Shape::Wide } else { args.shape };
    match synth::generate_shaped(args.family, &args.out, args.seed, args.scale, shape) {
        Ok(summary) => {
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&summary).unwrap_or_default()
                );
            } else {
                print!("{}", summary.sha256sum_lines());
                eprintln!(
                    "wrote {} files, {} tensors, {} bytes to `{}`",
                    summary.files.len(),
                    summary.tensors,
                    summary.total_bytes(),
                    summary.out.display()
                );
            }
            Exit::Ok.into()
        }
        Err(e) => {
            cli::print_error(&e, e.hint());
            Exit::Failure.into()
        }
    }
}
