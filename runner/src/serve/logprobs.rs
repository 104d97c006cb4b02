//! `logprobs` in responses (docs/runner.md "Log-probabilities"): each generated token's text and
//! log-probability with its alternatives, rendered as OpenAI renders them — chat's
//! `{"content": [{token, logprob, bytes, top_logprobs}]}` and the completions API's
//! `{tokens, token_logprobs, top_logprobs, text_offset}`. A streamed answer carries the entries of
//! the tokens since the chunk before; the end-of-sequence token, which adds no text, has none.

use serde_json::{json, Map, Value};

use crate::logprobs::TokenLogprobs;

/// What a log-probability of −∞ is written as (JSON has no infinity; OpenAI writes −9999).
const FLOOR: f32 = -9999.0;

/// One generated token as a response shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub token: String,
    pub logprob: f32,
    pub top: Vec<(String, f32)>,
}

impl Entry {
    /// `lp` with each id's text from `text`.
    pub fn new(lp: &TokenLogprobs, text: &dyn Fn(u32) -> String) -> Self {
        Self {
            token: text(lp.id),
            logprob: lp.logprob,
            top: lp.top.iter().map(|&(id, l)| (text(id), l)).collect(),
        }
    }
}

fn num(l: f32) -> Value {
    json!(if l.is_finite() { l } else { FLOOR })
}

fn token_json(token: &str, logprob: f32) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("token".into(), json!(token));
    m.insert("logprob".into(), num(logprob));
    m.insert("bytes".into(), json!(token.as_bytes()));
    m
}

/// The entries not yet sent, and where the next token's text starts in the completion.
#[derive(Debug, Default)]
pub struct Pending {
    entries: Vec<Entry>,
    offset: usize,
}

impl Pending {
    pub fn push(&mut self, e: Entry) {
        self.entries.push(e);
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A chat choice's `logprobs` for the entries waiting (taken).
    pub fn chat(&mut self) -> Value {
        let content: Vec<Value> = self
            .entries
            .drain(..)
            .map(|e| {
                let mut m = token_json(&e.token, e.logprob);
                let top: Vec<Value> = e
                    .top
                    .iter()
                    .map(|(t, l)| Value::Object(token_json(t, *l)))
                    .collect();
                m.insert("top_logprobs".into(), json!(top));
                Value::Object(m)
            })
            .collect();
        json!({ "content": content })
    }

    /// A completion choice's `logprobs` for the entries waiting (taken).
    pub fn completion(&mut self) -> Value {
        let (mut tokens, mut lps, mut tops, mut offsets) = (vec![], vec![], vec![], vec![]);
        for e in self.entries.drain(..) {
            offsets.push(self.offset);
            self.offset += e.token.len();
            let top: Map<String, Value> = e.top.iter().map(|(t, l)| (t.clone(), num(*l))).collect();
            tokens.push(json!(e.token));
            lps.push(num(e.logprob));
            tops.push(Value::Object(top));
        }
        json!({
            "tokens": tokens,
            "token_logprobs": lps,
            "top_logprobs": tops,
            "text_offset": offsets,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries() -> Pending {
        let mut p = Pending::default();
        for (t, l) in [("Hel", -0.5f32), ("lo", f32::NEG_INFINITY)] {
            p.push(Entry {
                token: t.into(),
                logprob: l,
                top: vec![(t.into(), l), ("x".into(), -3.0)],
            });
        }
        p
    }

    #[test]
    fn chat_logprobs_have_bytes_and_alternatives() {
        let mut p = entries();
        let v = p.chat();
        assert_eq!(v["content"][0]["token"], "Hel");
        assert_eq!(v["content"][0]["bytes"], json!([72, 101, 108]));
        assert_eq!(v["content"][0]["top_logprobs"][1]["logprob"], json!(-3.0));
        assert_eq!(v["content"][1]["logprob"], json!(FLOOR));
        assert!(p.is_empty(), "rendering takes the entries");
        assert_eq!(p.chat()["content"], json!([]));
    }

    #[test]
    fn completion_logprobs_count_text_offsets_across_chunks() {
        let mut p = entries();
        let v = p.completion();
        assert_eq!(v["tokens"], json!(["Hel", "lo"]));
        assert_eq!(v["text_offset"], json!([0, 3]));
        assert_eq!(v["top_logprobs"][0]["x"], json!(-3.0));
        p.push(Entry {
            token: "!".into(),
            logprob: -1.0,
            top: vec![],
        });
        assert_eq!(p.completion()["text_offset"], json!([5]));
    }
}
