//! Chat templates rendered by minijinja (`runner::chat`) equal transformers' rendering byte for
//! byte: three real templates of different families (ci/oracles/chat_templates/SOURCES.md), five
//! conversations each, recorded by `ci/oracles/chat_templates.py` (transformers' own renderer);
//! a template's `raise_exception` is a refusal carrying its message.

#![allow(clippy::panic, clippy::unwrap_used)]

use crate::common;

use std::path::PathBuf;

use runner::chat::{ChatTemplate, Message};
use sha2::Digest as _;

fn oracles() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../ci/oracles")
}

#[test]
fn real_templates_render_as_transformers_renders_them() {
    let rec: serde_json::Value = serde_json::from_slice(
        &std::fs::read(oracles().join("chat_templates.recorded.json")).unwrap(),
    )
    .unwrap();
    let now = rec["fixed_time"].as_i64().unwrap();
    let sources = std::fs::read_to_string(oracles().join("chat_templates/SOURCES.md")).unwrap();
    let templates = rec["templates"].as_object().unwrap();
    assert!(templates.len() >= 3, "three families at least");
    let (mut rendered, mut refused) = (0, 0);
    for (name, t) in templates {
        let file = t["file"].as_str().unwrap();
        let text = std::fs::read_to_string(oracles().join("chat_templates").join(file)).unwrap();
        let digest = hex::encode(sha2::Sha256::digest(text.as_bytes()));
        assert_eq!(
            digest,
            t["sha256"].as_str().unwrap(),
            "{file}: recorded digest"
        );
        assert!(
            sources.contains(&digest),
            "{file}: SOURCES.md lists its digest"
        );
        let tmpl = ChatTemplate::new(
            &text,
            t["bos_token"].as_str().unwrap(),
            t["eos_token"].as_str().unwrap(),
            Some(now),
        )
        .unwrap();
        for case in t["cases"].as_array().unwrap() {
            let messages: Vec<Message> = serde_json::from_value(case["messages"].clone()).unwrap();
            let gen = case["add_generation_prompt"].as_bool().unwrap();
            let what = format!("{name} / {}", case["case"]);
            match (case.get("rendered"), tmpl.render(&messages, gen)) {
                (Some(want), Ok(got)) => {
                    assert_eq!(got, want.as_str().unwrap(), "{what}");
                    rendered += 1;
                }
                (None, Err(e)) => {
                    let want = case["error"].as_str().unwrap();
                    assert!(e.to_string().contains(want), "{what}: {e} lacks {want:?}");
                    refused += 1;
                }
                (want, got) => panic!("{what}: transformers {want:?}, minirun {got:?}"),
            }
        }
    }
    assert!(
        rendered >= 12 && refused >= 1,
        "{rendered} rendered, {refused} refused"
    );
}

#[test]
fn the_smollm2_fixture_is_the_gguf_template_and_the_chat_prompt_uses_it() {
    let test = "the_smollm2_fixture_is_the_gguf_template_and_the_chat_prompt_uses_it";
    let Some(path) = common::model_path(test) else {
        return;
    };
    let model = runner::model::LlamaModel::open(&path).unwrap();
    let tok = runner::tokenizer::Tokenizer::from_gguf(model.gguf.metadata()).unwrap();
    let fixture = std::fs::read_to_string(
        oracles().join("chat_templates/HuggingFaceTB-SmolLM2-135M-Instruct.jinja"),
    )
    .unwrap();
    assert_eq!(tok.chat_template.as_deref(), Some(fixture.as_str()));
    assert_eq!(
        tok.chat_prompt(Some("Be brief."), "hi").unwrap(),
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
}
