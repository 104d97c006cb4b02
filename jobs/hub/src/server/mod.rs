//! The embedded file-backed hub server (docs/hub.md; `../shared/design/hub-protocol.md` §12 minimum
//! contract). One axum service routes by hand over the raw request path, percent-decoding each
//! segment exactly once, so encoded revisions (`refs%2Fpr%2F1`) and paths are never split or
//! decoded twice. An optional second listener plays the CDN that LFS downloads are redirected to.

// Handlers return `Result<_, Response>` so an early answer is one `?`-like match away; the
// response is built once per request, its size does not matter.
#![allow(clippy::result_large_err)]

mod faults;
mod flips;
mod import;
mod lfs;
mod quirks;
mod routes_read;
mod routes_write;
pub mod store;
pub mod tool;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::Digest as _;

pub use faults::{FaultMode, FaultSpec, Faults, FlipKind};
pub use import::{import_dir, ImportError, ImportSummary};
use store::Store;

use crate::protocol::{self, RepoId, RepoType};

/// How the server behaves.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// When set, writes and private reads need `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Start the CDN-like second listener on this address and redirect LFS downloads to it.
    pub cdn_addr: Option<SocketAddr>,
    /// Initial fault spec.
    pub faults: FaultSpec,
    /// LFS objects larger than this are offered as multipart uploads with parts of this size.
    pub lfs_chunk_size: u64,
    /// Entries per tree page (the Hub: 1000).
    pub tree_page_size: usize,
    /// Repos per `/api/models` page.
    pub list_page_size: usize,
    /// Largest JSON / NDJSON request body accepted, in bytes.
    pub max_body: usize,
    /// Largest single NDJSON line, in bytes.
    pub max_line: usize,
    /// The user name `whoami` reports and repos default to.
    pub user: String,
}

impl Default for ServerOptions {
    fn default() -> ServerOptions {
        ServerOptions {
            token: None,
            cdn_addr: None,
            faults: FaultSpec::default(),
            lfs_chunk_size: 16 * 1024 * 1024,
            tree_page_size: 1000,
            list_page_size: 1000,
            max_body: 256 * 1024 * 1024,
            max_line: 16 * 1024 * 1024,
            user: "minirun".into(),
        }
    }
}

pub(crate) struct AppState {
    pub store: Store,
    pub opts: ServerOptions,
    pub faults: Faults,
    pub secret: [u8; 32],
    pub addr: SocketAddr,
    pub cdn_origin: Option<String>,
    pub log: Mutex<Vec<String>>,
    /// Answers to a branch's refs or revision so far, and their signal (the `commit-504` fault
    /// lands its commit after the next one).
    pub branch_asks: std::sync::atomic::AtomicU64,
    pub branch_asked: tokio::sync::Notify,
}

impl AppState {
    /// A refs or revision answer was just computed: a deferred commit may land now.
    pub(crate) fn branch_asked(&self) {
        self.branch_asks
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.branch_asked.notify_waiters();
    }
}

