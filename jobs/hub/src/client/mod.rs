//! The Hub client (hub-protocol.md §1–§10; docs/hub.md §6): reqwest + rustls, one shared request
//! loop with retries ([`retry`]), and the endpoint families split by responsibility — downloads in
//! [`resolve`], reads in [`read`], writes in [`commit`], LFS transfers in [`lfs`].
//!
//! The token is held in [`Token`] (redacted `Debug`, no `Display`), sent only as a header marked
//! sensitive and only to the endpoint's own origin, and never written to a log line or an error.

pub mod answers;
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

pub use commit::{preupload_body, CommitOperation, CommitRequest, UploadFile, UploadSource};
pub use error::HubError;
pub use lfs::LfsObject;
pub use resolve::FileMetadata;
pub use retry::{Idempotence, RetryPolicy};

use crate::protocol::{self, RepoId};

/// A Hub access token. `Debug` prints `Token(<redacted>, from …)`; there is no `Display`.
#[derive(Clone)]
pub struct Token(String, TokenSource);

/// Where a [`Token`] came from, for messages (never the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// The `HF_TOKEN` variable.
    EnvVar,
    /// A file: `HF_TOKEN_PATH`, `$HF_HOME/token`, its default location, or `--token-file`.
    File(std::path::PathBuf),
    /// Handed over by the caller.
    Given,
}

impl std::fmt::Display for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenSource::EnvVar => f.write_str("HF_TOKEN"),
            TokenSource::File(p) => write!(f, "the token file `{}`", p.display()),
            TokenSource::Given => f.write_str("the caller"),
        }
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token(<redacted>, from {})", self.1)
    }
}

/// Where a token is looked for, in huggingface_hub's order (`HF_TOKEN`, then `HF_TOKEN_PATH`,
/// then `$HF_HOME/token` with `HF_HOME` defaulting to `$XDG_CACHE_HOME/huggingface`, else
/// `~/.cache/huggingface`), as text for help and hints.
pub const TOKEN_LOOKUP: &str = "HF_TOKEN, else the file HF_TOKEN_PATH names, else $HF_HOME/token (HF_HOME defaults to $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface — where `hf auth login` saves it)";

