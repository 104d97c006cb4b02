//! The one thread that owns the model (docs/runner.md "minirun-serve"): it takes jobs from a
//! bounded queue one at a time, renders and tokenizes the prompt, checks it against the context,
//! reuses the KV cache's common prefix with the previous request, generates, and reports each
//! piece of text as an [`Event`]. A job whose client has gone (its event receiver dropped) is
//! skipped, or stopped at the next token.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;

use super::api::{ApiError, Finish, GenRequest, Prompt};
use super::format::Formats;
use super::metrics::ServeStats;
use super::stop::StopMatcher;
use crate::adapter::Model;
use crate::chat::{ChatFormat, ForceCall, Forced};
use crate::constrain::{Constraint, ConstraintError, Grammars};
use crate::error::RunError;
use crate::generate::{generate, GenOpts, Generation};
use crate::sample::Sampler;
use crate::sequence::Sequence;
use crate::session::CachedPrefix;
use crate::tokenizer::{Detokenize, TextStream};

/// What the worker tells the request's handler.
#[derive(Debug)]
pub enum Event {
    /// The prompt was accepted: this many tokens.
    Started { prompt_tokens: usize },
    /// Text ready to send.
    Text(String),
    /// A generated token's log-probabilities (asked with `logprobs`), sent before its text.
    Logprob(super::logprobs::Entry),
    /// The end.
    Done {
        finish: Finish,
        completion_tokens: usize,
        timings: super::api::Timings,
    },
    /// The request was refused (before `Started`) or failed.
    Failed(ApiError),
}

/// Counts the requests admitted and not yet finished; a [`Slot`] is one of them.
#[derive(Debug)]
pub struct Slot(Arc<AtomicUsize>);

impl Slot {
    /// Takes a slot if fewer than `limit` are taken.
    pub fn take(count: &Arc<AtomicUsize>, limit: usize) -> Option<Slot> {
        count
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(count)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One request for the worker.
pub struct Job {
    pub request: GenRequest,
    pub events: UnboundedSender<Event>,
    pub slot: Slot,
}

/// What the worker runs on: the model and the sequence it serves requests on, the text
/// pipeline and the context.
pub struct Backend<'a> {
    pub model: &'a mut dyn Model,
    pub seq: Sequence,
    pub encode: &'a dyn Fn(&str) -> Result<Vec<u32>, RunError>,
    pub detok: &'a dyn Detokenize,
    /// The model's chat format, or why there is none.
    pub template: Result<ChatFormat, String>,
    /// Positions of the KV cache.
    pub ctx: usize,
    /// What the model's cache already holds (a loaded `--prompt-cache`).
    pub preloaded: Vec<u32>,
    /// Builds the grammars of structured output over the model's tokenizer (called once, at
    /// the first request that asks for a format).
    pub grammars: &'a dyn Fn() -> Result<Grammars, ConstraintError>,
}

/// Serves jobs until the queue's sender is dropped.
pub fn serve_jobs(
    backend: &mut Backend<'_>,
    jobs: std::sync::mpsc::Receiver<Job>,
    stats: &ServeStats,
) {
    let mut cache = CachedPrefix::default();
    cache.assume(std::mem::take(&mut backend.preloaded));
    let mut formats = Formats::new(backend.grammars);
    for job in jobs {
        if job.events.is_closed() {
            stats.dropped();
            continue;
        }
        let events = job.events.clone();
        let ran = run_job(backend, &mut cache, &mut formats, &job, stats);
        if let Some(gpu) = backend.model.stats() {
            stats.device_memory(gpu.device_bytes_allocated);
        }
        if let Err(e) = ran {
            stats.ended(None, 0);
            // A model or engine failure leaves the cache unknown: start the next one afresh.
            cache.forget(&mut *backend.model, &backend.seq);
            let _ = events.send(Event::Failed(e));
        }
        drop(job);
    }
}

/// The prompt's ids, or the 400 that says why not.
fn prompt_ids(backend: &Backend<'_>, prompt: &Prompt) -> Result<Vec<u32>, ApiError> {
    let text = match prompt {
        Prompt::Text(t) => t.clone(),
        Prompt::Chat(messages, effort, tools) => {
            let template = backend.template.as_ref().map_err(|why| {
                ApiError::invalid(
                    format!("this model has no chat format: {why}; use /v1/completions"),
                    Some("messages"),
                )
            })?;
            let thinking = effort
                .as_deref()
                .map(|e| template.thinking_mode(e))
                .transpose()
                .map_err(|e| ApiError::invalid(e.to_string(), Some("reasoning_effort")))?;
            if !tools.is_empty() && !template.renders_tools() {
                return Err(ApiError::invalid(crate::chat::NO_TOOLS, Some("tools")));
            }
            template
                .render_tools(messages, true, thinking, tools)
                .map_err(|e| ApiError::invalid(e.to_string(), Some("messages")))?
        }
    };
    let ids = (backend.encode)(&text).map_err(|e| ApiError::server(e.to_string()))?;
    if ids.is_empty() {
        return Err(ApiError::invalid("the prompt is empty", Some("prompt")));
    }
    Ok(ids)
}

/// A forced tool call (`tool_choice` `required` or a named function): the chat format's grammar
/// of a call, the tools and the one named; or the 400 for a format that cannot force one.
fn forced_call<'r>(
    backend: &Backend<'_>,
    req: &'r GenRequest,
) -> Result<Option<(ForceCall, Forced<'r>)>, ApiError> {
    let (Some(only), Prompt::Chat(_, _, tools)) = (req.tool_choice.forced(), &req.prompt) else {
        return Ok(None);
    };
    let force = backend
        .template
        .as_ref()
        .ok()
        .and_then(|f| f.answer_syntax())
        .and_then(|a| a.force)
        .ok_or_else(|| {
            ApiError::invalid(
                "tool_choice `required` or a named function: this model's chat format has no grammar that forces a call (use `auto`)",
                Some("tool_choice"),
            )
        })?;
    let forced = Forced {
        tools,
        only,
        parallel: req.parallel_tool_calls,
    };
    Ok(Some((force, forced)))
}

