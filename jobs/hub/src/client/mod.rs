//! The Hub client (hub-protocol.md §1–§10; docs/hub.md §6): reqwest + rustls, one shared request
//! loop with retries ([`retry`]), and the endpoint families split by responsibility — downloads in
//! [`resolve`], reads in [`read`], writes in [`commit`], LFS transfers in [`lfs`].
//!
//! The token is held in [`Token`] (redacted `Debug`, no `Display`), sent only as a header marked
//! sensitive and only to the endpoint's own origin, and never written to a log line or an error.

mod commit;
mod error;
mod guarded;
mod lfs;
mod read;
mod resolve;
pub mod retry;

use std::time::Duration;

use reqwest::header::{HeaderValue, AUTHORIZATION};
use reqwest::{Method, RequestBuilder, Response};
use url::Url;

pub use commit::{CommitOperation, CommitRequest, UploadFile, UploadSource};
pub use error::HubError;
pub use lfs::LfsObject;
pub use resolve::FileMetadata;
pub use retry::{Idempotence, RetryPolicy};

use crate::protocol::{self, RepoId};

/// A Hub access token. `Debug` prints `Token(<redacted>)`; there is no `Display`.
#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// Wrap a token string (surrounding whitespace trimmed).
    pub fn new(s: &str) -> Token {
        Token(s.trim().to_string())
    }
    /// `HF_TOKEN`, else the file named by `HF_TOKEN_PATH`, else `$HF_HOME/token`; `None` if unset.
    pub fn from_env() -> Result<Option<Token>, HubError> {
        if let Some(t) = std::env::var("HF_TOKEN")
            .ok()
            .filter(|t| !t.trim().is_empty())
        {
            return Ok(Some(Token::new(&t)));
        }
        if let Ok(p) = std::env::var("HF_TOKEN_PATH") {
            return Token::from_file(std::path::Path::new(&p)).map(Some);
        }
        if let Ok(home) = std::env::var("HF_HOME") {
            let p = std::path::Path::new(&home).join("token");
            if p.exists() {
                return Token::from_file(&p).map(Some);
            }
        }
        Ok(None)
    }
    /// Read a token file (first line).
    pub fn from_file(path: &std::path::Path) -> Result<Token, HubError> {
        let text = std::fs::read_to_string(path).map_err(|source| HubError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let t = text.lines().next().unwrap_or("").trim();
        if t.is_empty() {
            return Err(HubError::Config(format!(
                "token file `{}` is empty",
                path.display()
            )));
        }
        Ok(Token::new(t))
    }
    /// The secret itself (for servers and tests; never log it).
    pub fn expose(&self) -> &str {
        &self.0
    }
    fn header(&self) -> Option<HeaderValue> {
        let mut v = HeaderValue::from_str(&format!("Bearer {}", self.0)).ok()?;
        v.set_sensitive(true);
        Some(v)
    }
}

/// A client for one hub endpoint.
#[derive(Clone)]
pub struct HubClient {
    http: reqwest::Client,
    endpoint: Url,
    token: Option<Token>,
    retry: RetryPolicy,
    workers: usize,
}

/// Transfers a client runs at once by default (LFS uploads; `huggingface_hub` uses 8 workers).
pub const DEFAULT_WORKERS: usize = 8;

impl std::fmt::Debug for HubClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubClient")
            .field("endpoint", &self.endpoint.as_str())
            .field("token", &self.token)
            .finish()
    }
}

/// `quote(s, safe="")`.
pub(crate) fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, protocol::QUOTE_ALL).to_string()
}

/// `quote(path)`: like [`enc`] but `/` stays literal.
pub(crate) fn enc_path(p: &str) -> String {
    p.split('/').map(enc).collect::<Vec<_>>().join("/")
}