/// `HF_HOME`, else `$XDG_CACHE_HOME/huggingface`, else `~/.cache/huggingface` (as
/// huggingface_hub), over any variable source; `None` without any of them and without `HOME`.
pub fn hf_home(var: impl Fn(&str) -> Option<String>) -> Option<std::path::PathBuf> {
    let set = |k: &str| var(k).filter(|v| !v.trim().is_empty());
    set("HF_HOME").map(std::path::PathBuf::from).or_else(|| {
        set("XDG_CACHE_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| set("HOME").map(|h| std::path::Path::new(&h).join(".cache")))
            .map(|c| c.join("huggingface"))
    })
}

impl Token {
    /// Wrap a token string (surrounding whitespace trimmed).
    pub fn new(s: &str) -> Token {
        Token(s.trim().to_string(), TokenSource::Given)
    }
    /// Where it came from.
    pub fn source(&self) -> &TokenSource {
        &self.1
    }
    /// The token from the process environment ([`TOKEN_LOOKUP`]); `None` if there is none.
    pub fn from_env() -> Result<Option<Token>, HubError> {
        Token::lookup(|k| std::env::var(k).ok())
    }
    /// [`Token::from_env`] over any variable source (testable without touching the process).
    pub fn lookup(var: impl Fn(&str) -> Option<String>) -> Result<Option<Token>, HubError> {
        let set = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        if let Some(t) = set("HF_TOKEN") {
            return Ok(Some(Token(t.trim().to_string(), TokenSource::EnvVar)));
        }
        if let Some(p) = set("HF_TOKEN_PATH") {
            return Token::from_file(std::path::Path::new(&p)).map(Some);
        }
        match hf_home(&var).map(|h| h.join("token")) {
            Some(p) if p.is_file() => Token::from_file(&p).map(Some),
            _ => Ok(None),
        }
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
        Ok(Token(t.to_string(), TokenSource::File(path.to_owned())))
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
        let endpoint = protocol::parse_endpoint(endpoint).map_err(HubError::Config)?;
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

    /// The retry policy.
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.retry
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
                    // A rate limit asking for longer than the policy's longest backoff (an hourly
                    // quota) is the caller's to wait out or report: not slept through here.
                    let long = status == 429
                        && retry::server_wait(r.headers())
                            .is_some_and(|w| w > self.retry.max_delay);
                    if !last
                        && !long
                        && idem == Idempotence::Idempotent
                        && retry::retryable_status(status)
                    {
                        let wait = self.retry.delay(attempt, retry::server_wait(r.headers()));
                        tracing::warn!(url = %u, status, wait_ms = wait.as_millis() as u64, "hub request failed; retrying");
                        tokio::time::sleep(wait).await;
                        attempt += 1;
                        continue;
                    }
                    return Err(self.http_error(method, u, r).await);
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

/// A response's whole body (a transport failure names the URL).
pub(crate) async fn body_bytes(u: &Url, r: Response) -> Result<bytes::Bytes, HubError> {
    r.bytes().await.map_err(|e| HubError::Transport {
        url: u.to_string(),
        detail: transport_detail(&e),
        source: e,
    })
}

/// Parse a JSON body ([`answers::decode`]), naming the URL on failure.
pub(crate) async fn json_body<T: serde::de::DeserializeOwned>(
    u: &Url,
    r: Response,
) -> Result<T, HubError> {
    answers::decode(u.as_str(), &body_bytes(u, r).await?)
}

impl HubClient {
    /// [`http_error`], with a 401/403 message saying which token was sent (its source, never its
    /// value) or that none was, and how to set one.
    pub(crate) async fn http_error(&self, method: &Method, u: &Url, r: Response) -> HubError {
        let mut e = http_error(method, u, r).await;
        if let HubError::Http {
            status: 401 | 403,
            message,
            ..
        } = &mut e
        {
            let sent = self.token.as_ref().filter(|_| self.same_origin(u));
            message.push_str(&match sent {
                Some(t) => format!(
                    " (the request carried the token from {}; check that it is valid and may access this repository)",
                    t.source()
                ),
                None => format!(" (no token was sent; set one: {TOKEN_LOOKUP})"),
            });
        }
        e
    }
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
    let message = answers::error_message(&body, hv("x-error-message").as_deref());
    HubError::Http {
        method: method.to_string(),
        url: u.to_string(),
        status,
        request_id: hv("x-request-id"),
        error_code: hv("x-error-code"),
        message,
        retry_after,
    }
}

#[cfg(test)]
mod token_tests {
    use super::*;

    fn vars<'a>(kv: &'a [(&'a str, String)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| kv.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn token_lookup_follows_huggingface_hub() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("home");
        let saved = home.join(".cache/huggingface/token");
        std::fs::create_dir_all(saved.parent().unwrap()).unwrap();
        std::fs::write(&saved, "hf_saved\n").unwrap();
        let h = home.display().to_string();
        // `hf auth login`'s default location, found with only HOME set
        let t = Token::lookup(vars(&[("HOME", h.clone())]))
            .unwrap()
            .unwrap();
        assert_eq!(t.expose(), "hf_saved");
        assert_eq!(t.source(), &TokenSource::File(saved.clone()));
        // XDG_CACHE_HOME moves the default; HF_HOME overrides both
        let xdg = d.path().join("xdg");
        assert!(Token::lookup(vars(&[
            ("HOME", h.clone()),
            ("XDG_CACHE_HOME", xdg.display().to_string())
        ]))
        .unwrap()
        .is_none());
        let hf_home = d.path().join("hfhome");
        std::fs::create_dir_all(&hf_home).unwrap();
        std::fs::write(hf_home.join("token"), "hf_home_token").unwrap();
        let t = Token::lookup(vars(&[
            ("HOME", h.clone()),
            ("HF_HOME", hf_home.display().to_string()),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(t.expose(), "hf_home_token");
        // HF_TOKEN_PATH before HF_HOME, HF_TOKEN before everything
        let p = d.path().join("explicit");
        std::fs::write(&p, "hf_explicit").unwrap();
        let with_path = [
            ("HOME", h.clone()),
            ("HF_HOME", hf_home.display().to_string()),
            ("HF_TOKEN_PATH", p.display().to_string()),
        ];
        assert_eq!(
            Token::lookup(vars(&with_path)).unwrap().unwrap().expose(),
            "hf_explicit"
        );
        let mut all = with_path.to_vec();
        all.push(("HF_TOKEN", "hf_env".into()));
        let t = Token::lookup(vars(&all)).unwrap().unwrap();
        assert_eq!((t.expose(), t.source()), ("hf_env", &TokenSource::EnvVar));
        assert!(
            !format!("{t:?}").contains("hf_env"),
            "Debug shows the value"
        );
    }

    #[test]
    fn an_endpoint_with_credentials_is_refused_without_repeating_them() {
        for ep in [
            "http://user:hf_SECRET@127.0.0.1:9",
            "https://hf_SECRET@hub.example/x",
        ] {
            let e = HubClient::new(ep, None).unwrap_err().to_string();
            assert!(e.contains("carries credentials"), "{e}");
            assert!(!e.contains("hf_SECRET"), "the secret is repeated: {e}");
        }
        assert!(HubClient::new("http://127.0.0.1:9/", None).is_ok());
        assert!(HubClient::new("ftp://host", None).is_err());
    }
}
