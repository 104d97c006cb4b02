//! A real byte-level BPE `tokenizer.json`, trained at generation time with the `tokenizers`
//! crate on a fixed corpus embedded here, with DeepSeek V4's special tokens
//! (`../shared/design/models.md` §1.6): bos `<｜begin▁of▁sentence｜>` = id 0 and eos/pad
//! `<｜end▁of▁sentence｜>` = id 1 (config `bos_token_id` 0, `eos_token_id` 1), then the chat
//! markers. Training is deterministic: the trainer sorts its alphabet and breaks merge ties by
//! pair id, and the corpus and vocabulary size are fixed.

use super::SynthError;
use serde_json::json;
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer, TokenizerBuilder};

/// bos.
pub const BOS: &str = "<｜begin▁of▁sentence｜>";
/// eos and pad.
pub const EOS: &str = "<｜end▁of▁sentence｜>";
/// Special tokens in id order (ids 0..).
pub const SPECIALS: [&str; 8] = [
    BOS,
    EOS,
    "<｜User｜>",
    "<｜Assistant｜>",
    "<think>",
    "</think>",
    "<｜latest_reminder｜>",
    "｜DSML｜",
];

/// The training corpus: original prose written for this generator (no third-party text).
pub const CORPUS: &str = "\
A checkpoint is a set of named tensors stored in shards, with an index that maps every tensor to its shard.
Each shard begins with a small header that lists the names, the element types, the shapes and the byte offsets.
The data section follows the header without holes, and every tensor starts where the previous one ended.
Quantized weights keep one scale for every block of values, and the scale is a power of two.
The mixture of experts sends each token to a few experts, and a shared expert sees every token.
Attention looks at a sliding window of recent positions and at compressed summaries of older ones.
The indexer scores the compressed entries and keeps only the best few for each query.
Hyper connections keep four residual streams and mix them with small learned matrices.
When the fetch stage reads a header it asks only for the first bytes of the file.
A journal records every chunk that has been proven, so a restart never downloads it twice.
The gate compares the repacked tensors with the upstream bytes, one unit at a time.
Numbers such as 128, 256, 4096 and 65536 appear in configurations, and so do 0.02 and 1e-6.
The quick brown fox jumps over the lazy dog while the model counts tokens one by one.
Questions and answers: what is the capital of France? Paris is the capital of France.
How many layers does the model have? It has forty three layers and one prediction layer.
Please write a short poem about the sea, the wind, the stars and the long night.
The user asked for a summary, and the assistant replied with three clear sentences.
Rust code: fn main() { let x = vec![1, 2, 3]; println!(\"{:?}\", x); }
Python code: def add(a, b): return a + b  # adds two numbers
Mathematics: the sum of the first n integers is n (n + 1) / 2, and 2 + 2 = 4.
Weather report: cold in the morning, warm in the afternoon, rain expected in the evening.
Travel notes: the train left the station at nine, crossed the river and reached the hills by noon.
Cooking: mix the flour with water, add salt, knead the dough and let it rest for an hour.
History: the library kept thousands of books, and scholars copied them by hand for centuries.
Science: light travels fast, sound travels slower, and both carry energy from place to place.
";

/// Train the tokenizer to `vocab_size` entries (specials + 256 byte symbols + merges) and return
/// its pretty-printed `tokenizer.json`.
pub fn train_bpe(vocab_size: usize) -> Result<String, SynthError> {
    let err = |e: tokenizers::Error| SynthError::Tokenizer(e.to_string());
    let specials: Vec<AddedToken> = SPECIALS
        .iter()
        .map(|s| AddedToken::from(s.to_string(), true))
        .collect();
    let mut trainer = BpeTrainerBuilder::new()
        .vocab_size(vocab_size)
        .min_frequency(0)
        .show_progress(false)
        .special_tokens(specials)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build();
    let mut tok = TokenizerBuilder::<
        BPE,
        tokenizers::NormalizerWrapper,
        ByteLevel,
        ByteLevel,
        ByteLevel,
    >::new()
    .with_model(BPE::default())
    .with_normalizer(None)
    .with_pre_tokenizer(Some(ByteLevel::new(false, true, true)))
    .with_post_processor(Some(ByteLevel::new(false, false, true)))
    .with_decoder(Some(ByteLevel::default()))
    .build()
    .map_err(err)?;
    // Several passes so frequent words merge all the way (the trainer counts occurrences).
    let lines: Vec<&str> = CORPUS.lines().collect();
    let seqs = (0..4).flat_map(|_| lines.iter().copied());
    tok.train(&mut trainer, seqs).map_err(err)?;
    let tok: Tokenizer = tok.into();
    let mut json = tok.to_string(true).map_err(err)?;
    json.push('\n');
    Ok(json)
}

/// `tokenizer_config.json` (models.md §1.6 values; no chat template, as upstream).
pub fn tokenizer_config() -> serde_json::Value {
    super::deepseek::sorted(json!({
        "add_bos_token": false,
        "add_eos_token": false,
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": EOS,
        "clean_up_tokenization_spaces": false,
        "legacy": true,
        "model_max_length": 1048576,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": null,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn trains_deterministically_loads_and_round_trips() {
        let a = train_bpe(512).unwrap();
        let b = train_bpe(512).unwrap();
        assert_eq!(a, b);
        let tok = Tokenizer::from_str(&a).unwrap();
        assert_eq!(tok.get_vocab_size(true), 512);
        for (id, s) in SPECIALS.iter().enumerate() {
            assert_eq!(tok.token_to_id(s), Some(id as u32), "{s}");
        }
        let text = "The model reads 4096 tokens: ünïcödé, 漢字 and emoji 🚀 all survive.";
        let enc = tok.encode(text, false).unwrap();
        assert!(
            enc.get_ids().len() < text.len(),
            "merges should shorten the byte sequence"
        );
        assert_eq!(tok.decode(enc.get_ids(), false).unwrap(), text);
        let chat = format!("{BOS}<｜User｜>hi<｜Assistant｜></think>ok{EOS}");
        let ids = tok.encode(chat.as_str(), false).unwrap().get_ids().to_vec();
        assert_eq!(ids.first(), Some(&0));
        assert_eq!(ids.last(), Some(&1));
        assert!(ids.contains(&2) && ids.contains(&3) && ids.contains(&5));
    }
}
