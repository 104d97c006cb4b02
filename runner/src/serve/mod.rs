//! `minirun-serve` (docs/runner.md "minirun-serve"): an OpenAI-compatible HTTP API over one
//! model — a GGUF file (`--model`) or a verified Minirun artifact (`--artifact`, verified-only as
//! `minirun-run`). One thread owns the model and runs one generation at a time from a bounded
//! queue ([`worker`]); the HTTP side ([`http`]) admits, parses, and answers as JSON or as
//! server-sent events.

pub mod api;
pub mod format;
pub mod gate;
pub mod http;
pub mod logprobs;
pub mod metrics;
pub mod reasoning;
pub mod stop;
pub mod text;
pub mod tools;
pub mod worker;

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use clap::Parser;
use sha2::{Digest, Sha256};

use crate::adapter::ModelOptions;
use crate::error::RunError;
use crate::open::{Opening, Origin, Source};
use crate::prompt_cache::PromptCache;
use crate::registry::Entry;
use crate::run::{ShapeArg, EXIT_FAILURE, EXIT_OK, EXIT_USAGE};
use crate::sample::SamplingParams;
use crate::session::session_ctx;
use http::{AppState, ModelInfo};
use metrics::ServeStats;
use worker::{Backend, Job};

/// Request bodies larger than this get 413 (default of `--max-body-bytes`).
pub const DEFAULT_MAX_BODY: usize = 4 << 20;