/// Where the reasoning of a request in thinking mode ends (`None`: not thinking).
fn reasoning_end(backend: &Backend<'_>, req: &GenRequest) -> Option<&'static str> {
    match &req.prompt {
        Prompt::Chat(_, Some(_), _) => backend
            .template
            .as_ref()
            .ok()
            .and_then(|f| f.answer_syntax())
            .map(|a| a.reasoning_end),
        _ => None,
    }
}

/// How many tokens the request may generate in a context of `ctx`.
fn budget(ctx: usize, prompt: usize, max_tokens: Option<usize>) -> Result<usize, ApiError> {
    let over = |need: usize| {
        ApiError::invalid(
            format!(
                "this model's context is {ctx} tokens; the prompt ({prompt} tokens) and the completion need {need} (lower max_tokens or shorten the prompt)"
            ),
            Some("messages"),
        )
        .with_code("context_length_exceeded")
    };
    if prompt >= ctx {
        return Err(over(prompt + 1));
    }
    match max_tokens {
        Some(m) if prompt.saturating_add(m) > ctx => Err(over(prompt.saturating_add(m))),
        Some(m) => Ok(m),
        None => Ok(ctx - prompt),
    }
}

/// The request's sampler, held to its response format or grammar and to a forced call (after
/// the reasoning in thinking mode: they hold the answer, not the reasoning before it).
fn sampler_for(
    backend: &Backend<'_>,
    formats: &mut Formats<'_>,
    req: &GenRequest,
    forced: Option<&(ForceCall, Forced<'_>)>,
) -> Result<Sampler, ApiError> {
    let mut sampler = Sampler::new(req.sampling);
    let after = reasoning_end(backend, req);
    let gated = |c: Constraint| c.after(after).map_err(|e| ApiError::server(e.to_string()));
    if let Some(g) = &req.grammar {
        sampler.constrain(gated(formats.constraint(g, super::format::param(g))?)?);
    }
    if let Some((force, forced)) = forced {
        sampler.constrain(gated(formats.forced_call(*force, forced)?)?);
    }
    Ok(sampler)
}

fn run_job(
    backend: &mut Backend<'_>,
    cache: &mut CachedPrefix,
    formats: &mut Formats<'_>,
    job: &Job,
    stats: &ServeStats,
) -> Result<(), ApiError> {
    let req = &job.request;
    let forced = forced_call(backend, req)?;
    let ids = prompt_ids(backend, &req.prompt)?;
    let n = budget(backend.ctx, ids.len(), req.max_tokens)?;
    let mut sampler = sampler_for(backend, formats, req, forced.as_ref())?;
    let events = &job.events;
    let _ = events.send(Event::Started {
        prompt_tokens: ids.len(),
    });
    let started = std::time::Instant::now();
    let mut last_token: Option<std::time::Instant> = None;
    let server = |e: RunError| ApiError::server(e.to_string());
    let common = cache
        .reuse(&mut *backend.model, &backend.seq, &ids)
        .map_err(server)?;
    stats.prompt(ids.len(), common);
    let feed = &ids[common..];
    let mut stream = TextStream::new(backend.detok);
    let mut stops = StopMatcher::new(req.stop.clone());
    let opts = GenOpts {
        n,
        ignore_eos: false,
        keep_logits: false,
        logprobs: req.logprobs,
    };
    let eos = backend.detok.eos();
    let g = generate(
        &mut *backend.model,
        &backend.seq,
        feed,
        &opts,
        &mut sampler,
        eos,
        &mut |id, lp| {
            let now = std::time::Instant::now();
            match last_token.replace(now) {
                None => stats.first_token(now - started),
                Some(before) => stats.next_token(now - before),
            }
            if let Some(lp) = lp.filter(|_| Some(id) != eos) {
                let text = |t: u32| backend.detok.detokenize(&[t]).unwrap_or_default();
                let _ = events.send(Event::Logprob(super::logprobs::Entry::new(lp, &text)));
            }
            let piece = stops.push(&stream.push(id)?);
            if !piece.is_empty() {
                let _ = events.send(Event::Text(piece));
            }
            Ok(!stops.stopped() && !events.is_closed())
        },
    );
    let g = g.map_err(server)?;
    cache.fed(feed, &g.tokens);
    let (rest, _) = stream.finish().map_err(server)?;
    let tail = stops.push(&rest) + &stops.finish();
    if !tail.is_empty() {
        let _ = events.send(Event::Text(tail));
    }
    let ended_at_eos = eos.is_some() && g.tokens.last() == eos.as_ref();
    let finish = if events.is_closed() {
        Finish::Cancelled
    } else if stops.stopped() || ended_at_eos {
        Finish::Stop
    } else {
        Finish::Length
    };
    stats.ended(Some(finish), g.tokens.len());
    let _ = events.send(done(finish, common, feed.len(), &g));
    Ok(())
}

/// The last event of an answer: how it ended, its length and its timings.
fn done(finish: Finish, cached: usize, fed: usize, g: &Generation) -> Event {
    Event::Done {
        finish,
        completion_tokens: g.tokens.len(),
        timings: super::api::Timings {
            cached,
            prompt: fed,
            prompt_s: g.prefill_s,
            predicted: g.tokens.len(),
            predicted_s: g.decode_s,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_the_rest_of_the_context_and_never_more() {
        assert_eq!(budget(100, 10, None).unwrap(), 90);
        assert_eq!(budget(100, 10, Some(90)).unwrap(), 90);
        let e = budget(100, 10, Some(91)).unwrap_err();
        assert_eq!(e.code, Some("context_length_exceeded"));
        assert!(e.message.contains("need 101"), "{}", e.message);
        assert!(budget(100, 100, None).is_err());
    }

    #[test]
    fn slots_are_bounded_and_returned_on_drop() {
        let count = Arc::new(AtomicUsize::new(0));
        let a = Slot::take(&count, 2).unwrap();
        let b = Slot::take(&count, 2).unwrap();
        assert!(Slot::take(&count, 2).is_none());
        drop(a);
        let c = Slot::take(&count, 2);
        assert!(c.is_some());
        drop((b, c));
        assert_eq!(count.load(Ordering::SeqCst), 0);
    }
}
