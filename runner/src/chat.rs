//! Chat templates (docs/runner.md "Chat templates"): a model's own Jinja `chat_template` —
//! from GGUF `tokenizer.chat_template` or a `tokenizer_config.json` — rendered with minijinja in
//! the environment transformers gives it (`apply_chat_template`): `trim_blocks` and
//! `lstrip_blocks`, Python string and dict methods (`.strip()`, `.split()`, `.get()` …),
//! `raise_exception(message)`, `strftime_now(format)`, transformers' `tojson` (Python's
//! `json.dumps`: `", "` and `": "`, no HTML escaping, `indent=`), and the variables `messages`
//! (transformers' shape: an assistant's `tool_calls` as `{id, type, function: {name, arguments}}`
//! with the arguments an object), `tools` (OpenAI's `tools` entries, when offered),
//! `add_generation_prompt`, `bos_token`, `eos_token`. Rendering is checked byte for byte against
//! transformers on recorded real templates (`runner/tests/chat_templates.rs`).

pub mod calls;

use minijinja::value::Kwargs;
use minijinja::{context, Environment, Error, ErrorKind, Value};
use serde::Serialize;
use serde_json::{json, Value as Json};

use crate::error::RunError;

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
    /// An assistant message's reasoning (an encoder may render it, e.g. when tools are given). Absent
    /// from what a Jinja template sees unless set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// An assistant message's tool calls (absent from what a template sees unless set).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// A tool message's answer to this call (absent from what a template sees unless set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn new(role: &str, content: &str) -> Self {
        Self {
            role: role.to_owned(),
            content: content.to_owned(),
            reasoning_content: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// The message as a Jinja template sees it (transformers' shape): `role`, `content`, and
    /// where set `reasoning_content`, `tool_calls` (`{id, type: "function", function: {name,
    /// arguments}}`, the arguments parsed into an object when they are JSON, as transformers
    /// asks callers to pass them) and `tool_call_id`.
    fn for_template(&self) -> Json {
        let mut m = json!({"role": self.role, "content": self.content});
        if let Some(r) = &self.reasoning_content {
            m["reasoning_content"] = json!(r);
        }
        if !self.tool_calls.is_empty() {
            let calls: Vec<Json> = self
                .tool_calls
                .iter()
                .map(|c| {
                    let args = serde_json::from_str::<Json>(&c.arguments)
                        .unwrap_or_else(|_| json!(c.arguments));
                    json!({"id": c.id, "type": "function",
                        "function": {"name": c.name, "arguments": args}})
                })
                .collect();
            m["tool_calls"] = json!(calls);
        }
        if let Some(id) = &self.tool_call_id {
            m["tool_call_id"] = json!(id);
        }
        m
    }
}

/// A tool call an assistant made: OpenAI's `{id, type: "function", function: {name, arguments}}`
/// with `arguments` the JSON text the model (or client) wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A function the model may call: OpenAI's `tools[].function`.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ToolDef {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub parameters: Option<serde_json::Value>,
}

impl ToolDef {
    /// OpenAI's `tools` entry, as a Jinja template sees it: `{type: "function", function: {name,
    /// description, parameters}}`, absent fields left out.
    fn for_template(&self) -> Json {
        let mut f = json!({"name": self.name});
        if let Some(d) = &self.description {
            f["description"] = json!(d);
        }
        if let Some(p) = &self.parameters {
            f["parameters"] = p.clone();
        }
        json!({"type": "function", "function": f})
    }
}

/// A compiled chat template with the special-token texts it may print.
pub struct ChatTemplate {
    env: Environment<'static>,
    pub bos_token: String,
    pub eos_token: String,
    /// Whether the template reads `tools` (renders functions offered).
    pub reads_tools: bool,
    /// The call syntax it teaches, when it reads `tools` and the syntax is one read here.
    pub calls: Option<&'static AnswerSyntax>,
}

/// How the model is asked to answer: directly (chat mode), or reasoning first at an effort
/// (thinking mode; OpenAI's and DeepSeek's `reasoning_effort`). Only a family's published
/// encoder ([`ChatEncoder`]) has a thinking mode; a Jinja template has its own switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Chat,
    Thinking(Effort),
}

