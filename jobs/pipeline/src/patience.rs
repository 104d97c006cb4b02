//! Waiting out the hub's long rate limits (docs/publish.md "A real release on the Hub"). The Hub
//! limits commits per hour and answers 429 with a `RateLimit: …;t=N` or `Retry-After` of minutes;
//! the client does not sleep through a wait longer than its longest backoff
//! (`HubError::long_rate_limit`). A publishing stage waits, showing it, while its operator's
//! `--rate-limit-wait` allows, and otherwise stops (exit 1) saying when to run again: a re-run
//! resumes, sending nothing the branch already holds.

use std::future::Future;
use std::time::{Duration, Instant, SystemTime};

use hub::client::HubError;
use indicatif::{ProgressBar, ProgressDrawTarget};

use crate::progress::ProgressMode;

/// `--rate-limit-wait` by default: one window of an hourly quota.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(3600);
/// The environment variable that sets `--rate-limit-wait` (seconds, or `90s`, `10m`, `2h`).
pub const WAIT_VAR: &str = "MINIRUN_RATE_LIMIT_WAIT";
/// How often a log gets a line while a wait lasts.
const LINE_EVERY: Duration = Duration::from_secs(60);

/// A rate limit this run may not wait out.
#[derive(Debug, thiserror::Error)]
#[error("the hub rate-limits this repository: it asked for {wait} s before another request ({url}), beyond what `--rate-limit-wait` still allows ({left} s of {budget} s); run again after {retry_at} (what the branch already holds is not sent again)")]
pub struct RateLimited {
    /// The refused request's URL.
    pub url: String,
    /// The wait the hub asked for, in seconds.
    pub wait: u64,
    /// `--rate-limit-wait`, in seconds.
    pub budget: u64,
    /// What was left of it, in seconds.
    pub left: u64,
    /// When the wait ends, UTC (`YYYY-MM-DDTHH:MM:SSZ`).
    pub retry_at: String,
}

/// A hub call that failed, or a rate limit this run may not wait out.
#[derive(Debug)]
pub enum Stopped {
    /// Any other failure of the call.
    Hub(HubError),
    /// A rate limit beyond the budget.
    RateLimited(RateLimited),
}

/// One run's allowance for waiting out long rate limits, and how it shows the waits.
pub struct Patience {
    label: &'static str,
    budget: Duration,
    waited: Duration,
    /// Waits up to this long are the client's own retries (its longest backoff).
    beyond: Duration,
    mode: ProgressMode,
}

impl Patience {
    /// Wait at most `budget` in all for the stage `label`; `beyond` is the client's longest
    /// backoff (shorter waits are its own retries).
    pub fn new(
        label: &'static str,
        budget: Duration,
        beyond: Duration,
        mode: ProgressMode,
    ) -> Self {
        Patience {
            label,
            budget,
            waited: Duration::ZERO,
            beyond,
            mode,
        }
    }

    /// How long this run has waited so far.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Run `op` again after each long rate limit while the budget allows; the result, any other
    /// error, or the rate limit that would pass the budget.
    pub async fn run<T, F, Fut>(&mut self, mut op: F) -> Result<T, Stopped>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, HubError>>,
    {
        loop {
            let e = match op().await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let Some(wait) = e.long_rate_limit(self.beyond) else {
                return Err(Stopped::Hub(e));
            };
            let left = self.budget.saturating_sub(self.waited);
            if wait > left {
                return Err(Stopped::RateLimited(RateLimited {
                    url: url_of(&e),
                    wait: wait.as_secs(),
                    budget: self.budget.as_secs(),
                    left: left.as_secs(),
                    retry_at: utc_after(wait),
                }));
            }
            self.wait_out(wait).await;
            self.waited += wait;
        }
    }

