//! The HTTP side of `minirun-serve`: routes, the API key check, the admission limit, the body
//! limit, and the JSON and server-sent-event answers built from the worker's [`Event`]s.

use std::convert::Infallible;
use std::sync::atomic::AtomicUsize;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::{self, Stream, StreamExt};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use super::api::{self, ApiError, ChatRequest, CompletionRequest, Finish, GenRequest};
use super::logprobs::Pending;
use super::metrics::ServeStats;
use super::reasoning::Splitter;
use super::tools::{call_json, CallStage};
use super::worker::{Event, Job, Slot};
use crate::chat::AnswerSyntax;
use crate::chat::ToolCall;
use crate::sample::SamplingParams;

/// What `/v1/models` says of the served model.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ModelInfo {
    pub id: String,
    /// `gguf` or `artifact`.
    pub source: &'static str,
    /// The artifact's commit (verified), or the GGUF file's path.
    pub origin: String,
    /// Whether a runtime runs it (false: "verified, not chat-capable").
    pub chat_capable: bool,
    /// Why not, when it is not.
    pub reason: Option<String>,
    /// Whether the model has a chat format (`/v1/chat/completions`).
    pub chat_template: bool,
    /// Positions of the context.
    pub context: usize,
    /// How the chat format's answers mark reasoning and tool calls (`None`: plain text).
    #[serde(skip)]
    pub answer: Option<&'static AnswerSyntax>,
}

/// Everything a handler needs.
pub struct AppState {
    pub info: ModelInfo,
    pub defaults: SamplingParams,
    /// `None` when the model cannot run (every generation is refused).
    pub jobs: Option<SyncSender<Job>>,
    pub admitted: Arc<AtomicUsize>,
    /// Requests admitted at once: the running one and the queue.
    pub limit: usize,
    /// SHA-256 of the API key, when one is required.
    pub key_digest: Option<[u8; 32]>,
    pub created: u64,
    pub stats: Arc<ServeStats>,
    /// The model's tokenizer (`None` for a model that is listed, not run).
    pub text: Option<Arc<super::text::Text>>,
    /// Silence after which a streamed answer gets a `: ping` comment (`--sse-ping`).
    pub sse_ping: Option<std::time::Duration>,
}

/// The router: `/health` is open; `/v1/*` needs the key when one is set.
pub fn router(state: Arc<AppState>, max_body: usize) -> Router {
    let v1 = Router::new()
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/tokenize", post(super::text::tokenize))
        .route("/detokenize", post(super::text::detokenize))
        .route_layer(middleware::from_fn_with_state(Arc::clone(&state), auth));
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .merge(v1)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn(log_line))
        .with_state(state)
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// One stderr line per request: method, path, status, time (never a header).
async fn log_line(req: Request, next: Next) -> Response {
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let t0 = Instant::now();
    let r = next.run(req).await;
    eprintln!(
        "{method} {path} {} {:.3} s",
        r.status().as_u16(),
        t0.elapsed().as_secs_f64()
    );
    r
}

/// Compares the bearer token with the key in constant time (over their SHA-256 digests, so the
/// key's length does not show either).
async fn auth(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let Some(want) = state.key_digest else {
        return next.run(req).await;
    };
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    let got: [u8; 32] = Sha256::digest(given.as_bytes()).into();
    let diff = got.iter().zip(&want).fold(0u8, |acc, (a, b)| acc | (a ^ b));
    if diff != 0 {
        return ApiError {
            status: StatusCode::UNAUTHORIZED,
            message: "a valid API key is required (Authorization: Bearer KEY)".into(),
            kind: "invalid_request_error",
            code: Some("invalid_api_key"),
            param: None,
            retry_after: None,
        }
        .into_response();
    }
    next.run(req).await
}

/// Liveness and what the worker has done (open without the API key: counts only).
async fn health(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(state.stats.health(&state.admitted))
}

/// The Prometheus text exposition (open without the API key, as `/health`: counts only).
async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    openmetrics(&state.stats, &state.admitted)
}

/// `GET /metrics`'s answer (before the model is ready as after).
pub fn openmetrics(stats: &ServeStats, admitted: &AtomicUsize) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        stats.render(admitted),
    )
        .into_response()
}

async fn not_found(req: Request) -> ApiError {
    ApiError::invalid(
        format!("no route for {} {}", req.method(), req.uri().path()),
        None,
    )
    .with_status(StatusCode::NOT_FOUND)
}

