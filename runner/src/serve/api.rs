//! The OpenAI-compatible request and response bodies of `minirun-serve` (docs/runner.md
//! "minirun-serve"): requests are parsed into one [`GenRequest`], answers are built from what the
//! worker reports, errors carry OpenAI's error body `{"error": {message, type, param, code}}`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::chat::Message;
use crate::constrain::Grammar;
use crate::sample::SamplingParams;

/// At most this many stop sequences (OpenAI allows 4; llama-server more).
pub const MAX_STOPS: usize = 16;

/// What `/v1/completions` generates when the request names no `max_tokens` (OpenAI's default).
pub const COMPLETIONS_DEFAULT_MAX_TOKENS: usize = 16;

/// An error answered with OpenAI's error body.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub kind: &'static str,
    pub code: Option<&'static str>,
    pub param: Option<&'static str>,
    /// Seconds for `Retry-After` (503).
    pub retry_after: Option<u32>,
}

impl ApiError {
    /// A 400 `invalid_request_error`.
    pub fn invalid(message: impl Into<String>, param: Option<&'static str>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            code: None,
            param,
            retry_after: None,
        }
    }

    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// A 500 from the model or the engine.
    pub fn server(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
            kind: "server_error",
            code: None,
            param: None,
            retry_after: None,
        }
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after {
            if let Ok(v) = HeaderValue::from_str(&s.to_string()) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        r
    }
}

/// `stop`: a string or a list of strings.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum StopField {
    One(String),
    Many(Vec<String>),
}

/// A chat message's `content`: a string or a list of parts.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Deserialize)]
pub struct Part {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct ChatMessageIn {
    pub role: String,
    #[serde(default)]
    pub content: Option<Content>,
    /// An assistant's reasoning, handed back (DeepSeek V4 renders it when tools are offered).
    #[serde(default)]
    pub reasoning_content: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<super::tools::ToolCallIn>>,
    /// A tool result's call (not rendered by DeepSeek V4's format; accepted).
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// The fields both endpoints share.
#[derive(Debug, Deserialize)]
pub struct Common {
    pub model: String,
    #[serde(default)]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_p: Option<f32>,
    #[serde(default)]
    pub seed: Option<i64>,
    #[serde(default)]
    pub stop: Option<StopField>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub n: Option<u32>,
    #[serde(default)]
    pub frequency_penalty: Option<f32>,
    #[serde(default)]
    pub presence_penalty: Option<f32>,
    /// Chat: `true`/`false`; completions: how many alternatives (0..=5).
    #[serde(default)]
    pub logprobs: Option<Value>,
    /// Chat: how many alternatives per token (0..=20), with `logprobs: true`.
    #[serde(default)]
    pub top_logprobs: Option<u64>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub response_format: Option<Value>,
    /// The extension: `{"type": "lark" | "regex" | "json_schema", "value": …}`.
    #[serde(default)]
    pub grammar: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    #[serde(flatten)]
    pub common: Common,
    pub messages: Vec<ChatMessageIn>,
    /// DeepSeek V4's thinking mode at this effort (`low`, `high`, `xhigh`, `max`).
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    #[serde(default)]
    pub tool_choice: Option<Value>,
    /// `false`: at most one tool call (OpenAI's default: any number).
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
}

/// `prompt`: a string or a list holding one string.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum PromptField {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    #[serde(flatten)]
    pub common: Common,
    pub prompt: PromptField,
    #[serde(default)]
    pub echo: Option<bool>,
}

/// What the prompt is.
#[derive(Debug, Clone)]
pub enum Prompt {
    /// Rendered in the model's chat format (DeepSeek V4's thinking mode at the effort, if any),
    /// with the functions offered.
    Chat(Vec<Message>, Option<String>, Vec<crate::chat::ToolDef>),
    /// Tokenized as it is.
    Text(String),
}

/// One generation, as the worker runs it.
#[derive(Debug, Clone)]
pub struct GenRequest {
    pub prompt: Prompt,
    /// `None`: the rest of the context.
    pub max_tokens: Option<usize>,
    pub sampling: SamplingParams,
    pub stop: Vec<String>,
    pub stream: bool,
    pub include_usage: bool,
    /// Each token's log-probability and this many alternatives (`None`: not asked).
    pub logprobs: Option<usize>,
    /// What the output must match (`response_format`, `grammar`).
    pub grammar: Option<Grammar>,
    /// Whether the answer must call one of the tools offered (`tool_choice`).
    pub tool_choice: super::tools::Choice,
    /// Whether the answer may call more than one tool (`parallel_tool_calls`).
    pub parallel_tool_calls: bool,
}

/// Which endpoint a request came to (their `logprobs` fields differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Chat,
    Completions,
}