/// The reasoning effort of thinking mode: `low`, `high` (and `xhigh`, which encoders render as
/// `high`) or `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effort {
    /// No instruction: the model reasons as it sees fit.
    Low,
    /// The default where a request names no effort.
    High,
    Max,
}

impl Effort {
    /// The effort named `name` (`low`, `high`, `xhigh`, `max`), else what is accepted.
    pub fn parse(name: &str) -> Result<Self, RunError> {
        match name {
            "low" => Ok(Effort::Low),
            "high" | "xhigh" => Ok(Effort::High),
            "max" => Ok(Effort::Max),
            other => {
                let shown: String = other.chars().take(20).collect();
                Err(RunError::Usage(format!(
                    "reasoning effort {shown:?}: the efforts are low, high, xhigh and max"
                )))
            }
        }
    }
}

/// A family's published conversation encoder, for a model that ships no Jinja template: it
/// renders tools and tool calls, and has a thinking mode.
pub trait ChatEncoder: Sync {
    /// The prompt text of `messages` in `mode` with `tools` offered (none: the plain format),
    /// ending in the assistant's turn when `add_generation_prompt`.
    fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
        mode: Mode,
        tools: &[ToolDef],
    ) -> Result<String, RunError>;

    /// What renders the conversation in `mode`, in words (for `--verbose`, `/v1/models`).
    fn describe(&self, mode: Mode) -> &'static str;

    /// How the encoding marks the end of an answer's reasoning and its tool calls.
    fn answer_syntax(&self) -> &'static AnswerSyntax;
}

/// Splits an answer into the content before its tool-call block and the block's calls.
pub type ParseCalls = fn(&str) -> Option<(String, Vec<ToolCall>)>;

/// The Lark grammar (llguidance's) of an answer that calls what `Forced` allows, each call's
/// arguments held to the function's JSON Schema. The grammar spells its fixed text through the
/// last argument, which writes text as a Lark expression over the model's tokenizer
/// (`constrain::Grammars::lark_literal`: a chat marker that is a special token is matched by its
/// id).
pub type ForceCall = fn(&Forced<'_>, &dyn Fn(&str) -> String) -> String;

/// What a forced answer calls (`tool_choice` `required` or a named function).
#[derive(Debug, Clone, Copy)]
pub struct Forced<'a> {
    /// The functions offered.
    pub tools: &'a [ToolDef],
    /// The one function it must call (a named `tool_choice`); `None`: any of them.
    pub only: Option<&'a str>,
    /// More than one call (`parallel_tool_calls`, OpenAI's default); `false`: exactly one.
    pub parallel: bool,
}

impl Forced<'_> {
    /// The functions a call may name.
    pub fn choices(&self) -> Vec<&ToolDef> {
        self.tools
            .iter()
            .filter(|t| self.only.is_none_or(|n| t.name == n))
            .collect()
    }

    /// A Lark expression of one or more `item`s joined by `sep` (one item only, unless
    /// parallel calls are allowed).
    pub fn repeat(&self, item: &str, sep: &str) -> String {
        if self.parallel {
            format!("{item} ({sep} {item})*")
        } else {
            item.to_owned()
        }
    }
}

/// How an answer in a family's encoding is read back: where thinking mode's reasoning ends and
/// where a tool-call block starts and what calls it holds (`minirun-serve` sends reasoning
/// apart from content, and calls as `tool_calls`).
#[derive(Debug)]
pub struct AnswerSyntax {
    /// Closes the reasoning (thinking mode).
    pub reasoning_end: &'static str,
    /// Opens a block of tool calls.
    pub calls_start: &'static str,
    /// The content before the block and the block's calls (`None`: the text holds no
    /// well-formed block).
    pub parse_calls: ParseCalls,
    /// The grammar that forces a call (`tool_choice` `required` or a named function), where
    /// the syntax has one.
    pub force: Option<ForceCall>,
}

