//! `minirun-gguf quantize` as a library call (`tooling::run_quantize`, the code the binary runs),
//! for the file-level benchmark against `llama-quantize` (ci/bench/gguf_quantize_file.sh,
//! docs/bench/gguf-quantize.md): a release build of the `artifact` crate alone.
//! Usage: `cargo run --release -p tooling --example gguf_quantize_file -- IN OUT TYPE [--pure] [--allow-requantize]`.

use std::path::PathBuf;
use std::process::ExitCode;

use artifact::gguf::quant::FmaContract;
use tooling::gguf::ops::{run_quantize, QuantizeOpts};

fn main() -> ExitCode {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 3 {
        eprintln!("usage: gguf_quantize_file IN OUT TYPE [--pure]");
        return ExitCode::from(64);
    }
    let opts = QuantizeOpts {
        input: PathBuf::from(&a[0]),
        output: PathBuf::from(&a[1]),
        target: Some(a[2].clone()),
        split_max_size: None,
        fma: FmaContract::Off,
        pure: a.iter().any(|s| s == "--pure"),
        mixture: false,
        allow_requantize: a.iter().any(|s| s == "--allow-requantize"),
    };
    match run_quantize(&opts) {
        Ok(r) => {
            for l in r.lines {
                println!("{l}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
