//! Why a Minirun artifact is refused or a load fails (docs/runner.md "Verified-only execution").
//! Every message names the file or tensor and, where one exists, the fix.

use artifact::container::ContainerError;
use artifact::evidence::EvidenceError;

/// What opening a verified artifact, or loading one of its tensors, fails at.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("`{dir}` has no verification evidence {which}: the runner executes verified artifacts only; run `minirun-verify pull REPO --revision COMMIT --dir {dir}` first")]
    NoEvidence { dir: String, which: String },
    #[error("`{dir}` holds evidence for several commits ({commits}): name the one to run with `--revision`")]
    AmbiguousEvidence { dir: String, commits: String },
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
    #[error("`{path}` no longer matches {against} ({detail}): {fix}")]
    Modified {
        path: String,
        against: &'static str,
        detail: String,
        fix: String,
    },
    #[error("`{path}` is not part of the verified tree of commit `{commit}`")]
    NotInEvidence { path: String, commit: String },
    #[error("cannot open `{path}` under `{root}` without following symbolic links: {source}")]
    Open {
        path: String,
        root: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot {what} `{path}`: {source}")]
    Io {
        what: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the {what} identity in `index.json` is absent ({reason}): the runner needs the published tokenizer and configuration identities")]
    IdentityAbsent { what: &'static str, reason: String },
    #[error("the {what} `{file}` does not match its identity in `index.json`: {detail}")]
    IdentityMismatch {
        what: &'static str,
        file: String,
        detail: String,
    },
    #[error("vocabulary mismatch: {detail}")]
    Vocabulary { detail: String },
    #[error("`{path}`: {detail}")]
    Malformed { path: String, detail: String },
    #[error("tensor `{name}`: {detail}")]
    Tensor { name: String, detail: String },
    #[error("`{path}` is {actual} bytes long, but {what} says {expected}")]
    Length {
        path: String,
        what: &'static str,
        actual: u64,
        expected: u64,
    },
    #[error(transparent)]
    Container(#[from] ContainerError),
    #[error("`{path}`: SHA-256 {actual}, {what} says {expected}")]
    Digest {
        path: String,
        what: &'static str,
        actual: String,
        expected: String,
    },
    #[error("the artifact `{dir}` is verified, not chat-capable: no runner is registered for its family `{family}` (registered: {known}); it is never run with a guessed adapter")]
    UnknownFamily {
        dir: String,
        family: String,
        known: String,
    },
}

pub(crate) fn io(what: &'static str, path: &str) -> impl FnOnce(std::io::Error) -> ArtifactError {
    let path = path.to_owned();
    move |source| ArtifactError::Io { what, path, source }
}

impl From<ArtifactError> for crate::error::RunError {
    fn from(e: ArtifactError) -> Self {
        crate::error::RunError::Family {
            prefix: "",
            source: Box::new(e),
        }
    }
}
