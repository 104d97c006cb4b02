//! DeepSeek V4's tool calls (DSML), as deepseek-recipe 0.2.0 renders and parses them
//! (docs/runner-deepseek-v4.md "Chat"; held to it by `ci/oracles/deepseek_v4_chat.py`):
//!
//! * the tools are described after the system text: a blank line, `## Tools`, DeepSeek's
//!   instructions, and one JSON line `{"name": …, "description": …, "parameters": …}` per tool;
//! * an assistant's calls follow its content after a blank line as a `<｜DSML｜tool_calls>` block:
//!   one `invoke` per call, one `parameter` per argument — a string as it is (`string="true"`),
//!   any other value as JSON (`string="false"`); arguments that are not a JSON object are one
//!   string parameter named `arguments`;
//! * JSON is written as Python's `json.dumps` writes it (`", "` and `": "`, characters unescaped,
//!   exponents as `1e+20`), which is what DeepSeek's renderer does.
//!
//! [`parse`] is the inverse on the model's output: the text before the block is the content (its
//! trailing white space dropped), each `invoke` a [`ToolCall`] whose arguments are its parameters
//! written as a JSON object, values other than strings as the model wrote them.

use serde_json::Value;

use crate::chat::{Forced, ToolCall, ToolDef};

/// Opens the block of tool calls.
pub const CALLS_START: &str = "<｜DSML｜tool_calls>";
const CALLS_END: &str = "</｜DSML｜tool_calls>";
const INVOKE_END: &str = "</｜DSML｜invoke>";
const PARAM_END: &str = "</｜DSML｜parameter>";

const PREAMBLE: &str = "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke tools by writing a \"<｜DSML｜tool_calls>\" block like the following:\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"$TOOL_NAME\">\n<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n...\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"$TOOL_NAME2\">\n...\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>\n\nString parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\nIf thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside <think>...</think> BEFORE any tool calls or final response.\n\nOtherwise, output directly after </think> with tool calls or final response.\n\n### Available Tool Schemas\n\n";

const POSTAMBLE: &str =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

/// JSON as Python's `json.dumps(v, ensure_ascii=False)` writes it.
pub fn py_json(v: &Value) -> String {
    let mut out = String::new();
    write_py(&mut out, v);
    out
}

fn write_py(out: &mut String, v: &Value) {
    match v {
        Value::Null | Value::Bool(_) | Value::String(_) => out.push_str(&v.to_string()),
        Value::Number(n) => out.push_str(&py_number(n)),
        Value::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_py(out, x);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, x)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_py(out, x);
            }
            out.push('}');
        }
    }
}

/// A number as Python prints it: integers as they are, floats with a signed exponent of at
/// least two digits (`1e+20`, `1e-07`) where serde_json may write `1e20` or `1e-7`.
fn py_number(n: &serde_json::Number) -> String {
    let s = n.to_string();
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ("-", d),
                None => ("+", exp.trim_start_matches('+')),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

/// The tools section of the system text (without the blank line that precedes it).
pub fn tools_section(tools: &[ToolDef]) -> String {
    let schemas: Vec<String> = tools
        .iter()
        .map(|t| {
            let mut o = serde_json::Map::new();
            o.insert("name".into(), Value::String(t.name.clone()));
            o.insert(
                "description".into(),
                Value::String(t.description.clone().unwrap_or_default()),
            );
            o.insert(
                "parameters".into(),
                t.parameters.clone().unwrap_or(Value::Null),
            );
            py_json(&Value::Object(o))
        })
        .collect();
    format!("{PREAMBLE}{}{POSTAMBLE}", schemas.join("\n"))
}

/// The `<｜DSML｜tool_calls>` block of `calls`.
pub fn calls_block(calls: &[ToolCall]) -> String {
    let mut out = format!("{CALLS_START}\n");
    for c in calls {
        out.push_str(&format!("<｜DSML｜invoke name=\"{}\">\n", c.name));
        let params: Vec<(String, bool, String)> = match serde_json::from_str::<Value>(&c.arguments)
        {
            Ok(Value::Object(map)) => map
                .into_iter()
                .map(|(k, v)| match v {
                    Value::String(s) => (k, true, s),
                    other => (k, false, py_json(&other)),
                })
                .collect(),
            _ => vec![("arguments".into(), true, c.arguments.clone())],
        };
        for (name, string, value) in params {
            out.push_str(&format!(
                "<｜DSML｜parameter name=\"{name}\" string=\"{string}\">{value}{PARAM_END}\n"
            ));
        }
        out.push_str(INVOKE_END);
        out.push('\n');
    }
    out.push_str(CALLS_END);
    out
}

/// The value of attribute `name` in an opening tag's text (`name="…"`).
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let at = tag.find(&format!("{name}=\""))? + name.len() + 2;
    let len = tag[at..].find('"')?;
    Some(&tag[at..at + len])
}

