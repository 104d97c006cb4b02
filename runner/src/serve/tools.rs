//! Function calling on `/v1/chat/completions` (docs/runner.md "minirun-serve"): the request's
//! `tools`, `tool_choice`, assistant `tool_calls` and `tool` messages in OpenAI's shapes, turned
//! into what the chat format renders, and a tool-call block in the answer read back by the
//! format's [`AnswerSyntax`] (DeepSeek V4's DSML).

use serde::Deserialize;
use serde_json::Value;

use super::api::ApiError;
use crate::chat::{AnswerSyntax, ToolCall, ToolDef};

/// `tools[]`: `{"type": "function", "function": {name, description, parameters}}`.
#[derive(Debug, Deserialize)]
struct ToolIn {
    #[serde(rename = "type")]
    kind: String,
    function: Option<ToolDef>,
}

/// An assistant message's `tool_calls[]`.
#[derive(Debug, Deserialize)]
pub struct ToolCallIn {
    #[serde(default)]
    id: String,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    function: FunctionIn,
}

#[derive(Debug, Deserialize)]
struct FunctionIn {
    name: String,
    #[serde(default)]
    arguments: String,
}

/// Whether the answer must call a tool (`tool_choice`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Choice {
    /// The model chooses (`auto`, the default where tools are offered).
    #[default]
    Auto,
    /// At least one call to any of the tools (`required`).
    Required,
    /// A call to this function (`{"type": "function", "function": {"name": …}}`).
    Named(String),
}

impl Choice {
    /// The function a forced call must name (`None`: any); `None` overall when not forced.
    pub fn forced(&self) -> Option<Option<&str>> {
        match self {
            Choice::Auto => None,
            Choice::Required => Some(None),
            Choice::Named(n) => Some(Some(n)),
        }
    }
}

