//! Structured output enforced while sampling (docs/runner.md "Structured output"): a
//! [`Grammar`] (any JSON object, a JSON Schema, a Lark grammar or a regular expression) compiled
//! by `llguidance` over the model's own tokenizer into a [`Constraint`], which masks each step's
//! candidates to the tokens the grammar allows next and is told each token chosen. Once the
//! grammar is complete only the end-of-sequence token is allowed, so the answer ends there.
//! Names no family: a `tokenizers` tokenizer and its end-of-sequence id are all it needs
//! ([`crate::tokenizer::Tokenizer::grammars`]).

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{SimpleVob, TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{JsonCompileOptions, Matcher, ParserFactory};
use serde_json::Value;

/// What the output must match.
#[derive(Debug, Clone, PartialEq)]
pub enum Grammar {
    /// Any JSON object (`response_format` `json_object`).
    JsonObject,
    /// A JSON Schema (`response_format` `json_schema`); the schema must be an object.
    JsonSchema(Value),
    /// A grammar in llguidance's Lark syntax.
    Lark(String),
    /// A regular expression the whole output matches.
    Regex(String),
}

/// Why a grammar cannot be built or followed.
#[derive(Debug, thiserror::Error)]
pub enum ConstraintError {
    #[error("structured output needs {0}")]
    Tokenizer(String),
    /// The grammar itself is wrong (the request's fault: a 400).
    #[error("{0}")]
    Grammar(String),
    #[error("the output grammar failed while decoding: {0}")]
    Step(String),
}

/// JSON as compact as `json.dumps` writes it, with no free whitespace: a model cannot spend its
/// budget on blank lines inside an object.
fn json_options() -> JsonCompileOptions {
    JsonCompileOptions {
        item_separator: ", ".into(),
        key_separator: ": ".into(),
        whitespace_flexible: false,
        ..JsonCompileOptions::default()
    }
}

/// Marks a JSON Schema to be written with [`json_options`] (llguidance's `x-guidance` key),
/// wherever it is compiled: a response format here, or a `%json` rule inside a Lark grammar.
pub fn with_json_options(schema: &mut Value) {
    if schema.is_object() {
        json_options().apply_to(schema);
    }
}

impl Grammar {
    /// The grammar llguidance compiles.
    fn top_level(&self) -> Result<TopLevelGrammar, ConstraintError> {
        let schema = |mut s: Value| {
            if !s.is_object() {
                return Err(ConstraintError::Grammar(
                    "the JSON schema must be a JSON object".into(),
                ));
            }
            with_json_options(&mut s);
            Ok(TopLevelGrammar::from_json_schema(s))
        };
        match self {
            Grammar::JsonObject => schema(serde_json::json!({"type": "object"})),
            Grammar::JsonSchema(s) => schema(s.clone()),
            Grammar::Lark(g) => Ok(TopLevelGrammar::from_lark(g.clone())),
            Grammar::Regex(r) => Ok(TopLevelGrammar::from_regex(r)),
        }
    }
}

/// The model's tokenizer as llguidance sees it: each id's bytes in a trie, and the tokenizer for
/// the text llguidance tokenizes itself.
struct Env {
    trie: TokTrie,
    tok: tokenizers::Tokenizer,
}

impl TokenizerEnv for Env {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.trie.tokenize_with_greedy_fallback(s, |s| {
            self.tok
                .encode(s, false)
                .map(|e| e.get_ids().to_vec())
                .unwrap_or_default()
        })
    }
}

/// Compiles grammars over one tokenizer (built once per model: the trie of a 130k-token vocabulary
/// takes a moment).
pub struct Grammars {
    factory: ParserFactory,
    /// The tokenizer's special tokens (text, id), longest first: text a grammar spells with
    /// one of them is matched by the token, not by its characters ([`Grammars::lark_literal`]).
    specials: Vec<(String, u32)>,
}

impl Grammars {
    /// Grammars over `tok`, whose model scores `vocab` ids (at least the tokenizer's) and ends
    /// an answer with `eos`.
    pub fn new(
        tok: &tokenizers::Tokenizer,
        eos: Option<u32>,
        vocab: usize,
    ) -> Result<Self, ConstraintError> {
        let eos = eos.ok_or_else(|| {
            ConstraintError::Tokenizer("an end-of-sequence token; the tokenizer names none".into())
        })?;
        let spec: Value = serde_json::from_str(
            &tok.to_string(false)
                .map_err(|e| ConstraintError::Tokenizer(format!("the tokenizer as JSON ({e})")))?,
        )
        .map_err(|e| ConstraintError::Tokenizer(format!("the tokenizer as JSON ({e})")))?;
        // llguidance asserts on some malformed vocabularies: a panic there is a refusal here.
        let bytes = std::panic::catch_unwind(|| llguidance::token_bytes_from_tokenizer_json(&spec))
            .map_err(|_| {
                ConstraintError::Tokenizer("a byte-level or byte-fallback vocabulary".into())
            })?
            .map_err(|e| ConstraintError::Tokenizer(format!("each token's bytes ({e})")))?;
        let specials = special_tokens(&spec);
        let mut bytes = bytes;
        if bytes.len() > vocab {
            return Err(ConstraintError::Tokenizer(format!(
                "a vocabulary the model scores: the tokenizer has {} tokens, the model {vocab}",
                bytes.len()
            )));
        }
        // Ids the model scores but the tokenizer lacks: special (never text), so never allowed.
        while bytes.len() < vocab {
            let mut name = format!(".<[{}]>", bytes.len()).into_bytes();
            name[0] = TokTrie::SPECIAL_TOKEN_MARKER;
            bytes.push(name);
        }
        let info = TokRxInfo::new(vocab as u32, eos);
        let env: TokEnv = Arc::new(Env {
            trie: TokTrie::from(&info, &bytes),
            tok: tok.clone(),
        });
        let mut factory = ParserFactory::new_simple(&env)
            .map_err(|e| ConstraintError::Tokenizer(format!("a token trie ({e})")))?;
        factory.quiet();
        Ok(Self { factory, specials })
    }

