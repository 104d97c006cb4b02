//! `minirun-gguf split | quantize | convert | info` — GGUF tooling (docs/gguf.md). Thin: the
//! command line is `tooling::gguf::cli`, the operations `tooling::gguf` over `artifact::gguf`.

use std::process::ExitCode;

fn main() -> ExitCode {
    tooling::gguf::cli::main()
}
