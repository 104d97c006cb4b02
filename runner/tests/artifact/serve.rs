//! `minirun-serve --artifact` in process (`runner::serve::start`) over the verified demo artifact:
//! with a registered adapter (the test-local bigram of `registry.rs`) completions run, and chat
//! completions render in the family's chat format (DeepSeek V4's encoding: the artifact carries
//! no template); with no adapter for the
//! family the server still starts and `/v1/models` reports the model as verified, not
//! chat-capable, and every generation is refused with `model_not_runnable`. An unverified copy
//! is refused before the server starts. Forced tool calls (DeepSeek's DSML grammar) run on the
//! bigram at a context where DeepSeek's tools section fits, which the real forward on lavapipe
//! would take minutes to prefill.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Parser;
use runner::serve::{start, start_with, ServeArgs};
use serde_json::Value;

use runner::adapter::{Model, ModelOptions};
use runner::artifact::VerifiedArtifact;
use runner::error::RunError;
use runner::registry::Entry;

use super::registry::TOY;
use super::{engine, fixture};

/// One HTTP/1.1 request; (status, JSON body).
pub(super) fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let status: u16 = raw[9..12].parse().unwrap();
    let body = &raw[raw.find("\r\n\r\n").unwrap() + 4..];
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn args(dir: &str) -> ServeArgs {
    ServeArgs::try_parse_from([
        "minirun-serve",
        "--artifact",
        dir,
        "--port",
        "0",
        "-c",
        "64",
    ])
    .unwrap()
}