async fn models(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({
        "object": "list",
        "data": [{
            "id": state.info.id,
            "object": "model",
            "created": state.created,
            "owned_by": "minirun",
            "minirun": state.info,
        }],
    }))
}

/// The body, or the 413/400 that says why not.
pub(super) fn body_of(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|r| {
        let status = r.status();
        let e = ApiError::invalid(format!("the request body: {}", r.body_text()), None);
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            e.with_status(status).with_code("request_too_large")
        } else {
            e
        }
    })
}

async fn chat(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let req: ChatRequest = api::parse(&body_of(body)?)?;
    let gen = req.into_gen(&state.info.id, &state.defaults)?;
    answer(state, gen, Kind::Chat).await
}

async fn completions(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let req: CompletionRequest = api::parse(&body_of(body)?)?;
    let gen = req.into_gen(&state.info.id, &state.defaults)?;
    answer(state, gen, Kind::Completion).await
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Chat,
    Completion,
}

/// Queues the job and answers as JSON or as server-sent events.
async fn answer(state: Arc<AppState>, gen: GenRequest, kind: Kind) -> Result<Response, ApiError> {
    let Some(jobs) = &state.jobs else {
        return Err(ApiError::invalid(
            format!(
                "`{}` is verified, not chat-capable: {}",
                state.info.id,
                state.info.reason.as_deref().unwrap_or("no runtime")
            ),
            Some("model"),
        )
        .with_code("model_not_runnable"));
    };
    let busy = || ApiError {
        status: StatusCode::SERVICE_UNAVAILABLE,
        message: format!(
            "the server is busy: one generation runs and {} wait; retry later",
            state.limit - 1
        ),
        kind: "server_error",
        code: Some("server_busy"),
        param: None,
        retry_after: Some(1),
    };
    let slot = Slot::take(&state.admitted, state.limit).ok_or_else(busy)?;
    let (tx, mut rx) = unbounded_channel();
    let stream = gen.stream;
    let include_usage = gen.include_usage;
    let logprobs = gen.logprobs.is_some();
    let (thinking, tools) = reads_back(state.info.answer, &gen);
    let parallel_calls = gen.parallel_tool_calls;
    jobs.try_send(Job {
        request: gen,
        events: tx,
        slot,
    })
    .map_err(|e| match e {
        std::sync::mpsc::TrySendError::Full(_) => busy(),
        std::sync::mpsc::TrySendError::Disconnected(_) => {
            ApiError::server("the model thread has stopped; restart minirun-serve")
        }
    })?;
    let prompt_tokens = match rx.recv().await {
        Some(Event::Started { prompt_tokens }) => prompt_tokens,
        Some(Event::Failed(e)) => return Err(e),
        _ => {
            return Err(ApiError::server(
                "the worker ended the request without an answer",
            ))
        }
    };
    let meta = Meta {
        id: response_id(kind),
        created: unix_now(),
        model: state.info.id.clone(),
        kind,
        prompt_tokens,
        thinking,
        tools,
        parallel_calls,
        logprobs,
    };
    if stream {
        let events = Sse::new(sse(meta, rx, include_usage));
        Ok(match state.sse_ping {
            Some(every) => events
                .keep_alive(KeepAlive::new().interval(every).text("ping"))
                .into_response(),
            None => events.into_response(),
        })
    } else {
        whole(meta, &mut rx).await.map(IntoResponse::into_response)
    }
}

/// What of the answer is read back in the chat format's syntax: where thinking mode's
/// reasoning ends, and the syntax of tool calls where tools were offered (both only for a
/// format that reads its answers back).
fn reads_back(
    answer: Option<&'static AnswerSyntax>,
    gen: &GenRequest,
) -> (Option<&'static str>, Option<&'static AnswerSyntax>) {
    let api::Prompt::Chat(_, effort, tools) = &gen.prompt else {
        return (None, None);
    };
    (
        answer.filter(|_| effort.is_some()).map(|a| a.reasoning_end),
        answer.filter(|_| !tools.is_empty()),
    )
}

/// A fresh response id (`chatcmpl-…` or `cmpl-…`).
fn response_id(kind: Kind) -> String {
    let prefix = match kind {
        Kind::Chat => "chatcmpl",
        Kind::Completion => "cmpl",
    };
    format!("{prefix}-{:016x}", crate::run::random_seed())
}

