//! `minirun-run -i`: an interactive chat session (docs/runner.md "Interactive session"). Each
//! turn renders the whole conversation in the model's chat template, tokenizes it, and feeds only
//! what the KV cache does not already hold: the cache keeps the longest common prefix of the
//! tokens it was fed and the new rendering (earlier turns are not prefilled again; where the
//! template re-tokenizes an answer differently, the cache is rewound to where they part).
//! `/reset` forgets the conversation (the system message stays), `/exit` or end of input ends
//! the session; Ctrl-C stops the answer being written and returns to the prompt, and at the
//! prompt ends the session. The context limit is checked before each turn.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::adapter::Model;
use crate::chat::{ChatFormat, Message};
use crate::error::RunError;
use crate::generate::{generate_text, GenOpts};
use crate::sample::Sampler;
use crate::sequence::Sequence;
use crate::tokenizer::TextPipeline;

/// Set by SIGINT while an answer is being written.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// True while an answer is being written (SIGINT then stops it instead of ending the session).
static GENERATING: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    if GENERATING.load(Ordering::SeqCst) {
        INTERRUPTED.store(true, Ordering::SeqCst);
    } else {
        // At the prompt: end the session (async-signal-safe exit, 130 as a shell reports it).
        unsafe { libc::_exit(130) };
    }
}

fn install_sigint() {
    let handler: extern "C" fn(libc::c_int) = on_sigint;
    // SAFETY: the handler only touches atomics and calls `_exit`, both async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
    }
}

/// What one turn did (for the stderr line and the tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnStats {
    /// Tokens of the rendered conversation already in the cache.
    pub reused: usize,
    /// Tokens fed this turn (the part of the conversation the cache lacked).
    pub fed: usize,
    /// Tokens generated.
    pub generated: usize,
    /// Whether Ctrl-C stopped the answer.
    pub interrupted: bool,
}

/// The tokens a decoder's KV cache holds, so that a new prompt feeds only what the cache lacks
/// (a session's next turn, the server's next request): the cache keeps the longest common prefix
/// of what it was fed and the new prompt, and is rewound to where they part.
#[derive(Debug, Default)]
pub struct CachedPrefix {
    tokens: Vec<u32>,
}

impl CachedPrefix {
    /// Rewinds `seq` to the longest common prefix of the cache and `ids` (at most all but the
    /// last id: one is always fed) and returns its length; a model that cannot keep that prefix
    /// goes back to one it can (a snapshot, or 0).
    pub fn reuse(
        &mut self,
        model: &mut dyn Model,
        seq: &Sequence,
        ids: &[u32],
    ) -> Result<usize, RunError> {
        let common = self
            .tokens
            .iter()
            .zip(ids)
            .take_while(|(a, b)| a == b)
            .count()
            .min(ids.len().saturating_sub(1));
        let kept = model.rewind(seq, common)?.min(common);
        self.tokens.truncate(kept);
        Ok(kept)
    }

    /// Takes `tokens` as what the cache holds (a prompt cache was just loaded into the model).
    pub fn assume(&mut self, tokens: Vec<u32>) {
        self.tokens = tokens;
    }

    /// Records what a generation fed: `feed`, then every generated token but the last (which
    /// was chosen, never fed).
    pub fn fed(&mut self, feed: &[u32], generated: &[u32]) {
        self.tokens.extend_from_slice(feed);
        self.tokens
            .extend_from_slice(&generated[..generated.len().saturating_sub(1)]);
    }

    /// Forgets everything: `seq` goes back to position 0 (where that fails, the next
    /// [`CachedPrefix::reuse`] says why).
    pub fn forget(&mut self, model: &mut dyn Model, seq: &Sequence) {
        if model.rewind(seq, 0).is_ok() {
            self.tokens.clear();
        }
    }

    /// How many tokens the cache holds.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

/// A conversation: one sequence of a model, whose state it keeps between turns.
pub struct Session<'a> {
    model: &'a mut dyn Model,
    seq: Sequence,
    tok: &'a dyn TextPipeline,
    template: ChatFormat,
    sampler: Sampler,
    system: Option<String>,
    messages: Vec<Message>,
    /// The tokens the decoder's cache holds.
    cached: CachedPrefix,
    ctx: usize,
    n_max: usize,
}

