//! Retry policy (docs/hub.md §6): exponential backoff with jitter on 408/429/500/502/503/504 and
//! on connection failures, waiting at least what `Retry-After` or `RateLimit: …;t=N` asks (capped).
//! Requests that are not idempotent (the commit POST) are retried only when the connection failed
//! before anything was sent.

use std::time::Duration;

use reqwest::header::HeaderMap;

/// How the client retries.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts in all (1 = no retry).
    pub max_attempts: u32,
    /// First backoff.
    pub base_delay: Duration,
    /// Longest backoff, and the cap on a server-requested wait.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(30),
        }
    }
}

/// Which failures a request may be retried after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idempotence {
    /// Retry on retryable statuses and any transport failure.
    Idempotent,
    /// Retry only when the connection could not be made (nothing was sent).
    ConnectOnly,
}

/// Statuses retried by default (as `huggingface_hub` does).
pub fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
}

impl RetryPolicy {
    /// The wait before attempt `attempt + 1` (0-based `attempt` just failed): exponential with
    /// "equal jitter", never below what the server asked.
    pub fn delay(&self, attempt: u32, server_wait: Option<Duration>) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.max_delay);
        let half = exp / 2;
        let jitter = half.mul_f64(rand::random::<f64>());
        let d = half + jitter;
        match server_wait {
            Some(w) => d.max(w.min(self.max_delay)),
            None => d,
        }
    }
}

/// The wait a response asks for: `Retry-After: <seconds>` or the `t=` of `RateLimit`.
pub fn server_wait(h: &HeaderMap) -> Option<Duration> {
    if let Some(s) = h
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        return Some(Duration::from_secs(s));
    }
    let rl = h.get("ratelimit").and_then(|v| v.to_str().ok())?;
    rl.split(';')
        .find_map(|p| p.trim().strip_prefix("t="))
        .and_then(|t| t.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_honour_headers() {
        let mut h = HeaderMap::new();
        h.insert("ratelimit", "\"api\";r=0;t=7".parse().unwrap());
        assert_eq!(server_wait(&h), Some(Duration::from_secs(7)));
        h.insert("retry-after", "3".parse().unwrap());
        assert_eq!(server_wait(&h), Some(Duration::from_secs(3)));
        let p = RetryPolicy::default();
        let d = p.delay(0, Some(Duration::from_secs(3)));
        assert!(d >= Duration::from_secs(3));
        for a in 0..20 {
            assert!(p.delay(a, None) <= p.max_delay);
        }
    }
}