struct Meta {
    id: String,
    created: u64,
    model: String,
    kind: Kind,
    prompt_tokens: usize,
    /// Thinking mode: the answer's reasoning, up to this mark, goes out as `reasoning_content`.
    thinking: Option<&'static str>,
    /// Tools were offered: a tool-call block in the answer goes out as `tool_calls`.
    tools: Option<&'static AnswerSyntax>,
    /// More than one call goes out (`parallel_tool_calls`); `false`: the first only.
    parallel_calls: bool,
    /// `logprobs` were asked: each choice carries the entries of its tokens.
    logprobs: bool,
}

/// The finish reason: `tool_calls` when an answer that ended by itself called tools; an answer
/// cut by `max_tokens` says `length` whatever it holds (a call may be missing, as llama-server
/// says).
fn finish_name(finish: Finish, calls: &[ToolCall]) -> &'static str {
    match finish {
        Finish::Stop if !calls.is_empty() => "tool_calls",
        other => other.name(),
    }
}

impl Meta {
    /// `v`'s choice with the waiting log-probabilities, where they were asked and any wait.
    fn with_logprobs(&self, mut v: Value, pending: &mut Pending) -> Value {
        if self.logprobs && !pending.is_empty() {
            v["choices"][0]["logprobs"] = match self.kind {
                Kind::Chat => pending.chat(),
                Kind::Completion => pending.completion(),
            };
        }
        v
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.kind, chunk) {
            (Kind::Chat, false) => "chat.completion",
            (Kind::Chat, true) => "chat.completion.chunk",
            (Kind::Completion, _) => "text_completion",
        }
    }

    fn envelope(&self, chunk: bool, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": self.object(chunk),
            "created": self.created,
            "model": self.model,
            "system_fingerprint": concat!("minirun-", env!("CARGO_PKG_VERSION")),
            "choices": choices,
        })
    }

    /// One choice: a chat message or delta (with its reasoning in thinking mode), or a
    /// completion's text.
    fn choice(&self, chunk: bool, text: Option<Piece<'_>>, finish: Option<&str>) -> Value {
        let content = text.map_or("", |p| p.content);
        let calls = text.map_or(&[][..], |p| p.calls);
        match (self.kind, chunk) {
            (Kind::Chat, false) => {
                let mut message = json!({"role": "assistant", "content": content});
                if self.thinking.is_some() {
                    message["reasoning_content"] = json!(text.map_or("", |p| p.reasoning));
                }
                if !calls.is_empty() {
                    let calls: Vec<Value> = calls.iter().map(|c| call_json(c, None)).collect();
                    message["tool_calls"] = json!(calls);
                }
                json!({
                    "index": 0,
                    "message": message,
                    "logprobs": null,
                    "finish_reason": finish,
                })
            }
            (Kind::Chat, true) if !calls.is_empty() => {
                let calls: Vec<Value> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, c)| call_json(c, Some(i)))
                    .collect();
                let delta = json!({"tool_calls": calls});
                json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish})
            }
            (Kind::Chat, true) => {
                let delta = match text {
                    Some(p) if !p.reasoning.is_empty() && p.content.is_empty() => {
                        json!({"reasoning_content": p.reasoning})
                    }
                    Some(p) if !p.reasoning.is_empty() => {
                        json!({"reasoning_content": p.reasoning, "content": p.content})
                    }
                    Some(p) => json!({"content": p.content}),
                    None if finish.is_none() => json!({"role": "assistant", "content": ""}),
                    None => json!({}),
                };
                json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish})
            }
            (Kind::Completion, _) => json!({
                "index": 0,
                "text": content,
                "logprobs": null,
                "finish_reason": finish,
            }),
        }
    }
}

/// Text of one choice: its reasoning (thinking mode), its content and the tools it called.
#[derive(Clone, Copy)]
struct Piece<'a> {
    reasoning: &'a str,
    content: &'a str,
    calls: &'a [ToolCall],
}

