//! `minirun-run` (docs/runner.md "minirun-run"): load a GGUF Llama-family model onto the wgpu
//! engine (resident or streamed), tokenize the prompt (optionally in the file's chat template),
//! prefill, decode greedily, print the continuation on stdout and tokens/s on stderr, and
//! optionally dump every step's logits as a float32 `.npy` [steps, vocab].

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;

use crate::engine::Engine;
use crate::error::RunError;
use crate::llama::{Logits, Runner, WeightMode};
use crate::model::LlamaModel;
use crate::tokenizer::Tokenizer;

/// Exit codes (the pipeline table's subset: 0 ok, 1 failure, 64 usage).
pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILURE: u8 = 1;
pub const EXIT_USAGE: u8 = 64;

/// Default streamed tile: 256 KiB of rows.
pub const DEFAULT_TILE_BYTES: usize = 256 * 1024;

#[derive(Debug, Parser)]
#[command(
    name = "minirun-run",
    about = "run a GGUF Llama-family model on the wgpu engine"
)]
pub struct RunArgs {
    /// The GGUF file (or the first part of a split).
    #[arg(
        long,
        required_unless_present = "artifact",
        conflicts_with = "artifact"
    )]
    pub model: Option<PathBuf>,
    /// A verified Minirun artifact directory (docs/runner.md "Verified-only execution").
    #[arg(long)]
    pub artifact: Option<PathBuf>,
    /// With --artifact: the commit to run (default: the only one with evidence).
    #[arg(long, requires = "artifact")]
    pub revision: Option<String>,
    /// The prompt text.
    #[arg(short = 'p', long = "prompt", default_value = "")]
    pub prompt: String,
    /// Token ids instead of a text prompt, comma-separated.
    #[arg(long = "prompt-ids", value_delimiter = ',')]
    pub prompt_ids: Vec<u32>,
    /// Tokens to generate.
    #[arg(short = 'n', default_value_t = 32)]
    pub n: usize,
    /// Greedy decoding (the only decoding implemented; accepted for explicitness).
    #[arg(long)]
    pub greedy: bool,
    /// Stream weights tile by tile from the file.
    #[arg(long, conflicts_with = "resident")]
    pub stream: bool,
    /// Upload every matrix once (the default).
    #[arg(long)]
    pub resident: bool,
    /// Streamed tile size in bytes (whole rows; rounded to 16 KiB slots).
    #[arg(long, default_value_t = DEFAULT_TILE_BYTES)]
    pub tile_bytes: usize,
    /// Write every step's logits as float32 .npy [steps, vocab].
    #[arg(long)]
    pub dump_logits: Option<PathBuf>,
    /// Wrap the prompt in the file's chat template (ChatML).
    #[arg(long)]
    pub chat: bool,
    /// A tokenizer.json to use instead of the GGUF vocabulary.
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Do not stop at the end-of-sequence token.
    #[arg(long)]
    pub ignore_eos: bool,
}

/// What a run produced.
pub struct RunOutput {
    pub prompt_ids: Vec<u32>,
    pub tokens: Vec<u32>,
    pub text: String,
    /// [steps, vocab], the first row after the prompt (kept only with --dump-logits).
    pub logits: Vec<Vec<f32>>,
    pub prefill_s: f64,
    pub decode_s: f64,
    pub tile_reads: u64,
}