/// How a model's conversation becomes prompt text: its own Jinja template, or the published
/// encoder of a family that ships none.
pub enum ChatFormat {
    /// A `chat_template` (GGUF metadata or `tokenizer_config.json`).
    Template(Box<ChatTemplate>),
    /// A family's encoder, in chat or thinking mode.
    Encoder(&'static dyn ChatEncoder, Mode),
}

impl ChatFormat {
    /// The prompt text of `messages`, ending in the assistant's turn when `add_generation_prompt`.
    pub fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, RunError> {
        match self {
            ChatFormat::Template(t) => t.render(messages, add_generation_prompt),
            ChatFormat::Encoder(e, mode) => e.render(messages, add_generation_prompt, *mode, &[]),
        }
    }

    /// This format in thinking mode at `effort` (`None`: unchanged). Refused for a model that
    /// renders its own chat template (its templates' own switches differ).
    pub fn with_reasoning_effort(self, effort: Option<&str>) -> Result<Self, RunError> {
        let Some(effort) = effort else {
            return Ok(self);
        };
        let mode = self.thinking_mode(effort)?;
        match self {
            ChatFormat::Encoder(enc, _) => Ok(ChatFormat::Encoder(enc, mode)),
            ChatFormat::Template(_) => Err(no_thinking()),
        }
    }

    /// As [`ChatFormat::render`], in `thinking` mode when one is given (the server's
    /// per-request `reasoning_effort`, made by [`ChatFormat::thinking_mode`]).
    pub fn render_in(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
        thinking: Option<Mode>,
    ) -> Result<String, RunError> {
        self.render_tools(messages, add_generation_prompt, thinking, &[])
    }

    /// As [`ChatFormat::render_in`] with `tools` offered (only an encoder renders them:
    /// [`ChatFormat::renders_tools`]).
    pub fn render_tools(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
        thinking: Option<Mode>,
        tools: &[ToolDef],
    ) -> Result<String, RunError> {
        match self {
            ChatFormat::Encoder(e, mode) => e.render(
                messages,
                add_generation_prompt,
                thinking.unwrap_or(*mode),
                tools,
            ),
            ChatFormat::Template(_) if thinking.is_some() => Err(no_thinking()),
            ChatFormat::Template(t) => t.render_tools(messages, add_generation_prompt, tools),
        }
    }

    /// Whether the format renders tools and reads calls back: an encoder does; a template does
    /// when its text reads `tools` and teaches a call syntax read here ([`calls::syntax_of`]).
    pub fn renders_tools(&self) -> bool {
        match self {
            ChatFormat::Encoder(..) => true,
            ChatFormat::Template(t) => t.calls.is_some(),
        }
    }

    /// How an answer is read back (a template's: its call syntax, if it has one read here).
    pub fn answer_syntax(&self) -> Option<&'static AnswerSyntax> {
        match self {
            ChatFormat::Encoder(e, _) => Some(e.answer_syntax()),
            ChatFormat::Template(t) => t.calls,
        }
    }

    /// The thinking mode at `effort`, or why this format has none.
    pub fn thinking_mode(&self, effort: &str) -> Result<Mode, RunError> {
        match self {
            ChatFormat::Encoder(..) => Ok(Mode::Thinking(Effort::parse(effort)?)),
            ChatFormat::Template(_) => Err(no_thinking()),
        }
    }

    /// What renders the conversation, in words (for `--verbose`, `/v1/models` and docs).
    pub fn describe(&self) -> &'static str {
        match self {
            ChatFormat::Template(_) => "the model's chat template",
            ChatFormat::Encoder(e, mode) => e.describe(*mode),
        }
    }
}

/// Why tools were refused: the model's chat template does not render them, or teaches a call
/// syntax not read here.
pub const NO_TOOLS: &str =
    "this model's chat template does not render tools, or teaches a tool-call syntax minirun does not read back (it reads <tool_call> JSON blocks and bare {\"name\", \"parameters\"} objects)";

fn no_thinking() -> RunError {
    RunError::Usage(
        "a reasoning effort selects the thinking mode of a family's published chat encoder; this model renders its own chat template".into(),
    )
}

/// The error of a template, with the construct and line minijinja names.
fn template_err(what: &str, e: &Error) -> RunError {
    let mut detail = format!("{what}: {e}");
    if let Some(line) = e.line() {
        detail.push_str(&format!(" (template line {line})"));
    }
    if let Some(d) = e.detail() {
        if !detail.contains(d) {
            detail.push_str(&format!(": {d}"));
        }
    }
    RunError::Template(detail)
}

