//! Writes the deterministic tiny Qwen2 test models of `artifact::gguf::testmodel` (2-D weights
//! at f32 and at f16) into a directory: the inputs ci/oracles/llama_quantize.sh hands to
//! `llama-quantize --pure`. Usage: `cargo run -p artifact --example gguf_test_model -- OUT_DIR`.

use std::path::PathBuf;
use std::process::ExitCode;

use artifact::gguf::testmodel::write_test_model;
use artifact::gguf::GgmlType;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: gguf_test_model OUT_DIR");
        return ExitCode::from(64);
    };
    for (ty, name) in [(GgmlType::F32, "f32"), (GgmlType::F16, "f16")] {
        let p = dir.join(format!("tiny-qwen2-{name}.gguf"));
        match write_test_model(&p, ty) {
            Ok(n) => println!("{} {n}", p.display()),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
