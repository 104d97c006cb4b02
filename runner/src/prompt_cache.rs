//! `--prompt-cache FILE` (docs/runner.md "Prompt cache"): the KV state of a prompt prefix kept in
//! a `.megakv` file (`artifact::mega::kv`, docs/mega.md §12), bound to the exact GGUF file (its
//! SHA-256 and length) and the KV layout. Loading puts the file's keys and values back and keeps
//! the positions its tokens share with the new prompt, so only the rest is fed; a file made for
//! another model or layout, truncated, or altered in any byte is refused with the reason.

use std::io::Read;
use std::path::{Path, PathBuf};

use artifact::mega::kv::{read_kv, write_kv, KvHeader, KvLayout, KvModel};
use sha2::{Digest, Sha256};

use crate::adapter::Model;
use crate::error::RunError;
use crate::sequence::{SavedState, Sequence};

fn cache_err(path: &Path, detail: impl std::fmt::Display) -> RunError {
    RunError::Model {
        path: path.display().to_string(),
        detail: format!("prompt cache: {detail}"),
    }
}

/// The identity of a GGUF file: SHA-256 of its bytes and its length.
pub fn gguf_identity(gguf: &Path) -> Result<KvModel, RunError> {
    let io = |source| RunError::Io {
        what: "hash",
        path: gguf.display().to_string(),
        source,
    };
    let mut f = std::fs::File::open(gguf).map_err(io)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        bytes += n as u64;
    }
    Ok(KvModel::Gguf {
        sha256: hex::encode(h.finalize()),
        bytes,
    })
}

/// A prompt-cache file for one model.
pub struct PromptCache {
    path: PathBuf,
    model: KvModel,
}

impl PromptCache {
    /// The cache at `path` for the model identified by `model`.
    pub fn new(path: &Path, model: KvModel) -> Self {
        Self {
            path: path.to_owned(),
            model,
        }
    }

    /// Loads the file into `seq` and keeps the positions its tokens share with `prompt` (at
    /// most all but the last prompt token, and only what the model can keep); returns those
    /// tokens, or `None` when there is no file.
    pub fn load(
        &self,
        model: &mut dyn Model,
        seq: &Sequence,
        prompt: &[u32],
    ) -> Result<Option<Vec<u32>>, RunError> {
        let Some(tokens) = self.load_all(model, seq)? else {
            return Ok(None);
        };
        let common = tokens
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count()
            .min(prompt.len().saturating_sub(1));
        let kept = model.rewind(seq, common)?;
        Ok(Some(tokens[..kept].to_vec()))
    }

    /// Loads every position of the file into `seq` (a session or a server then keeps what
    /// the next prompt shares); returns the file's tokens, or `None` when there is no file.
    pub fn load_all(
        &self,
        model: &mut dyn Model,
        seq: &Sequence,
    ) -> Result<Option<Vec<u32>>, RunError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(RunError::Io {
                    what: "read",
                    path: self.path.display().to_string(),
                    source,
                })
            }
        };
        let (header, payload) = read_kv(&bytes).map_err(|e| cache_err(&self.path, e))?;
        if header.model != self.model {
            return Err(cache_err(
                &self.path,
                format!(
                    "made for another model ({}), not this one ({}); delete it or give another --prompt-cache",
                    describe(&header.model),
                    describe(&self.model)
                ),
            ));
        }
        let positions = header.tokens.len();
        if positions > model.capacity() {
            return Err(cache_err(
                &self.path,
                format!(
                    "it holds {positions} positions, more than the context of {} (-c)",
                    model.capacity()
                ),
            ));
        }
        match (&header.layout, layout_of(model, positions)?) {
            (KvLayout::Heads(have), KvLayout::Heads(want)) if have != &want => {
                return Err(cache_err(
                    &self.path,
                    format!("its KV layout {have:?} is not this model's {want:?}"),
                ))
            }
            (KvLayout::Heads(_), KvLayout::Sections(_)) | (KvLayout::Sections(_), KvLayout::Heads(_)) => {
                return Err(cache_err(
                    &self.path,
                    "its KV layout is of another kind than this model's (per-position keys and values against a whole decode state)",
                ))
            }
            // a sections layout is compared array by array by the model, which names the first
            // that differs
            _ => {}
        }
        let saved = SavedState {
            positions,
            layout: header.layout,
            payload: payload.to_vec(),
        };
        model
            .restore(seq, &saved)
            .map_err(|e| cache_err(&self.path, e))?;
        Ok(Some(header.tokens))
    }

    /// Writes the state of the longest prefix of `tokens` the model can save
    /// ([`Model::savable`]) by `seq` atomically: a temporary file in the same directory, renamed
    /// over the target.
    pub fn save(&self, model: &dyn Model, seq: &Sequence, tokens: &[u32]) -> Result<(), RunError> {
        let n = model.savable(seq, tokens.len());
        if n == 0 {
            return Err(cache_err(
                &self.path,
                format!(
                    "no prefix of the {} tokens can be saved: the model holds its state at {} positions and at none shorter that it can save",
                    tokens.len(),
                    model.position(seq)?
                ),
            ));
        }
        let saved = model.save(seq, n)?;
        let header = KvHeader {
            format: "megakv".into(),
            model: self.model.clone(),
            layout: saved.layout,
            tokens: tokens[..n].to_vec(),
            payload_sha256: String::new(),
        };
        let bytes = write_kv(&header, &saved.payload).map_err(|e| cache_err(&self.path, e))?;
        let io = |source| RunError::Io {
            what: "write",
            path: self.path.display().to_string(),
            source,
        };
        let dir = self
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
        std::io::Write::write_all(&mut tmp, &bytes).map_err(io)?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(&self.path).map_err(|e| io(e.error))?;
        Ok(())
    }
}

/// The layout a state of `positions` positions has in `model`, or why it has none.
fn layout_of(model: &dyn Model, positions: usize) -> Result<KvLayout, RunError> {
    model
        .state_layout(positions)
        .ok_or_else(crate::adapter::no_state)
}

fn describe(m: &KvModel) -> String {
    match m {
        KvModel::Gguf { sha256, bytes } => format!("GGUF sha256 {sha256}, {bytes} bytes"),
        KvModel::Artifact { repo, commit, .. } => format!("artifact {repo}@{commit}"),
    }
}