impl HubClient {
    /// A client for `endpoint` (e.g. `https://huggingface.co` or `http://127.0.0.1:8080`).
    pub fn new(endpoint: &str, token: Option<Token>) -> Result<HubClient, HubError> {
        let endpoint = Url::parse(endpoint.trim_end_matches('/'))
            .map_err(|e| HubError::Config(format!("endpoint `{endpoint}` is not a URL: {e}")))?;
        if !matches!(endpoint.scheme(), "http" | "https") {
            return Err(HubError::Config(format!(
                "endpoint `{endpoint}` must be http or https"
            )));
        }
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("minirun-hub-client/", env!("CARGO_PKG_VERSION")))
            // Small requests must not wait for a delayed ACK (Nagle): reqwest's default, made
            // explicit because the pull's speed rests on it (docs/hub.md §7).
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(15))
            .read_timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| HubError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(HubClient {
            http,
            endpoint,
            token,
            retry: RetryPolicy::default(),
            workers: DEFAULT_WORKERS,
        })
    }

    /// Endpoint from `explicit`, else `HF_ENDPOINT`, else `https://huggingface.co`; token from
    /// [`Token::from_env`].
    pub fn from_env(explicit: Option<&str>) -> Result<HubClient, HubError> {
        let ep = explicit
            .map(String::from)
            .or_else(|| std::env::var("HF_ENDPOINT").ok().filter(|e| !e.is_empty()))
            .unwrap_or_else(|| "https://huggingface.co".into());
        HubClient::new(&ep, Token::from_env()?)
    }

    /// Replace the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> HubClient {
        self.retry = retry;
        self
    }

    /// Run at most `n` (≥ 1) transfers at once.
    pub fn with_workers(mut self, n: usize) -> HubClient {
        self.workers = n.max(1);
        self
    }

    /// How many transfers run at once.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The endpoint, without a trailing slash.
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_str().trim_end_matches('/')
    }

    pub(crate) fn same_origin(&self, u: &Url) -> bool {
        u.scheme() == self.endpoint.scheme()
            && u.host_str() == self.endpoint.host_str()
            && u.port_or_known_default() == self.endpoint.port_or_known_default()
    }

    pub(crate) fn url(&self, s: &str) -> Result<Url, HubError> {
        Url::parse(s).map_err(|e| HubError::Config(format!("bad URL `{s}`: {e}")))
    }

    /// `{endpoint}/api/{models}/{owner}/{name}{tail}`.
    pub(crate) fn api_url(&self, repo: &RepoId, tail: &str) -> Result<Url, HubError> {
        self.url(&format!(
            "{}/api/{}/{}{tail}",
            self.endpoint(),
            repo.kind.api_plural(),
            repo.id()
        ))
    }

    /// A request; the token is attached only when `u` is on the endpoint's origin.
    pub(crate) fn request(&self, method: Method, u: &Url) -> RequestBuilder {
        let mut rb = self.http.request(method, u.clone());
        if self.same_origin(u) {
            if let Some(h) = self.token.as_ref().and_then(Token::header) {
                rb = rb.header(AUTHORIZATION, h);
            }
        }
        rb
    }

    /// A request that never carries the token (pre-signed upload URLs, CDN).
    pub(crate) fn request_anon(&self, method: Method, u: &Url) -> RequestBuilder {
        self.http.request(method, u.clone())
    }

    /// Send with retries. 2xx/3xx come back as `Ok`; other statuses become [`HubError::Http`]
    /// after the retryable ones are exhausted.
    pub(crate) async fn send<F>(
        &self,
        method: &Method,
        u: &Url,
        idem: Idempotence,
        build: F,
    ) -> Result<Response, HubError>
    where
        F: Fn() -> Result<RequestBuilder, HubError>,
    {
        let mut attempt = 0u32;
        loop {
            tracing::debug!(method = %method, url = %u, attempt, "hub request");
            let res = build()?.send().await;
            let last = attempt + 1 >= self.retry.max_attempts.max(1);
            match res {
                Ok(r) if r.status().is_success() || r.status().is_redirection() => return Ok(r),
                Ok(r) => {
                    let status = r.status().as_u16();
                    if !last && idem == Idempotence::Idempotent && retry::retryable_status(status) {
                        let wait = self.retry.delay(attempt, retry::server_wait(r.headers()));
                        tracing::warn!(url = %u, status, wait_ms = wait.as_millis() as u64, "hub request failed; retrying");
                        tokio::time::sleep(wait).await;
                        attempt += 1;
                        continue;
                    }
                    return Err(http_error(method, u, r).await);
                }
                Err(e) => {
                    let retry_ok = match idem {
                        Idempotence::Idempotent => true,
                        Idempotence::ConnectOnly => e.is_connect(),
                    };
                    if !last && retry_ok {
                        let wait = self.retry.delay(attempt, None);
                        tracing::warn!(url = %u, error = %e, wait_ms = wait.as_millis() as u64, "hub request failed; retrying");
                        tokio::time::sleep(wait).await;
                        attempt += 1;
                        continue;
                    }
                    return Err(HubError::Transport {
                        url: u.to_string(),
                        detail: transport_detail(&e),
                        source: e,
                    });
                }
            }
        }
    }

    /// GET a JSON document (idempotent, retried).
    pub(crate) async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        u: &Url,
    ) -> Result<(T, reqwest::header::HeaderMap), HubError> {
        let r = self
            .send(&Method::GET, u, Idempotence::Idempotent, || {
                Ok(self.request(Method::GET, u))
            })
            .await?;
        let headers = r.headers().clone();
        Ok((json_body(u, r).await?, headers))
    }
}

