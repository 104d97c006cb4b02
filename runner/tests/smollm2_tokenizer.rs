//! The GGUF-metadata tokenizer of SmolLM2 and its ChatML chat prompt.

#![allow(clippy::panic, clippy::unwrap_used)]

use crate::common;

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
    let chat = tok.chat_prompt(None, "hi").unwrap();
    assert_eq!(
        chat,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    let ids = tok.encode(&chat).unwrap();
    assert_eq!(ids.first(), Some(&1)); // <|im_start|> is one special token
    assert_eq!(ids.iter().filter(|&&i| i == 1).count(), 3);
    assert_eq!(ids.iter().filter(|&&i| i == 2).count(), 2);
}

#[test]
fn streamed_pieces_concatenate_to_the_text_and_never_split_a_character() {
    let test = "streamed_pieces_concatenate_to_the_text_and_never_split_a_character";
    let Some(path) = common::model_path(test) else {
        return;
    };
    let model = LlamaModel::open(&path).expect("open model");
    let tok = Tokenizer::from_gguf(model.gguf.metadata()).expect("tokenizer");
    for text in [
        "naïve café — 世界 🙂 ok",
        "emoji 🙂🙃🚀 and Ελληνικά",
        " leading space, tabs\tand\nnewlines",
    ] {
        let ids = tok.encode(text).unwrap();
        let mut stream = runner::tokenizer::TextStream::new(&tok);
        let mut pieces = Vec::new();
        for &id in &ids {
            pieces.push(stream.push(id).unwrap());
        }
        let (rest, dropped) = stream.finish().unwrap();
        pieces.push(rest);
        assert_eq!(dropped, 0);
        assert!(pieces.iter().all(|p| !p.contains('\u{FFFD}')), "{pieces:?}");
        assert_eq!(pieces.concat(), tok.decode(&ids).unwrap(), "{pieces:?}");
        assert_eq!(pieces.concat(), text);
    }
    // A multi-token character: its first tokens print nothing; cut there, nothing is printed
    // and the incomplete bytes are reported dropped, never shown as U+FFFD.
    let ids = tok.encode("🚀").unwrap();
    assert!(
        ids.len() > 1,
        "the rocket takes several byte tokens: {ids:?}"
    );
    let mut stream = runner::tokenizer::TextStream::new(&tok);
    assert_eq!(stream.push(ids[0]).unwrap(), "");
    let (rest, dropped) = stream.finish().unwrap();
    assert_eq!((rest.as_str(), dropped > 0), ("", true));
}
