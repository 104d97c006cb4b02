//! DeepSeek V4's chat format (issue 17 item 7): minirun's encoder (runner/src/deepseek/chat.rs)
//! renders every recorded conversation exactly as DeepSeek's own renderer did
//! (ci/oracles/deepseek_v4_chat.recorded.json, written and re-checked in CI by
//! ci/oracles/deepseek_v4_chat.py with deepseek-recipe), and refuses what it does not render.

#![allow(clippy::unwrap_used, clippy::panic)]

use runner::chat::{ChatFormat, Message};
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
            ChatFormat::DeepSeekV4(mode)
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
    for role in ["tool", "developer", "User", "\u{7}bell"] {
        let e = render(&[Message::new(role, "x")], true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("system, user, assistant and latest_reminder"),
            "{e}"
        );
        assert!(!e.contains('\u{7}'), "control characters are escaped: {e}");
    }
}