pub(crate) fn transport_detail(e: &reqwest::Error) -> String {
    let kind = if e.is_connect() {
        "could not connect"
    } else if e.is_timeout() {
        "timed out"
    } else if e.is_body() || e.is_decode() {
        "the response body was cut off"
    } else if e.is_request() {
        "sending the request failed"
    } else {
        "transport error"
    };
    let mut s = kind.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(x) = src {
        s.push_str(&format!(": {x}"));
        src = x.source();
    }
    s
}

/// Parse a JSON body, naming the URL on failure.
pub(crate) async fn json_body<T: serde::de::DeserializeOwned>(
    u: &Url,
    r: Response,
) -> Result<T, HubError> {
    let bytes = r.bytes().await.map_err(|e| HubError::Transport {
        url: u.to_string(),
        detail: transport_detail(&e),
        source: e,
    })?;
    serde_json::from_slice(&bytes).map_err(|e| HubError::Protocol {
        url: u.to_string(),
        detail: format!("invalid JSON: {e}"),
    })
}

/// Turn an error response into [`HubError::Http`] (message from `{"error"}`, `{"errors":[…]}`
/// or `X-Error-Message`).
pub(crate) async fn http_error(method: &Method, u: &Url, r: Response) -> HubError {
    let status = r.status().as_u16();
    let h = r.headers().clone();
    let retry_after =
        retry::server_wait(&h).map(|d| u16::try_from(d.as_secs()).unwrap_or(u16::MAX));
    let hv = |k: &str| h.get(k).and_then(|v| v.to_str().ok()).map(String::from);
    let body = r.bytes().await.unwrap_or_default();
    let json: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
    let message = json
        .as_ref()
        .and_then(|j| {
            j.get("error")
                .and_then(|e| e.as_str().map(String::from))
                .or_else(|| {
                    j.get("errors").and_then(|e| e.as_array()).map(|a| {
                        a.iter()
                            .filter_map(|x| x.get("message").and_then(|m| m.as_str()))
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                })
        })
        .or_else(|| hv("x-error-message"))
        .unwrap_or_else(|| {
            protocol::printable(&String::from_utf8_lossy(&body[..body.len().min(300)]))
        });
    HubError::Http {
        method: method.to_string(),
        url: u.to_string(),
        status,
        request_id: hv("x-request-id"),
        error_code: hv("x-error-code"),
        message: protocol::printable(&message),
        retry_after,
    }
}
