//! `minirun-run` (docs/runner.md "minirun-run"): open a GGUF Llama-family model or a verified
//! artifact through the one open path ([`crate::open`]), put it on the engine (resident or
//! streamed), tokenize the prompt (optionally in the model's chat format), prefill, decode,
//! print the continuation on stdout and tokens/s on stderr, and optionally dump every step's
//! logits as a float32 `.npy` [steps, vocab].

pub mod interactive;
mod report;
mod waiting;

use std::io::Write;
use std::path::PathBuf;

use clap::Parser;

use crate::adapter::ModelOptions;
use crate::chat::{ChatFormat, Message};
use crate::constrain::{Constraint, Grammar};
use crate::engine::Engine;
use crate::error::RunError;
use crate::generate::{check_context, generate_text, GenOpts, TextSink};
use crate::open::Opened;
use crate::prompt_cache::PromptCache;
use crate::registry::Entry;
use crate::sample::{Sampler, SamplingParams};
use crate::sequence::Input;
use crate::step_stats::{ExpertCacheStats, StepStats};

/// Exit codes: the one table every binary shares (`contract::Exit`; the runner uses 0, 1 and 64).
pub const EXIT_OK: u8 = contract::Exit::Ok.code();
pub const EXIT_FAILURE: u8 = contract::Exit::Failure.code();
pub const EXIT_USAGE: u8 = contract::Exit::Usage.code();

pub use crate::adapter::DEFAULT_TILE_BYTES;