impl ChatTemplate {
    /// Compiles `source`; `now` (seconds since the Unix epoch) is the clock `strftime_now` reads
    /// (`None`: the system clock at each call).
    pub fn new(
        source: &str,
        bos_token: &str,
        eos_token: &str,
        now: Option<i64>,
    ) -> Result<Self, RunError> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_function(
            "strftime_now",
            move |fmt: String| -> Result<String, Error> {
                let t = now.unwrap_or_else(unix_now);
                strftime(&fmt, t).map_err(|m| Error::new(ErrorKind::InvalidOperation, m))
            },
        );
        env.add_filter("tojson", tojson);
        env.add_template_owned("chat_template", python_string_continuations(source))
            .map_err(|e| template_err("the chat template does not compile", &e))?;
        let reads_tools = env
            .get_template("chat_template")
            .map(|t| t.undeclared_variables(false).contains("tools"))
            .unwrap_or(false);
        Ok(Self {
            env,
            bos_token: bos_token.to_owned(),
            eos_token: eos_token.to_owned(),
            reads_tools,
            calls: calls::syntax_of(source).filter(|_| reads_tools),
        })
    }

    /// The prompt text of `messages`, ending in the assistant's turn when `add_generation_prompt`.
    pub fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, RunError> {
        self.render_tools(messages, add_generation_prompt, &[])
    }

    /// As [`ChatTemplate::render`] with `tools` offered (none: `tools` is undefined, as
    /// transformers leaves it).
    pub fn render_tools(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
        tools: &[ToolDef],
    ) -> Result<String, RunError> {
        let t = self
            .env
            .get_template("chat_template")
            .map_err(|e| template_err("the chat template", &e))?;
        let messages: Vec<Json> = messages.iter().map(Message::for_template).collect();
        let tools = (!tools.is_empty())
            .then(|| tools.iter().map(ToolDef::for_template).collect::<Vec<_>>());
        t.render(context! {
            messages => messages,
            tools => tools,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos_token,
            eos_token => self.eos_token,
        })
        .map_err(|e| template_err("the chat template refused the conversation", &e))
    }
}

/// transformers' `tojson` filter: Python's `json.dumps(value, ensure_ascii=False,
/// indent=indent)` — `", "` and `": "` between items, or with `indent` a newline and that many
/// spaces per level and `","`; keys in their order; no HTML escaping (minijinja's own `tojson`
/// escapes `<`, `>`, `&` and `'`, and writes no spaces).
fn tojson(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    kwargs.assert_all_used()?;
    let json = serde_json::to_value(&value)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    let mut out = Vec::new();
    let written = match indent {
        Some(n) => {
            let pad = vec![b' '; n];
            let mut ser = serde_json::Serializer::with_formatter(
                &mut out,
                serde_json::ser::PrettyFormatter::with_indent(&pad),
            );
            json.serialize(&mut ser)
        }
        None => json.serialize(&mut serde_json::Serializer::with_formatter(
            &mut out,
            PythonFormatter,
        )),
    };
    written.map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    let text = String::from_utf8(out)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    Ok(Value::from_safe_string(text))
}

/// Python's `json.dumps` separators without `indent`: `", "` and `": "`.
struct PythonFormatter;

