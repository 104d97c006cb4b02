//! The generation loop every front-end shares (docs/runner.md "minirun-run"): one sequence of a
//! [`Model`] fed its prompt, then token by token through the sampler or the
//! device's own pick, text streamed as tokens complete, and the context check. Names no family.

use std::time::Instant;

use crate::adapter::Model;
use crate::error::RunError;
use crate::logprobs::TokenLogprobs;
use crate::sample::Sampler;
use crate::sequence::{Feed, Input, Sequence};
use crate::step_stats::{Counters, StepStats};
use crate::tokenizer::{Detokenize, TextStream};

pub use crate::adapter::Logits;

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
#[allow(clippy::too_many_arguments)] // generate's seven, the text pipeline, the sink and go_on
pub fn generate_text(
    model: &mut dyn Model,
    seq: &Sequence,
    prompt_ids: &[u32],
    opts: &GenOpts,
    sampler: &mut Sampler,
    tok: &dyn Detokenize,
    sink: TextSink<'_>,
    go_on: &dyn Fn() -> bool,
) -> Result<(Generation, String, usize), RunError> {
    let mut stream = TextStream::new(tok);
    let mut text = String::new();
    let g = generate(
        model,
        seq,
        prompt_ids,
        opts,
        sampler,
        tok.eos(),
        &mut |id, _| {
            let piece = stream.push(id)?;
            if !piece.is_empty() {
                sink(&piece);
                text.push_str(&piece);
            }
            Ok(go_on())
        },
    )?;
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
    /// Hand each token's log-probability and this many most likely alternatives to `on_token`
    /// (`None`: none; the logits then cross to the host every step).
    pub logprobs: Option<usize>,
}

/// The last position's logits of `seq` after feeding it `input`.
pub fn logits(
    model: &mut dyn Model,
    seq: &Sequence,
    input: Input<'_>,
) -> Result<Vec<f32>, RunError> {
    let mut rows = model.step(&[Feed { seq, input }], Logits::Last)?;
    let row = rows.pop().ok_or_else(|| RunError::Model {
        path: String::new(),
        detail: "the model returned no logits for the sequence".into(),
    })?;
    crate::adapter::last_row(row, model.vocab())
}

/// The argmax of the last position of `seq` after feeding it `input`: picked on the device
/// where the model does so (only the id is read back), else from the logits on the host.
pub fn argmax(model: &mut dyn Model, seq: &Sequence, input: Input<'_>) -> Result<u32, RunError> {
    if let Some(ids) = model.step_argmax(&[Feed { seq, input }])? {
        return ids.first().copied().ok_or_else(|| RunError::Model {
            path: String::new(),
            detail: "the model picked no id for the sequence".into(),
        });
    }
    let last = logits(model, seq, input)?;
    Ok(kernels::reference::argmax(&last, last.len())
        .first()
        .copied()
        .unwrap_or(0))
}

/// What `on_token` is handed: each token as soon as it is chosen, with its log-probabilities when
/// [`GenOpts::logprobs`] asks; it answers whether to go on (`false` stops, e.g. Ctrl-C in a
/// session).
pub type OnToken<'a> = &'a mut dyn FnMut(u32, Option<&TokenLogprobs>) -> Result<bool, RunError>;

/// The generation loop every `minirun-run` path shares: prefill `prompt_ids`, then up to
/// `opts.n` tokens, each handed to `on_token`, stopping at `eos` unless `ignore_eos`. Greedy settings without kept logits let a model that picks on the device do so
/// (only the chosen ids cross to the host); otherwise (a constraint among them) each step's logits
/// row is read back and the sampler picks.
pub fn generate(
    model: &mut dyn Model,
    seq: &Sequence,
    prompt_ids: &[u32],
    opts: &GenOpts,
    sampler: &mut Sampler,
    eos: Option<u32>,
    on_token: OnToken<'_>,
) -> Result<Generation, RunError> {
    let on_device = sampler.params().is_greedy()
        && !sampler.constrained()
        && !opts.keep_logits
        && opts.logprobs.is_none();
    sampler.start_output();
    let counters = |m: &dyn Model| {
        m.stats().map(|gpu| Counters {
            gpu,
            tile_reads: m.tile_reads(),
            expert_cache: m.expert_cache(),
        })
    };
    let mut history: Vec<u32> = prompt_ids.to_vec();
    let mut kept = Vec::new();
    let mut steps = Vec::new();
    let mut tokens = Vec::with_capacity(opts.n);
    if opts.n == 0 {
        return Ok(Generation {
            tokens,
            logits: kept,
            prefill_s: 0.0,
            decode_s: 0.0,
            steps,
        });
    }
    let mut pick = |model: &mut dyn Model, input: Input<'_>, history: &[u32]| {
        let (id, lp) = if on_device {
            (argmax(model, seq, input)?, None)
        } else {
            let last = logits(model, seq, input)?;
            let id = sampler.sample(&last, history)?;
            let lp = opts.logprobs.map(|top| TokenLogprobs::of(&last, id, top));
            if opts.keep_logits {
                kept.push(last);
            }
            (id, lp)
        };
        sampler.accept(id)?;
        Ok::<_, RunError>((id, lp))
    };
    let t0 = Instant::now();
    let (mut next, mut lp) = pick(model, Input::Ids(prompt_ids), &history)?;
    let prefill_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    for step in 0..opts.n {
        tokens.push(next);
        history.push(next);
        let go_on = on_token(next, lp.as_ref())?;
        if !go_on || (!opts.ignore_eos && eos == Some(next)) || step + 1 == opts.n {
            break;
        }
        let before = counters(model);
        (next, lp) = pick(model, Input::Picked(next), &history)?;
        if let (Some(a), Some(b)) = (before, counters(model)) {
            steps.push(StepStats::between(&a, &b));
        }
    }
    Ok(Generation {
        tokens,
        logits: kept,
        prefill_s,
        decode_s: t1.elapsed().as_secs_f64(),
        steps,
    })
}