#[derive(Debug, Clone, Parser)]
#[command(group(clap::ArgGroup::new("pinned").args(["artifact", "repo"])))]
#[command(
    name = "minirun-serve",
    version,
    about = "an OpenAI-compatible HTTP API over a GGUF model or a verified Minirun artifact",
    after_help = "Environment: with --repo, HF_ENDPOINT, HF_TOKEN, HF_TOKEN_PATH, HF_HOME, \
                  HF_HUB_CACHE, XDG_CACHE_HOME (as huggingface_hub); WGPU_BACKEND (the backends, when --backend is not given; default \
                  Vulkan, Metal, DX12), wgpu's other WGPU_* instance variables; XDG_RUNTIME_DIR \
                  (when unset, NODEVICE_SELECT=1 is set to keep Mesa's device-select layer \
                  quiet); nothing else is read (the API key comes only from --api-key-file).\n\
                  Endpoints: GET /health, GET /v1/models, POST /v1/chat/completions, \
                  POST /v1/completions (docs/runner.md \"minirun-serve\")."
)]
pub struct ServeArgs {
    /// The GGUF file (or the first part of a split).
    #[arg(
        long,
        required_unless_present_any = ["artifact", "repo"],
        conflicts_with_all = ["artifact", "repo"]
    )]
    pub model: Option<PathBuf>,
    /// A verified Minirun artifact directory.
    #[arg(long, conflicts_with = "repo")]
    pub artifact: Option<PathBuf>,
    /// A published Minirun repository, OWNER/NAME, pulled into the Hugging Face cache and
    /// verified before it is served (as `minirun-run --repo`).
    #[arg(long, value_name = "OWNER/NAME")]
    pub repo: Option<String>,
    /// With --artifact: the commit to serve (default: the only one with evidence); with
    /// --repo: the branch, tag or commit to pull (default `main`).
    #[arg(long, requires = "pinned")]
    pub revision: Option<String>,
    /// The model id clients name (default: the GGUF file's stem, or the artifact's repository).
    #[arg(long)]
    pub alias: Option<String>,
    /// Address to listen on; anything but a loopback address needs --allow-remote.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port (0: any free port; the `listening on` line says which).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Listen on a non-loopback address.
    #[arg(long)]
    pub allow_remote: bool,
    /// A file holding the API key clients must send as `Authorization: Bearer KEY`.
    #[arg(long)]
    pub api_key_file: Option<PathBuf>,
    /// Context in tokens: prompt and completion of one request (default min(model, 4096)).
    #[arg(short = 'c', long = "ctx-size")]
    pub ctx_size: Option<usize>,
    /// Requests that may wait while one runs; more get 503 with Retry-After.
    #[arg(long, default_value_t = 8)]
    pub queue: usize,
    /// Request bodies over this many bytes get 413.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY)]
    pub max_body_bytes: usize,
    /// Seconds of silence after which a streamed answer gets an SSE comment line (`: ping`),
    /// so that a client's idle timeout does not cut a long prefill (0: never).
    #[arg(long, default_value_t = 15.0)]
    pub sse_ping: f64,
    /// Seconds a stop (SIGTERM, Ctrl-C) waits for running answers before it cuts their
    /// connections, which cancels them (Kubernetes' default grace period is 30).
    #[arg(long, default_value_t = 25.0)]
    pub drain_seconds: f64,
    /// Default temperature (a request's `temperature` overrides it); 0 is greedy.
    #[arg(long = "temp", default_value_t = 0.0, allow_negative_numbers = true)]
    pub temperature: f32,
    /// Default top-k (0 = all).
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    /// Default top-p (a request's `top_p` overrides it).
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true)]
    pub top_p: f32,
    /// Default min-p (0 = off).
    #[arg(long, default_value_t = 0.05, allow_negative_numbers = true)]
    pub min_p: f32,
    /// Repetition penalty over the last --repeat-last-n tokens (1.0 = off).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub repeat_penalty: f32,
    #[arg(long, default_value_t = 64)]
    pub repeat_last_n: usize,
    /// Stream weights tile by tile from the file instead of uploading them once.
    #[arg(long)]
    pub stream: bool,
    /// Streamed tile size in bytes.
    #[arg(long, default_value_t = crate::run::DEFAULT_TILE_BYTES)]
    pub tile_bytes: usize,
    /// Streamed tile slots on the device, which a reader thread fills that many tiles ahead of
    /// the kernels (GGUF weights; at least 1).
    #[arg(long, value_name = "N", default_value_t = crate::llama::DEFAULT_RING as u16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub ring_slots: u16,
    /// With --artifact --stream: MiB of routed experts (gate, up and down together) kept on the
    /// device (the least used out first; docs/runner-deepseek-v4.md "Expert cache").
    #[arg(long, value_name = "MIB", default_value_t = crate::run::DEFAULT_EXPERT_CACHE_MIB)]
    pub expert_cache_mib: u64,
    /// Row mapping of the matmul kernels (default: by the adapter's type).
    #[arg(long, value_enum)]
    pub matvec_shape: Option<ShapeArg>,
    /// The graphics backends to look for an adapter on, comma-separated (`vulkan`, `metal`,
    /// `dx12`, `gl`). Default: WGPU_BACKEND, else Vulkan, Metal and DX12.
    #[arg(long, value_name = "LIST", value_parser = crate::open::parse_backend)]
    pub backend: Option<String>,
    /// A Jinja chat template to render conversations with instead of the model's own (as
    /// llama-server's `--chat-template-file`; e.g. one that renders tools).
    #[arg(long, value_name = "FILE")]
    pub chat_template_file: Option<PathBuf>,
    /// A `.megakv` prompt cache to load at start (read, never written; made by `minirun-run
    /// --prompt-cache` for the same model): requests whose prompt starts like its tokens do not
    /// feed them again.
    #[arg(long, value_name = "FILE")]
    pub prompt_cache: Option<PathBuf>,
    /// Check the arguments and say what would be served, without loading the model.
    #[arg(long)]
    pub dry_run: bool,
    /// Machine-readable lines (schema `minirun-serve/1`) on stdout.
    #[arg(long)]
    pub json: bool,
}

impl ServeArgs {
    fn defaults(&self) -> Result<SamplingParams, RunError> {
        let p = SamplingParams {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n: self.repeat_last_n,
            // the OpenAI API's per-request penalties (a request sets them)
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            seed: 0,
        };
        p.validate().map_err(|e| RunError::Usage(e.to_string()))?;
        Ok(p)
    }

