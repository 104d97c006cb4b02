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
//!   rendered for earlier turns, in either mode);
//! * the generation prompt is `<｜Assistant｜></think>` in chat mode, `<｜Assistant｜><think>` in
//!   thinking mode (the model then reasons, closes with `</think>` and answers);
//! * thinking mode at a reasoning effort other than `low` puts the effort's instruction right
//!   after BOS, ahead of the system text, followed by a blank line ([`Effort`]);
//! * with tools ([`super::tools`]): the tools section follows the system text after a blank line;
//!   an assistant message's reasoning is rendered (`<think>…</think>` in place of `</think>`),
//!   and its tool calls follow its content after a blank line as a DSML block; a tool result is
//!   `<tool_result>…</tool_result>`, a part of a user turn that starts at the first result after
//!   anything else and takes the results and user messages that follow.
//!
//! Response formats and images are not rendered; a role other than these is refused, naming it.

use super::tools;
use crate::chat::{AnswerSyntax, ChatEncoder, ChatFormat, Message, ToolDef};
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

pub use crate::chat::{Effort, Mode};

/// The instruction rendered after BOS in thinking mode at `effort` (none for `low`), as
/// DeepSeek's renderer writes it.
fn instruction(effort: Effort) -> &'static str {
    match effort {
        Effort::Low => "",
        Effort::High => EFFORT_HIGH,
        Effort::Max => EFFORT_MAX,
    }
}

/// DeepSeek V4's encoder as the runtime's [`ChatEncoder`].
pub struct Encoder;

/// The one encoder value a [`ChatFormat::Encoder`] points at.
pub static ENCODER: Encoder = Encoder;

impl ChatEncoder for Encoder {
    fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
        mode: Mode,
        tools: &[ToolDef],
    ) -> Result<String, RunError> {
        render_conversation(messages, add_generation_prompt, mode, tools)
    }

    fn describe(&self, mode: Mode) -> &'static str {
        match mode {
            Mode::Chat => "DeepSeek V4's chat encoding (deepseek-recipe, chat mode)",
            Mode::Thinking(_) => "DeepSeek V4's chat encoding (deepseek-recipe, thinking mode)",
        }
    }

    fn answer_syntax(&self) -> &'static AnswerSyntax {
        &ANSWER
    }
}

/// `</think>` ends the reasoning; a DSML `tool_calls` block holds the calls.
static ANSWER: AnswerSyntax = AnswerSyntax {
    reasoning_end: THINK_END,
    calls_start: super::tools::CALLS_START,
    parse_calls: super::tools::parse,
    force: Some(super::tools::force),
};

/// DeepSeek V4's conversation format in `mode`.
pub fn format(mode: Mode) -> ChatFormat {
    ChatFormat::Encoder(&ENCODER, mode)
}

/// Thinking mode's instruction at effort `high` (and `xhigh`), deepseek-recipe 0.2.0's text.
const EFFORT_HIGH: &str = "Reasoning Effort: Absolute maximum with no shortcuts permitted.\nYou MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\nExplicitly write out your entire deliberation process, documenting every intermediate step, considered alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

/// Thinking mode's instruction at effort `max`, deepseek-recipe 0.2.0's text.
const EFFORT_MAX: &str = "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\nYou MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: exhaustively decompose the problem into its most fundamental components, trace every causal chain to its root, and resolve the underlying cause rather than any surface symptom.\nDo not stop reasoning until you have independently verified the solution from multiple angles and are certain that no assumption remains unchecked and no error remains undiscovered.\n\n";

/// Opens the reasoning of the turn being generated (thinking mode).
pub const THINK_START: &str = "<think>";

enum Turn<'a> {
    /// Parts joined by blank lines; whether the turn holds tool results.
    User(Vec<String>, bool),
    Reminder(&'a str),
    Assistant(&'a Message),
}

fn joined<S: AsRef<str>>(parts: &[S]) -> String {
    parts
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The prompt text of `messages` in DeepSeek V4's chat mode, ending in the assistant's turn when
/// `add_generation_prompt`.
pub fn render(messages: &[Message], add_generation_prompt: bool) -> Result<String, RunError> {
    render_mode(messages, add_generation_prompt, Mode::Chat)
}

/// The prompt text of `messages` in `mode`, ending in the assistant's turn when
/// `add_generation_prompt`.
pub fn render_mode(
    messages: &[Message],
    add_generation_prompt: bool,
    mode: Mode,
) -> Result<String, RunError> {
    render_conversation(messages, add_generation_prompt, mode, &[])
}

/// The turns of `messages` and their system text.
fn turns(messages: &[Message]) -> Result<(Vec<&str>, Vec<Turn<'_>>), RunError> {
    let mut system = Vec::new();
    let mut turns: Vec<Turn<'_>> = Vec::new();
    for m in messages {
        let c = m.content.as_str();
        match m.role.as_str() {
            "system" => system.push(c),
            "user" => match turns.last_mut() {
                Some(Turn::User(parts, _)) => parts.push(c.to_owned()),
                _ => turns.push(Turn::User(vec![c.to_owned()], false)),
            },
            "tool" => {
                let part = format!("<tool_result>{c}</tool_result>");
                match turns.last_mut() {
                    Some(Turn::User(parts, true)) => parts.push(part),
                    _ => turns.push(Turn::User(vec![part], true)),
                }
            }
            "latest_reminder" => turns.push(Turn::Reminder(c)),
            "assistant" => turns.push(Turn::Assistant(m)),
            other => {
                let shown: String = other.chars().take(40).collect();
                return Err(RunError::Template(format!(
                    "DeepSeek V4's chat format is rendered for the roles system, user, assistant, tool and latest_reminder; not for {shown:?}"
                )));
            }
        }
    }
    Ok((system, turns))
}

/// An assistant turn: its reasoning where tools are given, content, tool calls, EOS.
fn assistant(out: &mut String, m: &Message, with_tools: bool) {
    out.push_str(ASSISTANT);
    match m.reasoning_content.as_deref() {
        Some(r) if with_tools => {
            out.push_str(THINK_START);
            out.push_str(r);
        }
        _ => {}
    }
    out.push_str(THINK_END);
    out.push_str(&m.content);
    if !m.tool_calls.is_empty() {
        out.push_str("\n\n");
        out.push_str(&tools::calls_block(&m.tool_calls));
    }
    out.push_str(EOS);
}

/// The prompt text of `messages` in `mode` with `tools` offered (none: the plain format),
/// ending in the assistant's turn when `add_generation_prompt`.
pub fn render_conversation(
    messages: &[Message],
    add_generation_prompt: bool,
    mode: Mode,
    tools: &[ToolDef],
) -> Result<String, RunError> {
    let (system, turns) = turns(messages)?;
    let mut out = String::from(BOS);
    if let Mode::Thinking(effort) = mode {
        out.push_str(instruction(effort));
    }
    out.push_str(&joined(&system));
    if !tools.is_empty() {
        out.push_str("\n\n");
        out.push_str(&tools::tools_section(tools));
    }
    for t in &turns {
        match t {
            Turn::User(parts, _) => {
                out.push_str(USER);
                out.push_str(&joined(parts));
            }
            Turn::Reminder(c) => {
                out.push_str(LATEST_REMINDER);
                out.push_str(c);
            }
            Turn::Assistant(m) => assistant(&mut out, m, !tools.is_empty()),
        }
    }
    if add_generation_prompt {
        out.push_str(ASSISTANT);
        out.push_str(match mode {
            Mode::Chat => THINK_END,
            Mode::Thinking(_) => THINK_START,
        });
    }
    Ok(out)
}
