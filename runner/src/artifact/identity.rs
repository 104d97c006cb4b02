//! The tokenizer and configuration the runner executes with (seed 000 "Tokenizer and
//! configuration identity"; docs/runner.md "Verified-only execution"). Both are execution
//! evidence: the root file named by `index.json` is opened through the artifact's rooted,
//! evidence-checked access, and its bytes must equal the recorded byte count and SHA-256; its
//! `source_repo`/`source_revision` must be the model's own upstream; the tokenizer's licence file
//! must be a file of the verified tree; and the tokenizer's vocabulary must fit the model's
//! `vocab_size` (config.json).

use crate::tokenizer::Tokenizer;
use artifact::identity::{Parsed, RootFile};
use artifact::index_json::{IndexDocument, Shape};
use sha2::{Digest, Sha256};

use super::error::ArtifactError;
use super::load::Rooted;

/// Root files larger than this are not read as tokenizer or configuration.
pub const ROOT_FILE_MAX_BYTES: u64 = 256 << 20;

/// The checked root files.
pub(crate) struct RootFiles {
    pub tokenizer_json: Vec<u8>,
    pub config: serde_json::Value,
    pub vocab_size: u64,
    pub tokenizer_vocab: u64,
}

/// The upstream (repo, revision) pairs the model's weights come from.
fn model_sources(doc: &IndexDocument) -> Vec<(String, String)> {
    match &doc.shape {
        Shape::SingleSourceTotals(s) => vec![(s.source_repo.clone(), s.source_revision.clone())],
        Shape::SingleSourceUnits(s) => vec![(s.source_repo.clone(), s.source_revision.clone())],
        Shape::MultiSourceUnits(m) => m
            .sources
            .values()
            .map(|s| (s.repo.clone(), s.revision.clone()))
            .collect(),
        Shape::Unrecognized { .. } | Shape::Unreadable { .. } => Vec::new(),
    }
}

fn check_root(
    rooted: &Rooted,
    what: &'static str,
    id: &RootFile,
    sources: &[(String, String)],
) -> Result<Vec<u8>, ArtifactError> {
    let mismatch = |detail: String| ArtifactError::IdentityMismatch {
        what,
        file: id.file.clone(),
        detail,
    };
    if !sources
        .iter()
        .any(|(r, v)| *r == id.source_repo && *v == id.source_revision)
    {
        let listed: Vec<String> = sources.iter().map(|(r, v)| format!("{r}@{v}")).collect();
        return Err(mismatch(format!(
            "it comes from `{}@{}`, the model from {}",
            id.source_repo,
            id.source_revision,
            if listed.is_empty() {
                "an unrecognized index".to_owned()
            } else {
                listed.join(", ")
            }
        )));
    }
    let bytes = rooted.read_small(&id.file, ROOT_FILE_MAX_BYTES)?;
    if bytes.len() as u64 != id.bytes {
        return Err(mismatch(format!(
            "{} bytes on disk, {} recorded",
            bytes.len(),
            id.bytes
        )));
    }
    let got = hex::encode(Sha256::digest(&bytes));
    if got != id.sha256 {
        return Err(mismatch(format!("SHA-256 {got}, recorded {}", id.sha256)));
    }
    Ok(bytes)
}

/// `vocab_size` of a configuration: top level, else `text_config.vocab_size` (multimodal
/// configurations nest the language model's).
pub fn config_vocab_size(config: &serde_json::Value) -> Option<u64> {
    config
        .get("vocab_size")
        .and_then(serde_json::Value::as_u64)
        .or_else(|| {
            config
                .get("text_config")
                .and_then(|t| t.get("vocab_size"))
                .and_then(serde_json::Value::as_u64)
        })
}

/// The size of the id space a `tokenizer.json` produces: the largest id of its vocabulary and
/// added tokens, plus one.
pub fn tokenizer_vocab(tok: &tokenizers::Tokenizer) -> u64 {
    tok.get_vocab(true)
        .values()
        .copied()
        .max()
        .map_or(0, |m| u64::from(m) + 1)
}

