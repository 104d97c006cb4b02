//! `HubError`: every failure of the client keeps the method, URL, status, request id and server
//! message where there is one (STYLE.md §3.7). No variant ever holds the token: requests carry it
//! only in a header marked sensitive, and headers are never copied into errors or logs.

/// A hub client failure.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The server answered with an error status.
    #[error("{method} `{url}` failed with HTTP {status}{}: {message}", request_id.as_deref().map(|r| format!(" (request id {r})")).unwrap_or_default())]
    Http {
        /// HTTP method.
        method: String,
        /// Request URL.
        url: String,
        /// Status code.
        status: u16,
        /// `X-Request-Id`, when sent.
        request_id: Option<String>,
        /// `X-Error-Code` (`RepoNotFound`, `RevisionNotFound`, `EntryNotFound`, …).
        error_code: Option<String>,
        /// The server's message (`{"error": …}`).
        message: String,
        /// The wait the answer asked for (`Retry-After`, or `t=` of `RateLimit`), in seconds
        /// (saturating; `u16` keeps the error small).
        retry_after: Option<u16>,
    },
    /// HTTP 412 on a commit: the branch head is no longer the `parentCommit` that was observed.
    /// Never retried: publishing must fail closed.
    #[error("the head of `{revision}` moved since commit `{parent}` was observed (HTTP 412 from `{url}`): {message}")]
    HeadMoved {
        /// Commit URL.
        url: String,
        /// The branch.
        revision: String,
        /// The parent commit the client sent.
        parent: String,
        /// `X-Request-Id`, when sent.
        request_id: Option<String>,
        /// The server's message.
        message: String,
    },
    /// Connecting, sending or reading failed (after the retries the policy allows).
    #[error("request to `{url}` failed: {detail}")]
    Transport {
        /// Request URL.
        url: String,
        /// What failed.
        detail: String,
        /// The transport error.
        #[source]
        source: reqwest::Error,
    },
    /// The commit request was sent but its response was lost: the commit may or may not exist.
    #[error("the commit sent to `{url}` may or may not have been applied: its response was lost ({detail}); re-read the branch head before deciding")]
    CommitOutcomeUnknown {
        /// Commit URL.
        url: String,
        /// What failed.
        detail: String,
    },
    /// A body shorter or longer than the headers announced.
    #[error("`{url}` sent {got} bytes where {expected} were announced")]
    BodyLength {
        /// Request URL.
        url: String,
        /// Bytes announced.
        expected: u64,
        /// Bytes received.
        got: u64,
    },
    /// A ranged response that does not carry exactly the requested range.
    #[error("`{url}` answered `Range: {range}` wrongly: {detail}")]
    BadRange {
        /// Request URL.
        url: String,
        /// The requested range header.
        range: String,
        /// What was wrong.
        detail: String,
    },
    /// Downloaded bytes whose digest is not the etag the hub announced.
    #[error("`{url}` content has {algo} {actual}, but the hub announced {expected}")]
    DigestMismatch {
        /// Request URL.
        url: String,
        /// `sha256` or `git-sha1`.
        algo: &'static str,
        /// The announced digest.
        expected: String,
        /// The digest of what arrived.
        actual: String,
    },
    /// A response that does not follow the protocol (missing header, bad JSON, …).
    #[error("unexpected response from `{url}`: {detail}")]
    Protocol {
        /// Request URL.
        url: String,
        /// What was wrong.
        detail: String,
    },
    /// A local file could not be read or written.
    #[error("failed to access `{path}`")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Bad client configuration (endpoint, token file, repo id).
    #[error("invalid hub client configuration: {0}")]
    Config(String),
}

impl HubError {
    /// The HTTP status, if the server answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            HubError::Http { status, .. } => Some(*status),
            HubError::HeadMoved { .. } => Some(412),
            _ => None,
        }
    }
    /// The wait an error answer asked for before another attempt.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            HubError::Http {
                retry_after: Some(s),
                ..
            } => Some(std::time::Duration::from_secs(u64::from(*s))),
            _ => None,
        }
    }
    /// A rate limit (HTTP 429) whose asked-for wait is longer than `beyond`: the client does not
    /// sleep through such a wait itself (an hourly commit quota); the caller decides, and a stage
    /// waits up to what its operator allows or says when to run again.
    pub fn long_rate_limit(&self, beyond: std::time::Duration) -> Option<std::time::Duration> {
        match (self.status(), self.retry_after()) {
            (Some(429), Some(w)) if w > beyond => Some(w),
            _ => None,
        }
    }
    /// The `X-Error-Code`, if any.
    pub fn error_code(&self) -> Option<&str> {
        match self {
            HubError::Http { error_code, .. } => error_code.as_deref(),
            _ => None,
        }
    }
    /// A 404 (`RepoNotFound`, `RevisionNotFound`, `EntryNotFound`, or a plain 404).
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }
    /// The repository itself is not there (or not visible to this token): `RepoNotFound` (the
    /// Hub answers it with 401 to an anonymous request), or a 404 naming no other code.
    pub fn is_repo_not_found(&self) -> bool {
        match self.error_code() {
            Some(code) => code == "RepoNotFound",
            None => self.is_not_found(),
        }
    }
    /// Worth another attempt of an idempotent request (transport and body-level failures).
    pub(crate) fn is_transient_body(&self) -> bool {
        matches!(
            self,
            HubError::Transport { .. } | HubError::BodyLength { .. } | HubError::BadRange { .. }
        )
    }
}