    /// The socket address, refused when remote without --allow-remote.
    fn addr(&self) -> Result<SocketAddr, RunError> {
        if !self.host.is_loopback() && !self.allow_remote {
            return Err(RunError::Usage(format!(
                "--host {} is not a loopback address: add --allow-remote to serve other machines (and consider --api-key-file)",
                self.host
            )));
        }
        if self.max_body_bytes == 0 {
            return Err(RunError::Usage("--max-body-bytes must be positive".into()));
        }
        for (flag, v) in [
            ("--sse-ping", self.sse_ping),
            ("--drain-seconds", self.drain_seconds),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(RunError::Usage(format!(
                    "{flag} {v}: a number of seconds ≥ 0"
                )));
            }
        }
        Ok(SocketAddr::new(self.host, self.port))
    }

    /// The SHA-256 of the key in --api-key-file (its first line), never the key itself.
    fn key_digest(&self) -> Result<Option<[u8; 32]>, RunError> {
        let Some(path) = &self.api_key_file else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path).map_err(|source| RunError::Io {
            what: "read the API key file",
            path: path.display().to_string(),
            source,
        })?;
        let key = text.lines().next().unwrap_or("").trim();
        if key.is_empty() {
            return Err(RunError::Usage(format!(
                "the API key file `{}` is empty",
                path.display()
            )));
        }
        Ok(Some(Sha256::digest(key.as_bytes()).into()))
    }
}

/// A running server.
pub struct Server {
    pub addr: SocketAddr,
    pub info: ModelInfo,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), RunError>>>,
    /// Ends when the HTTP side has dropped the job queue; joined last, so the device is
    /// released before the process exits (Mesa's exit handlers must not race a live device).
    model_thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Stops accepting, lets running answers end, and waits.
    pub fn stop(mut self) -> Result<(), RunError> {
        self.halt()
    }

    fn halt(&mut self) -> Result<(), RunError> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.join()
    }

    /// Serves until Ctrl-C or SIGTERM.
    pub fn wait(mut self) -> Result<(), RunError> {
        self.join()
    }

    /// Waits for the HTTP thread, then for the model thread.
    fn join(&mut self) -> Result<(), RunError> {
        let r = match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(RunError::Model {
                path: String::new(),
                detail: "the server thread panicked".into(),
            }),
            None => Ok(()),
        };
        if let Some(t) = self.model_thread.take() {
            let _ = t.join();
        }
        r
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

/// Binds, serves on a background thread (the [`gate`] answers while the model loads), loads the
/// model on its worker thread, and returns once it is ready. With `signals`, Ctrl-C and SIGTERM
/// stop it as well.
pub fn start(
    args: &ServeArgs,
    entries: &'static [Entry],
    signals: bool,
) -> Result<Server, RunError> {
    start_with(args, entries, signals, &|_| {})
}

