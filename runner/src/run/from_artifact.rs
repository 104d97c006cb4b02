//! `minirun-run --artifact DIR [--revision COMMIT]` (docs/runner.md "Verified-only execution"):
//! open the artifact under its evidence (refused before any engine exists when unverified or
//! modified), find its family's registry entry (refused, naming the family, when none), then
//! tokenize (with `--chat`, through the family's chat format), prefill and decode like the GGUF
//! path (streamed text, sampling).

use std::io::Write;

use crate::adapter::{ArtifactDecoder, ModelOptions};
use crate::artifact::prompt_cache_identity;
use crate::artifact::{OpenOptions, VerifiedArtifact};
use crate::chat::Message;
use crate::error::RunError;
use crate::generate::Logits;
use crate::generate::{check_context, generate_text, TextSink};
use crate::prompt_cache::PromptCache;
use crate::registry::{self, Entry};
use crate::run::{RunArgs, RunOutput};
use crate::sample::Sampler;

/// Runs `args` (with `args.artifact` set) with the registered families and returns what
/// `minirun-run` prints.
pub fn run_artifact(args: &RunArgs) -> Result<RunOutput, RunError> {
    run_artifact_with(args, registry::ENTRIES)
}

/// As [`run_artifact`], looking the family up in `entries`.
pub fn run_artifact_with(args: &RunArgs, entries: &[Entry]) -> Result<RunOutput, RunError> {
    run_artifact_streaming(args, entries, &mut |_| {})
}

/// As [`run_artifact_with`], writing each piece of text to `sink` as soon as it is complete.
pub fn run_artifact_streaming(
    args: &RunArgs,
    entries: &[Entry],
    sink: TextSink<'_>,
) -> Result<RunOutput, RunError> {
    let dir = args.artifact.as_deref().ok_or_else(|| RunError::Model {
        path: String::new(),
        detail: "no --artifact given".into(),
    })?;
    let artifact = VerifiedArtifact::open(dir, &OpenOptions::verified(args.revision.clone()))?;
    if let Some(a) = artifact.authority() {
        let _ = writeln!(
            std::io::stderr(),
            "verified `{}` at {} (evidence holds for every file); family `{}`",
            a.repo,
            a.commit,
            artifact.family()
        );
    }
    let entry = registry::entry_in(entries, &artifact)?;
    let tok = (entry.tokenizer)(&artifact)?;
    let prompt_ids = if !args.prompt_ids.is_empty() {
        args.prompt_ids.clone()
    } else if args.chat {
        let format =
            (entry.chat)(&artifact)?.with_reasoning_effort(args.reasoning_effort.as_deref())?;
        let mut messages = Vec::with_capacity(2);
        if let Some(s) = &args.system {
            messages.push(Message::new("system", s));
        }
        messages.push(Message::new("user", &args.prompt));
        tok.encode(&format.render(&messages, true)?)?
    } else {
        tok.encode(&args.prompt)?
    };
    if prompt_ids.is_empty() {
        return Err(RunError::Tokenizer(
            "the prompt is empty: give -p TEXT or --prompt-ids".into(),
        ));
    }
    crate::tokenizer::check_vocab(&prompt_ids, artifact.vocab_size())?;
    let sampling = args.sampling()?;
    let model_ctx = artifact.context();
    check_context(prompt_ids.len(), args.n, args.ctx_size, model_ctx)?;
    let engine = crate::open::engine(args.matvec_shape.map(Into::into))?;
    let opts = ModelOptions::from_flags(
        &engine,
        args.stream,
        prompt_ids.len() + args.n,
        args.expert_cache_mib,
    );
    let mut decoder = ArtifactDecoder((entry.open)(&artifact, &opts)?, opts.capacity);
    let cache = match &args.prompt_cache {
        Some(p) => Some(PromptCache::new(p, prompt_cache_identity(&artifact)?)),
        None => None,
    };
    let reused = match &cache {
        Some(c) => c.load(&mut decoder, &prompt_ids)?.map_or(0, |t| t.len()),
        None => 0,
    };
    let mut sampler = Sampler::new(sampling);
    let (g, text, dropped) = generate_text(
        &mut decoder,
        &prompt_ids[reused..],
        &args.gen_opts(),
        &mut sampler,
        &tok,
        sink,
        &|| true,
    )?;
    let mut prefill_s = g.prefill_s;
    if let Some(c) = cache.as_ref().filter(|_| !args.prompt_cache_ro) {
        // All but the last prompt token: the position a prefill keeps a snapshot of, so an
        // adapter that saves only the positions it holds (DeepSeek V4) can save it.
        let keep = prompt_ids.len() - 1;
        if reused < keep {
            if args.n == 0 {
                // Nothing was generated, so the prompt was not fed: feed it for the cache.
                let t0 = std::time::Instant::now();
                decoder.0.forward(&prompt_ids[reused..], Logits::Last)?;
                prefill_s = t0.elapsed().as_secs_f64();
            }
            c.save(&decoder, &prompt_ids[..keep])?;
        }
    }
    let model = &decoder.0;
    Ok(RunOutput {
        text,
        sampling,
        dropped_incomplete: dropped,
        prompt_ids,
        tokens: g.tokens,
        logits: g.logits,
        prefill_s,
        decode_s: g.decode_s,
        tile_reads: model.tile_reads(),
        steps: g.steps,
        prompt_cache_reused: reused,
        expert_cache: model.expert_cache(),
    })
}

/// Greedy generation of `n` tokens after `prompt` from the verified artifact at `dir`, resident
/// (what `minirun-demo` ends with): the same path as `minirun-run --artifact DIR -p PROMPT -n N`.
pub fn generate(dir: &std::path::Path, prompt: &str, n: usize) -> Result<RunOutput, RunError> {
    use clap::Parser;
    let args = RunArgs::try_parse_from([
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
    run_artifact(&args)
}
