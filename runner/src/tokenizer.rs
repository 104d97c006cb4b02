//! The tokenizer (docs/runner.md "Tokenizer and chat template"): a `tokenizers` Tokenizer built
//! from GGUF metadata (`tokenizer.ggml.model` = `gpt2`: byte-level BPE over
//! `tokenizer.ggml.tokens` / `merges`, control tokens (`token_type` 3) and user-defined ones (4) as
//! special added tokens, the pre-tokenizer chosen by `tokenizer.ggml.pre`), or loaded from a
//! `tokenizer.json`; the prompt of the file's `tokenizer.chat_template` (rendered by
//! `crate::chat`); and [`TextStream`], the text of a growing token sequence for streamed output.

pub mod tiktoken;

use std::collections::HashSet;
use std::path::Path;

use artifact::gguf::Metadata;
use serde_json::{json, Map, Value};

use crate::chat::{AnswerSyntax, ChatTemplate, Message};
use crate::constrain::{ConstraintError, Grammars};
use crate::error::RunError;

/// A tokenizer with the model's special ids.
#[derive(Clone)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    pub eos: Option<u32>,
    pub bos: Option<u32>,
    pub add_bos: bool,
    /// `tokenizer.chat_template`, if the file has one.
    pub chat_template: Option<String>,
    /// The special ids decoding skips once some special tokens are shown as text
    /// ([`Tokenizer::show_markers`]); `None`: decoding skips every special token.
    hidden: Option<HashSet<u32>>,
}

/// The `tokenizers` JSON of a byte-level BPE: `vocab` (token → id) and `merges` after
/// `pre_tokenizer`, with `added` tokens, decoded by the byte-level decoder (GGUF vocabularies
/// and tiktoken rank files are both written this way).
pub(crate) fn byte_level_bpe(
    added: Vec<Value>,
    pre_tokenizer: Value,
    vocab: Map<String, Value>,
    merges: Value,
) -> Value {
    json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": added, "normalizer": null,
        "pre_tokenizer": pre_tokenizer, "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
            "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null,
            "continuing_subword_prefix": null, "end_of_word_suffix": null,
            "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": Value::Object(vocab), "merges": merges},
    })
}

fn tk_err(e: impl std::fmt::Display) -> RunError {
    RunError::Tokenizer(e.to_string())
}

