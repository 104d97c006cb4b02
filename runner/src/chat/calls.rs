//! How the answers of a model that renders its own Jinja chat template call tools
//! (docs/runner.md "minirun-serve", function calling): the syntax a template teaches, found in
//! its text, read back into [`ToolCall`]s, and the grammar that forces a call (`tool_choice`
//! `required` or a named function) constrained by each function's JSON Schema.
//!
//! - [`TAGGED`]: each call a JSON object `{"name": …, "arguments": {…}}` inside
//!   `<tool_call>` … `</tool_call>` (Qwen2.5, Qwen3, Hermes, and templates like them);
//! - [`BARE_JSON`]: the whole answer one JSON object `{"name": …, "parameters": {…}}` (the
//!   templates that say "Respond in the format {"name": function name, "parameters": dictionary
//!   of argument name and its value}").

use serde_json::{json, Map, Value};

use super::{AnswerSyntax, Forced, ToolCall, ToolDef};

const TAG_OPEN: &str = "<tool_call>";
const TAG_CLOSE: &str = "</tool_call>";

/// Calls inside `<tool_call>` tags.
pub static TAGGED: AnswerSyntax = AnswerSyntax {
    reasoning_end: "</think>",
    calls_start: TAG_OPEN,
    parse_calls: parse_tagged,
    force: Some(force_tagged),
};

/// One bare JSON object with `name` and `parameters`.
pub static BARE_JSON: AnswerSyntax = AnswerSyntax {
    reasoning_end: "</think>",
    calls_start: "{\"name\"",
    parse_calls: parse_bare,
    force: Some(force_bare),
};

/// The call syntax a template's text teaches, if it is one read here.
pub fn syntax_of(template: &str) -> Option<&'static AnswerSyntax> {
    if template.contains(TAG_OPEN) && template.contains(TAG_CLOSE) {
        Some(&TAGGED)
    } else if template.contains("\"parameters\": ") && template.contains("\"name\": ") {
        Some(&BARE_JSON)
    } else {
        None
    }
}

/// A call read from a JSON object: `name`, and the arguments under `args_key` (an object, as
/// JSON text; absent: `{}`).
fn call_of(v: &Value, args_key: &str, index: usize) -> Option<ToolCall> {
    let name = v.get("name")?.as_str()?;
    let args = match v.get(args_key) {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(a) => a.to_string(),
    };
    Some(ToolCall {
        id: format!("call_{index}"),
        name: name.to_owned(),
        arguments: args,
    })
}

/// The content before the first `<tool_call>` and the calls of every well-formed tag (a call
/// cut by `max_tokens` is left out); `None` without a tag.
pub fn parse_tagged(text: &str) -> Option<(String, Vec<ToolCall>)> {
    let at = text.find(TAG_OPEN)?;
    let content = text[..at].trim_end().to_owned();
    let mut rest = &text[at..];
    let mut calls = Vec::new();
    while let Some(open) = rest.find(TAG_OPEN) {
        let body = &rest[open + TAG_OPEN.len()..];
        let Some(close) = body.find(TAG_CLOSE) else {
            break;
        };
        if let Some(c) = serde_json::from_str::<Value>(body[..close].trim())
            .ok()
            .and_then(|v| call_of(&v, "arguments", calls.len()))
        {
            calls.push(c);
        }
        rest = &body[close + TAG_CLOSE.len()..];
    }
    Some((content, calls))
}

/// The content before `{"name"` and the one call the object holds; `None` when the text holds
/// no such object.
pub fn parse_bare(text: &str) -> Option<(String, Vec<ToolCall>)> {
    let at = text.find("{\"name\"")?;
    let mut de = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
    let v = de.next()?.ok()?;
    let call = call_of(&v, "parameters", 0).or_else(|| call_of(&v, "arguments", 0))?;
    Some((text[..at].trim_end().to_owned(), vec![call]))
}

/// The JSON Schema of one call: the function's name and its parameters under `args_key`.
fn call_schema(tools: &[&ToolDef], args_key: &str) -> Value {
    let one = |t: &ToolDef| {
        let params = t
            .parameters
            .clone()
            .unwrap_or_else(|| json!({"type": "object"}));
        let mut props = Map::new();
        props.insert("name".into(), json!({"const": t.name}));
        props.insert(args_key.into(), params);
        json!({"type": "object", "properties": props,
            "required": ["name", args_key], "additionalProperties": false})
    };
    match tools {
        [t] => one(t),
        many => json!({"anyOf": many.iter().map(|t| one(t)).collect::<Vec<_>>()}),
    }
}

