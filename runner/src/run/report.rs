//! What `minirun-run` prints once a run ends: the `--json` report (schema `minirun-run/1`), the
//! summary lines on stderr (timings, the prompt cache, the expert cache, `--stats`), and the
//! `--dump-logits` file.

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use super::{RunArgs, RunOutput};
use crate::step_stats::StepSummary;

/// Decode steps of a run: every generated token after the first.
fn decode_steps(out: &RunOutput) -> usize {
    out.tokens.len().saturating_sub(1)
}

/// The `--json` report.
pub(super) fn json(out: &RunOutput) -> Value {
    let s = &out.sampling;
    serde_json::json!({
        "schema": "minirun-run/1",
        "text": out.text,
        "prompt_tokens": out.prompt_ids.len(),
        "tokens": out.tokens,
        "prefill_s": out.prefill_s,
        "decode_s": out.decode_s,
        "decode_tokens_per_s": decode_steps(out) as f64 / out.decode_s.max(1e-9),
        "tile_reads": out.tile_reads,
        "per_step": StepSummary::of(&out.steps),
        "steps": out.steps,
        "sampling": {
            "temperature": s.temperature,
            "top_k": s.top_k,
            "top_p": s.top_p,
            "min_p": s.min_p,
            "repeat_penalty": s.repeat_penalty,
            "repeat_last_n": s.repeat_last_n,
            "seed": s.seed,
        },
        "dropped_incomplete": out.dropped_incomplete,
        "prompt_cache_reused": out.prompt_cache_reused,
        "expert_cache": out.expert_cache,
        "devices": crate::open::devices_opened(),
        "adapter": out.adapter,
        "shaders": out.shaders,
        "pulled": out.pulled,
    })
}

/// The lines on stderr after a run: an incomplete last character, the prompt cache's reuse,
/// prefill and decode speed, the expert cache (streamed or `--stats`) and the step counters
/// (`--stats`).
pub(super) fn summary(args: &RunArgs, out: &RunOutput) {
    let mut err = std::io::stderr().lock();
    if out.dropped_incomplete > 0 {
        let _ = writeln!(
            err,
            "note: the last token left a character incomplete; its bytes were not printed"
        );
    }
    if let Some(p) = &args.prompt_cache {
        let _ = writeln!(
            err,
            "prompt cache `{}`: {} of {} prompt tokens reused",
            p.display(),
            out.prompt_cache_reused,
            out.prompt_ids.len()
        );
    }
    // the prompt tokens a prompt cache did not hold
    let fed = out.prompt_ids.len() - out.prompt_cache_reused;
    let steps = decode_steps(out);
    let reads = if args.stream {
        format!("; {} tile reads", out.tile_reads)
    } else {
        String::new()
    };
    let _ = writeln!(
        err,
        "prefill {fed} tokens in {:.3} s ({:.2} tokens/s); decode {steps} tokens in {:.3} s ({:.2} tokens/s){reads}",
        out.prefill_s,
        fed as f64 / out.prefill_s.max(1e-9),
        out.decode_s,
        steps as f64 / out.decode_s.max(1e-9),
    );
    if let Some(c) = out.expert_cache.filter(|_| args.stats || args.stream) {
        let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
        let _ = writeln!(
            err,
            "expert cache: {} hits, {} misses ({:.1} MiB loaded), {} evictions; {:.1} MiB held, peak {:.1} of {:.0} MiB",
            c.hits,
            c.misses,
            mib(c.loaded_bytes),
            c.evictions,
            mib(c.cached_bytes),
            mib(c.peak_bytes),
            mib(c.budget_bytes)
        );
    }
    if args.stats {
        let _ = writeln!(err, "{}", StepSummary::of(&out.steps).line());
    }
}

/// Every step's logits as float32 `.npy` `[steps, vocab]` at `path`.
pub(super) fn dump_logits(path: &Path, out: &RunOutput) -> std::io::Result<()> {
    let vocab = out.logits.first().map_or(0, Vec::len);
    let flat: Vec<f32> = out.logits.concat();
    std::fs::write(path, crate::npy::npy_f32(&[out.logits.len(), vocab], &flat))
}