impl<'a> Session<'a> {
    /// A session over the sequence `seq` of `model` talking in `template` (the GGUF's chat
    /// template, or an artifact family's chat format).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        model: &'a mut dyn Model,
        seq: Sequence,
        tok: &'a dyn TextPipeline,
        template: ChatFormat,
        sampler: Sampler,
        system: Option<String>,
        ctx: usize,
        n_max: usize,
    ) -> Result<Self, RunError> {
        let mut s = Self {
            model,
            seq,
            tok,
            template,
            sampler,
            system,
            messages: Vec::new(),
            cached: CachedPrefix::default(),
            ctx,
            n_max,
        };
        // The sequence's state is left as it is: empty for a fresh one, or a loaded prompt
        // cache the caller names with `assume_cached`.
        if let Some(sys) = &s.system {
            s.messages.push(Message::new("system", sys));
        }
        Ok(s)
    }

    /// The model's cache holds `tokens` (a prompt cache loaded after [`Session::new`]); the
    /// first turn reuses what its rendering shares with them.
    pub fn assume_cached(&mut self, tokens: Vec<u32>) {
        self.cached.assume(tokens);
    }

    /// Forgets the conversation; the system message stays.
    pub fn reset(&mut self) {
        self.messages.clear();
        if let Some(sys) = &self.system {
            self.messages.push(Message::new("system", sys));
        }
        self.cached.forget(&mut *self.model, &self.seq);
    }

    /// One turn: `user` says something, the answer is streamed to `sink`.
    pub fn turn(&mut self, user: &str, sink: &mut dyn FnMut(&str)) -> Result<TurnStats, RunError> {
        self.messages.push(Message::new("user", user));
        let text = self.template.render(&self.messages, true)?;
        let ids = self.tok.encode_text(&text)?;
        if ids.len() + 1 > self.ctx {
            self.messages.pop();
            return Err(RunError::Usage(format!(
                "the conversation needs {} tokens, the context holds {} (-c/--ctx-size): /reset to start over",
                ids.len() + 1,
                self.ctx
            )));
        }
        let common = self.cached.reuse(&mut *self.model, &self.seq, &ids)?;
        let feed = &ids[common..];
        let opts = GenOpts {
            n: self.n_max.min(self.ctx - ids.len()),
            ignore_eos: false,
            keep_logits: false,
            logprobs: None,
        };
        INTERRUPTED.store(false, Ordering::SeqCst);
        GENERATING.store(true, Ordering::SeqCst);
        // The EOS token decodes to nothing (special tokens are skipped).
        let result = generate_text(
            &mut *self.model,
            &self.seq,
            feed,
            &opts,
            &mut self.sampler,
            self.tok,
            sink,
            &|| !INTERRUPTED.load(Ordering::SeqCst),
        );
        GENERATING.store(false, Ordering::SeqCst);
        let (g, answer, _) = result?;
        self.cached.fed(feed, &g.tokens);
        self.messages.push(Message::new("assistant", &answer));
        Ok(TurnStats {
            reused: common,
            fed: feed.len(),
            generated: g.tokens.len(),
            interrupted: INTERRUPTED.load(Ordering::SeqCst),
        })
    }
}

/// The REPL on stdin/stdout: `> ` prompts, streamed answers, one stats line per turn on stderr.
pub fn repl(session: &mut Session<'_>, first: Option<&str>) -> Result<(), RunError> {
    install_sigint();
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    let _ = writeln!(
        std::io::stderr(),
        "interactive: /reset forgets the conversation, /exit (or end of input) ends; Ctrl-C stops an answer"
    );
    let mut pending = first.map(str::to_owned);
    loop {
        let line = match pending.take() {
            Some(l) => l,
            None => {
                let _ = write!(out, "> ");
                let _ = out.flush();
                let mut l = String::new();
                let n = stdin
                    .lock()
                    .read_line(&mut l)
                    .map_err(|source| RunError::Io {
                        what: "read",
                        path: "stdin".into(),
                        source,
                    })?;
                if n == 0 {
                    let _ = writeln!(out);
                    return Ok(());
                }
                l.trim_end_matches(['\n', '\r']).to_owned()
            }
        };
        match line.trim() {
            "" => continue,
            "/exit" | "/quit" => return Ok(()),
            "/reset" => {
                session.reset();
                let _ = writeln!(std::io::stderr(), "(conversation forgotten)");
                continue;
            }
            _ => {}
        }
        let t0 = Instant::now();
        let mut sink = |piece: &str| {
            let _ = out.write_all(piece.as_bytes()).and_then(|()| out.flush());
        };
        match session.turn(&line, &mut sink) {
            Ok(t) => {
                let _ = writeln!(out);
                let _ = writeln!(
                    std::io::stderr(),
                    "[{} tokens reused from the cache, {} fed, {} generated in {:.2} s{}]",
                    t.reused,
                    t.fed,
                    t.generated,
                    t0.elapsed().as_secs_f64(),
                    if t.interrupted {
                        ", stopped by Ctrl-C"
                    } else {
                        ""
                    }
                );
            }
            Err(RunError::Usage(m)) => {
                let _ = writeln!(std::io::stderr(), "{m}");
            }
            Err(e) => return Err(e),
        }
    }
}

/// The context of a session when `-c` is not given: the model's, at most this many tokens (the KV
/// cache is allocated for the whole context up front; llama.cpp's default is 4096 as well).
pub const DEFAULT_SESSION_CTX: usize = 4096;

/// The context of a long-lived model (a session, a server): `-c` if given, else the model's, at
/// most [`DEFAULT_SESSION_CTX`]; refused past the model's.
pub fn session_ctx(ctx_size: Option<usize>, model_ctx: usize) -> Result<usize, RunError> {
    crate::generate::check_context(
        0,
        0,
        Some(ctx_size.unwrap_or(model_ctx.min(DEFAULT_SESSION_CTX))),
        model_ctx,
    )
}