#[derive(Debug, Parser)]
#[command(group(clap::ArgGroup::new("pinned").args(["artifact", "repo"])))]
#[command(
    name = "minirun-run",
    version,
    about = "run a GGUF Llama-family model or a verified Minirun artifact on the wgpu engine",
    after_help = "Environment: with --repo, HF_ENDPOINT (the hub), HF_TOKEN, HF_TOKEN_PATH, \
                  HF_HOME, HF_HUB_CACHE, XDG_CACHE_HOME (the token and the cache, as \
                  huggingface_hub); WGPU_BACKEND (the backends, when --backend is not given; default \
                  Vulkan, Metal, DX12), wgpu's other WGPU_* instance variables; XDG_RUNTIME_DIR \
                  (when unset, NODEVICE_SELECT=1 is set to keep Mesa's device-select layer \
                  quiet); nothing else is read."
)]
pub struct RunArgs {
    /// The GGUF file (or the first part of a split).
    #[arg(
        long,
        required_unless_present_any = ["artifact", "repo"],
        conflicts_with_all = ["artifact", "repo"]
    )]
    pub model: Option<PathBuf>,
    /// A verified Minirun artifact directory (docs/runner.md "Verified-only execution").
    #[arg(long, conflicts_with = "repo")]
    pub artifact: Option<PathBuf>,
    /// A published Minirun repository, OWNER/NAME: pulled into the Hugging Face cache
    /// (`$HF_HUB_CACHE`, else `$HF_HOME/hub`) and verified first; what is there and still
    /// verifies is not downloaded again (docs/runner.md "From a repo id").
    #[arg(long, value_name = "OWNER/NAME")]
    pub repo: Option<String>,
    /// With --artifact: the commit to run (default: the only one with evidence); with --repo:
    /// the branch, tag or commit to pull (default `main`).
    #[arg(long, requires = "pinned")]
    pub revision: Option<String>,
    /// The prompt text.
    #[arg(short = 'p', long = "prompt", default_value = "")]
    pub prompt: String,
    /// Token ids instead of a text prompt, comma-separated.
    #[arg(long = "prompt-ids", value_delimiter = ',')]
    pub prompt_ids: Vec<u32>,
    /// Tokens to generate (prompt + n must fit the context, -c).
    #[arg(short = 'n', long = "n-predict", default_value_t = 32)]
    pub n: usize,
    /// The context in tokens: prompt and generated tokens together (default: the model's).
    #[arg(short = 'c', long = "ctx-size")]
    pub ctx_size: Option<usize>,
    /// Greedy decoding: the same as --temp 0.
    #[arg(long, conflicts_with = "temperature")]
    pub greedy: bool,
    /// Sampling temperature; 0 (the default) is greedy (docs/runner.md "Sampling").
    #[arg(
        long = "temp",
        visible_alias = "temperature",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    pub temperature: f32,
    /// Keep only the K most likely tokens (0 = all).
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    /// Keep the most likely tokens up to this cumulative probability (1.0 = off).
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true)]
    pub top_p: f32,
    /// Drop tokens less likely than this fraction of the most likely one (0 = off).
    #[arg(long, default_value_t = 0.05, allow_negative_numbers = true)]
    pub min_p: f32,
    /// Penalise tokens among the last --repeat-last-n (1.0 = off).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub repeat_penalty: f32,
    /// How many of the latest tokens the repetition penalty looks at (0 = off).
    #[arg(long, default_value_t = 64)]
    pub repeat_last_n: usize,
    /// Seed of the sampler's random stream (default: a random seed, printed on stderr).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Stream weights tile by tile from the file.
    #[arg(long, conflicts_with = "resident")]
    pub stream: bool,
    /// Upload every matrix once (the default).
    #[arg(long)]
    pub resident: bool,
    /// Streamed tile size in bytes (whole rows; rounded to 16 KiB slots).
    #[arg(long, default_value_t = DEFAULT_TILE_BYTES)]
    pub tile_bytes: usize,
    /// Streamed tile slots on the device, which a reader thread fills that many tiles ahead of
    /// the kernels (GGUF weights; at least 1).
    #[arg(long, value_name = "N", default_value_t = crate::llama::DEFAULT_RING as u16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub ring_slots: u16,
    /// With --artifact --stream: MiB of routed experts (gate, up and down together) kept on the
    /// device (the least used out first; docs/runner-deepseek-v4.md "Expert cache").
    #[arg(long, value_name = "MIB", default_value_t = crate::run::DEFAULT_EXPERT_CACHE_MIB)]
    pub expert_cache_mib: u64,
    /// Write every step's logits as float32 .npy [steps, vocab].
    #[arg(long)]
    pub dump_logits: Option<PathBuf>,
    /// Wrap the prompt as one user message in the model's own chat template (Jinja, rendered
    /// as transformers' apply_chat_template does), or, for an artifact whose family publishes
    /// an encoder instead (DeepSeek V4), in that encoding.
    #[arg(long)]
    pub chat: bool,
    /// With --chat or -i: a system message before the user's.
    #[arg(long)]
    pub system: Option<String>,
    /// With --chat or -i on a DeepSeek V4 artifact: thinking mode at this reasoning effort
    /// (`low`, `high`, `xhigh` or `max`, DeepSeek's efforts): the model reasons, closes its
    /// reasoning with `</think>`, then answers. Default: chat mode (no reasoning).
    #[arg(long, value_name = "EFFORT")]
    pub reasoning_effort: Option<String>,
    /// An interactive chat session in the model's chat template (docs/runner.md "Interactive
    /// session"): -n bounds each answer, -c the whole conversation (default min(model, 4096)).
    #[arg(short = 'i', long, conflicts_with_all = ["json", "dump_logits", "prompt_ids"])]
    pub interactive: bool,
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
    /// The graphics backends to look for an adapter on, comma-separated (`vulkan`, `metal`,
    /// `dx12`, `gl`). Default: WGPU_BACKEND, else Vulkan, Metal and DX12 (OpenGL only when
    /// asked: it is much slower; docs/runner.md "Device and backend").
    #[arg(long, value_name = "LIST", value_parser = crate::open::parse_backend)]
    pub backend: Option<String>,
    /// Print one JSON report (schema `minirun-run/1`) on stdout instead of the text.
    #[arg(long)]
    pub json: bool,
    /// A `.megakv` prefix cache (docs/runner.md "Prompt cache"): its KV state is loaded and the
    /// positions it shares with the prompt are not fed again; after the run it holds all but the
    /// prompt's last token (what a rerun of the prompt can reuse).
    #[arg(long, value_name = "FILE")]
    pub prompt_cache: Option<PathBuf>,
    /// With --prompt-cache: read the file, never rewrite it.
    #[arg(long, requires = "prompt_cache")]
    pub prompt_cache_ro: bool,
    /// Constrain the answer to this JSON Schema (inline JSON, as llama-cli's --json-schema),
    /// enforced while sampling; in thinking mode, the answer after the reasoning
    /// (docs/runner.md "Structured output").
    #[arg(long, value_name = "SCHEMA", conflicts_with_all = ["json_schema_file", "grammar_file", "interactive", "ignore_eos"])]
    pub json_schema: Option<String>,
    /// As --json-schema, the schema read from FILE.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["grammar_file", "interactive", "ignore_eos"])]
    pub json_schema_file: Option<PathBuf>,
    /// Constrain the answer to the grammar in FILE, in llguidance's Lark syntax (llama-cli's
    /// --grammar-file takes GBNF; this takes what minirun-serve's `grammar` extension takes).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["interactive", "ignore_eos"])]
    pub grammar_file: Option<PathBuf>,
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