#[test]
fn serve_an_artifact_with_and_without_a_runtime() {
    if engine("serve_an_artifact_with_and_without_a_runtime").is_none() {
        return;
    }
    let fx = fixture();
    let dir = fx.consumer.to_str().unwrap();

    let server = start(&args(dir), &TOY, false).unwrap();
    let addr = server.addr;
    let id = server.info.id.clone();
    assert_eq!(id, super::TARGET);
    let (st, models) = request(addr, "GET", "/v1/models", "");
    assert_eq!(st, 200);
    let m = &models["data"][0];
    assert_eq!(m["id"], id.as_str());
    assert_eq!(m["minirun"]["chat_capable"], true);
    assert_eq!(m["minirun"]["chat_template"], true);
    assert_eq!(
        m["minirun"]["origin"],
        format!("{}@{}", super::TARGET, fx.commit)
    );
    let body = format!(r#"{{"model": "{id}", "prompt": "hello", "max_tokens": 4}}"#);
    let (st, a) = request(addr, "POST", "/v1/completions", &body);
    assert_eq!(st, 200, "{a}");
    assert_eq!(a["usage"]["completion_tokens"], 4);
    assert_eq!(a["choices"][0]["finish_reason"], "length");
    // A second request starts a new sequence (the adapter rewinds) and, greedy, repeats the first.
    let (st, b) = request(addr, "POST", "/v1/completions", &body);
    assert_eq!(st, 200, "{b}");
    assert_eq!(a["choices"][0]["text"], b["choices"][0]["text"]);
    let chat = format!(
        r#"{{"model": "{id}", "messages": [{{"role": "system", "content": "Be brief."}}, {{"role": "user", "content": "hi"}}], "max_tokens": 3}}"#
    );
    let (st, c) = request(addr, "POST", "/v1/chat/completions", &chat);
    assert_eq!(st, 200, "{c}");
    assert_eq!(c["usage"]["completion_tokens"], 3, "{c}");
    // BOS, "Be brief.", <｜User｜>, "hi", <｜Assistant｜>, </think>: more than the two texts alone
    assert!(c["usage"]["prompt_tokens"].as_u64().unwrap() >= 5, "{c}");
    assert!(
        c["choices"][0]["message"]
            .get("reasoning_content")
            .is_none(),
        "{c}"
    );
    // Thinking mode (effort `low`: no instruction, which would not fit this 64-token context):
    // the answer, which the toy model never closes with </think>, is all reasoning, sent apart
    // from the content.
    let think = format!(
        r#"{{"model": "{id}", "messages": [{{"role": "user", "content": "hi"}}], "max_tokens": 3, "reasoning_effort": "low"}}"#
    );
    let (st, t) = request(addr, "POST", "/v1/chat/completions", &think);
    assert_eq!(st, 200, "{t}");
    let msg = &t["choices"][0]["message"];
    assert_eq!(msg["content"], "", "{t}");
    assert!(
        !msg["reasoning_content"].as_str().unwrap().is_empty(),
        "{t}"
    );
    let bad = think.replace(r#""low""#, r#""medium""#);
    let (st, e) = request(addr, "POST", "/v1/chat/completions", &bad);
    assert_eq!(
        (st, e["error"]["param"].as_str()),
        (400, Some("reasoning_effort")),
        "{e}"
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("low, high, xhigh and max"),
        "{e}"
    );
    // The context (-c 64) bounds prompt + max_tokens.
    let long = format!(r#"{{"model": "{id}", "prompt": "hello", "max_tokens": 64}}"#);
    let (st, e) = request(addr, "POST", "/v1/completions", &long);
    assert_eq!(
        (st, e["error"]["code"].as_str()),
        (400, Some("context_length_exceeded"))
    );
    server.stop().unwrap();

    // No runtime for the family: listed, verified, not chat-capable, and refused.
    let server = start(&args(dir), &[], false).unwrap();
    let (st, models) = request(server.addr, "GET", "/v1/models", "");
    assert_eq!(st, 200);
    let m = &models["data"][0]["minirun"];
    assert_eq!(m["chat_capable"], false);
    assert!(
        m["reason"]
            .as_str()
            .unwrap()
            .contains("is verified, not chat-capable"),
        "{m}"
    );
    let (st, e) = request(server.addr, "POST", "/v1/completions", &body);
    assert_eq!(
        (st, e["error"]["code"].as_str()),
        (400, Some("model_not_runnable"))
    );
    server.stop().unwrap();

    // A copy without evidence is refused: start fails, and what listened while it verified stops.
    let copy = fx.scratch.join("serve-unverified");
    let _ = std::fs::remove_dir_all(&copy);
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(&fx.consumer)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::remove_dir_all(copy.join(".minirun-evidence")).unwrap();
    let bound = std::sync::Mutex::new(None);
    let err = start_with(&args(copy.to_str().unwrap()), &TOY, false, &|a| {
        *bound.lock().unwrap() = Some(a);
    })
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("evidence"), "{err}");
    let addr = bound
        .lock()
        .unwrap()
        .expect("it listened while it verified");
    assert!(TcpStream::connect(addr).is_err(), "{addr} still listens");
    let _ = std::fs::remove_dir_all(&copy);
}

/// Holds the model's load until [`HELD_RELEASE`] is set.
static HELD_RELEASE: AtomicBool = AtomicBool::new(false);

fn open_held<'a>(
    a: &'a VerifiedArtifact,
    o: &ModelOptions<'a>,
) -> Result<Box<dyn Model + 'a>, RunError> {
    while !HELD_RELEASE.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(10));
    }
    (TOY[0].open)(a, o)
}

/// [`TOY`] whose load waits for the test.
static HELD: [Entry; 1] = [Entry {
    open: open_held,
    ..TOY[0]
}];