/// Alternatives a chat request may ask per token (OpenAI's bound).
pub const MAX_TOP_LOGPROBS: u64 = 20;
/// Alternatives a completions request may ask per token (OpenAI's bound).
pub const MAX_COMPLETION_LOGPROBS: u64 = 5;

/// Parses a JSON body into `T`, or the 400 that names what is wrong.
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::invalid(
            format!("the request body is not a valid request: {e}"),
            None,
        )
    })
}

impl Common {
    /// The generation settings: the server's defaults, with the request's temperature, top_p and
    /// seed (a random seed where none is given); refuses what the server does not do.
    pub fn settings(
        &self,
        served: &str,
        defaults: &SamplingParams,
        default_max: Option<usize>,
    ) -> Result<(Option<usize>, SamplingParams, Vec<String>), ApiError> {
        if self.model != served {
            return Err(ApiError::invalid(
                format!(
                    "the model `{}` does not exist here; this server serves `{served}` (GET /v1/models)",
                    self.model
                ),
                Some("model"),
            )
            .with_code("model_not_found"));
        }
        if self.n.is_some_and(|n| n != 1) {
            return Err(ApiError::invalid("only n = 1 is supported", Some("n")));
        }
        let max = match self.max_completion_tokens.or(self.max_tokens) {
            Some(0) => {
                return Err(ApiError::invalid(
                    "max_tokens must be at least 1",
                    Some("max_tokens"),
                ))
            }
            Some(m) => Some(usize::try_from(m).unwrap_or(usize::MAX)),
            None => default_max,
        };
        let mut sampling = *defaults;
        if let Some(t) = self.temperature {
            sampling.temperature = t;
        }
        if let Some(p) = self.top_p {
            sampling.top_p = p;
        }
        sampling.frequency_penalty = self.frequency_penalty.unwrap_or(0.0);
        sampling.presence_penalty = self.presence_penalty.unwrap_or(0.0);
        sampling.seed = match self.seed {
            Some(s) => s as u64,
            None => crate::run::random_seed(),
        };
        sampling.validate().map_err(|e| {
            let param = match &e {
                crate::sample::SamplingError::OpenAiPenalty(name, _) => Some(*name),
                _ => None,
            };
            ApiError::invalid(e.to_string(), param)
        })?;
        let stop = match &self.stop {
            None => Vec::new(),
            Some(StopField::One(s)) => vec![s.clone()],
            Some(StopField::Many(v)) => v.clone(),
        };
        if stop.len() > MAX_STOPS || stop.iter().any(String::is_empty) {
            return Err(ApiError::invalid(
                format!("stop: at most {MAX_STOPS} non-empty strings"),
                Some("stop"),
            ));
        }
        Ok((max, sampling, stop))
    }

    /// What the output must match, from `response_format` and `grammar`.
    pub fn grammar(&self) -> Result<Option<Grammar>, ApiError> {
        super::format::grammar(self.response_format.as_ref(), self.grammar.as_ref())
    }

    /// How many alternatives per token the request asks log-probabilities for (`None`: none):
    /// chat's `logprobs: true` with `top_logprobs` (default 0), completions' `logprobs: N`.
    pub fn logprobs(&self, endpoint: Endpoint) -> Result<Option<usize>, ApiError> {
        let field = self.logprobs.as_ref().filter(|v| !v.is_null());
        let asked = match (endpoint, field) {
            (_, None) | (Endpoint::Chat, Some(Value::Bool(false))) => None,
            (Endpoint::Chat, Some(Value::Bool(true))) => Some(self.top_logprobs.unwrap_or(0)),
            (Endpoint::Completions, Some(Value::Number(n))) => match n.as_u64() {
                Some(k) if k <= MAX_COMPLETION_LOGPROBS => Some(k),
                _ => {
                    return Err(ApiError::invalid(
                        format!("logprobs: an integer in 0..={MAX_COMPLETION_LOGPROBS}"),
                        Some("logprobs"),
                    ))
                }
            },
            (Endpoint::Chat, Some(_)) => {
                return Err(ApiError::invalid(
                    "logprobs: true or false (top_logprobs says how many alternatives)",
                    Some("logprobs"),
                ))
            }
            (Endpoint::Completions, Some(_)) => {
                return Err(ApiError::invalid(
                    format!("logprobs: an integer in 0..={MAX_COMPLETION_LOGPROBS}"),
                    Some("logprobs"),
                ))
            }
        };
        match (endpoint, self.top_logprobs) {
            (Endpoint::Chat, Some(k)) if k > MAX_TOP_LOGPROBS => Err(ApiError::invalid(
                format!("top_logprobs: an integer in 0..={MAX_TOP_LOGPROBS}"),
                Some("top_logprobs"),
            )),
            (Endpoint::Chat, Some(_)) if asked.is_none() => Err(ApiError::invalid(
                "top_logprobs needs logprobs: true",
                Some("top_logprobs"),
            )),
            (Endpoint::Completions, Some(_)) => Err(ApiError::invalid(
                "top_logprobs is a chat field; /v1/completions takes logprobs: N",
                Some("top_logprobs"),
            )),
            _ => Ok(asked.map(|k| k as usize)),
        }
    }

