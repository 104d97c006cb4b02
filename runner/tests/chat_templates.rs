//! Chat templates rendered by minijinja (`runner::chat`) equal transformers' rendering byte for
//! byte: seven real templates of five families (ci/oracles/chat_templates/SOURCES.md), seven
//! conversations each — two with tools offered, one with a tool call and its result — recorded
//! by `ci/oracles/chat_templates.py` (transformers' own renderer, `tools=` as
//! `apply_chat_template` passes them); a template's `raise_exception` is a refusal carrying its
//! message.

#![allow(clippy::panic, clippy::unwrap_used)]

use crate::common;

use std::path::PathBuf;

use runner::chat::{ChatTemplate, Message, ToolCall, ToolDef};
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
    let (mut rendered, mut refused, mut with_tools) = (0, 0, 0);
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
        // SmolLM2's and R1's templates never read `tools`; the others render them.
        let reads = !matches!(name.as_str(), "smollm2" | "deepseek-r1-distill-qwen");
        assert_eq!(tmpl.reads_tools, reads, "{name}: reads `tools`");
        for case in t["cases"].as_array().unwrap() {
            let messages: Vec<Message> = case["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(message)
                .collect();
            let tools: Vec<ToolDef> = case["tools"]
                .as_array()
                .map(|t| {
                    t.iter()
                        .map(|t| serde_json::from_value(t["function"].clone()).unwrap())
                        .collect()
                })
                .unwrap_or_default();
            let gen = case["add_generation_prompt"].as_bool().unwrap();
            let what = format!("{name} / {}", case["case"]);
            if !tools.is_empty() {
                with_tools += 1;
            }
            match (
                case.get("rendered"),
                tmpl.render_tools(&messages, gen, &tools),
            ) {
                (Some(want), Ok(got)) => {
                    assert_eq!(got, want.as_str().unwrap(), "{what}");
                    rendered += 1;
                }
                (None, Err(e)) => {
                    // raise_exception's message is the template's own; a Python TypeError
                    // (e.g. a string plus an object) is minijinja's type error.
                    let want = match case["error_type"].as_str().unwrap() {
                        "TypeError" => "unsupported types",
                        _ => case["error"].as_str().unwrap(),
                    };
                    assert!(e.to_string().contains(want), "{what}: {e} lacks {want:?}");
                    refused += 1;
                }
                (want, got) => panic!("{what}: transformers {want:?}, minirun {got:?}"),
            }
        }
    }
    assert!(
        rendered >= 40 && refused >= 1 && with_tools >= 14,
        "{rendered} rendered, {refused} refused, {with_tools} with tools"
    );
}

/// A recorded message (transformers' shape: an assistant's `tool_calls[].function.arguments` an
/// object) as the server builds it from an OpenAI request (the arguments as JSON text).
fn message(m: &serde_json::Value) -> Message {
    let mut msg = Message::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap());
    msg.tool_call_id = m["tool_call_id"].as_str().map(str::to_string);
    for c in m["tool_calls"].as_array().into_iter().flatten() {
        msg.tool_calls.push(ToolCall {
            id: c["id"].as_str().unwrap().to_string(),
            name: c["function"]["name"].as_str().unwrap().to_string(),
            arguments: c["function"]["arguments"].to_string(),
        });
    }
    msg
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