/// [`start`], calling `on_bound` with the address as soon as the server listens (before the
/// model is loaded).
pub fn start_with(
    args: &ServeArgs,
    entries: &'static [Entry],
    signals: bool,
    on_bound: &dyn Fn(SocketAddr),
) -> Result<Server, RunError> {
    let addr = args.addr()?;
    let defaults = args.defaults()?;
    let key_digest = args.key_digest()?;
    let limit = args.queue.saturating_add(1);
    let (rt, listener, bound) = bind(addr)?;
    let stats = Arc::new(ServeStats::default());
    let admitted = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(gate::Gate::new(Arc::clone(&stats), Arc::clone(&admitted)));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let drain = std::time::Duration::from_secs_f64(args.drain_seconds);
    let app = Arc::clone(&gate).router();
    let thread = spawn("minirun-serve-http", move || {
        // Dropping the runtime when this thread ends drops every connection still open, so
        // their receivers close and the model thread cancels what it runs.
        rt.block_on(serve_until_drained(listener, app, stop_rx, signals, drain))
            .map_err(|source| RunError::Io {
                what: "serve",
                path: bound.to_string(),
                source,
            })
    })?;
    on_bound(bound);
    let (job_tx, job_rx) = sync_channel::<Job>(limit);
    let (ready_tx, ready_rx) = sync_channel(1);
    let owned = args.clone();
    let worker_stats = Arc::clone(&stats);
    let model_thread = spawn("minirun-serve-model", move || {
        if let Err(e) = run_worker(&owned, entries, &ready_tx, job_rx, &worker_stats) {
            let _ = ready_tx.send(Err(e));
        }
    })?;
    let mut server = Server {
        addr: bound,
        info: ModelInfo::default(),
        shutdown: Some(stop_tx),
        thread: Some(thread),
        model_thread: Some(model_thread),
    };
    let (info, runnable, text) = match ready_rx.recv() {
        Ok(Ok(ready)) => ready,
        Ok(Err(e)) => {
            drop(job_tx);
            let _ = server.halt();
            return Err(e);
        }
        Err(_) => {
            drop(job_tx);
            let _ = server.halt();
            return Err(RunError::Model {
                path: String::new(),
                detail: "the model thread ended before the model was ready".into(),
            });
        }
    };
    if server.thread.as_ref().is_some_and(|t| t.is_finished()) {
        // Ctrl-C or SIGTERM came while the model loaded.
        drop(job_tx);
        let _ = server.halt();
        return Err(RunError::Model {
            path: String::new(),
            detail: "stopped (Ctrl-C or SIGTERM) while the model loaded".into(),
        });
    }
    let state = Arc::new(AppState {
        info: info.clone(),
        defaults,
        jobs: runnable.then_some(job_tx),
        admitted,
        limit,
        key_digest,
        created: http::unix_now(),
        stats,
        text,
        sse_ping: (args.sse_ping > 0.0).then(|| std::time::Duration::from_secs_f64(args.sse_ping)),
    });
    gate.open(http::router(state, args.max_body_bytes));
    server.info = info;
    Ok(server)
}

/// The HTTP runtime and its listener on `addr`; the address bound (port 0: the one chosen).
fn bind(
    addr: SocketAddr,
) -> Result<(tokio::runtime::Runtime, tokio::net::TcpListener, SocketAddr), RunError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|source| RunError::Io {
            what: "start the HTTP runtime",
            path: String::new(),
            source,
        })?;
    let listen = |source| RunError::Io {
        what: "listen on",
        path: addr.to_string(),
        source,
    };
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(addr))
        .map_err(listen)?;
    let bound = listener.local_addr().map_err(listen)?;
    Ok((rt, listener, bound))
}

/// A named thread.
fn spawn<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<std::thread::JoinHandle<T>, RunError> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|source| RunError::Io {
            what: "start a thread",
            path: name.to_string(),
            source,
        })
}

