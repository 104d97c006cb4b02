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

use crate::chat::{ChatTemplate, Message};
use crate::error::RunError;
use crate::run::{generate_text, Decoder, GenOpts};
use crate::sample::Sampler;
use crate::tokenizer::Tokenizer;

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

/// A conversation over a decoder whose KV cache it keeps.
pub struct Session<'a> {
    model: &'a mut dyn Decoder,
    tok: &'a Tokenizer,
    template: ChatTemplate,
    sampler: Sampler,
    system: Option<String>,
    messages: Vec<Message>,
    /// The tokens the decoder's cache holds, in order.
    cached: Vec<u32>,
    ctx: usize,
    n_max: usize,
}

impl<'a> Session<'a> {
    pub fn new(
        model: &'a mut dyn Decoder,
        tok: &'a Tokenizer,
        sampler: Sampler,
        system: Option<String>,
        ctx: usize,
        n_max: usize,
    ) -> Result<Self, RunError> {
        let template = tok.template()?;
        let mut s = Self {
            model,
            tok,
            template,
            sampler,
            system,
            messages: Vec::new(),
            cached: Vec::new(),
            ctx,
            n_max,
        };
        s.reset();
        Ok(s)
    }

    /// Forgets the conversation; the system message stays.
    pub fn reset(&mut self) {
        self.messages.clear();
        if let Some(sys) = &self.system {
            self.messages.push(Message::new("system", sys));
        }
        self.cached.clear();
        let _ = self.model.rewind(0);
    }

    /// One turn: `user` says something, the answer is streamed to `sink`.
    pub fn turn(&mut self, user: &str, sink: &mut dyn FnMut(&str)) -> Result<TurnStats, RunError> {
        self.messages.push(Message::new("user", user));
        let text = self.template.render(&self.messages, true)?;
        let ids = self.tok.encode(&text)?;
        if ids.len() + 1 > self.ctx {
            self.messages.pop();
            return Err(RunError::Usage(format!(
                "the conversation needs {} tokens, the context holds {} (-c/--ctx-size): /reset to start over",
                ids.len() + 1,
                self.ctx
            )));
        }
        // Reuse the cache up to where it and the new rendering part; feed at least one token.
        let mut common = self
            .cached
            .iter()
            .zip(&ids)
            .take_while(|(a, b)| a == b)
            .count()
            .min(ids.len() - 1);
        if self.model.rewind(common).is_none() {
            common = 0;
        }
        self.cached.truncate(common);
        let feed = &ids[common..];
        let opts = GenOpts {
            n: self.n_max.min(self.ctx - ids.len()),
            ignore_eos: false,
            keep_logits: false,
        };
        INTERRUPTED.store(false, Ordering::SeqCst);
        GENERATING.store(true, Ordering::SeqCst);
        // The EOS token decodes to nothing (special tokens are skipped).
        let result = generate_text(
            &mut *self.model,
            feed,
            &opts,
            &mut self.sampler,
            self.tok,
            sink,
            &|| !INTERRUPTED.load(Ordering::SeqCst),
        );
        GENERATING.store(false, Ordering::SeqCst);
        let (g, answer, _) = result?;
        // The cache holds the conversation and every generated token but the last (never fed).
        self.cached.extend_from_slice(feed);
        self.cached
            .extend_from_slice(&g.tokens[..g.tokens.len().saturating_sub(1)]);
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

/// `minirun-run -i --model FILE`: load, then the REPL.
pub fn run_interactive(args: &crate::run::RunArgs) -> Result<(), RunError> {
    use crate::llama::{Runner, WeightMode};
    let path = args.model.as_deref().ok_or_else(|| {
        RunError::Usage(
            "-i needs --model FILE (an artifact's chat format is not read yet: docs/runner.md)"
                .into(),
        )
    })?;
    let model = crate::model::LlamaModel::open(path)?;
    let tok = match &args.tokenizer {
        Some(p) => Tokenizer::from_file(p, model.gguf.metadata())?,
        None => Tokenizer::from_gguf(model.gguf.metadata())?,
    };
    let model_ctx = model.config.context;
    let ctx = crate::run::check_context(
        0,
        0,
        Some(args.ctx_size.unwrap_or(model_ctx.min(DEFAULT_SESSION_CTX))),
        model_ctx,
    )?;
    let sampler = Sampler::new(args.sampling()?);
    let engine = crate::engine::Engine::new_with_shape(args.matvec_shape.map(Into::into))?;
    let mode = if args.stream {
        WeightMode::Streamed {
            tile_bytes: args.tile_bytes,
        }
    } else {
        WeightMode::Resident
    };
    let mut runner = Runner::new(&engine, &model, mode, ctx)?;
    let mut session = Session::new(&mut runner, &tok, sampler, args.system.clone(), ctx, args.n)?;
    let first = (!args.prompt.is_empty()).then_some(args.prompt.as_str());
    repl(&mut session, first)
}