impl RunArgs {
    /// The sampling settings; a random seed is drawn when none was given.
    pub fn sampling(&self) -> Result<SamplingParams, RunError> {
        let p = SamplingParams {
            temperature: if self.greedy { 0.0 } else { self.temperature },
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n: self.repeat_last_n,
            // the OpenAI API's per-request penalties (a request sets them)
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            seed: self.seed.unwrap_or_else(random_seed),
        };
        p.validate().map_err(|e| RunError::Usage(e.to_string()))?;
        Ok(p)
    }

    /// What `--backend` and `--matvec-shape` ask of the device.
    pub fn device_flags(&self) -> crate::open::DeviceFlags {
        crate::open::DeviceFlags {
            backend: self.backend.clone(),
            shape: self.matvec_shape.map(Into::into),
        }
    }

    /// What `--model` (with `--tokenizer`) or `--artifact` (with `--revision`) names.
    pub fn source(&self) -> Option<crate::open::Source> {
        crate::open::Source::from_flags(crate::open::SourceFlags {
            model: self.model.as_deref(),
            tokenizer: self.tokenizer.as_deref(),
            artifact: self.artifact.as_deref(),
            repo: self.repo.as_deref(),
            revision: self.revision.as_deref(),
        })
    }

    /// What the answer must match: `--json-schema`, `--json-schema-file` or `--grammar-file`.
    pub fn grammar(&self) -> Result<Option<Grammar>, RunError> {
        let read = |path: &PathBuf, what: &'static str| {
            std::fs::read_to_string(path).map_err(|source| RunError::Io {
                what,
                path: path.display().to_string(),
                source,
            })
        };
        let schema = |text: &str, from: &str| {
            serde_json::from_str(text)
                .map(|v| Some(Grammar::JsonSchema(v)))
                .map_err(|e| RunError::Usage(format!("{from} is not JSON: {e}")))
        };
        match (
            &self.json_schema,
            &self.json_schema_file,
            &self.grammar_file,
        ) {
            (Some(s), _, _) => schema(s, "--json-schema"),
            (_, Some(p), _) => schema(
                &read(p, "read the JSON schema")?,
                &format!("--json-schema-file `{}`", p.display()),
            ),
            (_, _, Some(p)) => Ok(Some(Grammar::Lark(read(p, "read the grammar")?))),
            _ => Ok(None),
        }
    }

    /// How the model goes on `engine` with `capacity` positions: `--stream` (with
    /// `--tile-bytes`, `--ring-slots`) and `--expert-cache-mib`.
    pub fn model_options<'e>(&self, engine: &'e Engine, capacity: usize) -> ModelOptions<'e> {
        ModelOptions {
            tile_bytes: self.tile_bytes,
            ring_slots: usize::from(self.ring_slots),
            ..ModelOptions::from_flags(engine, self.stream, capacity, self.expert_cache_mib)
        }
    }

    /// The options of the generation loop.
    pub fn gen_opts(&self) -> GenOpts {
        GenOpts {
            n: self.n,
            ignore_eos: self.ignore_eos,
            keep_logits: self.dump_logits.is_some(),
            logprobs: None,
        }
    }
}

