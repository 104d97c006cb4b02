//! `minirun-run` (docs/runner.md "minirun-run"): load a GGUF Llama-family model onto the wgpu
//! engine (resident or streamed), tokenize the prompt (optionally in the file's chat template),
//! prefill, decode greedily, print the continuation on stdout and tokens/s on stderr, and
//! optionally dump every step's logits as a float32 `.npy` [steps, vocab].

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;

use kernels::gpu::GpuStats;

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
    /// Print the engine's counters per decode step on stderr (submits, dispatches, bytes
    /// uploaded and read back, buffers and bind groups created, tile reads).
    #[arg(long)]
    pub stats: bool,
    /// How the matmul kernels map rows to invocations: `lanes` (a workgroup per row, for GPUs)
    /// or `rows` (an invocation per row, for CPU adapters such as lavapipe); both give the same
    /// bits. Default: by the adapter's type.
    #[arg(long, value_enum)]
    pub matvec_shape: Option<ShapeArg>,
    /// Print one JSON report (schema `minirun-run/1`) on stdout instead of the text.
    #[arg(long)]
    pub json: bool,
}

/// `--matvec-shape`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShapeArg {
    Lanes,
    Rows,
}

impl From<ShapeArg> for kernels::gpu::MatvecShape {
    fn from(s: ShapeArg) -> Self {
        match s {
            ShapeArg::Lanes => kernels::gpu::MatvecShape::Lanes,
            ShapeArg::Rows => kernels::gpu::MatvecShape::Rows,
        }
    }
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
    /// Engine counters of each decode step (empty where the adapter does not count).
    pub steps: Vec<GpuStats>,
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
    let g = greedy(&mut runner, &prompt_ids, args, tok.eos)?;
    Ok(RunOutput {
        text: tok.decode(&g.tokens)?,
        prompt_ids,
        tokens: g.tokens,
        logits: g.logits,
        prefill_s: g.prefill_s,
        decode_s: g.decode_s,
        tile_reads: runner.tile_reads(),
        steps: g.steps,
    })
}

/// What [`greedy`] decoded.
pub struct Greedy {
    pub tokens: Vec<u32>,
    /// The logits row before each token (only with `--dump-logits`).
    pub logits: Vec<Vec<f32>>,
    pub prefill_s: f64,
    pub decode_s: f64,
    /// Engine counters of each decode step (after the prefill), when the decoder has them.
    pub steps: Vec<GpuStats>,
}

/// A model the greedy loop can drive: logits when they are asked for, and the argmax of the
/// last position (by default picked on the host from the logits; an engine that picks on the
/// device overrides [`Decoder::argmax`] and [`Decoder::next`]).
pub trait Decoder {
    /// Feeds `ids` and returns the last position's logits.
    fn logits(&mut self, ids: &[u32]) -> Result<Vec<f32>, RunError>;

    /// Feeds `ids` and returns the argmax of the last position's logits.
    fn argmax(&mut self, ids: &[u32]) -> Result<u32, RunError> {
        let last = self.logits(ids)?;
        Ok(kernels::reference::argmax(&last, last.len())
            .first()
            .copied()
            .unwrap_or(0))
    }

    /// Feeds the token `prev` that [`Decoder::argmax`] or `next` just returned and returns the
    /// next argmax.
    fn next(&mut self, prev: u32) -> Result<u32, RunError> {
        self.argmax(&[prev])
    }

    /// Engine counters so far, if the decoder runs on one.
    fn stats(&self) -> Option<GpuStats> {
        None
    }
}

/// A [`Decoder`] from a closure returning the last position's logits.
pub struct LogitsFn<F>(pub F);

impl<F: FnMut(&[u32]) -> Result<Vec<f32>, RunError>> Decoder for LogitsFn<F> {
    fn logits(&mut self, ids: &[u32]) -> Result<Vec<f32>, RunError> {
        (self.0)(ids)
    }
}

impl Decoder for Runner<'_> {
    fn logits(&mut self, ids: &[u32]) -> Result<Vec<f32>, RunError> {
        self.forward(ids, Logits::Last)
    }

    fn argmax(&mut self, ids: &[u32]) -> Result<u32, RunError> {
        self.forward_argmax(ids)
    }

    /// The previous argmax is already the device's input: nothing is uploaded for it.
    fn next(&mut self, _prev: u32) -> Result<u32, RunError> {
        self.step_argmax()
    }

    fn stats(&self) -> Option<GpuStats> {
        Some(Runner::stats(self))
    }
}