/// One `invoke` body: its parameters as the text of a JSON object, as DeepSeek's parser writes
/// it: `{"name": value, …}` with a string parameter as a JSON string and any other value as the
/// model wrote it (not re-formatted, nor checked).
fn parse_params(mut body: &str) -> String {
    let mut args = Vec::new();
    while let Some(open) = body.find("<｜DSML｜parameter ") {
        let rest = &body[open..];
        let Some(gt) = rest.find('>') else { break };
        let tag = &rest[..gt];
        let after = &rest[gt + 1..];
        let Some(end) = after.find(PARAM_END) else {
            break;
        };
        let raw = &after[..end];
        if let Some(name) = attr(tag, "name") {
            let value = if attr(tag, "string") == Some("true") {
                Value::String(raw.to_owned()).to_string()
            } else {
                raw.to_owned()
            };
            args.push(format!("{}: {value}", Value::String(name.to_owned())));
        }
        body = &after[end + PARAM_END.len()..];
    }
    format!("{{{}}}", args.join(", "))
}

/// The model's answer split into its content and its tool calls (ids `call_0`, `call_1`, … in
/// order); `None` when it holds no `<｜DSML｜tool_calls>` block. Calls are read up to the block's
/// end or the end of the text (an answer cut by `max_tokens` keeps the complete calls).
pub fn parse(text: &str) -> Option<(String, Vec<ToolCall>)> {
    let at = text.find(CALLS_START)?;
    let content = text[..at].trim_end().to_owned();
    let mut block = &text[at + CALLS_START.len()..];
    if let Some(end) = block.find(CALLS_END) {
        block = &block[..end];
    }
    let mut calls = Vec::new();
    while let Some(open) = block.find("<｜DSML｜invoke ") {
        let rest = &block[open..];
        let Some(gt) = rest.find('>') else { break };
        let Some(end) = rest.find(INVOKE_END) else {
            break;
        };
        if let Some(name) = attr(&rest[..gt], "name") {
            calls.push(ToolCall {
                id: format!("call_{}", calls.len()),
                name: name.to_owned(),
                arguments: parse_params(&rest[gt + 1..end]),
            });
        }
        block = &rest[end + INVOKE_END.len()..];
    }
    Some((content, calls))
}

/// The Lark grammar of an answer that is one block of calls (`tool_choice` `required`, or a
/// named function), as [`calls_block`] writes one, after the blank line the encoder writes
/// before it or at the start: one `invoke` (more when parallel calls are allowed) per call, each
/// naming a function allowed and giving its declared parameters in the schema's order (the
/// required ones always). A parameter whose schema is a string is raw text (`string="true"`, no
/// `<`, its `enum`, `minLength` and `maxLength` held), any other JSON held to its schema
/// (`string="false"`). A function that declares no parameters and does not forbid others takes
/// any named parameters.
pub fn force(f: &Forced<'_>, lit: &dyn Fn(&str) -> String) -> String {
    let mut rules = Vec::new();
    let mut invokes = Vec::new();
    for (i, t) in f.choices().into_iter().enumerate() {
        let params = force_params(i, t.parameters.as_ref(), lit, &mut rules);
        rules.push(format!(
            "invoke_{i}: {} {params} {}",
            lit(&format!("<｜DSML｜invoke name=\"{}\">\n", t.name)),
            lit(&format!("{INVOKE_END}\n"))
        ));
        invokes.push(format!("invoke_{i}"));
    }
    format!(
        "start: ({})? {} {} {}\ninvoke: {}\n{}\n",
        lit("\n\n"),
        lit(&format!("{CALLS_START}\n")),
        f.repeat("invoke", ""),
        lit(CALLS_END),
        invokes.join(" | "),
        rules.join("\n")
    )
}

/// The parameters of function `i` as a Lark expression, their rules pushed onto `rules`.
fn force_params(
    i: usize,
    schema: Option<&Value>,
    lit: &dyn Fn(&str) -> String,
    rules: &mut Vec<String>,
) -> String {
    let props = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .filter(|p| !p.is_empty());
    let Some(props) = props else {
        let closed =
            schema.and_then(|s| s.get("additionalProperties")) == Some(&Value::Bool(false));
        return if closed {
            String::new()
        } else {
            any_params(i, lit, rules)
        };
    };
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut seq = Vec::new();
    for (j, (name, ps)) in props.iter().enumerate() {
        let rule = format!("param_{i}_{j}");
        let r = param_rule(&rule, name, ps, lit, rules);
        rules.push(r);
        seq.push(if required.contains(&name.as_str()) {
            rule
        } else {
            format!("{rule}?")
        });
    }
    seq.join(" ")
}

