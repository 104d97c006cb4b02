//! The generation loop every front-end shares (docs/runner.md "minirun-run"): the [`Decoder`]
//! trait a model family implements, prefill then token by token through the sampler or the
//! device's own pick, text streamed as tokens complete, and the context check. Names no family.

use std::time::Instant;

use kernels::gpu::GpuStats;

use crate::error::RunError;
use crate::sample::Sampler;
use crate::step_stats::{Counters, ExpertCacheStats, StepStats};
use crate::tokenizer::{Detokenize, TextStream};

/// Which positions' logits a forward computes (the output head is the costliest matvec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    Last,
    All,
}

/// Refuses a generation that cannot fit: `prompt + n` tokens in a context of `-c` (default and
/// ceiling: the model's `model_ctx`).
pub fn check_context(
    prompt: usize,
    n: usize,
    ctx_size: Option<usize>,
    model_ctx: usize,
) -> Result<usize, RunError> {
    let ctx = ctx_size.unwrap_or(model_ctx);
    if ctx == 0 || ctx > model_ctx {
        return Err(RunError::Usage(format!(
            "-c/--ctx-size {ctx}: the model's context is {model_ctx} tokens (give 1..={model_ctx})"
        )));
    }
    if prompt.saturating_add(n) > ctx {
        return Err(RunError::Usage(format!(
            "the prompt ({prompt} tokens) and -n {n} need {} positions, more than the context of {ctx} (-c/--ctx-size; the model's is {model_ctx}): lower -n to at most {}",
            prompt.saturating_add(n),
            ctx.saturating_sub(prompt)
        )));
    }
    Ok(ctx)
}

/// Where streamed text goes: each piece as soon as a token completes it.
pub type TextSink<'a> = &'a mut dyn FnMut(&str);

/// [`generate`] with each token's text streamed to `sink` through a [`TextStream`], going on
/// while `go_on()` says so (a session's Ctrl-C); returns the generation, the whole text and how
/// many U+FFFD of an incomplete last character were dropped.
pub fn generate_text(
    model: &mut dyn Decoder,
    prompt_ids: &[u32],
    opts: &GenOpts,
    sampler: &mut Sampler,
    tok: &dyn Detokenize,
    sink: TextSink<'_>,
    go_on: &dyn Fn() -> bool,
) -> Result<(Generation, String, usize), RunError> {
    let mut stream = TextStream::new(tok);
    let mut text = String::new();
    let g = generate(model, prompt_ids, opts, sampler, tok.eos(), &mut |id| {
        let piece = stream.push(id)?;
        if !piece.is_empty() {
            sink(&piece);
            text.push_str(&piece);
        }
        Ok(go_on())
    })?;
    let (rest, dropped) = stream.finish()?;
    if !rest.is_empty() {
        sink(&rest);
        text.push_str(&rest);
    }
    Ok((g, text, dropped))
}

/// What [`generate`] produced.
pub struct Generation {
    pub tokens: Vec<u32>,
    /// The logits row before each token (only with `keep_logits`).
    pub logits: Vec<Vec<f32>>,
    pub prefill_s: f64,
    pub decode_s: f64,
    /// The counters of each decode step (after the prefill), when the decoder has them.
    pub steps: Vec<StepStats>,
}

/// The options of the generation loop.
#[derive(Debug, Clone, Copy, Default)]
pub struct GenOpts {
    /// Tokens to generate at most.
    pub n: usize,
    /// Do not stop at the end-of-sequence token.
    pub ignore_eos: bool,
    /// Keep each step's logits row (`--dump-logits`).
    pub keep_logits: bool,
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

    /// Weight tiles read from the file so far (streamed weights).
    fn tile_reads(&self) -> u64 {
        0
    }

    /// The streamed-expert cache's counters, where the decoder has one.
    fn expert_cache(&self) -> Option<ExpertCacheStats> {
        None
    }

    /// Keeps at most the first `n` positions fed so far and forgets the rest (a chat session
    /// reuses the conversation's prefix); returns how many it kept, which may be fewer than `n`
    /// for a decoder that can go back only to positions it holds a snapshot of; `None` when the
    /// decoder cannot rewind at all.
    fn rewind(&mut self, _n: usize) -> Option<usize> {
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

/// The generation loop every `minirun-run` path shares: prefill `prompt_ids`, then up to
/// `opts.n` tokens, each handed to `on_token` as soon as it is chosen (which answers whether to go
/// on: `false` stops, e.g. Ctrl-C in a session), stopping at `eos` unless `ignore_eos`. Greedy settings without kept logits let a decoder that picks on the device do so
/// (only the chosen ids cross to the host); otherwise each step's logits row is read back and the
/// sampler picks.
pub fn generate(
    model: &mut dyn Decoder,
    prompt_ids: &[u32],
    opts: &GenOpts,
    sampler: &mut Sampler,
    eos: Option<u32>,
    on_token: &mut dyn FnMut(u32) -> Result<bool, RunError>,
) -> Result<Generation, RunError> {
    let on_device = sampler.params().is_greedy() && !opts.keep_logits;
    let counters = |m: &dyn Decoder| {
        m.stats().map(|gpu| Counters {
            gpu,
            tile_reads: m.tile_reads(),
            expert_cache: m.expert_cache(),
        })
    };
    let mut history: Vec<u32> = prompt_ids.to_vec();
    let mut logits = Vec::new();
    let mut steps = Vec::new();
    let mut tokens = Vec::with_capacity(opts.n);
    if opts.n == 0 {
        return Ok(Generation {
            tokens,
            logits,
            prefill_s: 0.0,
            decode_s: 0.0,
            steps,
        });
    }
    let mut pick = |model: &mut dyn Decoder, ids: &[u32], history: &[u32], first: bool| {
        if on_device {
            return if first {
                model.argmax(ids)
            } else {
                model.next(ids[0])
            };
        }
        let last = model.logits(ids)?;
        let id = sampler.sample(&last, history);
        if opts.keep_logits {
            logits.push(last);
        }
        Ok(id)
    };
    let t0 = Instant::now();
    let mut next = pick(model, prompt_ids, &history, true)?;
    let prefill_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    for step in 0..opts.n {
        tokens.push(next);
        history.push(next);
        let go_on = on_token(next)?;
        if !go_on || (!opts.ignore_eos && eos == Some(next)) || step + 1 == opts.n {
            break;
        }
        let before = counters(model);
        next = pick(model, &[next], &history, false)?;
        if let (Some(a), Some(b)) = (before, counters(model)) {
            steps.push(StepStats::between(&a, &b));
        }
    }
    Ok(Generation {
        tokens,
        logits,
        prefill_s,
        decode_s: t1.elapsed().as_secs_f64(),
        steps,
    })
}