pub(crate) fn check(rooted: &Rooted, doc: &IndexDocument) -> Result<RootFiles, ArtifactError> {
    let absent = |what, a: &artifact::identity::Absent| ArtifactError::IdentityAbsent {
        what,
        reason: a.to_string(),
    };
    let tok_id = match &doc.tokenizer {
        Parsed::Present(t) => t,
        Parsed::Absent(a) => return Err(absent("tokenizer", a)),
    };
    let cfg_id = match &doc.configuration {
        Parsed::Present(c) => c,
        Parsed::Absent(a) => return Err(absent("configuration", a)),
    };
    let sources = model_sources(doc);
    let tokenizer_json = check_root(rooted, "tokenizer", &tok_id.root, &sources)?;
    let config_bytes = check_root(rooted, "configuration", &cfg_id.root, &sources)?;
    // The licence: a non-empty file of the verified tree, opened the same way.
    let (_, lic) = rooted.open(&tok_id.license)?;
    if lic.size == 0 {
        return Err(ArtifactError::IdentityMismatch {
            what: "tokenizer licence",
            file: tok_id.license.clone(),
            detail: "the licence file is empty".into(),
        });
    }
    let config: serde_json::Value =
        serde_json::from_slice(&config_bytes).map_err(|e| ArtifactError::Malformed {
            path: cfg_id.root.file.clone(),
            detail: format!("not JSON: {e}"),
        })?;
    let vocab_size = config_vocab_size(&config).ok_or_else(|| ArtifactError::Vocabulary {
        detail: format!(
            "`{}` has no integer `vocab_size` (nor `text_config.vocab_size`)",
            cfg_id.root.file
        ),
    })?;
    let tok = tokenizers::Tokenizer::from_bytes(&tokenizer_json).map_err(|e| {
        ArtifactError::Malformed {
            path: tok_id.root.file.clone(),
            detail: format!("not a tokenizer: {e}"),
        }
    })?;
    let tokenizer_vocab = tokenizer_vocab(&tok);
    if tokenizer_vocab == 0 || tokenizer_vocab > vocab_size {
        return Err(ArtifactError::Vocabulary {
            detail: format!(
                "`{}` produces ids up to {} ({tokenizer_vocab} ids), `{}` says vocab_size {vocab_size}: the tokenizer does not belong to this model",
                tok_id.root.file,
                tokenizer_vocab.saturating_sub(1),
                cfg_id.root.file
            ),
        });
    }
    Ok(RootFiles {
        tokenizer_json,
        config,
        vocab_size,
        tokenizer_vocab,
    })
}

/// The text pipeline of an artifact: the runtime's [`Tokenizer`] over its verified
/// `tokenizer.json`, with the special ids of its configuration (`bos_token_id`, `eos_token_id`: an
/// integer or the first of a list); BOS is not prepended unless the family says so.
pub fn tokenizer_of(a: &super::VerifiedArtifact) -> Result<Tokenizer, crate::error::RunError> {
    Tokenizer::from_json_bytes(
        a.tokenizer_json(),
        id_of(a.config().get("bos_token_id")),
        id_of(a.config().get("eos_token_id")),
    )
}

fn id_of(v: Option<&serde_json::Value>) -> Option<u32> {
    let v = v?;
    v.as_u64()
        .or_else(|| v.as_array()?.first()?.as_u64())
        .and_then(|x| u32::try_from(x).ok())
}

/// The identity of a verified artifact: its repository and verified commit (from the evidence it
/// was opened under) and its tokenizer's SHA-256.
pub fn prompt_cache_identity(
    a: &super::VerifiedArtifact,
) -> Result<artifact::mega::kv::KvModel, crate::error::RunError> {
    let auth = a.authority().ok_or_else(|| {
        crate::error::RunError::Usage(
            "--prompt-cache binds the file to a verified commit; this artifact was opened without evidence".into(),
        )
    })?;
    Ok(artifact::mega::kv::KvModel::Artifact {
        repo: auth.repo.clone(),
        commit: auth.commit.clone(),
        tokenizer_sha256: hex::encode(sha2::Sha256::digest(a.tokenizer_json())),
    })
}