/// Serves until `stop` fires or a signal comes, then stops accepting and lets running answers
/// end for at most `drain`; returns then, answers still running or not (docs/runner.md
/// "Lifecycle").
async fn serve_until_drained(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    stop: tokio::sync::oneshot::Receiver<()>,
    signals: bool,
    drain: std::time::Duration,
) -> std::io::Result<()> {
    use std::future::IntoFuture;
    let (fired_tx, fired_rx) = tokio::sync::oneshot::channel::<()>();
    let stopping = async move {
        tokio::select! {
            _ = stop => {}
            () = os_signal(signals) => {}
        }
        let _ = fired_tx.send(());
    };
    let serve = axum::serve(listener, app)
        .with_graceful_shutdown(stopping)
        .into_future();
    let deadline = async move {
        if fired_rx.await.is_err() {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(drain).await;
    };
    tokio::select! {
        r = serve => r,
        () = deadline => {
            eprintln!(
                "minirun-serve: answers still running {:.1} s after the stop (--drain-seconds): their connections are closed, which cancels them",
                drain.as_secs_f64()
            );
            Ok(())
        }
    }
}

/// Ctrl-C or SIGTERM (never, without `signals`).
async fn os_signal(signals: bool) {
    if !signals {
        return std::future::pending().await;
    }
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

/// What the model thread says once the model is open: what `/v1/models` lists, whether it
/// runs, and its tokenizer.
type Ready = SyncSender<Result<(ModelInfo, bool, Option<Arc<text::Text>>), RunError>>;

fn run_worker(
    a: &ServeArgs,
    entries: &[Entry],
    ready: &Ready,
    jobs: Receiver<Job>,
    stats: &ServeStats,
) -> Result<(), RunError> {
    let source = Source::from_flags(crate::open::SourceFlags {
        model: a.model.as_deref(),
        artifact: a.artifact.as_deref(),
        repo: a.repo.as_deref(),
        revision: a.revision.as_deref(),
        tokenizer: None,
    })
    .ok_or_else(|| {
        RunError::Usage("give --model FILE, --artifact DIR or --repo OWNER/NAME".into())
    })?;
    let mut opened = match crate::open::survey(&source, entries)? {
        Opening::Ready(o) => *o,
        Opening::Unregistered(u) => {
            // Listed, never run with a guessed adapter.
            let ctx = session_ctx(a.ctx_size, u.context)?;
            let mut info = model_info(a, &u.origin, ctx, false);
            info.reason = Some(u.refusal.to_string());
            let _ = ready.send(Ok((info, false, None)));
            return Ok(());
        }
    };
    let ctx = session_ctx(a.ctx_size, opened.context)?;
    if let Some(path) = &a.chat_template_file {
        let source = std::fs::read_to_string(path).map_err(|source| RunError::Io {
            what: "read the chat template",
            path: path.display().to_string(),
            source,
        })?;
        opened.use_template(&source)?;
    }
    let template = opened.take_chat().map_err(|e| e.to_string());
    let engine = crate::open::engine(&crate::open::DeviceFlags {
        backend: a.backend.clone(),
        shape: a.matvec_shape.map(Into::into),
    })?;
    let opts = ModelOptions {
        tile_bytes: a.tile_bytes,
        ring_slots: usize::from(a.ring_slots),
        ..ModelOptions::from_flags(&engine, a.stream, ctx, a.expert_cache_mib)
    };
    let mut model = opened.load(&opts)?;
    let seq = model.begin()?;
    let preloaded = match &a.prompt_cache {
        Some(p) => PromptCache::new(p, opened.prompt_cache_identity()?)
            .load_all(model.as_mut(), &seq)?
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let mut info = model_info(a, &opened.origin, ctx, true);
    info.chat_template = template.is_ok();
    info.answer = template.as_ref().ok().and_then(|f| f.answer_syntax());
    let text = text::Text {
        tokenizer: opened.tokenizer.clone(),
        vocab: opened.vocab,
    };
    let _ = ready.send(Ok((info, true, Some(Arc::new(text)))));
    let encode = |t: &str| opened.encode(t);
    let vocab = model.vocab();
    let grammars = || opened.tokenizer.grammars(vocab);
    let mut backend = Backend {
        model: model.as_mut(),
        seq,
        encode: &encode,
        detok: &opened,
        template,
        ctx,
        preloaded,
        grammars: &grammars,
    };
    worker::serve_jobs(&mut backend, jobs, stats);
    Ok(())
}

/// What `/v1/models` says of the model (its id is `--alias`, else the origin's name).
fn model_info(a: &ServeArgs, origin: &Origin, ctx: usize, chat_capable: bool) -> ModelInfo {
    ModelInfo {
        id: a.alias.clone().unwrap_or_else(|| origin.name.clone()),
        source: origin.source,
        origin: origin.location.clone(),
        chat_capable,
        reason: None,
        chat_template: false,
        context: ctx,
        answer: None,
    }
}

/// What `--dry-run` says.
fn dry_run(args: &ServeArgs, addr: SocketAddr, json: bool) -> Result<String, RunError> {
    if let Some(repo) = &args.repo {
        return Ok(dry_run_repo(args, repo, addr, json));
    }
    let (source, path) = match (&args.model, &args.artifact) {
        (Some(p), _) => ("gguf", p),
        (None, Some(d)) => ("artifact", d),
        (None, None) => {
            return Err(RunError::Usage(
                "give --model FILE, --artifact DIR or --repo OWNER/NAME".into(),
            ))
        }
    };
    if !path.exists() {
        return Err(RunError::Io {
            what: "open",
            path: path.display().to_string(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
    }
    let auth = args.api_key_file.is_some();
    if json {
        return Ok(serde_json::json!({
            "schema": "minirun-serve/1",
            "dry_run": true,
            "would_listen": format!("http://{addr}"),
            "source": source,
            "path": path.display().to_string(),
            "api_key_required": auth,
            "queue": args.queue,
            "max_body_bytes": args.max_body_bytes,
            "ctx_size": args.ctx_size,
        })
        .to_string());
    }
    Ok(format!(
        "would load the {source} `{}`{}, listen on http://{addr} ({}), admit 1 running + {} queued requests, refuse bodies over {} bytes",
        path.display(),
        if source == "artifact" { " (verified-only)" } else { "" },
        if auth { "API key required" } else { "no API key" },
        args.queue,
        args.max_body_bytes
    ))
}

/// `--dry-run --repo`: what would be pulled (nothing is asked of the hub).
fn dry_run_repo(args: &ServeArgs, repo: &str, addr: SocketAddr, json: bool) -> String {
    let rev = args.revision.as_deref().unwrap_or("main");
    if json {
        return serde_json::json!({
            "schema": "minirun-serve/1",
            "dry_run": true,
            "would_listen": format!("http://{addr}"),
            "source": "repo",
            "repo": repo,
            "revision": rev,
        })
        .to_string();
    }
    format!(
        "would pull `{repo}` at `{rev}` into the Hugging Face cache, verify it, and serve it (verified-only) on http://{addr}"
    )
}

/// The CLI: parse, start, print the `listening on` line, serve until a signal; the exit code.
pub fn main_with(argv: impl IntoIterator<Item = std::ffi::OsString>) -> u8 {
    let args = match contract::parse_exit::<ServeArgs, _, _>(argv) {
        Ok(a) => a,
        Err(exit) => return exit.code(),
    };
    let fail = |e: RunError| {
        contract::print_error(&e, None);
        if matches!(e, RunError::Usage(_)) {
            EXIT_USAGE
        } else {
            EXIT_FAILURE
        }
    };
    if args.dry_run {
        return match args.addr().and_then(|a| dry_run(&args, a, args.json)) {
            Ok(line) => {
                let _ = writeln!(std::io::stdout(), "{line}");
                EXIT_OK
            }
            Err(e) => fail(e),
        };
    }
    let loading = |addr: SocketAddr| {
        let _ = writeln!(
            std::io::stderr(),
            "minirun-serve: bound to http://{addr}; loading the model (GET /health answers 503 until it is ready)"
        );
    };
    let server = match start_with(&args, crate::registry::ENTRIES, true, &loading) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let url = format!("http://{}", server.addr);
    let line = if args.json {
        serde_json::json!({"schema": "minirun-serve/1", "listening": url, "model": server.info})
            .to_string()
    } else {
        let i = &server.info;
        if !i.chat_capable {
            let _ = writeln!(
                std::io::stderr(),
                "minirun-serve: `{}` is verified, not chat-capable: {}",
                i.id,
                i.reason.as_deref().unwrap_or("")
            );
        }
        format!(
            "listening on {url} (model `{}`, context {})",
            i.id, i.context
        )
    };
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    }
    match server.wait() {
        Ok(()) => EXIT_OK,
        Err(e) => fail(e),
    }
}