    /// `text` as a Lark expression that matches it as the model writes it: quoted strings, with
    /// each special token it contains (a chat marker such as DeepSeek's `｜DSML｜`) referenced
    /// by id (`<[id]>`), since a special token is never matched by its characters.
    pub fn lark_literal(&self, text: &str) -> String {
        let mut parts = Vec::new();
        let mut plain = 0;
        let mut at = 0;
        while at < text.len() {
            let rest = &text[at..];
            match self
                .specials
                .iter()
                .find(|(t, _)| rest.starts_with(t.as_str()))
            {
                Some((t, id)) => {
                    if plain < at {
                        parts.push(Value::String(text[plain..at].to_owned()).to_string());
                    }
                    parts.push(format!("<[{id}]>"));
                    at += t.len();
                    plain = at;
                }
                None => at += rest.chars().next().map_or(1, char::len_utf8),
            }
        }
        if plain < text.len() || parts.is_empty() {
            parts.push(Value::String(text[plain..].to_owned()).to_string());
        }
        parts.join(" ")
    }

    /// A fresh constraint for one output.
    pub fn constraint(&self, grammar: &Grammar) -> Result<Constraint, ConstraintError> {
        let parser = self
            .factory
            .create_parser(grammar.top_level()?)
            .map_err(|e| ConstraintError::Grammar(e.to_string()))?;
        let matcher = Matcher::new(Ok(parser));
        if let Some(e) = matcher.get_error() {
            return Err(ConstraintError::Grammar(e));
        }
        Ok(Constraint {
            matcher,
            wait: None,
        })
    }
}

/// The special added tokens of a tokenizer's JSON, longest text first.
fn special_tokens(spec: &Value) -> Vec<(String, u32)> {
    let mut out: Vec<(String, u32)> = spec["added_tokens"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|t| t["special"].as_bool() == Some(true))
        .filter_map(|t| {
            let text = t["content"].as_str().filter(|c| !c.is_empty())?;
            let id = u32::try_from(t["id"].as_u64()?).ok()?;
            Some((text.to_owned(), id))
        })
        .collect();
    out.sort_by_key(|t| std::cmp::Reverse(t.0.len()));
    out
}

/// One output's grammar state.
pub struct Constraint {
    matcher: Matcher,
    /// The grammar waits for this marker first ([`Constraint::after`]).
    wait: Option<Wait>,
}

/// A marker the output has not written yet, and the bytes of its last tokens.
struct Wait {
    marker: Vec<u8>,
    tail: Vec<u8>,
    env: TokEnv,
    /// Every token but end-of-sequence.
    open: SimpleVob,
}

impl Constraint {
    /// This constraint, applied only once the output has written `marker` (thinking mode's end
    /// of reasoning, as vLLM applies structured output after the reasoning): until then any
    /// token but end-of-sequence may come, so the answer cannot end before its grammar is met.
    /// `None` (not thinking): the constraint as it is.
    pub fn after(mut self, marker: Option<&str>) -> Result<Self, ConstraintError> {
        let Some(marker) = marker else {
            return Ok(self);
        };
        let env = self
            .matcher
            .tok_env()
            .map_err(|e| ConstraintError::Step(e.to_string()))?;
        let trie = env.tok_trie();
        let mut open = trie.alloc_token_set();
        open.set_all(true);
        open.disallow_token(trie.eos_token());
        self.wait = Some(Wait {
            marker: marker.as_bytes().to_vec(),
            tail: Vec::new(),
            open,
            env,
        });
        Ok(self)
    }

    /// Sets the logit of every candidate `(logit, id)` the grammar does not allow next to −∞.
    pub fn mask(&mut self, cand: &mut [(f32, u32)]) -> Result<(), ConstraintError> {
        let computed;
        let allowed = match &self.wait {
            Some(w) => &w.open,
            None => {
                computed = self
                    .matcher
                    .compute_mask_or_eos()
                    .map_err(|e| ConstraintError::Step(e.to_string()))?;
                &computed
            }
        };
        let mut any = false;
        for c in cand.iter_mut() {
            if allowed.is_allowed(c.1) {
                any |= c.0 > f32::NEG_INFINITY;
            } else {
                c.0 = f32::NEG_INFINITY;
            }
        }
        if !any {
            return Err(ConstraintError::Step(
                "no token the model scores is allowed next".into(),
            ));
        }
        Ok(())
    }

    /// `id` was chosen.
    pub fn commit(&mut self, id: u32) -> Result<(), ConstraintError> {
        if let Some(w) = &mut self.wait {
            w.tail.extend_from_slice(w.env.tok_trie().token(id));
            if w.tail.ends_with(&w.marker) {
                self.wait = None;
            } else {
                let keep = w.tail.len().saturating_sub(w.marker.len());
                w.tail.drain(..keep);
            }
            return Ok(());
        }
        if self.matcher.is_stopped() {
            return Ok(());
        }
        self.matcher
            .consume_token(id)
            .map_err(|e| ConstraintError::Step(e.to_string()))
    }

    /// Whether the output so far is complete under the grammar.
    pub fn is_complete(&mut self) -> bool {
        self.wait.is_none()
            && (self.matcher.is_stopped() || self.matcher.is_accepting().unwrap_or(false))
    }
}