impl Tokenizer {
    /// Grammars (structured output) over this vocabulary, for a model that scores `vocab` ids.
    pub fn grammars(&self, vocab: usize) -> Result<Grammars, ConstraintError> {
        Grammars::new(&self.inner, self.eos, vocab)
    }

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
        let spec = byte_level_bpe(added, pre_tokenizer, vocab, json!(merges));
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
            hidden: None,
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
            hidden: None,
        })
    }

    /// Loads a `tokenizer.json` held in memory (a verified artifact's) with the special ids its
    /// configuration names; no chat template (the family's chat format renders conversations)
    /// and no BOS prepended unless [`Tokenizer::add_bos`] is set.
    pub fn from_json_bytes(
        bytes: &[u8],
        bos: Option<u32>,
        eos: Option<u32>,
    ) -> Result<Self, RunError> {
        Ok(Self {
            inner: tokenizers::Tokenizer::from_bytes(bytes).map_err(tk_err)?,
            eos,
            bos,
            add_bos: false,
            chat_template: None,
            hidden: None,
        })
    }

    /// A tiktoken BPE (the ranks of a `tiktoken.model`, [`tiktoken::read_ranks`]; its
    /// pre-tokenizer regex; its special tokens) as the equivalent `tokenizers` BPE
    /// ([`tiktoken`]), with the special ids named; no chat template and no BOS prepended unless
    /// [`Tokenizer::add_bos`] is set.
    pub fn from_tiktoken(
        ranks: &[Vec<u8>],
        pattern: &str,
        specials: &[(String, u32)],
        bos: Option<u32>,
        eos: Option<u32>,
    ) -> Result<Self, RunError> {
        let spec = tiktoken::tokenizer_json(ranks, pattern, specials)?;
        let text = serde_json::to_string(&spec).map_err(tk_err)?;
        Self::from_json_bytes(text.as_bytes(), bos, eos)
    }

    /// Token ids of `text` (special tokens in the text are recognised; BOS added when the
    /// metadata says so).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, RunError> {
        self.encode_with(text, self.add_bos)
    }

    /// [`Tokenizer::encode`] with BOS added only when `add_bos` (and the model has one).
    pub fn encode_with(&self, text: &str, add_bos: bool) -> Result<Vec<u32>, RunError> {
        let enc = self.inner.encode(text, false).map_err(tk_err)?;
        let mut ids = Vec::with_capacity(enc.len() + 1);
        if add_bos {
            ids.extend(self.bos);
        }
        // A text that already starts with BOS (a chat template printed it) gets no second one.
        if ids.len() == 1 && enc.get_ids().first() == self.bos.as_ref() {
            ids.clear();
        }
        ids.extend_from_slice(enc.get_ids());
        Ok(ids)
    }

    /// Text of `ids` (special tokens skipped, but for the markers [`Tokenizer::show_markers`]
    /// shows).
    pub fn decode(&self, ids: &[u32]) -> Result<String, RunError> {
        match &self.hidden {
            None => self.inner.decode(ids, true),
            Some(hidden) => {
                let kept: Vec<u32> = ids
                    .iter()
                    .copied()
                    .filter(|i| !hidden.contains(i))
                    .collect();
                self.inner.decode(&kept, false)
            }
        }
        .map_err(tk_err)
    }

    /// Decodes the special tokens that spell the markers of `syntax` (where reasoning ends, where
    /// a tool-call block starts) as their text, so that an answer can be read back: DeepSeek V4's
    /// `</think>` and `｜DSML｜` are special tokens, which decoding otherwise drops (llama.cpp's
    /// "preserved tokens").
    pub fn show_markers(&mut self, syntax: &AnswerSyntax) {
        let added = self.inner.get_added_tokens_decoder();
        let marks = [syntax.reasoning_end, syntax.calls_start];
        let shown = |t: &tokenizers::AddedToken| {
            !t.content.is_empty() && marks.iter().any(|m| m.contains(&t.content))
        };
        if !added.values().any(|t| t.special && shown(t)) {
            return;
        }
        self.hidden = Some(
            added
                .iter()
                .filter(|(_, t)| t.special && !shown(t))
                .map(|(id, _)| *id)
                .collect(),
        );
    }

    /// The text of token `id`, if the vocabulary has it.
    pub fn token_text(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// The file's `tokenizer.chat_template`, compiled, with the BOS/EOS texts it may print.
    pub fn template(&self) -> Result<ChatTemplate, RunError> {
        let t = self.chat_template.as_deref().ok_or_else(|| {
            RunError::Tokenizer("the model has no `tokenizer.chat_template`".into())
        })?;
        self.template_from(t)
    }

    /// `source` compiled as this model's chat template (`--chat-template-file`), with the
    /// BOS/EOS texts of this tokenizer.
    pub fn template_from(&self, source: &str) -> Result<ChatTemplate, RunError> {
        let text = |id: Option<u32>| id.and_then(|i| self.token_text(i)).unwrap_or_default();
        ChatTemplate::new(source, &text(self.bos), &text(self.eos), None)
    }

    /// The prompt for one user message (after an optional system message) in the file's chat
    /// template, ending in the assistant's turn.
    pub fn chat_prompt(&self, system: Option<&str>, user: &str) -> Result<String, RunError> {
        let mut messages = Vec::with_capacity(2);
        if let Some(s) = system {
            messages.push(Message::new("system", s));
        }
        messages.push(Message::new("user", user));
        self.template()?.render(&messages, true)
    }
}