    fn stream_flags(&self) -> (bool, bool) {
        let stream = self.stream.unwrap_or(false);
        let usage = stream
            && self
                .stream_options
                .as_ref()
                .is_some_and(|o| o.include_usage);
        (stream, usage)
    }
}

impl ChatRequest {
    pub fn into_gen(self, served: &str, defaults: &SamplingParams) -> Result<GenRequest, ApiError> {
        let (max_tokens, sampling, stop) = self.common.settings(served, defaults, None)?;
        if self.messages.is_empty() {
            return Err(ApiError::invalid(
                "messages must hold at least one message",
                Some("messages"),
            ));
        }
        let mut messages = Vec::with_capacity(self.messages.len());
        for m in &self.messages {
            let content = match &m.content {
                None => String::new(),
                Some(Content::Text(t)) => t.clone(),
                Some(Content::Parts(parts)) => {
                    let mut text = String::new();
                    for p in parts {
                        match (p.kind.as_str(), &p.text) {
                            ("text", Some(t)) => text.push_str(t),
                            (kind, _) => {
                                return Err(ApiError::invalid(
                                    format!(
                                    "content parts of type `{kind}` are not supported (text only)"
                                ),
                                    Some("messages"),
                                ))
                            }
                        }
                    }
                    text
                }
            };
            let role = m.role.as_str();
            if !matches!(role, "system" | "developer" | "user" | "assistant" | "tool") {
                return Err(ApiError::invalid(
                    format!("message role `{role}` is not supported (system, developer, user, assistant, tool)"),
                    Some("messages"),
                ));
            }
            // `developer` is the newer name of `system`; chat templates know `system`.
            let role = if role == "developer" { "system" } else { role };
            let mut msg = Message::new(role, &content);
            if role == "assistant" {
                // As DeepSeek's request conversion: handed-back reasoning counts in thinking
                // mode only, where a missing one is empty.
                msg.reasoning_content = self
                    .reasoning_effort
                    .is_some()
                    .then(|| m.reasoning_content.clone().unwrap_or_default());
                msg.tool_calls = super::tools::calls(m.tool_calls.as_deref().unwrap_or(&[]))?;
            }
            messages.push(msg);
        }
        let (tools, tool_choice) =
            super::tools::offered(self.common.tools.as_deref(), self.tool_choice.as_ref())?;
        let grammar = self.common.grammar()?;
        if grammar.is_some() && !tools.is_empty() {
            return Err(ApiError::invalid(
                "a response_format or grammar leaves no room for tool calls: offer no tools with it",
                Some("tools"),
            ));
        }
        let (stream, include_usage) = self.common.stream_flags();
        Ok(GenRequest {
            prompt: Prompt::Chat(messages, self.reasoning_effort.clone(), tools),
            max_tokens,
            sampling,
            stop,
            stream,
            include_usage,
            logprobs: self.common.logprobs(Endpoint::Chat)?,
            grammar,
            tool_choice,
            parallel_tool_calls: self.parallel_tool_calls.unwrap_or(true),
        })
    }
}

impl CompletionRequest {
    pub fn into_gen(self, served: &str, defaults: &SamplingParams) -> Result<GenRequest, ApiError> {
        let (max_tokens, sampling, stop) =
            self.common
                .settings(served, defaults, Some(COMPLETIONS_DEFAULT_MAX_TOKENS))?;
        if self.echo == Some(true) {
            return Err(ApiError::invalid("echo is not supported", Some("echo")));
        }
        if self.common.tools.as_ref().is_some_and(|t| !t.is_empty()) {
            return Err(ApiError::invalid(
                "tools are offered on /v1/chat/completions, not on /v1/completions",
                Some("tools"),
            ));
        }
        let text = match self.prompt {
            PromptField::One(s) => s,
            PromptField::Many(mut v) if v.len() == 1 => v.remove(0),
            PromptField::Many(_) => {
                return Err(ApiError::invalid(
                    "prompt: one string (a batch of prompts is not supported)",
                    Some("prompt"),
                ))
            }
        };
        let (stream, include_usage) = self.common.stream_flags();
        Ok(GenRequest {
            prompt: Prompt::Text(text),
            max_tokens,
            sampling,
            stop,
            stream,
            include_usage,
            logprobs: self.common.logprobs(Endpoint::Completions)?,
            grammar: self.common.grammar()?,
            tool_choice: super::tools::Choice::Auto,
            parallel_tool_calls: true,
        })
    }
}

