//! `minirun-run -i`: open the model the flags name (a GGUF file or a verified artifact) through
//! the one open path ([`crate::open`]), load a `--prompt-cache` state, then the chat session's
//! REPL ([`crate::session`]). An adapter that cannot cut its state at any position goes back to
//! the latest snapshot it holds before where a new rendering parts; the turn's stats line says
//! how much was reused.

use std::io::Write;

use crate::error::RunError;
use crate::registry::Entry;
use crate::run::RunArgs;
use crate::sample::Sampler;
use crate::session::{repl, session_ctx, Session};

/// `minirun-run -i` with the registered families.
pub fn run_interactive(args: &RunArgs) -> Result<(), RunError> {
    run_interactive_with(args, crate::registry::ENTRIES)
}

/// `minirun-run -i` with the families of `entries` (tests register their own).
pub fn run_interactive_with(args: &RunArgs, entries: &[Entry]) -> Result<(), RunError> {
    let source = args.source().ok_or_else(|| {
        RunError::Usage("-i needs --model FILE, --artifact DIR or --repo OWNER/NAME".into())
    })?;
    let engine = crate::open::engine(&args.device_flags())?;
    let mut opened = crate::open::open(&source, entries)?;
    let template = opened
        .take_chat()
        .map_err(|e| {
            crate::run::with_hint(e, "-i chats in the model's chat format: run without -i")
        })?
        .with_reasoning_effort(args.reasoning_effort.as_deref())?;
    let ctx = session_ctx(args.ctx_size, opened.context)?;
    let mut model = opened.load(&args.model_options(&engine, ctx))?;
    let seq = model.begin()?;
    let loaded = match &args.prompt_cache {
        Some(p) => crate::prompt_cache::PromptCache::new(p, opened.prompt_cache_identity()?)
            .load_all(model.as_mut(), &seq)?,
        None => None,
    };
    let sampler = Sampler::new(args.sampling()?);
    let mut session = Session::new(
        model.as_mut(),
        seq,
        &opened,
        template,
        sampler,
        args.system.clone(),
        ctx,
        args.n,
    )?;
    if let Some(tokens) = loaded {
        let _ = writeln!(
            std::io::stderr(),
            "prompt cache: {} tokens loaded (the first turn reuses what it shares with them)",
            tokens.len()
        );
        session.assume_cached(tokens);
    }
    let first = (!args.prompt.is_empty()).then_some(args.prompt.as_str());
    repl(&mut session, first)
}
