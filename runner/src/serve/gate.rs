//! The server before its model is ready (docs/runner.md "minirun-serve", "Lifecycle"): it
//! listens from the start, so a probe can tell loading from ready and from dead. While the model
//! loads, `GET /health` answers 503 `{"status": "loading"}`, `GET /metrics` answers as ever, and
//! every other request 503 `model_loading` with `Retry-After`; once the model thread hands over
//! the loaded router, every request goes to it.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::json;
use tower::ServiceExt as _;

use super::api::ApiError;
use super::metrics::ServeStats;

/// What answers before the model is ready, and the router that answers after.
pub struct Gate {
    pub stats: Arc<ServeStats>,
    pub admitted: Arc<AtomicUsize>,
    ready: OnceLock<Router>,
}

impl Gate {
    pub fn new(stats: Arc<ServeStats>, admitted: Arc<AtomicUsize>) -> Self {
        Self {
            stats,
            admitted,
            ready: OnceLock::new(),
        }
    }

    /// The model is ready: `router` answers every request from now on (a second call is
    /// ignored).
    pub fn open(&self, router: Router) {
        let _ = self.ready.set(router);
    }

    /// The router the server runs: the gate in front of the loaded router.
    pub fn router(self: Arc<Self>) -> Router {
        Router::new().fallback(move |req: Request| {
            let gate = Arc::clone(&self);
            async move {
                match gate.ready.get() {
                    Some(r) => match r.clone().oneshot(req).await {
                        Ok(resp) => resp,
                        Err(never) => match never {},
                    },
                    None => gate.loading(&req),
                }
            }
        })
    }

    fn loading(&self, req: &Request) -> Response {
        match req.uri().path() {
            "/health" => (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::RETRY_AFTER, "1")],
                Json(json!({"status": "loading"})),
            )
                .into_response(),
            "/metrics" => super::http::openmetrics(&self.stats, &self.admitted),
            _ => ApiError {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: "the model is loading; retry when GET /health answers 200".into(),
                kind: "unavailable_error",
                code: Some("model_loading"),
                param: None,
                retry_after: Some(1),
            }
            .into_response(),
        }
    }
}
