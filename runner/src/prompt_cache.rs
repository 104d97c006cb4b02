//! `--prompt-cache FILE` (docs/runner.md "Prompt cache"): the KV state of a prompt prefix kept in
//! a `.megakv` file (`artifact::mega::kv`, docs/mega.md §12), bound to the exact GGUF file (its
//! SHA-256 and length) and the KV layout. Loading puts the file's keys and values back and keeps
//! the positions its tokens share with the new prompt, so only the rest is fed; a file made for
//! another model or layout, truncated, or altered in any byte is refused with the reason.

use std::io::Read;
use std::path::{Path, PathBuf};

use artifact::mega::kv::{read_kv, write_kv, KvHeader, KvLayout, KvModel};
use sha2::{Digest, Sha256};

use crate::error::RunError;
use crate::llama::Runner;

/// A prompt-cache file for one model.
pub struct PromptCache {
    path: PathBuf,
    model: KvModel,
    layout: KvLayout,
}

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

impl PromptCache {
    /// The cache at `path` for `runner`'s model, identified by `model`.
    pub fn new(path: &Path, model: KvModel, runner: &Runner<'_>) -> Self {
        let c = runner.config();
        Self {
            path: path.to_owned(),
            model,
            layout: KvLayout {
                layers: c.n_layers as u32,
                kv_heads: c.n_kv_heads as u32,
                head_dim: c.head_dim as u32,
                dtype: "f32".into(),
            },
        }
    }

    /// Loads the file into `runner` and keeps the positions its tokens share with `prompt` (at
    /// most all but the last prompt token); returns those tokens, or `None` when there is no file.
    pub fn load(
        &self,
        runner: &mut Runner<'_>,
        prompt: &[u32],
    ) -> Result<Option<Vec<u32>>, RunError> {
        let Some(tokens) = self.load_all(runner)? else {
            return Ok(None);
        };
        let common = tokens
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count()
            .min(prompt.len().saturating_sub(1));
        runner.rewind(common);
        Ok(Some(tokens[..common].to_vec()))
    }

    /// Loads every position of the file into `runner` (a session or a server then keeps what
    /// the next prompt shares); returns the file's tokens, or `None` when there is no file.
    pub fn load_all(&self, runner: &mut Runner<'_>) -> Result<Option<Vec<u32>>, RunError> {
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
        if header.layout != self.layout {
            return Err(cache_err(
                &self.path,
                format!(
                    "its KV layout {:?} is not this model's {:?}",
                    header.layout, self.layout
                ),
            ));
        }
        if header.tokens.len() > runner.capacity() {
            return Err(cache_err(
                &self.path,
                format!(
                    "it holds {} positions, more than the context of {} (-c)",
                    header.tokens.len(),
                    runner.capacity()
                ),
            ));
        }
        runner.kv_restore(header.tokens.len(), payload)?;
        Ok(Some(header.tokens))
    }

    /// Writes the KV state of `tokens` (the first `tokens.len()` positions the runner holds)
    /// atomically: a temporary file in the same directory, renamed over the target.
    pub fn save(&self, runner: &Runner<'_>, tokens: &[u32]) -> Result<(), RunError> {
        let n = tokens.len().min(runner.position());
        let payload = runner.kv_payload(n)?;
        let header = KvHeader {
            format: "megakv".into(),
            model: self.model.clone(),
            layout: self.layout.clone(),
            tokens: tokens[..n].to_vec(),
            payload_sha256: String::new(),
        };
        let bytes = write_kv(&header, &payload).map_err(|e| cache_err(&self.path, e))?;
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

fn describe(m: &KvModel) -> String {
    match m {
        KvModel::Gguf { sha256, bytes } => format!("GGUF sha256 {sha256}, {bytes} bytes"),
        KvModel::Artifact { repo, commit, .. } => format!("artifact {repo}@{commit}"),
    }
}