/// A Lark rule that is the JSON of `schema` (llguidance's `%json`), written as `json.dumps`
/// writes JSON.
fn json_rule(schema: &Value) -> String {
    let mut s = schema.clone();
    crate::constrain::with_json_options(&mut s);
    format!("%json {s}")
}

/// `<tool_call>` blocks (one, unless parallel calls are allowed), each a call of one of the
/// functions allowed.
fn force_tagged(f: &Forced<'_>, lit: &dyn Fn(&str) -> String) -> String {
    let schema = call_schema(&f.choices(), "arguments");
    format!(
        "start: {}\ncall: {} body {}\nbody: {}\n",
        f.repeat("call", &lit("\n")),
        lit(&format!("{TAG_OPEN}\n")),
        lit(&format!("\n{TAG_CLOSE}")),
        json_rule(&schema)
    )
}

/// The answer one call object (the syntax has room for one only).
fn force_bare(f: &Forced<'_>, _: &dyn Fn(&str) -> String) -> String {
    let schema = call_schema(&f.choices(), "parameters");
    format!("start: {}\n", json_rule(&schema))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather() -> ToolDef {
        ToolDef {
            name: "get_weather".into(),
            description: None,
            parameters: Some(json!({"type": "object",
                "properties": {"city": {"type": "string"}}, "required": ["city"]})),
        }
    }

    #[test]
    fn tagged_calls_are_read_with_the_content_before_them() {
        let text = "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\"}\n</tool_call>\n<tool_call>\n{\"name\": \"cut";
        let (content, calls) = parse_tagged(text).unwrap();
        assert_eq!(content, "Let me look.");
        assert_eq!(calls.len(), 2, "the cut third call is left out");
        assert_eq!(
            (calls[0].name.as_str(), calls[0].arguments.as_str()),
            ("get_weather", "{\"city\":\"Paris\"}")
        );
        assert_eq!(
            (calls[1].id.as_str(), calls[1].arguments.as_str()),
            ("call_1", "{}")
        );
        assert!(parse_tagged("no calls").is_none());
    }

    #[test]
    fn a_bare_json_call_is_read_with_parameters_or_arguments() {
        let (content, calls) =
            parse_bare("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}")
                .unwrap();
        assert_eq!(content, "");
        assert_eq!(calls[0].arguments, "{\"city\":\"Oslo\"}");
        let (_, calls) = parse_bare("x {\"name\": \"f\", \"arguments\": {}} trailing").unwrap();
        assert_eq!(calls[0].name, "f");
        assert!(parse_bare("{\"name\": 3}").is_none());
        assert!(parse_bare("plain text").is_none());
    }

    #[test]
    fn templates_are_told_apart_by_the_syntax_they_teach() {
        let tagged = "{{- '<tool_call>\\n' }}{{ x }}{{- '\\n</tool_call>' }}";
        assert!(std::ptr::eq(syntax_of(tagged).unwrap(), &TAGGED));
        let bare = "Respond in the format {\"name\": function name, \"parameters\": dictionary}";
        assert!(std::ptr::eq(syntax_of(bare).unwrap(), &BARE_JSON));
        assert!(syntax_of("{{ messages }}").is_none());
    }

    fn forced<'a>(tools: &'a [ToolDef], only: Option<&'a str>, parallel: bool) -> Forced<'a> {
        Forced {
            tools,
            only,
            parallel,
        }
    }

    /// Text as a Lark string (a tokenizer without special tokens).
    fn quoted(text: &str) -> String {
        Value::String(text.to_owned()).to_string()
    }

    #[test]
    fn a_forced_call_grammar_names_the_functions_it_allows() {
        let tools = [weather()];
        let g = force_tagged(&forced(&tools, None, true), &quoted);
        assert!(g.starts_with("start: call (\"\\n\" call)*\n"), "{g}");
        let one = force_tagged(&forced(&tools, None, false), &quoted);
        assert!(one.starts_with("start: call\n"), "{one}");
        assert!(
            g.contains("%json {") && g.contains("\"const\":\"get_weather\""),
            "{g}"
        );
        let clock = ToolDef {
            name: "now".into(),
            description: None,
            parameters: None,
        };
        let two = [weather(), clock];
        let g = force_bare(&forced(&two, Some("now"), true), &quoted);
        assert!(
            g.contains("\"const\":\"now\"") && !g.contains("get_weather"),
            "{g}"
        );
        let g = force_bare(&forced(&two, None, true), &quoted);
        assert!(g.contains("anyOf"), "{g}");
    }
}
