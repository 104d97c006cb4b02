//! The `minirun-gguf` command line: clap definitions for `split`, `quantize`, `convert`,
//! `synth` and `info`, dispatched to `tooling::gguf::ops` / `tooling::gguf::convert`. Flags the seed
//! calls required (`--type`, `--max-size`) are optional here on purpose, so their refusal text
//! and exit code 1 come from the library, not from clap (seed 003 §3; docs/gguf.md).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::convert::{run_convert, ConvertOpts};
use super::ops::{self as gguf_ops, QuantizeOpts, SplitOpts, ToolError};
use artifact::gguf::quant::FmaContract;

/// `minirun-gguf`: GGUF split, quantize, convert and inspect.
#[derive(Debug, clap::Parser)]
#[command(name = "minirun-gguf", version, after_help = contract::ENV_NONE)]
pub struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, clap::Subcommand)]
enum Cmd {
    /// Split a single-file GGUF into parts (verbatim tensor copy).
    Split {
        /// The single-file GGUF.
        input: PathBuf,
        /// The output directory.
        out_dir: PathBuf,
        /// Largest data size of one part: bytes or 1K / 512M / 2G (required).
        #[arg(long)]
        max_size: Option<String>,
        /// Output name stem (default: the input file name minus `.gguf`).
        #[arg(long)]
        stem: Option<String>,
    },
    /// Re-encode a single-file GGUF to a quant type or float cast.
    Quantize {
        /// The single-file source GGUF.
        input: PathBuf,
        /// The output GGUF (parts are written beside it with --split-max-size).
        output: PathBuf,
        /// Target: q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K, f16, f32, or a llama-quantize
        /// file type (Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, Q8_0, …) (required).
        #[arg(long = "type")]
        target: Option<String>,
        /// Split the output into parts of at most this data size.
        #[arg(long)]
        split_max_size: Option<String>,
        /// Encoder arithmetic: `off` (x86-64 baseline ggml, gguf-py) or `fast` (contracted FMA).
        #[arg(long, default_value = "off", value_parser = ["off", "fast"])]
        fp_contract: String,
        /// llama-quantize --pure's whole-file rules (name rules, F16 fallback, no tied-embedding
        /// rule, loader tensor order, metadata order): the output is that tool's file, byte for byte.
        #[arg(long)]
        pure: bool,
        /// llama-quantize's whole file with its per-tensor mixture (what `llama-quantize IN OUT
        /// TYPE` writes, e.g. attn_v/ffn_down bumps); implied by a mixture name (Q4_K_M, Q5_K_S, …).
        #[arg(long)]
        llama_mixture: bool,
        /// Re-encode tensors that are already quantized (refused by default, as llama-quantize).
        #[arg(long)]
        allow_requantize: bool,
    },
    /// Convert a Qwen2 / Qwen3 HuggingFace safetensors checkpoint to GGUF.
    Convert {
        /// The HuggingFace model directory.
        hf_dir: PathBuf,
        /// The output GGUF.
        output: PathBuf,
        /// f16 (default), bf16 or f32.
        #[arg(long)]
        outtype: Option<String>,
        /// Split the output into parts of at most this data size.
        #[arg(long)]
        split_max_size: Option<String>,
    },
    /// Write a GGUF with another file's metadata and tensor index (names, dims, types) and
    /// generated weights; the other file may be cut at its data section (docs/gguf.md
    /// "synth --like").
    Synth {
        /// The GGUF whose header is copied: a whole file or its first `data_start` bytes.
        #[arg(long)]
        like: PathBuf,
        /// The output GGUF.
        #[arg(long)]
        out: PathBuf,
        /// Seed of the generated weights (the same header and seed give the same bytes).
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Print a model's metadata (typed JSON values, arrays cut at 16 with their count) and
    /// tensor index as JSON, schema `minirun.gguf-info/1` (docs/gguf.md).
    Info {
        /// A GGUF file or the first part of a split.
        input: PathBuf,
        /// Accepted for the common CLI contract: `info` always prints JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Run the tool over process arguments; returns the exit code.
pub fn main() -> ExitCode {
    let cli: Cli = match contract::parse_args() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let input = cli.cmd.gguf_input().map(Path::to_path_buf);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            contract::print_error(&e, wrong_tool(&e, input.as_deref()));
            ExitCode::from(e.exit_code())
        }
    }
}

impl Cmd {
    /// The GGUF file the subcommand reads, if it reads one.
    fn gguf_input(&self) -> Option<&Path> {
        match self {
            Cmd::Split { input, .. } | Cmd::Quantize { input, .. } | Cmd::Info { input, .. } => {
                Some(input)
            }
            Cmd::Synth { like, .. } => Some(like),
            Cmd::Convert { .. } => None,
        }
    }
}

/// When the GGUF reader refused `input` and it is a file of another format another tool reads,
/// the hint naming that tool (docs/cli.md "First mistakes").
fn wrong_tool(e: &ToolError, input: Option<&Path>) -> Option<String> {
    let input = input.filter(|_| matches!(e, ToolError::Gguf { .. }))?;
    match artifact::sniff::sniff(input)? {
        artifact::sniff::Kind::Gguf => None,
        kind => Some(kind.hint(input)),
    }
}

fn run(cli: Cli) -> Result<(), ToolError> {
    match cli.cmd {
        Cmd::Split {
            input,
            out_dir,
            max_size,
            stem,
        } => {
            let paths = gguf_ops::run_split(&SplitOpts {
                input,
                out_dir,
                max_size,
                stem,
            })?;
            for p in paths {
                println!("split: wrote {}", p.display());
            }
        }
        Cmd::Quantize {
            input,
            output,
            target,
            split_max_size,
            fp_contract,
            pure,
            llama_mixture,
            allow_requantize,
        } => {
            let fma = if fp_contract == "fast" {
                FmaContract::Fast
            } else {
                FmaContract::Off
            };
            let r = gguf_ops::run_quantize(&QuantizeOpts {
                input,
                output,
                target,
                split_max_size,
                fma,
                pure,
                mixture: llama_mixture,
                allow_requantize,
            })?;
            for l in r.lines {
                println!("{l}");
            }
            for p in r.outputs {
                println!("quantize: wrote {}", p.display());
            }
        }
        Cmd::Convert {
            hf_dir,
            output,
            outtype,
            split_max_size,
        } => {
            let r = run_convert(&ConvertOpts {
                hf_dir,
                output,
                outtype,
                split_max_size,
            })?;
            for l in r.lines {
                println!("{l}");
            }
        }
        Cmd::Synth { like, out, seed } => {
            let r = super::like::synth_like(&like, &out, seed)?;
            println!(
                "synth: wrote {} ({} tensors, {} bytes)",
                out.display(),
                r.tensors,
                r.bytes
            );
        }
        Cmd::Info { input, json: _ } => {
            let v = gguf_ops::run_info(&input)?;
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        }
    }
    Ok(())
}