/// The non-streamed answer: every event collected.
async fn whole(meta: Meta, rx: &mut UnboundedReceiver<Event>) -> Result<Json<Value>, ApiError> {
    let mut split = Splitter::new(meta.thinking);
    let mut stage = CallStage::new(meta.tools, meta.parallel_calls);
    let (mut reasoning, mut text) = (String::new(), String::new());
    let mut pending = Pending::default();
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Text(t) => {
                let (r, c) = split.push(&t);
                reasoning.push_str(&r);
                text.push_str(&stage.push(&c));
            }
            Event::Logprob(e) => pending.push(e),
            Event::Failed(e) => return Err(e),
            Event::Started { .. } => {}
            Event::Done {
                finish,
                completion_tokens,
                timings,
            } => {
                reasoning.push_str(&split.finish());
                let (rest, calls) = stage.finish();
                text.push_str(&rest);
                let piece = Piece {
                    reasoning: &reasoning,
                    content: &text,
                    calls: &calls,
                };
                let finish = finish_name(finish, &calls);
                let mut body = meta.with_logprobs(
                    meta.envelope(
                        false,
                        json!([meta.choice(false, Some(piece), Some(finish))]),
                    ),
                    &mut pending,
                );
                body["usage"] = api::usage(meta.prompt_tokens, completion_tokens);
                body["timings"] = timings.json();
                return Ok(Json(body));
            }
        }
    }
    Err(ApiError::server(
        "the worker ended the request without an answer",
    ))
}

/// How a streamed answer ended (the worker's `Done` event).
struct Ended {
    finish: Finish,
    completion_tokens: usize,
    timings: api::Timings,
}

/// The events that close a streamed answer: what the stages still hold (reasoning, content,
/// the tool calls), the chunk with the finish reason and timings, the usage chunk when asked,
/// then `[DONE]`.
fn last_events(
    meta: &Meta,
    split: &mut (Splitter, CallStage, Pending),
    ended: Ended,
    include_usage: bool,
) -> Vec<Result<SseEvent, Infallible>> {
    let data = |v: Value| Ok(SseEvent::default().data(v.to_string()));
    let mut out = Vec::new();
    let held = split.0.finish();
    let (rest, calls) = split.1.finish();
    let pieces = [
        Piece {
            reasoning: &held,
            content: &rest,
            calls: &[],
        },
        Piece {
            reasoning: "",
            content: "",
            calls: &calls,
        },
    ];
    for piece in pieces {
        if !(piece.reasoning.is_empty() && piece.content.is_empty() && piece.calls.is_empty()) {
            out.push(data(
                meta.envelope(true, json!([meta.choice(true, Some(piece), None)])),
            ));
        }
    }
    let finish = finish_name(ended.finish, &calls);
    let mut last = meta.with_logprobs(
        meta.envelope(true, json!([meta.choice(true, None, Some(finish))])),
        &mut split.2,
    );
    last["timings"] = ended.timings.json();
    out.push(data(last));
    if include_usage {
        let mut u = meta.envelope(true, json!([]));
        u["usage"] = api::usage(meta.prompt_tokens, ended.completion_tokens);
        out.push(data(u));
    }
    out.push(Ok(SseEvent::default().data("[DONE]")));
    out
}