/// `", "` before every item but the first.
fn item_separator<W: ?Sized + std::io::Write>(w: &mut W, first: bool) -> std::io::Result<()> {
    if first {
        Ok(())
    } else {
        w.write_all(b", ")
    }
}

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        item_separator(w, first)
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        item_separator(w, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

/// Jinja2 reads a string literal with Python's escapes, where a backslash before a line break
/// continues the string on the next line (both vanish); minijinja keeps them. Real templates use
/// it (Mistral Small 3.1's default system message), so inside string literals within `{{ }}` and
/// `{% %}` the pair is removed before compiling. Text outside tags is left as it is.
fn python_string_continuations(source: &str) -> String {
    let b = source.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let (mut in_tag, mut quote, mut i) = (false, None::<u8>, 0);
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        match (in_tag, quote) {
            (false, _) => {
                if c == b'{' && matches!(next, Some(b'{') | Some(b'%')) {
                    in_tag = true;
                    out.extend_from_slice(&b[i..i + 2]);
                    i += 2;
                    continue;
                }
            }
            (true, None) => {
                if matches!(c, b'}' | b'%') && next == Some(b'}') {
                    in_tag = false;
                    out.extend_from_slice(&b[i..i + 2]);
                    i += 2;
                    continue;
                }
                if c == b'\'' || c == b'"' {
                    quote = Some(c);
                }
            }
            (true, Some(q)) => {
                if c == b'\\' {
                    if next == Some(b'\n') {
                        i += 2;
                        continue;
                    }
                    out.push(c);
                    if let Some(n) = next {
                        out.push(n);
                    }
                    i += 2;
                    continue;
                }
                if c == q {
                    quote = None;
                }
            }
        }
        out.push(c);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| source.to_owned())
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Days since 1970-01-01 → (year, month 1..=12, day 1..=31) in the proleptic Gregorian calendar
/// (H. Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Python's `strftime` for the directives chat templates use, in UTC: `%Y %m %d %B %b %A %a
/// %H %M %S %j %y %e %%`; any other directive is an error naming it.
pub fn strftime(fmt: &str, unix: i64) -> Result<String, String> {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    let (y, m, d) = civil(days);
    let weekday = (days + 3).rem_euclid(7) as usize; // 1970-01-01 was a Thursday
    let month = MONTHS[(m - 1) as usize];
    let yday = days - days_from_civil(y, 1, 1) + 1;
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&y.to_string()),
            Some('y') => out.push_str(&format!("{:02}", y.rem_euclid(100))),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('e') => out.push_str(&format!("{d:>2}")),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('B') => out.push_str(month),
            Some('b') => out.push_str(&month[..3]),
            Some('A') => out.push_str(DAYS[weekday]),
            Some('a') => out.push_str(&DAYS[weekday][..3]),
            Some('H') => out.push_str(&format!("{:02}", secs / 3600)),
            Some('M') => out.push_str(&format!("{:02}", secs / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", secs % 60)),
            Some('%') => out.push('%'),
            other => {
                return Err(format!(
                    "strftime_now: directive `%{}` is not supported (Y y m d e j B b A a H M S %)",
                    other.map(String::from).unwrap_or_default()
                ))
            }
        }
    }
    Ok(out)
}

/// (year, month, day) → days since 1970-01-01 (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backslash_line_break_continues_a_string_only_inside_tags() {
        let src = "a\\\nb{{ 'x\\\ny' + \"\\\"q\\\n\" }}c\\\n";
        assert_eq!(
            python_string_continuations(src),
            "a\\\nb{{ 'xy' + \"\\\"q\" }}c\\\n"
        );
    }

    #[test]
    fn strftime_matches_known_dates() {
        // 2026-01-01T00:00:00Z was a Thursday; 2024-02-29T13:05:09Z a Thursday, day 60.
        assert_eq!(
            strftime("%Y-%m-%d %A %a %b %B", 1_767_225_600).unwrap(),
            "2026-01-01 Thursday Thu Jan January"
        );
        assert_eq!(
            strftime("%d %b %Y %H:%M:%S %j %%", 1_709_211_909).unwrap(),
            "29 Feb 2024 13:05:09 060 %"
        );
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(civil(days_from_civil(2000, 3, 1)), (2000, 3, 1));
        assert!(strftime("%Z", 0).unwrap_err().contains("`%Z`"));
    }

    #[test]
    fn raise_exception_and_compile_errors_name_what_failed() {
        let t = ChatTemplate::new(
            "{{ raise_exception('roles must alternate') }}",
            "",
            "",
            Some(0),
        )
        .unwrap();
        let e = t.render(&[], true).unwrap_err().to_string();
        assert!(e.contains("roles must alternate"), "{e}");
        let e = ChatTemplate::new("{% for m in messages %}", "", "", Some(0))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("does not compile") && e.contains("line 1"),
            "{e}"
        );
    }
}