    /// Sleep `wait`, saying so: a countdown bar on a terminal, a line a minute in a log.
    async fn wait_out(&self, wait: Duration) {
        let what = format!(
            "the hub rate-limits this repository (HTTP 429): waiting {} s, until {} ({} s of `--rate-limit-wait` {} s used)",
            wait.as_secs(),
            utc_after(wait),
            self.waited.as_secs(),
            self.budget.as_secs()
        );
        let bar = match self.mode {
            ProgressMode::Bars => {
                let b = ProgressBar::with_draw_target(
                    Some(wait.as_secs()),
                    ProgressDrawTarget::stderr(),
                );
                b.set_message(format!("{}: rate limited", self.label));
                b
            }
            _ => ProgressBar::hidden(),
        };
        if self.mode == ProgressMode::Lines {
            eprintln!("{}: {what}", self.label);
        }
        let start = Instant::now();
        let mut next_line = LINE_EVERY;
        while start.elapsed() < wait {
            tokio::time::sleep((wait - start.elapsed()).min(Duration::from_secs(1))).await;
            let elapsed = start.elapsed();
            bar.set_position(elapsed.as_secs());
            if self.mode == ProgressMode::Lines && elapsed >= next_line && elapsed < wait {
                next_line += LINE_EVERY;
                let left = (wait - elapsed).as_secs();
                eprintln!("{}: rate limited, {left} s left", self.label);
            }
        }
        bar.finish_and_clear();
        if self.mode == ProgressMode::Lines {
            eprintln!("{}: rate limit waited out; going on", self.label);
        }
    }
}

/// The URL an error names, for the message.
fn url_of(e: &HubError) -> String {
    match e {
        HubError::Http { method, url, .. } => format!("{method} {url}"),
        other => other.to_string(),
    }
}

/// Now + `wait`, UTC, to the second.
fn utc_after(wait: Duration) -> String {
    let at = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        + wait.as_secs();
    let s = hub::protocol::iso8601(at);
    format!("{}Z", s.trim_end_matches(".000Z"))
}

/// `--rate-limit-wait` as given: seconds, or a number with `s`, `m` or `h`.
pub fn parse_wait(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&s[..i], c),
        _ => (s, 's'),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (seconds, or e.g. `90s`, `10m`, `2h`)"))?;
    let mult = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        _ => return Err(format!("`{s}`: the unit is s, m or h")),
    };
    n.checked_mul(mult)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("`{s}` is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_parse_in_seconds_minutes_and_hours() {
        assert_eq!(parse_wait("0"), Ok(Duration::ZERO));
        assert_eq!(parse_wait("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_wait("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_wait("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_wait("2h"), Ok(Duration::from_secs(7200)));
        for bad in ["", "m", "-1", "1d", "1.5h", "ten"] {
            assert!(parse_wait(bad).is_err(), "{bad}");
        }
    }

    fn limited(secs: u16) -> HubError {
        HubError::Http {
            method: "POST".into(),
            url: "http://hub/api/models/o/n/commit/main".into(),
            status: 429,
            request_id: None,
            error_code: None,
            message: "rate limited".into(),
            retry_after: Some(secs),
        }
    }

    #[test]
    fn a_long_rate_limit_is_waited_out_within_the_budget_and_reported_beyond_it() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let mut p = Patience::new(
            "t",
            Duration::from_secs(3),
            Duration::from_secs(1),
            ProgressMode::Off,
        );
        let mut calls = 0;
        let r = rt.block_on(p.run(|| {
            calls += 1;
            let first = calls == 1;
            async move {
                if first {
                    Err(limited(2))
                } else {
                    Ok(7)
                }
            }
        }));
        assert_eq!(r.ok(), Some(7));
        assert_eq!((calls, p.waited()), (2, Duration::from_secs(2)));
        // 2 s more would pass the 3 s budget: stopped, with the time to run again.
        match rt.block_on(p.run(|| async { Err::<(), _>(limited(2)) })) {
            Err(Stopped::RateLimited(r)) => {
                assert_eq!((r.wait, r.budget, r.left), (2, 3, 1));
                assert!(r.to_string().contains("run again after 20"), "{r}");
            }
            other => panic!("{other:?}"),
        }
        // A short one is the client's own retry: returned as is.
        match rt.block_on(p.run(|| async { Err::<(), _>(limited(1)) })) {
            Err(Stopped::Hub(e)) => assert_eq!(e.status(), Some(429)),
            other => panic!("{other:?}"),
        }
    }
}