/// The rule `rule` of parameter `name` whose schema is `ps` (a JSON value's rule pushed onto
/// `rules`).
fn param_rule(
    rule: &str,
    name: &str,
    ps: &Value,
    lit: &dyn Fn(&str) -> String,
    rules: &mut Vec<String>,
) -> String {
    let open = |string: bool| {
        lit(&format!(
            "<｜DSML｜parameter name=\"{name}\" string=\"{string}\">"
        ))
    };
    let mut forms = Vec::new();
    if let Some(text) = text_value(ps, lit) {
        forms.push(format!("{} {text}", open(true)));
    }
    if !is_string_only(ps) {
        let mut js = ps.clone();
        crate::constrain::with_json_options(&mut js);
        rules.push(format!("{rule}_json: %json {js}"));
        forms.push(format!("{} {rule}_json", open(false)));
    }
    format!(
        "{rule}: ({}) {}",
        forms.join(" | "),
        lit(&format!("{PARAM_END}\n"))
    )
}

/// Any number of parameters of function `i` with any names, raw text or JSON.
fn any_params(i: usize, lit: &dyn Fn(&str) -> String, rules: &mut Vec<String>) -> String {
    rules.push(format!(
        "param_{i}: {} /[A-Za-z_][A-Za-z0-9_.-]*/ ({} text_{i} | {} json_{i}) {}",
        lit("<｜DSML｜parameter name=\""),
        lit("\" string=\"true\">"),
        lit("\" string=\"false\">"),
        lit(&format!("{PARAM_END}\n"))
    ));
    rules.push(format!("text_{i}: /[^<]+/?"));
    rules.push(format!("json_{i}: %json {{}}"));
    format!("param_{i}*")
}

/// Whether a parameter's schema admits strings only (written raw, never as JSON).
fn is_string_only(ps: &Value) -> bool {
    ps.get("type").and_then(Value::as_str) == Some("string")
}

/// The Lark expression of a parameter's raw text, where its schema admits a string: one of its
/// `enum` strings, or text without `<` within its length bounds.
fn text_value(ps: &Value, lit: &dyn Fn(&str) -> String) -> Option<String> {
    let admits = match ps.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
        _ => false,
    };
    if !admits {
        return None;
    }
    if let Some(options) = ps.get("enum").and_then(Value::as_array) {
        let strings: Vec<String> = options.iter().filter_map(Value::as_str).map(lit).collect();
        return (!strings.is_empty()).then(|| format!("({})", strings.join(" | ")));
    }
    let bound = |k: &str| ps.get(k).and_then(Value::as_u64);
    let min = bound("minLength").unwrap_or(0);
    Some(match bound("maxLength") {
        Some(0) => String::new(),
        Some(max) => format!(
            "/[^<]{{{},{max}}}/{}",
            min.max(1),
            if min == 0 { "?" } else { "" }
        ),
        None if min > 1 => format!("/[^<]{{{min},}}/"),
        None => format!("/[^<]+/{}", if min == 0 { "?" } else { "" }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_written_as_python_writes_it() {
        let v: Value = serde_json::from_str(
            r#"{"z": [1, {"é": "ü\n"}], "f": 1.5, "e": 1e20, "s": 1e-7, "n": null}"#,
        )
        .unwrap();
        assert_eq!(
            py_json(&v),
            r#"{"z": [1, {"é": "ü\n"}], "f": 1.5, "e": 1e+20, "s": 1e-07, "n": null}"#
        );
    }

    #[test]
    fn calls_render_and_parse_back() {
        let calls = vec![
            ToolCall {
                id: "a".into(),
                name: "f".into(),
                arguments: r#"{"city": "Paris", "days": 2, "tags": ["x"]}"#.into(),
            },
            ToolCall {
                id: "b".into(),
                name: "g".into(),
                arguments: "{}".into(),
            },
        ];
        let text = format!("Checking.\n\n{}", calls_block(&calls));
        let (content, back) = parse(&text).unwrap();
        assert_eq!(content, "Checking.");
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].name, "f");
        assert_eq!(back[0].arguments, calls[0].arguments);
        assert_eq!(back[1].arguments, "{}");
        assert!(parse("no calls here").is_none());
        // cut before the block closes: the complete invoke is kept
        let cut = &text[..text.find("<｜DSML｜invoke name=\"g\"").unwrap()];
        assert_eq!(parse(cut).unwrap().1.len(), 1);
    }
}
