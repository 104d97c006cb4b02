//! Shared set-up of the SmolLM2 tests: the engine (skip or fail without an adapter) and the model
//! file (skip or fail without it).

#![allow(dead_code, clippy::panic)]

use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;

use runner::engine::{Engine, EngineError};

/// The five fixed prompts of the exact and llama.cpp comparisons (also in
/// `ci/oracles/smollm2_llamacpp.py`).
pub const PROMPTS: [&str; 5] = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, there was a",
    "The three primary colors are",
    "In 1969, Neil Armstrong",
];

fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| !v.is_empty() && v != "0")
}

pub fn engine(test: &str) -> Option<&'static Engine> {
    static ENGINE: OnceLock<Option<Engine>> = OnceLock::new();
    let e = ENGINE
        .get_or_init(|| match Engine::new() {
            Ok(e) => Some(e),
            Err(EngineError::Open(kernels::KernelError::NoAdapter { .. })) => None,
            Err(e) => panic!("engine set-up failed: {e}"),
        })
        .as_ref();
    if e.is_none() {
        if std::env::var("MINIRUN_REQUIRE_ADAPTER").is_ok_and(|v| v == "1") {
            panic!("{test}: no wgpu adapter and MINIRUN_REQUIRE_ADAPTER=1");
        }
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: no wgpu adapter");
    }
    e
}

/// `$MINIRUN_SMOLLM2_GGUF`, else `<repo>/ci/.cache/SmolLM2-135M-Instruct.Q4_1.gguf`; absent: a
/// failure when `CI` is set, otherwise a visible skip.
pub fn model_path(test: &str) -> Option<PathBuf> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let candidates = [
        std::env::var_os("MINIRUN_SMOLLM2_GGUF").map(PathBuf::from),
        Some(repo.join("ci/.cache/SmolLM2-135M-Instruct.Q4_1.gguf")),
    ];
    if let Some(p) = candidates.into_iter().flatten().find(|p| p.is_file()) {
        return Some(p);
    }
    if required("CI") {
        panic!(
            "{test}: SmolLM2 GGUF not found (set MINIRUN_SMOLLM2_GGUF; ci/install.d fetches it)"
        );
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: SmolLM2 GGUF not found (set MINIRUN_SMOLLM2_GGUF)"
    );
    None
}

pub fn repo_file(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel)
}

/// (index of the maximum, margin to the second largest).
pub fn top2(v: &[f32]) -> (usize, f32) {
    let mut best = (0usize, f32::NEG_INFINITY);
    let mut second = f32::NEG_INFINITY;
    for (i, &x) in v.iter().enumerate() {
        if x > best.1 {
            second = best.1;
            best = (i, x);
        } else if x > second {
            second = x;
        }
    }
    (best.0, best.1 - second)
}

/// A prompt-cache `file` (holding a good `.megakv`) cut by one byte, then with one byte altered,
/// is refused by `load` (which returns the error's text), naming why; the good bytes are put back.
pub fn cache_refuses_truncated_and_altered(
    file: &std::path::Path,
    mut load: impl FnMut() -> String,
) {
    let write = |bytes: &[u8]| {
        if let Err(e) = std::fs::write(file, bytes) {
            panic!("write {}: {e}", file.display());
        }
    };
    let good = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => panic!("read {}: {e}", file.display()),
    };
    write(&good[..good.len() - 1]);
    let err = load();
    assert!(
        err.contains("prompt cache") && err.contains("truncated"),
        "{err}"
    );
    let mut altered = good.clone();
    altered[good.len() - 10] ^= 0x40;
    write(&altered);
    let err = load();
    assert!(err.contains("digest mismatch"), "{err}");
    write(&good);
}

/// A model with one live sequence, as the tests drive it (the front-ends go through
/// `generate`, the session and the prompt cache, which take the pair).
pub struct One<'a> {
    pub model: Box<dyn runner::adapter::Model + 'a>,
    pub seq: runner::sequence::Sequence,
}

impl<'a> One<'a> {
    /// `model` with a sequence begun.
    pub fn new(mut model: Box<dyn runner::adapter::Model + 'a>) -> Self {
        let seq = model.begin().expect("a sequence of a fresh model");
        Self { model, seq }
    }

    /// The last position's logits after feeding `ids`.
    pub fn logits(&mut self, ids: &[u32]) -> Result<Vec<f32>, runner::error::RunError> {
        runner::generate::logits(
            self.model.as_mut(),
            &self.seq,
            runner::sequence::Input::Ids(ids),
        )
    }

    /// Positions fed so far.
    pub fn position(&self) -> usize {
        self.model.position(&self.seq).expect("the live sequence")
    }
}
