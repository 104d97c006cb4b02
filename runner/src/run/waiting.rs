//! A line on stderr every few seconds while a run waits for its first token: the weights are
//! being loaded, the prompt fed, and on a first run the driver may still be compiling the
//! kernels' shaders (OpenGL compiles them at first use, not when the pipelines are made), so a
//! slow start says what it is doing instead of sitting silent.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the first token may take before the first line, and between lines.
const EVERY: Duration = Duration::from_secs(5);

/// Prints while the first token is awaited; stops at [`FirstToken::arrived`] or when dropped.
pub struct FirstToken {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FirstToken {
    /// Starts watching a run that loads its model and feeds `prompt_tokens` tokens before its
    /// first token, telling stderr.
    pub fn watch(prompt_tokens: usize) -> Self {
        Self::watch_into(prompt_tokens, EVERY, std::io::stderr)
    }

    /// As [`FirstToken::watch`], a line each `every` into what `out` gives.
    fn watch_into<W: Write>(
        prompt_tokens: usize,
        every: Duration,
        out: impl Fn() -> W + Send + 'static,
    ) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&done);
        let thread = std::thread::Builder::new()
            .name("first-token".into())
            .spawn(move || {
                let t0 = Instant::now();
                let mut next = every;
                while !seen.load(Ordering::Acquire) {
                    let now = t0.elapsed();
                    if now >= next {
                        let _ = writeln!(
                            out(),
                            "waiting for the first token: {:.0} s (loading the weights, feeding {prompt_tokens} prompt tokens; a first run on this driver also compiles the kernels' shaders)",
                            now.as_secs_f64()
                        );
                        next += every;
                    }
                    std::thread::park_timeout(next.saturating_sub(now).min(every));
                }
            })
            .ok();
        Self { done, thread }
    }

    /// The first token is out: no more lines.
    pub fn arrived(&self) {
        if !self.done.swap(true, Ordering::AcqRel) {
            if let Some(t) = &self.thread {
                t.thread().unpark();
            }
        }
    }
}

impl Drop for FirstToken {
    fn drop(&mut self) {
        self.arrived();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Lines written so far into a shared buffer.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::ErrorKind::Other)?
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Lines {
        fn count(&self) -> usize {
            self.0
                .lock()
                .map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
        }
    }

    #[test]
    fn a_slow_first_token_is_told_until_it_arrives_and_a_fast_one_is_not() {
        let lines = Lines::default();
        let sink = lines.clone();
        let w = FirstToken::watch_into(7, Duration::from_millis(40), move || sink.clone());
        std::thread::sleep(Duration::from_millis(150));
        w.arrived();
        let told = lines.count();
        assert!(told >= 2, "{told} lines in 150 ms at one per 40 ms");
        std::thread::sleep(Duration::from_millis(120));
        assert_eq!(lines.count(), told, "no line after the first token");
        drop(w);
        let text = String::from_utf8(lines.0.lock().map(|b| b.clone()).unwrap_or_default())
            .unwrap_or_default();
        assert!(text.contains("feeding 7 prompt tokens"), "{text}");

        let quiet = Lines::default();
        let sink = quiet.clone();
        drop(FirstToken::watch_into(
            3,
            Duration::from_millis(200),
            move || sink.clone(),
        ));
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(quiet.count(), 0, "a fast run prints nothing");
    }
}
