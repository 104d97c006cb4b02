//! Writes the deterministic tiny Qwen2 and Qwen3 test models of `tooling::gguf::testmodel` (2-D
//! weights at f32 and at f16) into a directory: the inputs ci/oracles/llama_quantize.sh hands to
//! `llama-quantize --pure`. Usage: `cargo run -p tooling --example gguf_test_model -- OUT_DIR`.

use std::path::PathBuf;
use std::process::ExitCode;

use artifact::gguf::GgmlType;
use tooling::gguf::testmodel::{write_test_model_arch, Arch};

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: gguf_test_model OUT_DIR");
        return ExitCode::from(64);
    };
    let models = [Arch::Qwen2, Arch::Qwen3]
        .into_iter()
        .flat_map(|a| [(a, GgmlType::F32, "f32"), (a, GgmlType::F16, "f16")]);
    for (arch, ty, name) in models {
        let p = dir.join(format!("tiny-{}-{name}.gguf", arch.name()));
        match write_test_model_arch(&p, ty, arch) {
            Ok(n) => println!("{} {n}", p.display()),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
