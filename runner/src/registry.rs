//! The product registry (docs/runner.md "Registry"): one [`Entry`] per artifact family, pairing
//! the family's model adapter with its text pipeline, and one [`GgufEntry`] per GGUF
//! architecture, naming the family that opens it. `minirun-run --artifact DIR` opens the
//! [`VerifiedArtifact`] first, then looks its family up here; a family without an entry is
//! refused after verification, with a message naming it.
//!
//! Adding a family = one line in [`ENTRIES`]:
//!
//! ```text
//! Entry { family: "deepseek-v4", open: crate::deepseek::open_artifact, tokenizer: crate::artifact::tokenizer_of, chat: crate::deepseek::entry::chat },
//! ```
//!
//! where `open` builds the adapter from the artifact's tensors (by upstream name, through
//! [`VerifiedArtifact::load_container`] / [`VerifiedArtifact::load_plain`], which apply the load
//! policy) on the engine of [`ModelOptions`].

use std::path::Path;

use artifact::gguf::GgufModel;

use crate::adapter::{GgufWeights, Model, ModelOptions};
use crate::artifact::{ArtifactError, VerifiedArtifact};
use crate::error::RunError;
use crate::tokenizer::Tokenizer;

/// Builds a family's adapter from a verified artifact.
pub type OpenFn =
    for<'a> fn(&'a VerifiedArtifact, &ModelOptions<'a>) -> Result<Box<dyn Model + 'a>, RunError>;

/// Builds a family's text pipeline from a verified artifact.
pub type TokenizerFn = fn(&VerifiedArtifact) -> Result<Tokenizer, RunError>;

/// How a family's conversations become prompt text (its template or published encoder).
pub type ChatFn = fn(&VerifiedArtifact) -> Result<crate::chat::ChatFormat, RunError>;

/// One family: its name as in the plan and `.minirun/release.json` (`family`), its adapter and
/// its text pipeline.
#[derive(Clone, Copy)]
pub struct Entry {
    pub family: &'static str,
    pub open: OpenFn,
    pub tokenizer: TokenizerFn,
    pub chat: ChatFn,
}

/// The registered families.
pub static ENTRIES: &[Entry] = &[Entry {
    family: "deepseek-v4",
    open: crate::deepseek::entry::open_artifact,
    tokenizer: crate::deepseek::entry::tokenizer,
    chat: crate::deepseek::entry::chat,
}];

/// Opens a GGUF file of a registered architecture as its family's weights.
pub type GgufOpenFn = fn(GgufModel, &Path) -> Result<Box<dyn GgufWeights>, RunError>;

/// One GGUF architecture (`general.architecture`) and the family that runs it.
#[derive(Clone, Copy)]
pub struct GgufEntry {
    pub architecture: &'static str,
    /// The family module that runs it (`llama`).
    pub family: &'static str,
    pub open: GgufOpenFn,
}

/// The registered GGUF architectures: the Llama family's three (their RoPE pairing and
/// metadata keys are the family's, in `model.rs`).
pub static GGUF_ENTRIES: &[GgufEntry] = &[
    GgufEntry {
        architecture: "llama",
        family: "llama",
        open: crate::llama::open_gguf,
    },
    GgufEntry {
        architecture: "qwen2",
        family: "llama",
        open: crate::llama::open_gguf,
    },
    GgufEntry {
        architecture: "qwen3",
        family: "llama",
        open: crate::llama::open_gguf,
    },
];

/// The row of the GGUF file's `architecture` in [`GGUF_ENTRIES`], or the refusal naming it and
/// the registered ones.
pub fn gguf_entry(architecture: &str, path: &Path) -> Result<&'static GgufEntry, RunError> {
    GGUF_ENTRIES
        .iter()
        .find(|e| e.architecture == architecture)
        .ok_or_else(|| RunError::Model {
            path: path.display().to_string(),
            detail: format!(
                "architecture `{architecture}` has no runner (registered: {}); minirun runs only what its registry names",
                GGUF_ENTRIES
                    .iter()
                    .map(|e| e.architecture)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

/// The entry for `family`, if one is registered.
pub fn lookup(family: &str) -> Option<&'static Entry> {
    ENTRIES.iter().find(|e| e.family == family)
}

/// The entry for the artifact's family in [`ENTRIES`], or the refusal naming it.
pub fn entry_for(artifact: &VerifiedArtifact) -> Result<&'static Entry, ArtifactError> {
    entry_in(ENTRIES, artifact)
}

/// The entry for the artifact's family in `entries` (the CLI passes [`ENTRIES`]; tests pass
/// their own table), or the refusal naming the family and the registered ones.
pub fn entry_in<'e>(
    entries: &'e [Entry],
    artifact: &VerifiedArtifact,
) -> Result<&'e Entry, ArtifactError> {
    let family = artifact.family();
    entries
        .iter()
        .find(|e| e.family == family)
        .ok_or_else(|| ArtifactError::UnknownFamily {
            dir: artifact.root().display().to_string(),
            family: family.to_owned(),
            known: if entries.is_empty() {
                "none yet".to_owned()
            } else {
                entries
                    .iter()
                    .map(|e| format!("`{}`", e.family))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        })
}