/// A seed from the clock and the process id (what `--seed` replaces).
pub fn random_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
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
    /// The counters of each decode step (empty where the adapter does not count).
    pub steps: Vec<StepStats>,
    /// The sampling settings used (with the seed).
    pub sampling: SamplingParams,
    /// U+FFFD characters dropped at the end: a character the last token left incomplete.
    pub dropped_incomplete: usize,
    /// Prompt tokens whose KV state came from --prompt-cache (not fed).
    pub prompt_cache_reused: usize,
    /// The streamed-expert cache's counters (an artifact streamed with such a cache).
    pub expert_cache: Option<ExpertCacheStats>,
    /// The adapter the run's device was opened on.
    pub adapter: Option<kernels::gpu::Adapter>,
    /// Pipelines compiled for the run and the time it took.
    pub shaders: kernels::gpu::ShaderStats,
    /// With `--repo`: what the pull into the cache did.
    pub pulled: Option<crate::open::Pulled>,
}

/// Default `--expert-cache-mib`: a whole token's routed experts of DeepSeek V4 Flash (43 layers ×
/// 6 experts × 3 mxfp4 matrices of 2048 × 4096 ≈ 4.25 MiB each ≈ 3.3 GiB) do not fit, but the
/// hot experts of a conversation largely do; 1 GiB is a budget an 8 GiB GPU can spare.
pub const DEFAULT_EXPERT_CACHE_MIB: u64 = 1024;

/// Runs the model `args` names (a GGUF file or a verified artifact of a family in `entries`)
/// through the one open path, writing each piece of text to `sink` as soon as it is complete.
pub fn run_streaming(
    args: &RunArgs,
    entries: &[Entry],
    sink: TextSink<'_>,
) -> Result<RunOutput, RunError> {
    let source = args.source().ok_or_else(|| {
        RunError::Usage("give --model FILE, --artifact DIR or --repo OWNER/NAME".into())
    })?;
    // The device first: a machine without a usable adapter is told so in seconds, before a
    // large artifact is verified.
    let engine = crate::open::engine(&args.device_flags())?;
    let mut opened = crate::open::open(&source, entries)?;
    if let Some(line) = opened.origin.provenance() {
        let _ = writeln!(std::io::stderr(), "{line}");
    }
    let constraint = constraint(args, &opened)?;
    let prompt_ids = prompt_ids(args, &mut opened)?;
    let sampling = args.sampling()?;
    check_context(prompt_ids.len(), args.n, args.ctx_size, opened.context)?;
    let waiting = waiting::FirstToken::watch(prompt_ids.len());
    let mut model = opened.load(&args.model_options(&engine, prompt_ids.len() + args.n))?;
    let seq = model.begin()?;
    let cache = match &args.prompt_cache {
        Some(p) => Some(PromptCache::new(p, opened.prompt_cache_identity()?)),
        None => None,
    };
    let reused = match &cache {
        Some(c) => c
            .load(model.as_mut(), &seq, &prompt_ids)?
            .map_or(0, |t| t.len()),
        None => 0,
    };
    let mut sampler = Sampler::new(sampling);
    if let Some(c) = constraint {
        sampler.constrain(c);
    }
    let (g, text, dropped) = generate_text(
        model.as_mut(),
        &seq,
        &prompt_ids[reused..],
        &args.gen_opts(),
        &mut sampler,
        &opened,
        sink,
        &|| {
            waiting.arrived();
            true
        },
    )?;
    drop(waiting);
    let mut prefill_s = g.prefill_s;
    if let Some(c) = cache.as_ref().filter(|_| !args.prompt_cache_ro) {
        let fed = save_prompt(c, model.as_mut(), &seq, &prompt_ids, reused, args.n)?;
        prefill_s = fed.unwrap_or(prefill_s);
    }
    Ok(RunOutput {
        text,
        prompt_ids,
        tokens: g.tokens,
        logits: g.logits,
        prefill_s,
        decode_s: g.decode_s,
        tile_reads: model.tile_reads(),
        steps: g.steps,
        sampling,
        dropped_incomplete: dropped,
        prompt_cache_reused: reused,
        expert_cache: model.expert_cache(),
        adapter: engine.gpu().adapter(),
        shaders: engine.gpu().shader_stats(),
        pulled: opened.origin.pulled.clone(),
    })
}

