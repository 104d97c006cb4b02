//! The Hub's current answers as `--faults` modes (docs/hub.md §5, hub-protocol.md §13): shapes a
//! client must take in its stride, applied to an answer after routing. `redirect-307`: an LFS
//! file's CDN redirect is a 307 whose `Content-Length` is its own short body's, not the file's.
//! `xet-hash`: resolve answers of LFS files carry `X-Xet-Hash`, and tree and paths-info entries
//! of LFS files `xetHash` (this hub stores no Xet data: the value is a stable stand-in).
//! (`commit-504`, `binary-inline` and `preupload-256` act in the write routes.)

use axum::body::Body;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::Response;
use serde_json::Value;
use sha2::Digest as _;

use super::faults::FaultMode;
use super::AppState;

/// Largest JSON answer rewritten (tree pages and paths-info answers are far smaller).
const MAX_ANSWER: usize = 64 << 20;

/// The answer to `method segs` with every armed quirk applied.
pub(crate) async fn answer(
    st: &AppState,
    method: &Method,
    segs: &[String],
    path: &str,
    mut r: Response,
) -> Response {
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let resolve = matches!(method.as_str(), "GET" | "HEAD") && s.contains(&"resolve");
    let listing = matches!(
        (method.as_str(), s.as_slice()),
        ("GET", ["api", _, _, _, "tree", ..]) | ("POST", ["api", _, _, _, "paths-info", ..])
    );
    if resolve && st.faults.armed(FaultMode::XetHash) {
        r = xet_header(st, path, r);
    }
    if resolve && st.faults.armed(FaultMode::Redirect307) {
        r = redirect_307(st, path, r);
    }
    if listing && st.faults.armed(FaultMode::XetHash) && r.status().is_success() {
        r = xet_entries(st, path, r).await;
    }
    r
}

/// A stable stand-in Xet hash of the LFS object `sha256` (64 hex).
fn xet_of(sha256: &str) -> String {
    hex::encode(sha2::Sha256::digest(format!("xet\0{sha256}").as_bytes()))
}

/// `X-Xet-Hash` on an answer about an LFS file (it carries `X-Linked-Etag`).
fn xet_header(st: &AppState, path: &str, mut r: Response) -> Response {
    let linked = r
        .headers()
        .get("x-linked-etag")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_matches('"').to_owned());
    if let Some(sha) = linked {
        if st
            .faults
            .fire_where(FaultMode::XetHash, path, |_| true)
            .is_some()
        {
            if let Ok(v) = HeaderValue::from_str(&xet_of(&sha)) {
                r.headers_mut().insert("x-xet-hash", v);
            }
        }
    }
    r
}

/// A 302 to the CDN answered as a 307 with a body, whose length `Content-Length` then states.
fn redirect_307(st: &AppState, path: &str, r: Response) -> Response {
    if r.status() != StatusCode::FOUND
        || st
            .faults
            .fire_where(FaultMode::Redirect307, path, |_| true)
            .is_none()
    {
        return r;
    }
    let (mut parts, _) = r.into_parts();
    let to = parts
        .headers
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = format!("Temporary Redirect. Redirecting to {to}");
    parts.status = StatusCode::TEMPORARY_REDIRECT;
    if let Ok(v) = HeaderValue::from_str(&body.len().to_string()) {
        parts.headers.insert(header::CONTENT_LENGTH, v);
    }
    parts
        .headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Response::from_parts(parts, Body::from(body))
}

/// `xetHash` beside `lfs` in every LFS entry of a tree page or paths-info answer.
async fn xet_entries(st: &AppState, path: &str, r: Response) -> Response {
    let (mut parts, body) = r.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ANSWER).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let Ok(mut v) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let mut added = false;
    for e in v.as_array_mut().into_iter().flatten() {
        if let Some(oid) = e.pointer("/lfs/oid").and_then(Value::as_str) {
            let xet = xet_of(oid);
            e["xetHash"] = Value::String(xet);
            added = true;
        }
    }
    if added {
        st.faults.fire_where(FaultMode::XetHash, path, |_| true);
    }
    let out = serde_json::to_vec(&v).unwrap_or_default();
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(out))
}
