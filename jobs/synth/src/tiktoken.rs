//! A real tiktoken BPE rank file (`tiktoken.model`, the tokenizer file Kimi ships instead of a
//! `tokenizer.json`): one line per token, `base64(token bytes) rank`, ranks 0–255 the single
//! bytes and then the merges in the order they were learned, trained here on the generator's own
//! corpus (`tokenizer::CORPUS`). Deterministic: pair counts are kept in a `BTreeMap` and ties
//! break towards the smaller (left rank, right rank) pair.
//!
//! Spec: the tiktoken rank-file format (`load_tiktoken_bpe`: whitespace-separated base64 token
//! and decimal rank per line); `docs/synth.md` (kimi-k3).

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;

/// Split text into pre-tokens the way GPT-style regexes roughly do: an optional leading space
/// followed by a run of non-space bytes, or a run of whitespace.
fn pre_tokens(text: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < text.len() {
        let space = text.get(i).is_some_and(|b| b.is_ascii_whitespace());
        let prev_space = i > start && text.get(i - 1).is_some_and(|b| b.is_ascii_whitespace());
        // A boundary before a space that follows a word, and before a word byte that follows
        // two or more spaces (the last space joins the word).
        if i > start && ((space && !prev_space) || (!space && prev_space && i - start > 1)) {
            let cut = if !space && prev_space { i - 1 } else { i };
            if cut > start {
                out.push(text.get(start..cut).unwrap_or(&[]));
                start = cut;
            }
        }
        i += 1;
    }
    if start < text.len() {
        out.push(text.get(start..).unwrap_or(&[]));
    }
    out
}

/// Learn up to `merges` merges on `corpus`; returns every token's bytes in rank order (the 256
/// single bytes first). Stops early when no pair occurs twice.
pub fn train(corpus: &str, merges: usize) -> Vec<Vec<u8>> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let mut known: BTreeSet<Vec<u8>> = tokens.iter().cloned().collect();
    let mut words: Vec<Vec<u32>> = pre_tokens(corpus.as_bytes())
        .into_iter()
        .map(|w| w.iter().map(|&b| u32::from(b)).collect())
        .collect();
    let mut banned = BTreeSet::new();
    while tokens.len() < 256 + merges {
        let mut counts: BTreeMap<(u32, u32), u64> = BTreeMap::new();
        for w in &words {
            for p in w.windows(2) {
                if let [a, b] = *p {
                    if !banned.contains(&(a, b)) {
                        *counts.entry((a, b)).or_default() += 1;
                    }
                }
            }
        }
        // Highest count; on a tie the first (smallest) pair in map order.
        let Some((&pair, &n)) =
            counts
                .iter()
                .fold(None, |best: Option<(&(u32, u32), &u64)>, cur| match best {
                    Some(b) if b.1 >= cur.1 => Some(b),
                    _ => Some(cur),
                })
        else {
            break;
        };
        if n < 2 {
            break;
        }
        let bytes: Vec<u8> = [pair.0, pair.1]
            .iter()
            .flat_map(|&t| tokens.get(t as usize).cloned().unwrap_or_default())
            .collect();
        if known.contains(&bytes) {
            // The same bytes already have a rank (reached by another split): never a duplicate.
            banned.insert(pair);
            continue;
        }
        let id = tokens.len() as u32;
        known.insert(bytes.clone());
        tokens.push(bytes);
        for w in &mut words {
            let mut out = Vec::with_capacity(w.len());
            let mut i = 0;
            while i < w.len() {
                if w.get(i) == Some(&pair.0) && w.get(i + 1) == Some(&pair.1) {
                    out.push(id);
                    i += 2;
                } else {
                    out.extend(w.get(i).copied());
                    i += 1;
                }
            }
            *w = out;
        }
    }
    tokens
}

/// The rank file's bytes for `tokens` (rank = position).
pub fn to_rank_file(tokens: &[Vec<u8>]) -> Vec<u8> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut out = String::new();
    for (rank, t) in tokens.iter().enumerate() {
        out.push_str(&b64.encode(t));
        out.push(' ');
        out.push_str(&rank.to_string());
        out.push('\n');
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encode with the ranks the way tiktoken does: repeatedly merge the lowest-ranked adjacent
    /// pair whose concatenation is a token.
    fn encode(ranks: &BTreeMap<Vec<u8>, usize>, word: &[u8]) -> Vec<usize> {
        let mut parts: Vec<Vec<u8>> = word.iter().map(|&b| vec![b]).collect();
        loop {
            let best = (0..parts.len().saturating_sub(1))
                .filter_map(|i| {
                    let cat = [parts[i].clone(), parts[i + 1].clone()].concat();
                    ranks.get(&cat).map(|r| (*r, i))
                })
                .min();
            let Some((_, i)) = best else { break };
            let right = parts.remove(i + 1);
            parts[i].extend(right);
        }
        parts.iter().map(|p| ranks[p]).collect()
    }

    #[test]
    fn trains_deterministically_parses_and_round_trips() {
        let corpus = super::super::tokenizer::CORPUS;
        let a = train(corpus, 256);
        assert_eq!(a, train(corpus, 256));
        // The small corpus runs out of pairs seen twice before 256 merges (the rest of the
        // 512-entry vocabulary is left to special tokens, as Kimi's config leaves room for).
        assert!((400..=512).contains(&a.len()), "{} ranks", a.len());
        assert!(a[256..].iter().all(|t| t.len() >= 2));
        let file = to_rank_file(&a);
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut ranks = BTreeMap::new();
        for (i, line) in std::str::from_utf8(&file).unwrap().lines().enumerate() {
            let (tok, rank) = line.split_once(' ').unwrap();
            assert_eq!(rank.parse::<usize>().unwrap(), i);
            assert!(
                ranks.insert(b64.decode(tok).unwrap(), i).is_none(),
                "duplicate"
            );
        }
        let text = " the gate compares bytes, ünïcödé too";
        let ids = encode(&ranks, text.as_bytes());
        assert!(ids.len() < text.len(), "merges shorten the text");
        let back: Vec<u8> = ids.iter().flat_map(|&i| a[i].clone()).collect();
        assert_eq!(back, text.as_bytes());
    }

    #[test]
    fn pre_tokens_keep_every_byte() {
        let t = b"a  bc d\n\nef ";
        let parts = pre_tokens(t);
        assert_eq!(parts.concat(), t.to_vec());
        assert!(parts.contains(&&b" bc"[..]), "{parts:?}");
    }
}
