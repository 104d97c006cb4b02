//! DeepSeek V4's chat format (issue 17 item 7): minirun's encoder (runner/src/deepseek/chat.rs)
//! renders every recorded conversation exactly as DeepSeek's own renderer did
//! (ci/oracles/deepseek_v4_chat.recorded.json, written and re-checked in CI by
//! ci/oracles/deepseek_v4_chat.py with deepseek-recipe), and refuses what it does not render.
//! Function calling is held to deepseek-recipe's OpenAI layer: every recorded request body,
//! parsed by `minirun-serve`'s request types, renders as deepseek-recipe converted and rendered
//! it, and every recorded answer splits into the content, reasoning and tool calls its stream
//! parser made of it.

#![allow(clippy::unwrap_used, clippy::panic)]

use runner::chat::Message;
use runner::deepseek::chat::{render, render_mode, Effort, Mode, BOS};

fn recorded() -> serde_json::Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../ci/oracles/deepseek_v4_chat.recorded.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn every_recorded_conversation_renders_byte_for_byte() {
    let r = recorded();
    assert!(r["renderer"]
        .as_str()
        .unwrap()
        .starts_with("deepseek-recipe"));
    let cases = r["cases"].as_array().unwrap();
    assert!(cases.len() >= 15);
    let mut thinking = 0;
    for c in cases {
        let messages: Vec<Message> = serde_json::from_value(c["messages"].clone()).unwrap();
        let want = c["prompt"].as_str().unwrap();
        let mode = match c["thinking"].as_str() {
            None => Mode::Chat,
            // no effort given: DeepSeek's renderer then writes what `high` writes
            Some("default") => Mode::Thinking(Effort::High),
            Some(effort) => Mode::Thinking(Effort::parse(effort).unwrap()),
        };
        thinking += usize::from(mode != Mode::Chat);
        let got = render_mode(&messages, true, mode).unwrap();
        assert_eq!(got, want, "{}", c["name"]);
        assert_eq!(
            runner::deepseek::chat::format(mode)
                .render(&messages, true)
                .unwrap(),
            want
        );
        if mode == Mode::Chat {
            assert_eq!(render(&messages, true).unwrap(), want);
        }
        assert!(got.starts_with(BOS));
    }
    // every effort, the default, and thinking with a system text, a reminder and earlier turns
    assert!(thinking >= 9, "{thinking} thinking-mode cases");
}

#[test]
fn thinking_mode_opens_the_reasoning_and_refuses_unknown_efforts() {
    let m = [Message::new("user", "q")];
    let text = render_mode(&m, true, Mode::Thinking(Effort::Low)).unwrap();
    assert!(text.ends_with("<｜Assistant｜><think>"), "{text}");
    let e = Effort::parse("medium").unwrap_err().to_string();
    assert!(e.contains("low, high, xhigh and max"), "{e}");
}

#[test]
fn no_generation_prompt_leaves_the_assistant_turn_closed() {
    let m = [Message::new("user", "a"), Message::new("assistant", "b")];
    let text = render(&m, false).unwrap();
    assert!(text.ends_with("b<｜end▁of▁sentence｜>"), "{text}");
}

#[test]
fn roles_it_does_not_render_are_refused_by_name() {
    for role in ["developer", "User", "\u{7}bell"] {
        let e = render(&[Message::new(role, "x")], true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("system, user, assistant, tool and latest_reminder"),
            "{e}"
        );
        assert!(!e.contains('\u{7}'), "control characters are escaped: {e}");
    }
}

fn mode_of(effort: Option<&str>) -> Option<Mode> {
    effort.map(|e| Mode::Thinking(Effort::parse(e).unwrap()))
}

#[test]
fn every_recorded_tool_request_renders_byte_for_byte() {
    use runner::serve::api::{ChatRequest, Prompt};
    let r = recorded();
    let cases = r["tool_requests"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for c in cases {
        let body = c["request"].to_string();
        let req: ChatRequest = serde_json::from_str(&body).unwrap();
        let model = req.common.model.clone();
        let gen = req
            .into_gen(&model, &runner::sample::SamplingParams::default())
            .unwrap();
        let Prompt::Chat(messages, effort, tools) = gen.prompt else {
            panic!("a chat prompt")
        };
        let got = runner::deepseek::chat::format(Mode::Chat)
            .render_tools(&messages, true, mode_of(effort.as_deref()), &tools)
            .unwrap();
        assert_eq!(got, c["prompt"].as_str().unwrap(), "{}", c["name"]);
    }
}

#[test]
fn every_recorded_answer_splits_into_content_reasoning_and_calls() {
    use runner::serve::reasoning::Splitter;
    use runner::serve::tools::CallStage;
    let r = recorded();
    let cases = r["parses"].as_array().unwrap();
    assert!(cases.len() >= 6);
    for c in cases {
        let req = &c["request"];
        let thinking = req.get("reasoning_effort").is_some();
        let offered = req.get("tools").is_some();
        let text = c["text"].as_str().unwrap();
        let want = &c["parsed"];
        // as the server streams it: one character at a time
        // the syntax the served format reads its answers back with
        let syntax = runner::deepseek::chat::format(Mode::Chat).answer_syntax();
        let (mut split, mut stage) = (
            Splitter::new(syntax.filter(|_| thinking).map(|s| s.reasoning_end)),
            CallStage::new(syntax.filter(|_| offered), true),
        );
        let (mut reasoning, mut content) = (String::new(), String::new());
        for ch in text.chars() {
            let (r, t) = split.push(&ch.to_string());
            reasoning.push_str(&r);
            content.push_str(&stage.push(&t));
        }
        reasoning.push_str(&split.finish());
        let (rest, calls) = stage.finish();
        content.push_str(&rest);
        let name = c["name"].as_str().unwrap();
        assert_eq!(content, want["content"].as_str().unwrap(), "{name}");
        match want["reasoning_content"].as_str() {
            Some(w) => assert_eq!(reasoning, w, "{name}"),
            None => assert!(reasoning.is_empty(), "{name}"),
        }
        let got: Vec<serde_json::Value> = calls
            .iter()
            .map(|t| serde_json::json!([t.name, t.arguments]))
            .collect();
        assert_eq!(
            got,
            want["tool_calls"].as_array().unwrap().clone(),
            "{name}"
        );
        let finish = if calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        assert_eq!(finish, want["finish_reason"].as_str().unwrap(), "{name}");
    }
}