/// The greedy loop every `minirun-run` path shares: prefill `prompt_ids`, then up to `args.n`
/// argmax tokens, stopping at `eos` unless `--ignore-eos`. With `--dump-logits` each step's
/// logits row is read back and kept; otherwise only the chosen ids cross to the host (on a
/// decoder that picks on the device).
pub fn greedy(
    model: &mut dyn Decoder,
    prompt_ids: &[u32],
    args: &RunArgs,
    eos: Option<u32>,
) -> Result<Greedy, RunError> {
    let keep = args.dump_logits.is_some();
    let pick = |last: &[f32]| {
        kernels::reference::argmax(last, last.len())
            .first()
            .copied()
            .unwrap_or(0)
    };
    let mut logits = Vec::new();
    let mut steps = Vec::new();
    let t0 = Instant::now();
    let mut next = if keep {
        let last = model.logits(prompt_ids)?;
        let id = pick(&last);
        logits.push(last);
        id
    } else {
        model.argmax(prompt_ids)?
    };
    let prefill_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let mut tokens = Vec::with_capacity(args.n);
    for step in 0..args.n {
        tokens.push(next);
        if (!args.ignore_eos && eos == Some(next)) || step + 1 == args.n {
            break;
        }
        let before = model.stats();
        next = if keep {
            let last = model.logits(&[next])?;
            let id = pick(&last);
            logits.push(last);
            id
        } else {
            model.next(next)?
        };
        if let (Some(a), Some(b)) = (before, model.stats()) {
            steps.push(b - a);
        }
    }
    Ok(Greedy {
        tokens,
        logits,
        prefill_s,
        decode_s: t1.elapsed().as_secs_f64(),
        steps,
    })
}

/// The largest value of each counter over the decode steps (what a structural check reads).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct StepSummary {
    pub steps: usize,
    pub max: GpuStats,
}

impl StepSummary {
    pub fn of(steps: &[GpuStats]) -> Self {
        let mut max = GpuStats::default();
        for s in steps {
            max.submits = max.submits.max(s.submits);
            max.dispatches = max.dispatches.max(s.dispatches);
            max.bytes_uploaded = max.bytes_uploaded.max(s.bytes_uploaded);
            max.bytes_read_back = max.bytes_read_back.max(s.bytes_read_back);
            max.maps = max.maps.max(s.maps);
            max.buffers_created = max.buffers_created.max(s.buffers_created);
            max.bind_groups_created = max.bind_groups_created.max(s.bind_groups_created);
            max.device_bytes_allocated = max.device_bytes_allocated.max(s.device_bytes_allocated);
        }
        Self {
            steps: steps.len(),
            max,
        }
    }

    /// One stderr line.
    pub fn line(&self) -> String {
        let m = &self.max;
        if self.steps == 0 {
            return "stats: no decode step was counted".to_string();
        }
        format!(
            "stats: per decode step (max over {} steps): {} submits, {} dispatches, {} B uploaded, {} B read back, {} buffers and {} bind groups created",
            self.steps,
            m.submits,
            m.dispatches,
            m.bytes_uploaded,
            m.bytes_read_back,
            m.buffers_created,
            m.bind_groups_created
        )
    }
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
        Engine::new_with_shape(args.matvec_shape.map(Into::into))
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
    let decode_steps = out.tokens.len().saturating_sub(1);
    let summary = StepSummary::of(&out.steps);
    if args.json {
        let report = serde_json::json!({
            "schema": "minirun-run/1",
            "text": out.text,
            "prompt_tokens": out.prompt_ids.len(),
            "tokens": out.tokens,
            "prefill_s": out.prefill_s,
            "decode_s": out.decode_s,
            "decode_tokens_per_s": decode_steps as f64 / out.decode_s.max(1e-9),
            "tile_reads": out.tile_reads,
            "per_step": summary,
            "steps": out.steps,
        });
        let _ = writeln!(std::io::stdout(), "{report}");
    } else {
        let _ = writeln!(std::io::stdout(), "{}", out.text);
    }
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
    if args.stats {
        let _ = writeln!(std::io::stderr(), "{}", summary.line());
    }
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