#[test]
fn health_tells_loading_from_ready() {
    if engine("health_tells_loading_from_ready").is_none() {
        return;
    }
    let fx = fixture();
    let a = args(fx.consumer.to_str().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let starting = std::thread::spawn(move || {
        start_with(&a, &HELD, false, &|addr| {
            let _ = tx.send(addr);
        })
    });
    let addr = rx.recv_timeout(Duration::from_secs(120)).unwrap();
    let (st, h) = request(addr, "GET", "/health", "");
    assert_eq!((st, h["status"].as_str()), (503, Some("loading")), "{h}");
    let (st, e) = request(addr, "GET", "/v1/models", "");
    assert_eq!(
        (st, e["error"]["code"].as_str()),
        (503, Some("model_loading")),
        "{e}"
    );
    let (st, _) = request(addr, "GET", "/metrics", "");
    assert_eq!(st, 200);
    HELD_RELEASE.store(true, Ordering::SeqCst);
    let server = starting.join().unwrap().unwrap();
    assert_eq!(server.addr, addr);
    let (st, h) = request(addr, "GET", "/health", "");
    assert_eq!((st, h["status"].as_str()), (200, Some("ok")), "{h}");
    let (st, m) = request(addr, "GET", "/v1/models", "");
    assert_eq!(st, 200, "{m}");
    server.stop().unwrap();
}

/// A forced call's arguments, checked against the weather tool's schema; the calls.
fn weather_calls(answer: &Value) -> Vec<(String, Value)> {
    let calls = answer["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap_or_else(|| panic!("no tool_calls: {answer}"));
    calls
        .iter()
        .map(|c| {
            let name = c["function"]["name"].as_str().unwrap().to_owned();
            let args: Value = serde_json::from_str(c["function"]["arguments"].as_str().unwrap())
                .unwrap_or_else(|e| panic!("arguments not JSON ({e}): {answer}"));
            if name == "get_weather" {
                let city = args["city"].as_str().unwrap();
                assert!(city.chars().count() <= 12 && !city.is_empty(), "{answer}");
                assert!(["celsius", "fahrenheit"].contains(&args["unit"].as_str().unwrap()));
                assert_eq!(args.as_object().unwrap().len(), 2, "{answer}");
            } else {
                assert_eq!((name.as_str(), &args), ("now", &serde_json::json!({})));
            }
            (name, args)
        })
        .collect()
}

#[test]
fn forced_tool_calls_in_deepseeks_format_parse_and_validate() {
    if engine("forced_tool_calls_in_deepseeks_format_parse_and_validate").is_none() {
        return;
    }
    let fx = fixture();
    let mut a = args(fx.consumer.to_str().unwrap());
    a.ctx_size = Some(4096);
    let server = start(&a, &TOY, false).unwrap();
    let addr = server.addr;
    let id = server.info.id.clone();
    let tools = r#"[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 12}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]"#;
    let ask = |extra: &str| {
        format!(
            r#"{{"model": "{id}", "messages": [{{"role": "user", "content": "Weather in Paris?"}}], "tools": {tools}, "max_tokens": 400, {extra}}}"#
        )
    };
    // The bigram toy never calls on its own; the grammar makes every answer a call that validates.
    let named = ask(
        r#""tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": false, "temperature": 0"#,
    );
    let (st, r) = request(addr, "POST", "/v1/chat/completions", &named);
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["choices"][0]["finish_reason"], "tool_calls", "{r}");
    assert_eq!(r["choices"][0]["message"]["content"], "", "{r}");
    let calls = weather_calls(&r);
    assert_eq!(calls.len(), 1, "{r}");
    assert_eq!(calls[0].0, "get_weather");
    // Sampled, any number of calls: an answer ends with its calls, or is cut by max_tokens
    // (`length`) with the calls it completed.
    let mut ended = 0;
    for seed in 1..4 {
        let any = ask(&format!(
            r#""tool_choice": "required", "temperature": 1.0, "seed": {seed}"#
        ));
        let (st, r) = request(addr, "POST", "/v1/chat/completions", &any);
        assert_eq!(st, 200, "{r}");
        let finish = r["choices"][0]["finish_reason"].as_str().unwrap();
        if finish == "tool_calls" || r["choices"][0]["message"]["tool_calls"].is_array() {
            assert!(!weather_calls(&r).is_empty(), "{r}");
        }
        assert!(["tool_calls", "length"].contains(&finish), "{r}");
        ended += usize::from(finish == "tool_calls");
    }
    assert!(ended > 0, "no sampled answer ended by itself");
    // In thinking mode the grammar waits for the reasoning's end, which the toy never writes:
    // the answer is all reasoning, and it cannot end (EOS is masked) before the budget does.
    let think = ask(r#""tool_choice": "required", "reasoning_effort": "low", "max_tokens": 8"#)
        .replace(r#""max_tokens": 400, "#, "");
    let (st, r) = request(addr, "POST", "/v1/chat/completions", &think);
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["choices"][0]["finish_reason"], "length", "{r}");
    assert_eq!(r["usage"]["completion_tokens"], 8, "{r}");
    server.stop().unwrap();
}