/// Saves the prompt into the prompt cache `c` (`reused` of its tokens came from it): one rule
/// for every model, the longest prefix of all but the last prompt token that the model can save
/// (a run feeds its prompt's last token whatever the cache holds). With `-n 0` nothing was
/// generated, so the prompt was not fed: it is fed here, and the seconds that took returned.
fn save_prompt(
    c: &PromptCache,
    model: &mut dyn crate::adapter::Model,
    seq: &crate::sequence::Sequence,
    prompt_ids: &[u32],
    reused: usize,
    n: usize,
) -> Result<Option<f64>, RunError> {
    let mut prefill_s = None;
    if n == 0 && reused + 1 < prompt_ids.len() {
        let t0 = std::time::Instant::now();
        crate::generate::argmax(model, seq, Input::Ids(&prompt_ids[reused..]))?;
        prefill_s = Some(t0.elapsed().as_secs_f64());
    }
    let keep = model.savable(seq, prompt_ids.len() - 1);
    if keep > reused {
        c.save(model, seq, &prompt_ids[..keep])?;
    }
    Ok(prefill_s)
}

/// The constraint of `--json-schema` or `--grammar-file` over the model's tokenizer (after the
/// reasoning in thinking mode), built before the model loads so a wrong one fails fast.
fn constraint(args: &RunArgs, opened: &Opened<'_>) -> Result<Option<Constraint>, RunError> {
    let Some(g) = args.grammar()? else {
        return Ok(None);
    };
    let vocab = usize::try_from(opened.vocab)
        .map_err(|_| RunError::Tokenizer("a vocabulary past the address space".into()))?;
    let c = opened.tokenizer.grammars(vocab)?.constraint(&g)?;
    let thinking_end = args
        .reasoning_effort
        .as_ref()
        .and(opened.chat.as_ref().ok())
        .and_then(ChatFormat::answer_syntax)
        .map(|a| a.reasoning_end);
    Ok(Some(c.after(thinking_end)?))
}

/// As [`run_streaming`] with nothing streamed.
pub fn run_with(args: &RunArgs, entries: &[Entry]) -> Result<RunOutput, RunError> {
    run_streaming(args, entries, &mut |_| {})
}

/// The prompt's ids: `--prompt-ids`, or `-p` (with `--chat`, one user message after an optional
/// `--system` in the model's chat format), refused when empty or past the vocabulary.
fn prompt_ids(args: &RunArgs, opened: &mut Opened<'_>) -> Result<Vec<u32>, RunError> {
    let ids = if !args.prompt_ids.is_empty() {
        crate::tokenizer::check_vocab(&args.prompt_ids, opened.vocab)?;
        args.prompt_ids.clone()
    } else if args.chat {
        let format = opened
            .take_chat()
            .map_err(|e| with_hint(e, "drop --chat"))?
            .with_reasoning_effort(args.reasoning_effort.as_deref())?;
        let mut messages = Vec::with_capacity(2);
        if let Some(s) = &args.system {
            messages.push(Message::new("system", s));
        }
        messages.push(Message::new("user", &args.prompt));
        opened.encode(&format.render(&messages, true)?)?
    } else {
        opened.encode(&args.prompt)?
    };
    if ids.is_empty() {
        return Err(RunError::Tokenizer(
            "the prompt is empty: give -p TEXT or --prompt-ids".into(),
        ));
    }
    Ok(ids)
}

/// `e` with what the user can do about it appended (the variant, and so the exit code, kept).
pub(crate) fn with_hint(e: RunError, hint: &str) -> RunError {
    match e {
        RunError::Tokenizer(m) => RunError::Tokenizer(format!("{m}; {hint}")),
        RunError::Usage(m) => RunError::Usage(format!("{m}; {hint}")),
        e => e,
    }
}

