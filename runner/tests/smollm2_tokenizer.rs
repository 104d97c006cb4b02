//! The GGUF-metadata tokenizer of SmolLM2 and its ChatML chat prompt.

#![allow(clippy::panic, clippy::unwrap_used)]

mod common;

use runner::model::LlamaModel;
use runner::tokenizer::Tokenizer;

#[test]
fn gguf_tokenizer_round_trips_and_knows_the_specials() {
    let Some(path) = common::model_path("gguf_tokenizer_round_trips_and_knows_the_specials") else {
        return;
    };
    let model = LlamaModel::open(&path).expect("open model");
    let tok = Tokenizer::from_gguf(model.gguf.metadata()).expect("tokenizer");
    assert_eq!((tok.bos, tok.eos, tok.add_bos), (Some(1), Some(2), false));
    for text in [
        "Hello, world!",
        "  two spaces\nand a newline",
        "naïve café ünïcode",
        "x = [1, 22, 333]",
    ] {
        let ids = tok.encode(text).unwrap();
        assert_eq!(tok.decode(&ids).unwrap(), text);
    }
    // SmolLM2's pre-tokenizer splits digits one by one
    assert_eq!(tok.encode("1969").unwrap().len(), 4);
    let chat = tok.chat_prompt("hi").unwrap();
    assert_eq!(
        chat,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    let ids = tok.encode(&chat).unwrap();
    assert_eq!(ids.first(), Some(&1)); // <|im_start|> is one special token
    assert_eq!(ids.iter().filter(|&&i| i == 1).count(), 3);
    assert_eq!(ids.iter().filter(|&&i| i == 2).count(), 2);
}
