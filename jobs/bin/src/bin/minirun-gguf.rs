//! `minirun-gguf split | quantize | convert | info` — GGUF tooling (docs/gguf.md). Thin: the
//! command line is `pipeline::gguf_tool`, the operations `artifact::gguf`.

use std::process::ExitCode;

fn main() -> ExitCode {
    pipeline::gguf_tool::main()
}
