//! DeepSeek V4's conversation format (docs/runner-deepseek-v4.md "Chat"). The model publishes no
//! Jinja chat template; DeepSeek's renderer is the `deepseek-recipe` package
//! (`DeepseekV4Encoding`). This reproduces its non-thinking ("chat") rendering of system, user,
//! assistant and latest-reminder messages, and is held to it byte for byte on recorded
//! conversations (`ci/oracles/deepseek_v4_chat.py`, `runner/tests/deepseek_chat.rs`):
//!
//! * the text starts with BOS; every system message's non-empty content follows, joined by a
//!   blank line, wherever the system messages stood in the conversation;
//! * consecutive user messages are one turn: `<｜User｜>` and their non-empty contents joined by a
//!   blank line (an empty turn still prints the marker);
//! * a latest reminder is `<｜latest_reminder｜>` and its content;
//! * an assistant message is `<｜Assistant｜></think>`, its content and EOS (no reasoning is
//!   rendered in chat mode);
//! * the generation prompt is `<｜Assistant｜></think>`.
//!
//! Thinking mode, tools, tool results and response formats are not rendered: such a conversation
//! is refused, naming the role, rather than rendered differently from DeepSeek's renderer.

use crate::chat::Message;
use crate::error::RunError;

/// The sequence's first token.
pub const BOS: &str = "<｜begin▁of▁sentence｜>";
/// End of an assistant turn.
pub const EOS: &str = "<｜end▁of▁sentence｜>";
/// Opens a user turn.
pub const USER: &str = "<｜User｜>";
/// Opens an assistant turn.
pub const ASSISTANT: &str = "<｜Assistant｜>";
/// Closes the (empty, in chat mode) reasoning of an assistant turn.
pub const THINK_END: &str = "</think>";
/// Opens a latest reminder (date, locale and the like).
pub const LATEST_REMINDER: &str = "<｜latest_reminder｜>";

enum Turn<'a> {
    User(Vec<&'a str>),
    Reminder(&'a str),
    Assistant(&'a str),
}

fn joined(parts: &[&str]) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The prompt text of `messages` in DeepSeek V4's chat mode, ending in the assistant's turn when
/// `add_generation_prompt`.
pub fn render(messages: &[Message], add_generation_prompt: bool) -> Result<String, RunError> {
    let mut system = Vec::new();
    let mut turns: Vec<Turn<'_>> = Vec::new();
    for m in messages {
        let c = m.content.as_str();
        match m.role.as_str() {
            "system" => system.push(c),
            "user" => match turns.last_mut() {
                Some(Turn::User(parts)) => parts.push(c),
                _ => turns.push(Turn::User(vec![c])),
            },
            "latest_reminder" => turns.push(Turn::Reminder(c)),
            "assistant" => turns.push(Turn::Assistant(c)),
            other => {
                let shown: String = other.chars().take(40).collect();
                return Err(RunError::Template(format!(
                    "DeepSeek V4's chat format is rendered for the roles system, user, assistant and latest_reminder; the role {shown:?} (tools, tool results) is not rendered here"
                )));
            }
        }
    }
    let mut out = String::from(BOS);
    out.push_str(&joined(&system));
    for t in &turns {
        match t {
            Turn::User(parts) => {
                out.push_str(USER);
                out.push_str(&joined(parts));
            }
            Turn::Reminder(c) => {
                out.push_str(LATEST_REMINDER);
                out.push_str(c);
            }
            Turn::Assistant(c) => {
                out.push_str(ASSISTANT);
                out.push_str(THINK_END);
                out.push_str(c);
                out.push_str(EOS);
            }
        }
    }
    if add_generation_prompt {
        out.push_str(ASSISTANT);
        out.push_str(THINK_END);
    }
    Ok(out)
}