/// Refuses ids past a model's vocabulary of `vocab` (`--prompt-ids`, or a tokenizer that does not
/// belong to the weights).
pub fn check_vocab(ids: &[u32], vocab: u64) -> Result<(), RunError> {
    match ids.iter().find(|&&id| u64::from(id) >= vocab) {
        Some(bad) => Err(RunError::Tokenizer(format!(
            "prompt id {bad} is outside the model's vocabulary of {vocab}"
        ))),
        None => Ok(()),
    }
}

/// The text of a growing token sequence, piece by piece, for streamed output: each piece is the
/// text the newest token completes. The sequence is decoded from a moving prefix (one token of
/// context, so a word's leading space survives), and a piece whose decoding ends in U+FFFD — the
/// bytes of a character split across tokens — is held back until a later token completes it, so
/// the pieces concatenate to the whole decoding and never carry a replacement character for a
/// split code point.
pub struct TextStream<'a> {
    tok: &'a dyn Detokenize,
    ids: Vec<u32>,
    /// Where the decoded window starts.
    prefix: usize,
    /// Where the text already emitted ends (as a token index).
    read: usize,
    /// The decoding of `ids[prefix..read]` (it changes only when a piece is emitted).
    before: String,
}

/// What [`TextStream`] and the generation loop need of a tokenizer: the text of ids (special
/// tokens skipped) and the end-of-sequence id.
pub trait Detokenize {
    fn detokenize(&self, ids: &[u32]) -> Result<String, RunError>;
    fn eos(&self) -> Option<u32>;
}

/// What a chat session needs of a tokenizer besides [`Detokenize`]: the ids of a rendered
/// conversation (the GGUF vocabulary's or an artifact's `tokenizer.json`).
pub trait TextPipeline: Detokenize {
    fn encode_text(&self, text: &str) -> Result<Vec<u32>, RunError>;
}

impl TextPipeline for Tokenizer {
    fn encode_text(&self, text: &str) -> Result<Vec<u32>, RunError> {
        self.encode(text)
    }
}

impl Detokenize for Tokenizer {
    fn detokenize(&self, ids: &[u32]) -> Result<String, RunError> {
        self.decode(ids)
    }
    fn eos(&self) -> Option<u32> {
        self.eos
    }
}

impl<'a> TextStream<'a> {
    pub fn new(tok: &'a dyn Detokenize) -> Self {
        Self {
            tok,
            ids: Vec::new(),
            prefix: 0,
            read: 0,
            before: String::new(),
        }
    }

    /// Adds `id`; returns the text it completes (empty while a character is incomplete).
    pub fn push(&mut self, id: u32) -> Result<String, RunError> {
        self.ids.push(id);
        let now = self.tok.detokenize(&self.ids[self.prefix..])?;
        if now.len() <= self.before.len() || now.ends_with('\u{FFFD}') {
            return Ok(String::new());
        }
        let Some(piece) = now.get(self.before.len()..).map(str::to_owned) else {
            return Ok(String::new());
        };
        self.advance()?;
        Ok(piece)
    }

    /// The text held back at the end, less the bytes of a character left incomplete (returned
    /// as how many U+FFFD were dropped): a generation cut mid-character prints no replacement.
    pub fn finish(&mut self) -> Result<(String, usize), RunError> {
        let now = self.tok.detokenize(&self.ids[self.prefix..])?;
        let rest = now.get(self.before.len()..).unwrap_or("");
        let kept = rest.trim_end_matches('\u{FFFD}');
        let dropped = rest[kept.len()..].chars().count();
        let kept = kept.to_owned();
        self.advance()?;
        Ok((kept, dropped))
    }

    /// Everything so far is emitted: the window moves to start at the last emitted token.
    fn advance(&mut self) -> Result<(), RunError> {
        self.prefix = self.read;
        self.read = self.ids.len();
        self.before = self.tok.detokenize(&self.ids[self.prefix..self.read])?;
        Ok(())
    }
}
