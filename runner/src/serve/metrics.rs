//! What the server has done since it started (docs/runner.md "minirun-serve"): one home for the
//! counts `GET /health` reports and the Prometheus metrics `GET /metrics` exposes (text format,
//! through the Prometheus project's `prometheus-client`): requests by outcome, prompt and
//! generated tokens, prompt tokens the prefix cache held, time to first token and inter-token
//! latency histograms, requests admitted (running and queued) and the device memory the engine
//! holds. The model thread records; the HTTP thread reads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use serde_json::{json, Value};

use super::api::Finish;

/// A request's label: how it ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    outcome: &'static str,
}

/// The server's counters and histograms.
pub struct ServeStats {
    registry: Registry,
    requests: Family<Outcome, Counter>,
    prompt_tokens: Counter,
    generation_tokens: Counter,
    prefix_hits: Counter,
    ttft: Histogram,
    inter_token: Histogram,
    admitted: Gauge,
    device_bytes: Gauge,
}

impl std::fmt::Debug for ServeStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServeStats")
    }
}

impl Default for ServeStats {
    fn default() -> Self {
        let s = Self {
            registry: Registry::with_prefix("minirun"),
            requests: Family::default(),
            prompt_tokens: Counter::default(),
            generation_tokens: Counter::default(),
            prefix_hits: Counter::default(),
            // 10 ms … 82 s, and 1 ms … 8.2 s
            ttft: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
            inter_token: Histogram::new(exponential_buckets(0.001, 2.0, 14)),
            admitted: Gauge::default(),
            device_bytes: Gauge::default(),
        };
        s.register()
    }
}

impl ServeStats {
    fn register(mut self) -> Self {
        let r = &mut self.registry;
        r.register(
            "requests",
            "Generations by how they ended: stop, length, cancelled (the client went away, before or while it ran), error (refused by the model thread, or failed)",
            self.requests.clone(),
        );
        r.register(
            "prompt_tokens",
            "Prompt tokens of the generations",
            self.prompt_tokens.clone(),
        );
        r.register(
            "generation_tokens",
            "Tokens generated (the end-of-sequence token counted when generated)",
            self.generation_tokens.clone(),
        );
        r.register(
            "prefix_cache_hit_tokens",
            "Prompt tokens the KV cache already held (not fed again)",
            self.prefix_hits.clone(),
        );
        r.register_with_unit(
            "time_to_first_token",
            "From the start of a generation (its prompt tokenized and admitted) to its first token",
            Unit::Seconds,
            self.ttft.clone(),
        );
        r.register_with_unit(
            "inter_token_latency",
            "Between one generated token and the next",
            Unit::Seconds,
            self.inter_token.clone(),
        );
        r.register(
            "requests_admitted",
            "Generations admitted and not yet answered: the running one and the queue",
            self.admitted.clone(),
        );
        r.register_with_unit(
            "device_memory",
            "Device memory the engine has allocated, after the last generation",
            Unit::Bytes,
            self.device_bytes.clone(),
        );
        self
    }

    /// A generation ended as `finish` (`None`: it failed) after `generated` tokens.
    pub fn ended(&self, finish: Option<Finish>, generated: usize) {
        let outcome = finish.map_or("error", Finish::name);
        self.requests.get_or_create(&Outcome { outcome }).inc();
        self.generation_tokens.inc_by(generated as u64);
    }

    /// A queued request whose client went away before it ran.
    pub fn dropped(&self) {
        self.ended(Some(Finish::Cancelled), 0);
    }

    /// A generation's prompt: `tokens`, of which the cache held `reused`.
    pub fn prompt(&self, tokens: usize, reused: usize) {
        self.prompt_tokens.inc_by(tokens as u64);
        self.prefix_hits.inc_by(reused as u64);
    }

    pub fn first_token(&self, after: Duration) {
        self.ttft.observe(after.as_secs_f64());
    }

    pub fn next_token(&self, after: Duration) {
        self.inter_token.observe(after.as_secs_f64());
    }

    pub fn device_memory(&self, bytes: u64) {
        self.device_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    fn outcome(&self, outcome: &'static str) -> u64 {
        self.requests.get_or_create(&Outcome { outcome }).get()
    }

    /// `GET /health`'s counts.
    pub fn health(&self, admitted: &AtomicUsize) -> Value {
        let cancelled = self.outcome("cancelled");
        json!({
            "status": "ok",
            "admitted": admitted.load(Ordering::SeqCst),
            "generations": self.outcome("stop") + self.outcome("length") + cancelled,
            "cancelled": cancelled,
            "completion_tokens": self.generation_tokens.get(),
            "reused_prompt_tokens": self.prefix_hits.get(),
        })
    }

    /// `GET /metrics`: the Prometheus text exposition, with `admitted` requests now.
    pub fn render(&self, admitted: &AtomicUsize) -> String {
        let now = admitted.load(Ordering::SeqCst);
        self.admitted.set(i64::try_from(now).unwrap_or(i64::MAX));
        let mut out = String::new();
        // writing into a String cannot fail
        let _ = encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_and_metrics_read_the_same_counts() {
        let s = ServeStats::default();
        s.prompt(10, 4);
        s.ended(Some(Finish::Stop), 3);
        s.ended(Some(Finish::Length), 5);
        s.dropped();
        s.ended(None, 0);
        s.first_token(Duration::from_millis(30));
        s.next_token(Duration::from_millis(2));
        s.device_memory(4096);
        let admitted = AtomicUsize::new(2);
        let h = s.health(&admitted);
        assert_eq!(h["generations"], 3, "{h}");
        assert_eq!(h["cancelled"], 1);
        assert_eq!(h["completion_tokens"], 8);
        assert_eq!(h["reused_prompt_tokens"], 4);
        let m = s.render(&admitted);
        for line in [
            "minirun_requests_total{outcome=\"stop\"} 1",
            "minirun_requests_total{outcome=\"error\"} 1",
            "minirun_prompt_tokens_total 10",
            "minirun_generation_tokens_total 8",
            "minirun_prefix_cache_hit_tokens_total 4",
            "minirun_time_to_first_token_seconds_count 1",
            "minirun_inter_token_latency_seconds_count 1",
            "minirun_requests_admitted 2",
            "minirun_device_memory_bytes 4096",
            "# EOF",
        ] {
            assert!(m.lines().any(|l| l == line), "{line} not in\n{m}");
        }
    }
}
