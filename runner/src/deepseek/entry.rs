//! The `deepseek-v4` entry of the product registry (docs/runner.md "Registry",
//! docs/runner-deepseek-v4.md): the adapter opened over a verified artifact through
//! [`VerifiedSource`] (every tensor load under the artifact's load policy), and the family's
//! input pipeline — the verified `tokenizer.json` through the `tokenizers` crate with the
//! configuration's `bos_token_id` prepended, as DeepSeek's encoding starts every sequence — and
//! its chat format: the verified `tokenizer_config.json`'s `chat_template` if it has one, else
//! DeepSeek's own encoding in chat mode ([`super::chat`]).

use std::sync::Arc;

use super::model::{Mode, V4Model};
use crate::artifact::source::VerifiedSource;
use crate::artifact::{ArtifactTokenizer, VerifiedArtifact};
use crate::error::RunError;
use crate::llama::Logits;
use crate::registry::{ArtifactModel, ModelOptions, Residency};

/// The adapter behind the registry's [`ArtifactModel`].
pub struct V4Artifact {
    model: V4Model,
}

impl ArtifactModel for V4Artifact {
    fn vocab(&self) -> usize {
        self.model.config.vocab
    }

    fn forward(&mut self, ids: &[u32], logits: Logits) -> Result<Vec<Vec<f32>>, RunError> {
        match logits {
            Logits::Last => Ok(vec![self.model.forward(ids)?]),
            // One row per id: decode steps give the prefill's logits bit for bit (tested in
            // runner/tests/deepseek_reference.rs), so feeding them one at a time is exact.
            Logits::All => ids
                .iter()
                .map(|&id| self.model.forward(&[id]).map_err(RunError::from))
                .collect(),
        }
    }

    fn tile_reads(&self) -> u64 {
        self.model.tile_reads()
    }

    fn expert_cache(&self) -> Option<crate::deepseek::linear::ExpertCacheStats> {
        self.model.expert_cache()
    }

    /// Only a new sequence: the compressor and indexer states are not kept per position.
    fn rewind(&mut self, n: usize) -> Option<()> {
        (n == 0).then(|| self.model.reset())
    }
}

/// Opens the V4 adapter over `artifact` on the wgpu kernels, resident or with routed experts
/// streamed on demand.
pub fn open_artifact<'a>(
    artifact: &'a VerifiedArtifact,
    opts: &ModelOptions<'a>,
) -> Result<Box<dyn ArtifactModel + 'a>, RunError> {
    let mode = Mode::Gpu {
        streamed: opts.residency == Residency::Streamed,
        expert_cache_bytes: opts.expert_cache_bytes,
    };
    let model = V4Model::open(Arc::new(VerifiedSource::new(artifact)), mode)?;
    Ok(Box::new(V4Artifact { model }))
}

/// The family's text pipeline: the verified tokenizer with BOS prepended.
pub fn tokenizer(artifact: &VerifiedArtifact) -> Result<ArtifactTokenizer, RunError> {
    let mut tok = ArtifactTokenizer::from_artifact(artifact)?;
    tok.add_bos = tok.bos.is_some();
    Ok(tok)
}

/// The family's chat format: a `chat_template` in the verified `tokenizer_config.json` (none
/// upstream today), else DeepSeek V4's published encoding in chat mode.
pub fn chat(artifact: &VerifiedArtifact) -> Result<crate::chat::ChatFormat, RunError> {
    crate::artifact::chat::from_tokenizer_config(artifact)
        .map(|t| t.unwrap_or(crate::chat::ChatFormat::DeepSeekV4(Default::default())))
}