/// Runs the model as `args` says on `engine`.
pub fn run(engine: &Engine, args: &RunArgs) -> Result<RunOutput, RunError> {
    let path = args.model.as_deref().ok_or_else(|| RunError::Model {
        path: String::new(),
        detail: "no --model given".into(),
    })?;
    let model = LlamaModel::open(path)?;
    let tok = match &args.tokenizer {
        Some(p) => Tokenizer::from_file(p, model.gguf.metadata())?,
        None => Tokenizer::from_gguf(model.gguf.metadata())?,
    };
    let prompt_ids = if args.prompt_ids.is_empty() {
        let text = if args.chat {
            tok.chat_prompt(&args.prompt)?
        } else {
            args.prompt.clone()
        };
        tok.encode(&text)?
    } else {
        args.prompt_ids.clone()
    };
    if prompt_ids.is_empty() {
        return Err(RunError::Tokenizer(
            "the prompt is empty: give -p TEXT or --prompt-ids".into(),
        ));
    }
    let mode = if args.stream {
        WeightMode::Streamed {
            tile_bytes: args.tile_bytes,
        }
    } else {
        WeightMode::Resident
    };
    let capacity = prompt_ids.len() + args.n;
    let mut runner = Runner::new(engine, &model, mode, capacity)?;
    let g = greedy(
        |ids| runner.forward(ids, Logits::Last),
        &prompt_ids,
        args,
        tok.eos,
    )?;
    Ok(RunOutput {
        text: tok.decode(&g.tokens)?,
        prompt_ids,
        tokens: g.tokens,
        logits: g.logits,
        prefill_s: g.prefill_s,
        decode_s: g.decode_s,
        tile_reads: runner.tile_reads(),
    })
}

/// What [`greedy`] decoded.
pub struct Greedy {
    pub tokens: Vec<u32>,
    /// The logits row before each token (only with `--dump-logits`).
    pub logits: Vec<Vec<f32>>,
    pub prefill_s: f64,
    pub decode_s: f64,
}

/// The greedy loop both `minirun-run` paths share: prefill `prompt_ids` through `forward` (which
/// returns the last position's logits), then `args.n` argmax tokens, stopping at `eos` unless
/// `--ignore-eos`.
pub fn greedy(
    mut forward: impl FnMut(&[u32]) -> Result<Vec<f32>, RunError>,
    prompt_ids: &[u32],
    args: &RunArgs,
    eos: Option<u32>,
) -> Result<Greedy, RunError> {
    let keep = args.dump_logits.is_some();
    let mut logits = Vec::new();
    let t0 = Instant::now();
    let mut last = forward(prompt_ids)?;
    let prefill_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let mut tokens = Vec::with_capacity(args.n);
    for step in 0..args.n {
        let next = kernels::reference::argmax(&last, last.len())
            .first()
            .copied()
            .unwrap_or(0);
        if keep {
            logits.push(std::mem::take(&mut last));
        }
        tokens.push(next);
        if (!args.ignore_eos && eos == Some(next)) || step + 1 == args.n {
            break;
        }
        last = forward(&[next])?;
    }
    Ok(Greedy {
        tokens,
        logits,
        prefill_s,
        decode_s: t1.elapsed().as_secs_f64(),
    })
}

/// The CLI: parse, run, print; returns the exit code.
pub fn main_with(argv: impl IntoIterator<Item = std::ffi::OsString>) -> u8 {
    let args = match RunArgs::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    let result = if args.artifact.is_some() {
        crate::artifact::cli::run_artifact(&args)
    } else {
        Engine::new()
            .map_err(RunError::from)
            .and_then(|engine| run(&engine, &args))
    };
    let out = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "minirun-run: error: {e}");
            return EXIT_FAILURE;
        }
    };
    let _ = writeln!(std::io::stdout(), "{}", out.text);
    let decode_steps = out.tokens.len().saturating_sub(1);
    let reads = if args.stream {
        format!("; {} tile reads", out.tile_reads)
    } else {
        String::new()
    };
    let _ = writeln!(
        std::io::stderr(),
        "prefill {} tokens in {:.3} s ({:.2} tokens/s); decode {} tokens in {:.3} s ({:.2} tokens/s){reads}",
        out.prompt_ids.len(),
        out.prefill_s,
        out.prompt_ids.len() as f64 / out.prefill_s.max(1e-9),
        decode_steps,
        out.decode_s,
        decode_steps as f64 / out.decode_s.max(1e-9),
    );
    if let Some(path) = &args.dump_logits {
        let vocab = out.logits.first().map_or(0, Vec::len);
        let flat: Vec<f32> = out.logits.concat();
        let bytes = crate::npy::npy_f32(&[out.logits.len(), vocab], &flat);
        if let Err(e) = std::fs::write(path, bytes) {
            let _ = writeln!(
                std::io::stderr(),
                "minirun-run: error: write `{}`: {e}",
                path.display()
            );
            return EXIT_FAILURE;
        }
    }
    EXIT_OK
}
