//! The DeepSeek V4 adapter's typed errors: each names the file, tensor or configuration key and
//! what to do about it (docs/runner-deepseek-v4.md).

/// What opening or running a V4 artifact fails at.
#[derive(Debug, thiserror::Error)]
pub enum V4Error {
    #[error("{what} `{path}`: {source}")]
    Io {
        what: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{path}` is not valid JSON for {what}: {detail}")]
    Json {
        what: &'static str,
        path: String,
        detail: String,
    },
    #[error("config key `{key}`: {detail}")]
    Config { key: String, detail: String },
    #[error("tensor `{name}`: {detail}")]
    Tensor { name: String, detail: String },
    #[error("container `{path}`: {source}")]
    Container {
        path: String,
        #[source]
        source: artifact::container::ContainerError,
    },
    #[error("kernel: {0}")]
    Kernel(#[from] kernels::KernelError),
    #[error("engine: {0}")]
    Engine(#[from] crate::engine::EngineError),
    #[error("input: {0}")]
    Input(String),
    #[error(transparent)]
    Artifact(#[from] crate::artifact::ArtifactError),
}

impl From<V4Error> for crate::error::RunError {
    fn from(e: V4Error) -> Self {
        crate::error::RunError::Family {
            prefix: "deepseek v4: ",
            source: Box::new(e),
        }
    }
}
