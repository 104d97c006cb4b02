//! A tiktoken BPE — a `tiktoken.model` rank file (one `base64(token bytes) rank` line per token,
//! ranks dense from 0; the format `tiktoken.load.load_tiktoken_bpe` reads), a pre-tokenizer
//! regex and the special tokens after the ranks — as the `tokenizers` byte-level BPE that
//! encodes the same ids, the conversion transformers' `TikTokenConverter` makes: the vocabulary
//! is each rank's bytes in GPT-2's byte-to-character alphabet, and each token of two or more
//! bytes is the merge of the two parts tiktoken's own merging gives it when only lower ranks may
//! merge, the merges ordered by rank. Held to Python `tiktoken` by runner/tests/kimi_tokenizer.rs.

use std::collections::HashMap;

use base64::Engine as _;
use serde_json::{json, Map, Value};

use crate::error::RunError;

fn bad(line: usize, why: impl std::fmt::Display) -> RunError {
    RunError::Tokenizer(format!("tiktoken.model line {line}: {why}"))
}

/// Each rank's bytes, in rank order, from a rank file; refused unless the ranks are 0, 1, 2, …
/// in order and no token repeats.
pub fn read_ranks(file: &[u8]) -> Result<Vec<Vec<u8>>, RunError> {
    let text = std::str::from_utf8(file).map_err(|e| bad(0, format!("not UTF-8 ({e})")))?;
    let mut ranks = Vec::new();
    let mut seen = HashMap::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let mut parts = line.split_whitespace();
        let (Some(token), Some(rank), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad(i + 1, "not `base64 rank`"));
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(token)
            .map_err(|e| bad(i + 1, format!("bad base64 ({e})")))?;
        match rank.parse::<usize>() {
            Ok(r) if r == ranks.len() => {}
            _ => {
                return Err(bad(
                    i + 1,
                    format!("rank {rank} where {} comes next", ranks.len()),
                ))
            }
        }
        if seen.insert(bytes.clone(), ranks.len()).is_some() {
            return Err(bad(i + 1, "a token that already has a rank"));
        }
        ranks.push(bytes);
    }
    if ranks.is_empty() {
        return Err(bad(0, "no ranks"));
    }
    Ok(ranks)
}

/// GPT-2's byte-to-character map (printable bytes stand for themselves, the others for
/// U+0100 onwards), the alphabet of byte-level vocabularies.
fn byte_chars() -> [char; 256] {
    let mut map = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        map[usize::from(b)] = if printable {
            char::from(b)
        } else {
            let c = char::from_u32(next).unwrap_or('\u{FFFD}');
            next += 1;
            c
        };
        // (`next` never leaves the BMP's first planes: 68 bytes map past U+00FF)
    }
    map
}

/// tiktoken's merging of `token`'s bytes where only merges of rank below `max` may apply.
fn merge_below<'a>(token: &'a [u8], index: &HashMap<&[u8], usize>, max: usize) -> Vec<&'a [u8]> {
    let mut parts: Vec<&[u8]> = (0..token.len()).map(|i| &token[i..i + 1]).collect();
    loop {
        let best = (0..parts.len().saturating_sub(1))
            .filter_map(|i| {
                let joined = &token[offset(&parts, i)..offset(&parts, i + 2)];
                index.get(joined).map(|&r| (r, i))
            })
            .min();
        match best {
            Some((r, i)) if r < max => {
                let joined = &token[offset(&parts, i)..offset(&parts, i + 2)];
                parts.splice(i..i + 2, [joined]);
            }
            _ => return parts,
        }
    }
}

/// Where part `i` of `parts` (consecutive slices of one token) starts in the token.
fn offset(parts: &[&[u8]], i: usize) -> usize {
    parts[..i].iter().map(|p| p.len()).sum()
}

/// The `tokenizers` JSON of the BPE: `ranks` in `pattern`'s pre-tokens, and `specials`
/// (text, id) as special added tokens.
pub fn tokenizer_json(
    ranks: &[Vec<u8>],
    pattern: &str,
    specials: &[(String, u32)],
) -> Result<Value, RunError> {
    let chars = byte_chars();
    let spell = |b: &[u8]| b.iter().map(|&x| chars[usize::from(x)]).collect::<String>();
    let index: HashMap<&[u8], usize> = ranks
        .iter()
        .enumerate()
        .map(|(r, t)| (t.as_slice(), r))
        .collect();
    let mut vocab = Map::with_capacity(ranks.len());
    let mut merges = Vec::new();
    for (rank, token) in ranks.iter().enumerate() {
        vocab.insert(spell(token), json!(rank));
        if token.len() < 2 {
            continue;
        }
        match merge_below(token, &index, rank).as_slice() {
            [a, b] if index.contains_key(a) && index.contains_key(b) => {
                merges.push(json!([spell(a), spell(b)]));
            }
            _ => {
                return Err(RunError::Tokenizer(format!(
                    "tiktoken.model: rank {rank} is not the merge of two lower ranks"
                )))
            }
        }
    }
    let added: Vec<Value> = specials
        .iter()
        .map(|(text, id)| {
            json!({"id": id, "content": text, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let pre_tokenizer = json!({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
            "use_regex": false}]});
    Ok(super::byte_level_bpe(
        added,
        pre_tokenizer,
        vocab,
        Value::Array(merges),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_alphabet_is_gpt2s() {
        let c = byte_chars();
        assert_eq!((c[usize::from(b'a')], c[usize::from(b' ')]), ('a', 'Ġ'));
        assert_eq!((c[0], c[usize::from(b'\n')]), ('Ā', 'Ċ'));
        let mut all: Vec<char> = c.to_vec();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 256);
    }

    #[test]
    fn a_rank_file_reads_in_order_and_refuses_gaps_and_repeats() {
        let file = b"YQ== 0\nYg== 1\nYWI= 2\n";
        assert_eq!(
            read_ranks(file).unwrap(),
            vec![b"a".to_vec(), b"b".to_vec(), b"ab".to_vec()]
        );
        assert!(read_ranks(b"YQ== 0\nYg== 2\n").is_err());
        assert!(read_ranks(b"YQ== 0\nYQ== 1\n").is_err());
        assert!(read_ranks(b"YQ==\n").is_err());
        assert!(read_ranks(b"").is_err());
    }

    #[test]
    fn each_longer_token_is_the_merge_tiktoken_makes_of_lower_ranks() {
        let ranks: Vec<Vec<u8>> = ["a", "b", "c", "ab", "abc", "bc"]
            .iter()
            .map(|t| t.as_bytes().to_vec())
            .collect();
        let spec = tokenizer_json(&ranks, r"\S+", &[]).unwrap();
        assert_eq!(
            spec["model"]["merges"],
            json!([["a", "b"], ["ab", "c"], ["b", "c"]])
        );
        // "cab" splits into "ca" and a byte without a rank: refused
        let bad = vec![
            b"a".to_vec(),
            b"c".to_vec(),
            b"ca".to_vec(),
            b"cab".to_vec(),
        ];
        assert!(tokenizer_json(&bad, r"\S+", &[]).is_err());
    }
}
