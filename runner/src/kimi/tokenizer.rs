//! Kimi's tokenizer as Moonshot's `tokenization_kimi.py` builds it (Kimi K2, K2.5, Kimi Linear;
//! K3 ships the same files): `tiktoken` over the `tiktoken.model` ranks with [`PATTERN`] as the
//! pre-tokenizer, and a block of 256 control tokens right after the ranks, each named by
//! `tokenizer_config.json`'s `added_tokens_decoder` or else `<|reserved_token_{id}|>`; BOS and
//! EOS are the `bos_token` / `eos_token` the configuration names. Built as the equivalent
//! `tokenizers` BPE (`crate::tokenizer::tiktoken`) and held to Python `tiktoken` by
//! runner/tests/kimi_tokenizer.rs (ci/oracles/kimi_tokenizer.py).

use serde_json::Value;

use crate::error::RunError;
use crate::tokenizer::Tokenizer;

/// `tokenization_kimi.py`'s `pat_str`: a run of Han characters; words (a leading non-letter,
/// upper- then lower-case letters that are not Han, an English contraction); up to three
/// digits; punctuation with the line breaks after it; line breaks; other white space.
pub const PATTERN: &str = concat!(
    r"[\p{Han}]+",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"|\s*[\r\n]+",
    r"|\s+(?!\S)",
    r"|\s+",
);

/// Control tokens after the ranks.
pub const RESERVED: u32 = 256;

/// The control tokens (text, id) of a vocabulary of `ranks` ranks under `config`
/// (`tokenizer_config.json`; `None`: every one reserved).
pub fn controls(ranks: u32, config: Option<&Value>) -> Vec<(String, u32)> {
    let named = config.and_then(|c| c.get("added_tokens_decoder"));
    (ranks..ranks + RESERVED)
        .map(|id| {
            let name = named
                .and_then(|n| n.get(id.to_string()))
                .and_then(|t| t.get("content"))
                .and_then(Value::as_str)
                .map_or_else(|| format!("<|reserved_token_{id}|>"), str::to_owned);
            (name, id)
        })
        .collect()
}

/// The id of the control `config` names under `key` (`bos_token`, `eos_token`: a string or an
/// added-token object).
fn named_id(config: Option<&Value>, key: &str, controls: &[(String, u32)]) -> Option<u32> {
    let v = config?.get(key)?;
    let name = v
        .as_str()
        .or_else(|| v.get("content").and_then(Value::as_str))?;
    controls.iter().find(|(t, _)| t == name).map(|&(_, id)| id)
}

/// Kimi's tokenizer from `tiktoken.model`'s bytes and `tokenizer_config.json` (if any).
pub fn tokenizer(rank_file: &[u8], config: Option<&Value>) -> Result<Tokenizer, RunError> {
    let ranks = crate::tokenizer::tiktoken::read_ranks(rank_file)?;
    let count = u32::try_from(ranks.len())
        .map_err(|_| RunError::Tokenizer("tiktoken.model: more ranks than u32 ids".into()))?;
    let controls = controls(count, config);
    let bos = named_id(config, "bos_token", &controls);
    let eos = named_id(config, "eos_token", &controls);
    Tokenizer::from_tiktoken(&ranks, PATTERN, &controls, bos, eos)
}
