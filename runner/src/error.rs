//! The runner's typed errors (model loading, tokenizer, forward, CLI files).

use crate::engine::EngineError;

/// What loading or running a model fails at.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("gguf `{path}`: {source}")]
    Gguf {
        path: String,
        #[source]
        source: artifact::gguf::GgufError,
    },
    #[error("gguf `{path}`: {source}")]
    Meta {
        path: String,
        #[source]
        source: artifact::gguf::metadata::MetaError,
    },
    #[error("model `{path}`: {detail}")]
    Model { path: String, detail: String },
    #[error("tensor `{name}`: {detail}")]
    Tensor { name: String, detail: String },
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A model family's or weight source's own error, converted where that module defines it
    /// (`prefix` names the family where its text does not).
    #[error("{prefix}{source}")]
    Family {
        prefix: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("kernel reference: {0}")]
    Kernel(#[from] kernels::KernelError),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error(transparent)]
    Constraint(#[from] crate::constrain::ConstraintError),
    #[error("{what} `{path}`: {source}")]
    Io {
        what: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("chat template: {0}")]
    Template(String),
    /// Settings that cannot work (exit 64).
    #[error("{0}")]
    Usage(String),
    #[error("context of {capacity} positions is full (prompt + new tokens must fit)")]
    ContextFull { capacity: usize },
    /// `--repo`: the pull into the Hugging Face cache failed (`hint`: the next step, where the
    /// failure has one).
    #[error("pulling `{repo}`{}", .hint.as_deref().map(|h| format!(" ({h})")).unwrap_or_default())]
    Pull {
        repo: String,
        #[source]
        source: Box<pipeline::verify::VerifyError>,
        hint: Option<String>,
    },
    /// `--repo`: the pulled copy did not verify; nothing is run.
    #[error("`{repo}` at {commit} in `{dir}` is not verified ({verdict}): {problems}; the runner executes verified artifacts only (`minirun-verify check {repo} --revision {commit} --dir {dir} --repair` repairs it)")]
    NotVerified {
        repo: String,
        commit: String,
        dir: String,
        verdict: &'static str,
        problems: String,
    },
}
