//! The tokenizer (docs/runner.md "Tokenizer and chat template"): a `tokenizers` Tokenizer built
//! from GGUF metadata (`tokenizer.ggml.model` = `gpt2`: byte-level BPE over
//! `tokenizer.ggml.tokens` / `merges`, control tokens (`token_type` 3) and user-defined ones (4) as
//! special added tokens, the pre-tokenizer chosen by `tokenizer.ggml.pre`), or loaded from a
//! `tokenizer.json`; and the ChatML prompt of SmolLM2's `tokenizer.chat_template`.

use std::path::Path;

use artifact::gguf::Metadata;
use serde_json::{json, Map, Value};

use crate::error::RunError;

/// A tokenizer with the model's special ids.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    pub eos: Option<u32>,
    pub bos: Option<u32>,
    pub add_bos: bool,
    /// `tokenizer.chat_template`, if the file has one.
    pub chat_template: Option<String>,
}

fn tk_err(e: impl std::fmt::Display) -> RunError {
    RunError::Tokenizer(e.to_string())
}

impl Tokenizer {
    /// Builds the tokenizer the GGUF metadata describes.
    pub fn from_gguf(m: &Metadata) -> Result<Self, RunError> {
        let meta = |e: artifact::gguf::metadata::MetaError| RunError::Tokenizer(e.to_string());
        let model = m.get_str("tokenizer.ggml.model").map_err(meta)?;
        if model != "gpt2" {
            return Err(RunError::Tokenizer(format!(
                "`tokenizer.ggml.model` = `{model}` is not supported from GGUF metadata (only `gpt2` byte-level BPE); pass --tokenizer tokenizer.json"
            )));
        }
        let pre = m.get_str("tokenizer.ggml.pre").unwrap_or("default");
        let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false,
            "trim_offsets": true, "use_regex": true});
        let pre_tokenizer = match pre {
            // llama.cpp LLAMA_VOCAB_PRE_TYPE_SMOLLM: every digit alone, then the GPT-2 split
            // (as SmolLM2's tokenizer.json: Digits(individual) + ByteLevel).
            "smollm" => json!({"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": true}, byte_level]}),
            "default" | "gpt-2" | "gpt2" => byte_level,
            other => {
                return Err(RunError::Tokenizer(format!(
                    "pre-tokenizer `tokenizer.ggml.pre` = `{other}` is not supported (smollm, gpt-2, default); pass --tokenizer tokenizer.json"
                )))
            }
        };
        let tokens = m.get_str_array("tokenizer.ggml.tokens").map_err(meta)?;
        let merges = m.get_str_array("tokenizer.ggml.merges").map_err(meta)?;
        let types = m
            .get_i32_array("tokenizer.ggml.token_type")
            .unwrap_or_default();
        let mut vocab = Map::with_capacity(tokens.len());
        let mut added = Vec::new();
        for (id, tok) in tokens.iter().enumerate() {
            vocab.insert((*tok).to_string(), json!(id));
            let ty = types.get(id).copied().unwrap_or(1);
            if ty == 3 || ty == 4 {
                added.push(json!({"id": id, "content": tok, "single_word": false,
                    "lstrip": false, "rstrip": false, "normalized": false, "special": ty == 3}));
            }
        }
        let spec = json!({
            "version": "1.0", "truncation": null, "padding": null,
            "added_tokens": added, "normalizer": null,
            "pre_tokenizer": pre_tokenizer, "post_processor": null,
            "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
                "use_regex": true},
            "model": {"type": "BPE", "dropout": null, "unk_token": null,
                "continuing_subword_prefix": null, "end_of_word_suffix": null,
                "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                "vocab": Value::Object(vocab), "merges": merges},
        });
        let text = serde_json::to_string(&spec).map_err(tk_err)?;
        let inner: tokenizers::Tokenizer = text.parse().map_err(tk_err)?;
        Ok(Self {
            inner,
            eos: m.get_u32("tokenizer.ggml.eos_token_id").ok(),
            bos: m.get_u32("tokenizer.ggml.bos_token_id").ok(),
            add_bos: m.get_bool("tokenizer.ggml.add_bos_token").unwrap_or(false),
            chat_template: m
                .get_str("tokenizer.chat_template")
                .ok()
                .map(str::to_string),
        })
    }

    /// Loads a `tokenizer.json`; special ids and template still come from the GGUF metadata.
    pub fn from_file(path: &Path, m: &Metadata) -> Result<Self, RunError> {
        let inner = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| RunError::Tokenizer(format!("`{}`: {e}", path.display())))?;
        Ok(Self {
            inner,
            eos: m.get_u32("tokenizer.ggml.eos_token_id").ok(),
            bos: m.get_u32("tokenizer.ggml.bos_token_id").ok(),
            add_bos: m.get_bool("tokenizer.ggml.add_bos_token").unwrap_or(false),
            chat_template: m
                .get_str("tokenizer.chat_template")
                .ok()
                .map(str::to_string),
        })
    }

    /// Token ids of `text` (special tokens in the text are recognised; BOS added when the
    /// metadata says so).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, RunError> {
        let enc = self.inner.encode(text, false).map_err(tk_err)?;
        let mut ids = Vec::with_capacity(enc.len() + 1);
        if self.add_bos {
            ids.extend(self.bos);
        }
        ids.extend_from_slice(enc.get_ids());
        Ok(ids)
    }

    /// Text of `ids` (special tokens skipped).
    pub fn decode(&self, ids: &[u32]) -> Result<String, RunError> {
        self.inner.decode(ids, true).map_err(tk_err)
    }

    /// The prompt for one user message in the file's chat template. Supported: ChatML
    /// (`<|im_start|>role\ncontent<|im_end|>\n`, as SmolLM2 and Qwen2 use), with the default
    /// system message the template inserts when the conversation has none, and the generation
    /// prompt `<|im_start|>assistant\n`.
    pub fn chat_prompt(&self, user: &str) -> Result<String, RunError> {
        let t = self.chat_template.as_deref().ok_or_else(|| {
            RunError::Tokenizer("the model has no `tokenizer.chat_template`; drop --chat".into())
        })?;
        if !t.contains("<|im_start|>") {
            return Err(RunError::Tokenizer(
                "`tokenizer.chat_template` is not ChatML (`<|im_start|>`); only ChatML is supported".into(),
            ));
        }
        let marker = "<|im_start|>system\n";
        let system = t.find(marker).and_then(|i| {
            let rest = t.get(i + marker.len()..)?;
            rest.find("<|im_end|>").and_then(|j| rest.get(..j))
        });
        let mut p = String::new();
        if let Some(sys) = system {
            p.push_str("<|im_start|>system\n");
            p.push_str(sys);
            p.push_str("<|im_end|>\n");
        }
        p.push_str("<|im_start|>user\n");
        p.push_str(user);
        p.push_str("<|im_end|>\n<|im_start|>assistant\n");
        Ok(p)
    }
}