/// The streamed answer: a first chunk (chat: the assistant's role), one chunk per piece of
/// text, a last chunk with the finish reason, the usage chunk when asked, then `[DONE]`.
fn sse(
    meta: Meta,
    rx: UnboundedReceiver<Event>,
    include_usage: bool,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let data = |v: Value| Ok(SseEvent::default().data(v.to_string()));
    let first = match meta.kind {
        Kind::Chat => Some(data(
            meta.envelope(true, json!([meta.choice(true, None, None)])),
        )),
        Kind::Completion => None,
    };
    let split = (
        Splitter::new(meta.thinking),
        CallStage::new(meta.tools, meta.parallel_calls),
        Pending::default(),
    );
    let meta = Arc::new(meta);
    let body = stream::unfold((rx, false, split), move |(mut rx, ended, mut split)| {
        let meta = Arc::clone(&meta);
        async move {
            if ended {
                return None;
            }
            let mut out: Vec<Result<SseEvent, Infallible>> = Vec::new();
            let mut end = false;
            match rx.recv().await {
                Some(Event::Text(t)) => {
                    let (reasoning, content) = split.0.push(&t);
                    let content = split.1.push(&content);
                    if !(reasoning.is_empty() && content.is_empty()) {
                        let piece = Piece {
                            reasoning: &reasoning,
                            content: &content,
                            calls: &[],
                        };
                        out.push(data(meta.with_logprobs(
                            meta.envelope(true, json!([meta.choice(true, Some(piece), None)])),
                            &mut split.2,
                        )));
                    }
                }
                Some(Event::Logprob(e)) => split.2.push(e),
                Some(Event::Done {
                    finish,
                    completion_tokens,
                    timings,
                }) => {
                    let ended = Ended {
                        finish,
                        completion_tokens,
                        timings,
                    };
                    out = last_events(&meta, &mut split, ended, include_usage);
                    end = true;
                }
                Some(Event::Failed(e)) => {
                    out.push(data(e.body()));
                    out.push(Ok(SseEvent::default().data("[DONE]")));
                    end = true;
                }
                Some(Event::Started { .. }) => {}
                None => return None,
            }
            Some((stream::iter(out), (rx, end, split)))
        }
    })
    .flatten();
    stream::iter(first).chain(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(tools: bool) -> Meta {
        let syntax = crate::deepseek::chat::format(crate::chat::Mode::Chat).answer_syntax();
        Meta {
            id: "x".into(),
            created: 0,
            model: "m".into(),
            kind: Kind::Chat,
            prompt_tokens: 3,
            thinking: None,
            tools: syntax.filter(|_| tools),
            parallel_calls: true,
            logprobs: false,
        }
    }

    /// The answer one character at a time, as the worker may send it.
    fn events(text: &str) -> UnboundedReceiver<Event> {
        let (tx, rx) = unbounded_channel();
        for ch in text.chars() {
            let _ = tx.send(Event::Text(ch.to_string()));
        }
        let _ = tx.send(Event::Done {
            finish: Finish::Stop,
            completion_tokens: 9,
            timings: api::Timings::default(),
        });
        rx
    }

    #[test]
    fn an_answer_cut_by_max_tokens_says_length_even_with_calls() {
        let call = ToolCall {
            id: "call_0".into(),
            name: "f".into(),
            arguments: "{}".into(),
        };
        assert_eq!(
            finish_name(Finish::Length, std::slice::from_ref(&call)),
            "length"
        );
        assert_eq!(finish_name(Finish::Stop, &[call]), "tool_calls");
        assert_eq!(finish_name(Finish::Stop, &[]), "stop");
    }

    const ANSWER: &str = "Let me check.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";

    #[test]
    fn a_tool_call_answer_goes_out_as_tool_calls_whole_and_streamed() -> Result<(), String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async {
            let Json(body) = whole(meta(true), &mut events(ANSWER))
                .await
                .map_err(|e| e.message)?;
            let choice = &body["choices"][0];
            assert_eq!(choice["finish_reason"], "tool_calls");
            assert_eq!(choice["message"]["content"], "Let me check.");
            let call = &choice["message"]["tool_calls"][0];
            assert_eq!(call["type"], "function");
            assert_eq!(call["function"]["name"], "f");
            assert_eq!(call["function"]["arguments"], r#"{"city": "Paris"}"#);
            // no tools offered: the block is text
            let Json(body) = whole(meta(false), &mut events(ANSWER))
                .await
                .map_err(|e| e.message)?;
            assert_eq!(body["choices"][0]["message"]["content"], ANSWER);
            assert_eq!(body["choices"][0]["finish_reason"], "stop");
            // streamed: the content, then one delta with the call, then the finish reason
            let resp = Sse::new(sse(meta(true), events(ANSWER), false)).into_response();
            let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
                .await
                .map_err(|e| e.to_string())?;
            let text = String::from_utf8(bytes.to_vec()).map_err(|e| e.to_string())?;
            let chunks: Vec<Value> = text
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .filter(|d| *d != "[DONE]")
                .filter_map(|d| serde_json::from_str(d).ok())
                .collect();
            let delta = |c: &Value| c["choices"][0]["delta"].clone();
            let content: String = chunks
                .iter()
                .filter_map(|c| delta(c)["content"].as_str().map(str::to_owned))
                .collect();
            assert_eq!(content, "Let me check.");
            let calls: Vec<Value> = chunks
                .iter()
                .filter_map(|c| delta(c).get("tool_calls").cloned())
                .collect();
            assert_eq!(calls.len(), 1, "{text}");
            assert_eq!(calls[0][0]["index"], 0);
            assert_eq!(calls[0][0]["function"]["arguments"], r#"{"city": "Paris"}"#);
            let last = chunks.last().ok_or("no chunks")?;
            assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
            Ok(())
        })
    }
}
