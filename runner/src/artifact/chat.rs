//! The chat template a verified artifact carries: `chat_template` in its `tokenizer_config.json`
//! (a string, or the list of named templates transformers also accepts, of which `default` is
//! used), with the `bos_token`/`eos_token` texts it may print (a string or an added-token
//! object's `content`). Read under the artifact's load policy like every other file.

use super::VerifiedArtifact;
use crate::chat::{ChatFormat, ChatTemplate};
use crate::error::RunError;

/// The file the template is read from.
pub const TOKENIZER_CONFIG: &str = "tokenizer_config.json";
/// Largest `tokenizer_config.json` read.
const MAX_BYTES: u64 = 16 << 20;

fn token_text(v: Option<&serde_json::Value>) -> String {
    match v {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(o) => o
            .get("content")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        None => String::new(),
    }
}

fn template_source(v: &serde_json::Value) -> Result<Option<String>, RunError> {
    match v.get("chat_template") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
        Some(serde_json::Value::Array(named)) => named
            .iter()
            .find(|t| t.get("name").and_then(serde_json::Value::as_str) == Some("default"))
            .and_then(|t| t.get("template")?.as_str())
            .map(|s| Some(s.to_owned()))
            .ok_or_else(|| {
                RunError::Template(format!(
                    "`{TOKENIZER_CONFIG}` lists named chat templates but none called `default`"
                ))
            }),
        Some(_) => Err(RunError::Template(format!(
            "`{TOKENIZER_CONFIG}`: `chat_template` is neither a string nor a list of named templates"
        ))),
    }
}

/// The artifact's own template, compiled; `None` when it has no `tokenizer_config.json` or the
/// file has no `chat_template`.
pub fn from_tokenizer_config(artifact: &VerifiedArtifact) -> Result<Option<ChatFormat>, RunError> {
    let Some(bytes) = artifact.root_file(TOKENIZER_CONFIG, MAX_BYTES)? else {
        return Ok(None);
    };
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| RunError::Template(format!("`{TOKENIZER_CONFIG}` is not JSON: {e}")))?;
    let Some(source) = template_source(&v)? else {
        return Ok(None);
    };
    let t = ChatTemplate::new(
        &source,
        &token_text(v.get("bos_token")),
        &token_text(v.get("eos_token")),
        None,
    )?;
    Ok(Some(ChatFormat::Template(Box::new(t))))
}
