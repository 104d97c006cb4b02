//! Kimi's tokenizer (`runner::kimi::tokenizer`: a tiktoken BPE converted to `tokenizers`) against
//! Python `tiktoken` as Moonshot's code builds it (ci/oracles/kimi_tokenizer.py, recorded in
//! ci/oracles/kimi_tokenizer.recorded.json and re-run live by ci/checks.d/59-kimi-tokenizer.sh),
//! over the generated K3 checkpoint's `tiktoken.model`: the same ids for every text, and the
//! text back from them.

#![allow(clippy::panic, clippy::unwrap_used)]

use serde_json::Value;
use sha2::{Digest, Sha256};

use runner::kimi::tokenizer::{controls, tokenizer, PATTERN, RESERVED};
use runner::tokenizer::Tokenizer;

fn record() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../ci/oracles/kimi_tokenizer.recorded.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The rank file `minirun-synth kimi-k3` writes (its default vocabulary: 256 merges asked).
fn rank_file() -> Vec<u8> {
    let ranks = synth::tiktoken::train(synth::tokenizer::CORPUS, 256);
    synth::tiktoken::to_rank_file(&ranks)
}

#[test]
fn kimis_tokenizer_encodes_as_tiktoken_does() {
    let rec = record();
    let file = rank_file();
    assert_eq!(
        hex::encode(Sha256::digest(&file)),
        rec["tiktoken_model_sha256"].as_str().unwrap(),
        "the oracle ran on another rank file"
    );
    assert_eq!(rec["pattern"], PATTERN, "the oracle's pattern is Kimi's");
    let config = &rec["tokenizer_config"];
    let tok = tokenizer(&file, Some(config)).unwrap();
    let ranks = rec["ranks"].as_u64().unwrap() as u32;
    assert_eq!(tok.bos, Some(ranks));
    assert_eq!(tok.eos, Some(ranks + 1));
    let cases = rec["cases"].as_array().unwrap();
    assert!(cases.len() >= 15);
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let want: Vec<u32> = case["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let got = tok.encode_with(text, false).unwrap();
        assert_eq!(got, want, "{text:?}");
        // specials are skipped when decoding; the rest comes back as it was
        let plain: Vec<u32> = got.iter().copied().filter(|&i| i < ranks).collect();
        if plain.len() == got.len() {
            assert_eq!(tok.decode(&got).unwrap(), text);
        }
    }
    // The pattern matters: GPT-2's (no Han run, digits not cut at three, no case rule) parts
    // from tiktoken on some of these texts.
    let gpt2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
    let ranks_read = runner::tokenizer::tiktoken::read_ranks(&file).unwrap();
    let other =
        Tokenizer::from_tiktoken(&ranks_read, gpt2, &controls(ranks, None), None, None).unwrap();
    let differ = cases
        .iter()
        .filter(|c| {
            let ids = other
                .encode_with(c["text"].as_str().unwrap(), false)
                .unwrap();
            serde_json::to_value(ids).unwrap() != c["ids"]
        })
        .count();
    assert!(differ >= 3, "only {differ} texts tell the patterns apart");
}

#[test]
fn the_control_block_follows_the_ranks() {
    let rec = record();
    let c = controls(495, Some(&rec["tokenizer_config"]));
    assert_eq!(c.len(), RESERVED as usize);
    assert_eq!(c[0], ("[BOS]".to_owned(), 495));
    assert_eq!(c[2], ("<|im_end|>".to_owned(), 497));
    assert_eq!(c[5], ("<|reserved_token_500|>".to_owned(), 500));
    let bare = controls(10, None);
    assert_eq!(
        bare.last().unwrap(),
        &("<|reserved_token_265|>".to_owned(), 265)
    );
}