/// Greedy generation of `n` tokens after `prompt` from the verified artifact at `dir`, resident
/// (what `minirun-demo` ends with): the same path as `minirun-run --artifact DIR -p PROMPT -n N`.
pub fn generate(
    dir: &std::path::Path,
    prompt: &str,
    n: usize,
    backend: Option<&str>,
) -> Result<RunOutput, RunError> {
    let mut args = RunArgs::try_parse_from([
        "minirun-run".as_ref(),
        "--artifact".as_ref(),
        dir.as_os_str(),
        "-p".as_ref(),
        prompt.as_ref(),
        "-n".as_ref(),
        n.to_string().as_ref(),
        "--ignore-eos".as_ref(),
    ] as [&std::ffi::OsStr; 8])
    .map_err(|e| RunError::Tokenizer(format!("building the run arguments: {e}")))?;
    args.backend = backend.map(str::to_owned);
    run_with(&args, crate::registry::ENTRIES)
}

/// Refuses flags that need others: `--system` without a chat, `--reasoning-effort` without
/// an artifact's chat.
fn flags_agree(args: &RunArgs) -> Result<(), &'static str> {
    if args.system.is_some() && !args.chat && !args.interactive {
        return Err("--system needs --chat or -i");
    }
    let artifact = args.artifact.is_some() || args.repo.is_some();
    if args.reasoning_effort.is_some() && !(artifact && (args.chat || args.interactive)) {
        return Err(
            "--reasoning-effort needs --artifact (DeepSeek V4's encoding) and --chat or -i",
        );
    }
    Ok(())
}

/// The CLI: parse, run, print; returns the exit code.
pub fn main_with(argv: impl IntoIterator<Item = std::ffi::OsString>) -> u8 {
    let mut args = match contract::parse_exit::<RunArgs, _, _>(argv) {
        Ok(a) => a,
        Err(exit) => return exit.code(),
    };
    if let Err(why) = flags_agree(&args) {
        let _ = writeln!(std::io::stderr(), "error: {why}");
        return EXIT_USAGE;
    }
    // The seed is fixed (and said) before anything runs, so any run can be repeated.
    let seed = *args.seed.get_or_insert_with(random_seed);
    match args.sampling() {
        Ok(p) if !p.is_greedy() => {
            let _ = writeln!(
                std::io::stderr(),
                "sampling: seed {seed}, temp {}, top-k {}, top-p {}, min-p {}, repeat-penalty {} over {}",
                p.temperature, p.top_k, p.top_p, p.min_p, p.repeat_penalty, p.repeat_last_n
            );
        }
        Ok(_) => {}
        Err(e) => {
            contract::print_error(&e, None);
            return EXIT_USAGE;
        }
    }
    if args.interactive {
        return match interactive::run_interactive(&args) {
            Ok(()) => EXIT_OK,
            Err(e) => {
                contract::print_error(&e, None);
                if matches!(e, RunError::Usage(_)) {
                    EXIT_USAGE
                } else {
                    EXIT_FAILURE
                }
            }
        };
    }
    // Text mode: each piece is written and flushed as soon as a token completes it.
    let mut stdout_sink = |piece: &str| {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(piece.as_bytes()).and_then(|()| out.flush());
    };
    let mut quiet = |_: &str| {};
    let sink: TextSink<'_> = if args.json {
        &mut quiet
    } else {
        &mut stdout_sink
    };
    let result = run_streaming(&args, crate::registry::ENTRIES, sink);
    let out = match result {
        Ok(r) => r,
        Err(e) => {
            contract::print_error(&e, None);
            return if matches!(e, RunError::Usage(_)) {
                EXIT_USAGE
            } else {
                EXIT_FAILURE
            };
        }
    };
    if args.json {
        let _ = writeln!(std::io::stdout(), "{}", report::json(&out));
    } else {
        // The text was streamed; end its line.
        let _ = writeln!(std::io::stdout());
    }
    report::summary(&args, &out);
    if let Some(path) = &args.dump_logits {
        if let Err(e) = report::dump_logits(path, &out) {
            let _ = writeln!(
                std::io::stderr(),
                "error: cannot write `{}`: {e}",
                path.display()
            );
            return EXIT_FAILURE;
        }
    }
    EXIT_OK
}