/// Why a generation ended, as OpenAI names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// The end-of-sequence token or a stop sequence.
    Stop,
    /// `max_tokens` (or the context) reached.
    Length,
    /// The client went away (never sent: nobody is listening).
    Cancelled,
}

impl Finish {
    pub fn name(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
            Finish::Cancelled => "cancelled",
        }
    }
}

/// How long a generation took, as llama-server's `timings` reports it: the prompt's tokens the
/// cache already held (`cache_n`), those fed (`prompt_n`) and the time to the first token, then
/// the tokens generated and the time after the first (its decode steps; the first token comes
/// from the prompt's forward).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timings {
    pub cached: usize,
    pub prompt: usize,
    pub prompt_s: f64,
    pub predicted: usize,
    pub predicted_s: f64,
}

impl Timings {
    pub fn json(&self) -> Value {
        let per_s = |n: usize, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
        let steps = self.predicted.saturating_sub(1);
        json!({
            "cache_n": self.cached,
            "prompt_n": self.prompt,
            "prompt_ms": self.prompt_s * 1e3,
            "prompt_per_second": per_s(self.prompt, self.prompt_s),
            "predicted_n": self.predicted,
            "predicted_ms": self.predicted_s * 1e3,
            "predicted_per_second": per_s(steps, self.predicted_s),
        })
    }
}

/// `usage`.
pub fn usage(prompt: usize, completion: usize) -> Value {
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(body: &str) -> Result<GenRequest, ApiError> {
        parse::<ChatRequest>(body.as_bytes())?.into_gen("m", &SamplingParams::default())
    }

    #[test]
    fn requests_take_the_server_defaults_and_refuse_what_is_not_done() {
        let g = chat(r#"{"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],"stop":"x","seed":5,"temperature":0.5}"#).unwrap();
        match &g.prompt {
            Prompt::Chat(m, _, _) => assert_eq!(
                (m[0].role.as_str(), m[0].content.as_str()),
                ("system", "ab")
            ),
            Prompt::Text(_) => panic!("a chat request became a text prompt"),
        }
        assert_eq!(
            (g.stop.clone(), g.sampling.seed, g.sampling.temperature),
            (vec!["x".to_owned()], 5, 0.5)
        );
        assert_eq!(g.max_tokens, None);
        let refused = |body: &str, param: &str| {
            let e = chat(body).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{body}");
            assert_eq!(
                e.param,
                Some(param).filter(|p| !p.is_empty()),
                "{body}: {}",
                e.message
            );
        };
        refused(
            r#"{"model":"other","messages":[{"role":"user","content":"a"}]}"#,
            "model",
        );
        refused(r#"{"model":"m","messages":[]}"#, "messages");
        refused(
            r#"{"model":"m","messages":[{"role":"user","content":"a"}],"n":2}"#,
            "n",
        );
        refused(
            r#"{"model":"m","messages":[{"role":"user","content":"a"}],"tools":[{"type":"function"}]}"#,
            "tools",
        );
        refused(
            r#"{"model":"m","messages":[{"role":"user","content":"a"}],"response_format":{"type":"yaml"}}"#,
            "response_format",
        );
        refused(
            r#"{"model":"m","messages":[{"role":"user","content":"a"}],"stop":[""]}"#,
            "stop",
        );
        refused(
            r#"{"model":"m","messages":[{"role":"user","content":"a"}],"max_tokens":0}"#,
            "max_tokens",
        );
        refused(
            r#"{"model":"m","messages":[{"role":"function","content":"a"}]}"#,
            "messages",
        );
        refused(
            r#"{"model":"m","messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}"#,
            "tool_choice",
        );
        refused(
            r#"{"model":"m","messages":[{"role":"user","content":"a"}],"tools":[{"type":"web_search"}]}"#,
            "tools",
        );
        refused(
            r#"{"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]}"#,
            "messages",
        );
        refused(
            r#"{"model":"m","messages":[{"role":"user","content":"a"}],"top_p":0}"#,
            "",
        );
        refused(r#"{"model": "#, "");
        let c = parse::<CompletionRequest>(br#"{"model":"m","prompt":["only"]}"#)
            .unwrap()
            .into_gen("m", &SamplingParams::default())
            .unwrap();
        assert_eq!(c.max_tokens, Some(COMPLETIONS_DEFAULT_MAX_TOKENS));
        let e = parse::<CompletionRequest>(br#"{"model":"m","prompt":["a","b"]}"#)
            .unwrap()
            .into_gen("m", &SamplingParams::default())
            .unwrap_err();
        assert_eq!(e.param, Some("prompt"));
    }
}