/// A running server.
pub struct ServerHandle {
    /// The API address.
    pub addr: SocketAddr,
    /// The CDN address, if started.
    pub cdn_addr: Option<SocketAddr>,
    state: Arc<AppState>,
    shutdown: Vec<tokio::sync::oneshot::Sender<()>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl ServerHandle {
    /// `http://addr`, the endpoint clients use.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
    /// Replace the fault spec.
    pub fn set_faults(&self, spec: FaultSpec) {
        self.state.faults.set(spec);
    }
    /// How many injected faults have fired so far.
    pub fn faults_fired(&self) -> u64 {
        self.state.faults.fired()
    }
    /// `METHOD path` of every request served so far (no headers, no query: tokens never logged).
    pub fn request_log(&self) -> Vec<String> {
        self.state
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    /// Stop listening and wait for the accept loops to end.
    pub async fn shutdown(mut self) {
        for s in self.shutdown.drain(..) {
            let _ = s.send(());
        }
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

fn app_state(
    store: Store,
    opts: ServerOptions,
    addr: SocketAddr,
    cdn_addr: Option<SocketAddr>,
) -> Arc<AppState> {
    let faults = Faults::default();
    faults.set(opts.faults.clone());
    Arc::new(AppState {
        store,
        opts,
        faults,
        secret: rand::random(),
        addr,
        cdn_origin: cdn_addr.map(|a| format!("http://{a}")),
        log: Mutex::default(),
        branch_asks: Default::default(),
        branch_asked: Default::default(),
    })
}

/// The API that [`spawn`] serves, as an in-process service over the store at `root` (no
/// listener; answers name `http://127.0.0.1:0`): for drivers that send requests straight to the
/// handlers, such as the fuzz targets (docs/fuzz.md).
pub fn in_process(root: &Path, opts: ServerOptions) -> std::io::Result<axum::Router> {
    let addr = SocketAddr::from(([127, 0, 0, 1], 0));
    let state = app_state(Store::open(root)?, opts, addr, None);
    Ok(axum::Router::new().fallback(handle).with_state(state))
}

/// Bind `addr` (and the CDN address if configured) and serve the store at `root` in background
/// tasks of the current tokio runtime. Port 0 picks a free port; see [`ServerHandle::addr`].
pub async fn spawn(
    root: &Path,
    addr: SocketAddr,
    opts: ServerOptions,
) -> std::io::Result<ServerHandle> {
    use axum::serve::ListenerExt as _;
    // TCP_NODELAY on every accepted connection: without it a small answer written in two parts
    // (head, then body) waits for the client's delayed ACK, ~40 ms per request on Linux.
    let nodelay = |t: &mut tokio::net::TcpStream| {
        let _ = t.set_nodelay(true);
    };
    let store = Store::open(root)?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let cdn = match opts.cdn_addr {
        Some(a) => Some(tokio::net::TcpListener::bind(a).await?),
        None => None,
    };
    let cdn_addr = match &cdn {
        Some(l) => Some(l.local_addr()?),
        None => None,
    };
    let state = app_state(store, opts, addr, cdn_addr);
    let mut shutdown = Vec::new();
    let mut tasks = Vec::new();
    let api = axum::Router::new()
        .fallback(handle)
        .with_state(state.clone());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    shutdown.push(tx);
    tasks.push(tokio::spawn(async move {
        let _ = axum::serve(listener.tap_io(nodelay), api)
            .with_graceful_shutdown(async move {
                let _ = rx.await;
            })
            .await;
    }));
    if let Some(l) = cdn {
        let app = axum::Router::new()
            .fallback(routes_read::cdn)
            .with_state(state.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        shutdown.push(tx);
        tasks.push(tokio::spawn(async move {
            let _ = axum::serve(l.tap_io(nodelay), app)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await;
        }));
    }
    Ok(ServerHandle {
        addr,
        cdn_addr,
        state,
        shutdown,
        tasks,
    })
}

/// Hub-shaped error: `{"error": msg}` plus `X-Error-Code` / `X-Error-Message`.
pub(crate) fn hub_error(status: StatusCode, code: Option<&str>, msg: &str) -> Response {
    let mut r = (status, axum::Json(serde_json::json!({ "error": msg }))).into_response();
    if let Some(c) = code {
        r.headers_mut()
            .insert("x-error-code", HeaderValue::from_static(static_code(c)));
    }
    let ascii: String = msg
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .take(300)
        .collect();
    if let Ok(v) = HeaderValue::from_str(&ascii) {
        r.headers_mut().insert("x-error-message", v);
    }
    r
}

fn static_code(c: &str) -> &'static str {
    match c {
        "RepoNotFound" => "RepoNotFound",
        "RevisionNotFound" => "RevisionNotFound",
        "EntryNotFound" => "EntryNotFound",
        _ => "BadRequest",
    }
}

/// A 400 for malformed input.
pub(crate) fn bad_request(msg: &str) -> Response {
    hub_error(StatusCode::BAD_REQUEST, None, msg)
}

/// A 500 for a store failure (the message names the operation, never a token).
pub(crate) fn internal(what: &str, e: &std::io::Error) -> Response {
    tracing::error!("hub store: {what}: {e}");
    hub_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        None,
        &format!("internal error while {what}"),
    )
}

/// What the request's credentials amount to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Auth {
    /// No token is configured: everything is open.
    Open,
    /// The configured token was presented.
    Valid,
    /// No `Authorization` header.
    Missing,
    /// A different token.
    Invalid,
}

impl AppState {
    /// Record `METHOD path` in the request log and at `info` level (never headers or queries).
    pub(crate) fn record(&self, line: String) {
        tracing::info!("{line}");
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line);
    }

    pub(crate) fn auth(&self, headers: &HeaderMap) -> Auth {
        let Some(want) = &self.opts.token else {
            return Auth::Open;
        };
        let Some(got) = headers.get("authorization").and_then(|v| v.to_str().ok()) else {
            return Auth::Missing;
        };
        let got = got
            .strip_prefix("Bearer ")
            .or_else(|| got.strip_prefix("bearer "))
            .unwrap_or("");
        // Compare digests so the comparison time does not depend on a common prefix.
        if sha2::Sha256::digest(got.as_bytes()) == sha2::Sha256::digest(want.as_bytes()) {
            Auth::Valid
        } else {
            Auth::Invalid
        }
    }

    /// `Err(response)` unless the request may write.
    pub(crate) fn require_write(&self, headers: &HeaderMap) -> Result<(), Response> {
        match self.auth(headers) {
            Auth::Open | Auth::Valid => Ok(()),
            Auth::Missing => Err(hub_error(
                StatusCode::UNAUTHORIZED,
                None,
                "authentication required: send `Authorization: Bearer <token>`",
            )),
            Auth::Invalid => Err(hub_error(
                StatusCode::FORBIDDEN,
                None,
                "Invalid credentials in Authorization header",
            )),
        }
    }

    /// The repo's metadata if it exists and the request may read it, else the Hub's answer.
    pub(crate) fn readable_repo(
        &self,
        repo: &RepoId,
        headers: &HeaderMap,
    ) -> Result<store::RepoMeta, Response> {
        let meta = match self.store.repo_meta(repo) {
            Ok(Some(m)) => m,
            Ok(None) => return Err(repo_not_found(repo)),
            Err(e) => return Err(internal("reading repo metadata", &e)),
        };
        if meta.private && !matches!(self.auth(headers), Auth::Open | Auth::Valid) {
            // The Hub hides private repos: 401 + RepoNotFound (clients map it to "not found").
            return Err(hub_error(
                StatusCode::UNAUTHORIZED,
                Some("RepoNotFound"),
                &format!("Repository Not Found for url: {repo}"),
            ));
        }
        Ok(meta)
    }

    /// Keyed digest authorising an unauthenticated upload URL or CDN URL.
    pub(crate) fn sign(&self, purpose: &str, what: &str) -> String {
        let mut h = sha2::Sha256::new();
        h.update(self.secret);
        h.update(format!("\0{purpose}\0{what}").as_bytes());
        hex::encode(h.finalize())
    }

    /// The origin clients reached us by (`Host` header when it is a plain authority).
    pub(crate) fn base_url(&self, headers: &HeaderMap) -> String {
        match headers.get("host").and_then(|h| h.to_str().ok()) {
            Some(h)
                if !h.is_empty()
                    && h.len() < 256
                    && h.bytes()
                        .all(|c| c.is_ascii_alphanumeric() || b".:-[]".contains(&c)) =>
            {
                format!("http://{h}")
            }
            _ => format!("http://{}", self.addr),
        }
    }
}

pub(crate) fn repo_not_found(repo: &RepoId) -> Response {
    hub_error(
        StatusCode::NOT_FOUND,
        Some("RepoNotFound"),
        &format!("Repository Not Found for url: {repo}"),
    )
}

/// The request as routing sees it: method, decoded segments, query pairs, headers, body.
pub(crate) struct Req {
    pub method: Method,
    pub segs: Vec<String>,
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    pub body: BodyCell,
}

/// The request body behind a mutex, so `&Req` is `Sync` (axum's `Body` is only `Send`) and
/// handlers holding `&Req` across awaits stay `Send`.
pub(crate) struct BodyCell(std::sync::Mutex<Option<Body>>);

impl BodyCell {
    /// Take the body out (empty if already taken).
    pub fn take(self) -> Body {
        self.0
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or_else(Body::empty)
    }
}

impl Req {
    /// First value of a query parameter.
    pub fn q(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    /// A boolean query parameter (`true`/`True`/`1`).
    pub fn q_bool(&self, key: &str) -> bool {
        self.q(key)
            .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
    }
}

/// Split the raw path and percent-decode each segment exactly once (decoded text must be UTF-8 and
/// free of NUL/control characters).
pub(crate) fn decode_segments(raw: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for seg in raw.split('/').skip(1) {
        let d = percent_encoding::percent_decode_str(seg)
            .decode_utf8()
            .map_err(|_| "path segment is not UTF-8 after percent-decoding".to_string())?;
        if d.chars().any(char::is_control) {
            return Err("control characters in the request path".into());
        }
        out.push(d.into_owned());
    }
    Ok(out)
}

/// Split a revision off the front of `segs`: one (possibly encoded) segment, or the literal
/// `refs/pr/N` / `refs/heads/X` / `refs/tags/X` forms spelled with real slashes.
pub(crate) fn take_rev(segs: &[String]) -> Option<(String, &[String])> {
    let first = segs.first()?;
    if first == "refs" {
        if let (Some(kind), Some(name)) = (segs.get(1), segs.get(2)) {
            if matches!(kind.as_str(), "pr" | "heads" | "tags") {
                return Some((format!("refs/{kind}/{name}"), segs.get(3..).unwrap_or(&[])));
            }
        }
    }
    Some((first.clone(), segs.get(1..).unwrap_or(&[])))
}

fn handle(
    State(st): State<Arc<AppState>>,
    req: Request,
) -> impl std::future::Future<Output = Response> + Send {
    handle_inner(st, req)
}

/// The `reset-request` fault: read about half of the request body, then break the connection
/// without handling the request (the answer's body fails at once, so the client sees the
/// connection end before a complete answer).
async fn reset_midway(headers: &HeaderMap, body: Body) -> Response {
    use futures_util::StreamExt as _;
    let announced: u64 = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut stream = body.into_data_stream();
    let mut read = 0u64;
    while read < announced / 2 {
        match stream.next().await {
            Some(Ok(c)) => read += c.len() as u64,
            _ => break,
        }
    }
    let items: Vec<Result<bytes::Bytes, std::io::Error>> = vec![Err(std::io::Error::other(
        "injected fault: connection reset mid-request",
    ))];
    let mut r = (
        StatusCode::INTERNAL_SERVER_ERROR,
        Body::from_stream(futures_util::stream::iter(items)),
    )
        .into_response();
    r.headers_mut().insert(
        axum::http::header::CONNECTION,
        HeaderValue::from_static("close"),
    );
    r
}

/// Reads a request's body to its end before an injected refusal is answered, as the Hub does: an
/// answer sent while a large body (a commit of hundreds of operations) is still being written
/// would reach the client as a reset connection instead of the status under test.
async fn drain(body: Body) {
    let _ = axum::body::to_bytes(body, usize::MAX).await;
}

async fn handle_inner(st: Arc<AppState>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    st.record(format!("{} {}", parts.method, parts.uri.path()));
    // Request-level faults honour a rule's path filter (`ratelimit:x1@600=/commit/`).
    let fire = |mode| st.faults.fire_where(mode, parts.uri.path(), |_| true);
    if let Some(ms) = fire(FaultMode::Delay) {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    if fire(FaultMode::ServerError).is_some() {
        drain(body).await;
        return hub_error(
            StatusCode::SERVICE_UNAVAILABLE,
            None,
            "injected fault: service unavailable",
        );
    }
    if let Some(secs) = fire(FaultMode::RateLimit) {
        drain(body).await;
        let mut r = hub_error(
            StatusCode::TOO_MANY_REQUESTS,
            None,
            "injected fault: rate limited",
        );
        let h = r.headers_mut();
        if let Ok(v) = HeaderValue::from_str(&format!("\"api\";r=0;t={secs}")) {
            h.insert("ratelimit", v);
        }
        h.insert(
            "ratelimit-policy",
            HeaderValue::from_static("\"fixed window\";\"api\";q=500;w=300"),
        );
        return r;
    }
    if matches!(parts.method, Method::POST | Method::PUT) && fire(FaultMode::ResetRequest).is_some()
    {
        return reset_midway(&parts.headers, body).await;
    }
    let segs = match decode_segments(parts.uri.path()) {
        Ok(s) => s,
        Err(m) => return bad_request(&m),
    };
    let query = parts
        .uri
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    let path = parts.uri.path().to_owned();
    let body = match flips::request_kind(&parts.method, &segs) {
        Some(kind) => flips::request_body(&st, kind, &path, &parts.headers, body),
        None => body,
    };
    let answer_flip = flips::answer_kind(&parts.method, &segs);
    let (method, quirk_segs) = (parts.method.clone(), segs.clone());
    let req = Req {
        method: parts.method,
        segs,
        query,
        headers: parts.headers,
        body: BodyCell(std::sync::Mutex::new(Some(body))),
    };
    let mut r = route(&st, req).await;
    r = quirks::answer(&st, &method, &quirk_segs, &path, r).await;
    if let Some(kind) = answer_flip {
        r = flips::answer(&st, kind, &path, r).await;
    }
    if let Ok(v) = HeaderValue::from_str(&format!("{:016x}", rand::random::<u64>())) {
        r.headers_mut().insert("x-request-id", v);
    }
    r
}

async fn route(st: &Arc<AppState>, req: Req) -> Response {
    let segs = req.segs.clone();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let m = req.method.clone();
    match (m.as_str(), s.as_slice()) {
        ("GET", ["api", plural]) if RepoType::from_plural(plural).is_some() => routes_read::list_repos(st, &req).await,
        ("POST", ["api", "repos", "create"]) => routes_write::create_repo(st, req).await,
        ("DELETE", ["api", "repos", "delete"]) => routes_write::delete_repo(st, req).await,
        ("POST", ["api", "validate-yaml"]) => axum::Json(serde_json::json!({"errors": [], "warnings": []})).into_response(),
        ("GET", ["api", "whoami-v2"]) => match st.require_write(&req.headers) {
            Ok(()) => axum::Json(serde_json::json!({"type": "user", "name": st.opts.user, "orgs": [], "auth": {"type": "access_token"}})).into_response(),
            Err(r) => r,
        },
        (_, ["api", plural, owner, name, ..]) if RepoType::from_plural(plural).is_some() => {
            let kind = RepoType::from_plural(plural).unwrap_or(RepoType::Model);
            let repo = match RepoId::from_parts(kind, owner, name) {
                Ok(r) => r,
                Err(e) => return bad_request(&e),
            };
            let rest: Vec<String> = req.segs.get(4..).unwrap_or(&[]).to_vec();
            routes_repo_api(st, req, repo, &rest).await
        }
        ("POST", ["lfs-upload", ..]) | ("PUT", ["lfs-upload", ..]) => lfs::upload(st, req).await,
        ("POST", ["lfs-verify", ..]) => lfs::verify(st, req).await,
        _ => routes_files(st, req).await,
    }
}

async fn routes_repo_api(st: &Arc<AppState>, req: Req, repo: RepoId, rest: &[String]) -> Response {
    let first = rest.first().map(String::as_str);
    let m = req.method.as_str();
    match (m, first) {
        ("GET", None) => routes_read::info(st, &req, &repo, "main").await,
        ("GET", Some("revision")) => match take_rev(rest.get(1..).unwrap_or(&[])) {
            Some((rev, [])) => routes_read::info(st, &req, &repo, &rev).await,
            _ => bad_request("expected /revision/{rev}"),
        },
        ("GET", Some("tree")) => match take_rev(rest.get(1..).unwrap_or(&[])) {
            Some((rev, path)) => routes_read::tree(st, &req, &repo, &rev, &path.join("/")).await,
            None => bad_request("expected /tree/{rev}[/{path}]"),
        },
        ("GET", Some("commits")) => match take_rev(rest.get(1..).unwrap_or(&[])) {
            Some((rev, [])) => routes_read::commits(st, &req, &repo, &rev).await,
            _ => bad_request("expected /commits/{rev}"),
        },
        ("POST", Some("paths-info")) => match take_rev(rest.get(1..).unwrap_or(&[])) {
            Some((rev, [])) => routes_read::paths_info(st, req, &repo, &rev).await,
            _ => bad_request("expected /paths-info/{rev}"),
        },
        ("GET", Some("refs")) if rest.len() == 1 => routes_read::refs(st, &req, &repo).await,
        ("POST" | "DELETE", Some("branch")) if rest.len() >= 2 => {
            let name = rest.get(1..).unwrap_or(&[]).join("/");
            routes_write::branch(st, req, &repo, &name).await
        }
        ("POST", Some("preupload")) => match take_rev(rest.get(1..).unwrap_or(&[])) {
            Some((rev, [])) => routes_write::preupload(st, req, &repo, &rev).await,
            _ => bad_request("expected /preupload/{rev}"),
        },
        ("POST", Some("commit")) => match take_rev(rest.get(1..).unwrap_or(&[])) {
            Some((rev, [])) => routes_write::commit(st, req, &repo, &rev).await,
            _ => bad_request("expected /commit/{rev}"),
        },
        _ => hub_error(StatusCode::NOT_FOUND, None, "no such api route"),
    }
}

/// `/{repo}/resolve/{rev}/{path}` and `/{repo}.git/info/lfs/objects/batch` (with the `datasets/`
/// and `spaces/` prefixes).
async fn routes_files(st: &Arc<AppState>, req: Req) -> Response {
    let segs = req.segs.clone();
    let (kind, rest) = match segs.first().map(String::as_str) {
        Some("datasets") => (RepoType::Dataset, segs.get(1..).unwrap_or(&[])),
        Some("spaces") => (RepoType::Space, segs.get(1..).unwrap_or(&[])),
        _ => (RepoType::Model, segs.as_slice()),
    };
    let (Some(owner), Some(name)) = (rest.first(), rest.get(1)) else {
        return hub_error(StatusCode::NOT_FOUND, None, "not found");
    };
    let tail = rest.get(2..).unwrap_or(&[]);
    let tail_s: Vec<&str> = tail.iter().map(String::as_str).collect();
    if let Some(base) = name.strip_suffix(".git") {
        if req.method == Method::POST && tail_s == ["info", "lfs", "objects", "batch"] {
            return match RepoId::from_parts(kind, owner, base) {
                Ok(repo) => lfs::batch(st, req, &repo).await,
                Err(e) => bad_request(&e),
            };
        }
    }
    if (req.method == Method::GET || req.method == Method::HEAD)
        && tail_s.first() == Some(&"resolve")
    {
        let repo = match RepoId::from_parts(kind, owner, name) {
            Ok(r) => r,
            Err(e) => return bad_request(&e),
        };
        return match take_rev(tail.get(1..).unwrap_or(&[])) {
            Some((rev, path)) if !path.is_empty() => {
                routes_read::resolve(st, &req, &repo, &rev, &path.join("/")).await
            }
            _ => bad_request("expected /resolve/{rev}/{path}"),
        };
    }
    hub_error(StatusCode::NOT_FOUND, None, "not found")
}

/// Validate a revision string from a request.
pub(crate) fn check_rev(rev: &str) -> Result<(), Response> {
    if rev.is_empty()
        || rev.len() > 255
        || rev.chars().any(char::is_control)
        || rev.split('/').any(|c| c == ".." || c.is_empty())
    {
        return Err(bad_request(&format!(
            "invalid revision `{}`",
            protocol::printable(rev)
        )));
    }
    Ok(())
}

/// Bytes of an over-limit body still read (and dropped) after the limit, and for how long, so
/// that a client still sending it gets to read the 413 instead of a connection reset (a lingering
/// close, as nginx's `lingering_close` does); a longer body or a slower sender is cut off.
const DRAIN_BYTES: usize = 64 << 20;
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(5);

/// Read a whole request body up to `limit` bytes (413 beyond, after draining the rest within
/// [`DRAIN_BYTES`] and [`DRAIN_TIME`]).
pub(crate) async fn read_body(body: BodyCell, limit: usize) -> Result<bytes::Bytes, Response> {
    use futures_util::StreamExt as _;
    let mut stream = body.take().into_data_stream();
    let mut buf = bytes::BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| bad_request(&format!("reading the request body: {e}")))?;
        if buf.len() + chunk.len() > limit {
            let _ = tokio::time::timeout(DRAIN_TIME, async {
                let mut dropped = 0usize;
                while let Some(Ok(c)) = stream.next().await {
                    dropped += c.len();
                    if dropped > DRAIN_BYTES {
                        break;
                    }
                }
            })
            .await;
            return Err(hub_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                None,
                &format!("request body larger than {limit} bytes"),
            ));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}