/// The functions offered and the choice, or the 400 naming what is wrong. `tool_choice` `none`
/// offers none (the template renders no tools); `auto` (the default) lets the model choose;
/// `required` and a named function force a call (`Choice`).
pub fn offered(
    tools: Option<&[Value]>,
    choice: Option<&Value>,
) -> Result<(Vec<ToolDef>, Choice), ApiError> {
    let bad = |why: String| ApiError::invalid(why, Some("tool_choice"));
    let choice = match choice {
        None | Some(Value::Null) => Choice::Auto,
        Some(Value::String(s)) if s == "auto" => Choice::Auto,
        Some(Value::String(s)) if s == "none" => return Ok((Vec::new(), Choice::Auto)),
        Some(Value::String(s)) if s == "required" => Choice::Required,
        Some(v @ Value::Object(_)) => {
            match v.pointer("/function/name").and_then(Value::as_str) {
                Some(n) if v.get("type").and_then(Value::as_str) == Some("function") => {
                    Choice::Named(n.to_owned())
                }
                _ => return Err(bad(
                    "tool_choice: {\"type\": \"function\", \"function\": {\"name\": …}} expected"
                        .into(),
                )),
            }
        }
        Some(other) => {
            return Err(bad(format!(
                "tool_choice: `auto`, `none`, `required` or a named function, not {other}"
            )))
        }
    };
    let tools = tools.unwrap_or(&[]);
    if choice != Choice::Auto && tools.is_empty() {
        return Err(bad(
            "tool_choice forces a call, but no tools are offered".into()
        ));
    }
    let defs = tools
        .iter()
        .map(|t| {
            let t: ToolIn = serde_json::from_value(t.clone()).map_err(|e| {
                ApiError::invalid(format!("tools: not a tool ({e})"), Some("tools"))
            })?;
            match (t.kind.as_str(), t.function) {
                // as DeepSeek's request conversion: no parameters are an empty object
                ("function", Some(mut f)) if !f.name.is_empty() => {
                    f.parameters
                        .get_or_insert_with(|| Value::Object(serde_json::Map::new()));
                    Ok(f)
                }
                (kind, _) => Err(ApiError::invalid(
                    format!(
                        "tools: type `{kind}` with a named function expected (type `function`)"
                    ),
                    Some("tools"),
                )),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    if let Choice::Named(n) = &choice {
        if !defs.iter().any(|d| &d.name == n) {
            return Err(bad(format!(
                "tool_choice names `{n}`, which tools do not offer"
            )));
        }
    }
    Ok((defs, choice))
}

/// An assistant message's calls as the chat format takes them.
pub fn calls(calls: &[ToolCallIn]) -> Result<Vec<ToolCall>, ApiError> {
    calls
        .iter()
        .map(|c| match c.kind.as_deref() {
            None | Some("function") => Ok(ToolCall {
                id: c.id.clone(),
                name: c.function.name.clone(),
                arguments: c.function.arguments.clone(),
            }),
            Some(other) => Err(ApiError::invalid(
                format!("tool_calls: type `{other}` (only `function`)"),
                Some("messages"),
            )),
        })
        .collect()
}

/// A call as OpenAI returns it (`index` in streamed deltas).
pub fn call_json(c: &ToolCall, index: Option<usize>) -> Value {
    let mut v = serde_json::json!({
        "id": c.id,
        "type": "function",
        "function": {"name": c.name, "arguments": c.arguments},
    });
    if let Some(i) = index {
        v["index"] = i.into();
    }
    v
}

/// The content of an answer to a request that offered tools, as it streams: what may begin a
/// tool-call block (trailing white space, a prefix of the syntax's `calls_start`) is held back,
/// and the block itself is kept to the end, where [`CallStage::finish`] parses it into calls.
pub struct CallStage {
    syntax: Option<&'static AnswerSyntax>,
    parallel: bool,
    in_block: bool,
    held: String,
}

impl CallStage {
    /// A stage that parses tool calls in `syntax` (tools were offered) or passes content
    /// through (`None`); all the calls of the block, or only the first unless `parallel`
    /// (`parallel_tool_calls: false`).
    pub fn new(syntax: Option<&'static AnswerSyntax>, parallel: bool) -> Self {
        Self {
            syntax,
            parallel,
            in_block: false,
            held: String::new(),
        }
    }

    /// The content ready to send after `piece`.
    pub fn push(&mut self, piece: &str) -> String {
        let Some(syntax) = self.syntax else {
            return piece.to_owned();
        };
        self.held.push_str(piece);
        if self.in_block {
            return String::new();
        }
        if let Some(at) = self.held.find(syntax.calls_start) {
            let send = self.held[..at].trim_end().to_owned();
            self.held.drain(..at);
            self.in_block = true;
            return send;
        }
        let cut = hold_from(&self.held, syntax.calls_start);
        let send = self.held[..cut].to_owned();
        self.held.drain(..cut);
        send
    }

    /// The content still held and the calls of the block, if one began.
    pub fn finish(&mut self) -> (String, Vec<ToolCall>) {
        let held = std::mem::take(&mut self.held);
        let Some(syntax) = self.syntax.filter(|_| self.in_block) else {
            return (held, Vec::new());
        };
        match (syntax.parse_calls)(&held) {
            Some((_, mut calls)) => {
                if !self.parallel {
                    calls.truncate(1);
                }
                (String::new(), calls)
            }
            None => (held, Vec::new()),
        }
    }
}

/// Where the tail that may begin a block starts: a prefix of the `start` marker at the very end,
/// and the white space before it.
fn hold_from(text: &str, start: &str) -> usize {
    let marker = (1..start.len())
        .rev()
        .filter_map(|n| text.len().checked_sub(n))
        .find(|&at| text.get(at..).is_some_and(|t| start.starts_with(t)))
        .unwrap_or(text.len());
    text[..marker].trim_end().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dsml() -> Option<&'static AnswerSyntax> {
        crate::deepseek::chat::format(crate::chat::Mode::Chat).answer_syntax()
    }

    #[test]
    fn a_block_is_held_and_parsed_wherever_the_pieces_break() {
        let text = "Let me check.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"x\" string=\"true\">a b</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
        for cut in (0..=text.len()).filter(|&c| text.is_char_boundary(c)) {
            let mut s = CallStage::new(dsml(), true);
            let mut sent = s.push(&text[..cut]);
            sent.push_str(&s.push(&text[cut..]));
            let (rest, calls) = s.finish();
            sent.push_str(&rest);
            assert_eq!(sent, "Let me check.", "cut at {cut}");
            assert_eq!(calls.len(), 1);
            assert_eq!(calls[0].arguments, r#"{"x": "a b"}"#);
        }
        // no block: everything is sent, white space included
        let mut s = CallStage::new(dsml(), true);
        let mut sent = s.push("plain  \n");
        sent.push_str(&s.finish().0);
        assert_eq!(sent, "plain  \n");
        // parallel_tool_calls false: the first call only
        let two = text.replace(
            "</｜DSML｜tool_calls>",
            "<｜DSML｜invoke name=\"g\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
        );
        for (parallel, n) in [(true, 2), (false, 1)] {
            let mut s = CallStage::new(dsml(), parallel);
            s.push(&two);
            assert_eq!(s.finish().1.len(), n, "parallel {parallel}");
        }
        // not offered: passed through
        let mut s = CallStage::new(None, true);
        assert_eq!(s.push("<｜DSML｜tool_calls>"), "<｜DSML｜tool_calls>");
    }
}
