//! LFS on the server (hub-protocol.md §7.3): the batch endpoint, pre-authorised (signed) upload
//! URLs for basic and multipart transfers, the multipart completion, and the authenticated verify.
//! Uploaded bytes land in `tmp/`, are hashed, and are renamed into the content-addressed store only
//! when their SHA-256 and size match the announced oid.

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::Digest as _;
use tokio::io::AsyncWriteExt as _;

use super::faults::FaultMode;
use super::{bad_request, hub_error, internal, read_body, AppState, Req};
use crate::protocol::{self, RepoId};

#[derive(Deserialize)]
struct BatchObject {
    oid: String,
    size: u64,
}

#[derive(Deserialize)]
struct BatchBody {
    operation: String,
    #[serde(default)]
    transfers: Vec<String>,
    objects: Vec<BatchObject>,
}

fn lfs_json(v: Value, status: StatusCode) -> Response {
    let mut r = (status, axum::Json(v)).into_response();
    r.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("application/vnd.git-lfs+json"),
    );
    r
}

/// Most parts one multipart upload is offered in (S3's limit, which the Hub's storage shares).
const MAX_PARTS: u64 = 10_000;

pub(crate) async fn batch(st: &Arc<AppState>, req: Req, repo: &RepoId) -> Response {
    if let Err(r) = st
        .require_write(&req.headers)
        .and_then(|()| st.readable_repo(repo, &req.headers).map(|_| ()))
    {
        return r;
    }
    let base = st.base_url(&req.headers);
    let body = match read_body(req.body, 4 * 1024 * 1024).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let b: BatchBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => return bad_request(&format!("invalid LFS batch body: {e}")),
    };
    if b.operation != "upload" {
        return bad_request("only the `upload` LFS operation is served; download through /resolve");
    }
    if b.objects.len() > 1000 {
        return bad_request("too many objects in one LFS batch (at most 1000)");
    }
    let multipart_ok = b.transfers.iter().any(|t| t == "multipart");
    let chunk = st.opts.lfs_chunk_size.max(1);
    let mut any_multipart = false;
    let mut objects = Vec::new();
    for o in &b.objects {
        if !names::is_sha256_lower(&o.oid) {
            objects.push(json!({"oid": o.oid, "size": o.size, "error": {"code": 422, "message": "oid is not a sha256 hex digest"}}));
            continue;
        }
        if st.store.lfs_size(&o.oid) == Some(o.size) {
            objects.push(json!({"oid": o.oid, "size": o.size}));
            continue;
        }
        let q = format!(
            "size={}&sig={}",
            o.size,
            st.sign("upload", &format!("{}:{}", o.oid, o.size))
        );
        let verify = json!({"href": format!("{base}/lfs-verify/{}/{}/{}", repo.kind.api_plural(), repo.id(), o.oid)});
        if multipart_ok && o.size > chunk {
            let parts = o.size.div_ceil(chunk);
            if parts > MAX_PARTS {
                // Refused before any part URL is built: a size in the body must not decide how
                // much the server allocates (found by the hub_server fuzz target).
                objects.push(json!({"oid": o.oid, "size": o.size, "error": {"code": 422, "message": format!(
                    "object of {} bytes needs {parts} parts of {chunk} bytes; at most {MAX_PARTS} are served", o.size)}}));
                continue;
            }
            any_multipart = true;
            let mut header = serde_json::Map::new();
            header.insert("chunk_size".into(), json!(chunk.to_string()));
            for n in 1..=parts {
                header.insert(
                    n.to_string(),
                    json!(format!("{base}/lfs-upload/{}/part/{n}?{q}", o.oid)),
                );
            }
            objects.push(json!({"oid": o.oid, "size": o.size, "authenticated": true, "actions": {
                "upload": {"href": format!("{base}/lfs-upload/{}/complete?{q}", o.oid), "header": header},
                "verify": verify,
            }}));
        } else {
            objects.push(
                json!({"oid": o.oid, "size": o.size, "authenticated": true, "actions": {
                    "upload": {"href": format!("{base}/lfs-upload/{}?{q}", o.oid)},
                    "verify": verify,
                }}),
            );
        }
    }
    let transfer = if any_multipart { "multipart" } else { "basic" };
    lfs_json(
        json!({"transfer": transfer, "objects": objects, "hash_algo": "sha256"}),
        StatusCode::OK,
    )
}

/// Write a request body to a temp file, refusing more than `limit` bytes.
/// Bytes of an upload body gathered before one write to its temporary file.
const WRITE_BLOCK: usize = 1 << 20;

async fn body_to_tmp(
    st: &AppState,
    body: axum::body::Body,
    limit: u64,
) -> Result<(std::path::PathBuf, u64, String), Response> {
    let tmp = st.store.tmp_path();
    let mut f = tokio::fs::File::create(&tmp)
        .await
        .map_err(|e| internal("creating an upload file", &e))?;
    let mut n = 0u64;
    let mut h = sha2::Sha256::new();
    let mut stream = body.into_data_stream();
    // Request-side faults (docs/hub.md §5): what a lossy link does to an upload body.
    let mut corrupt = st.faults.fire(FaultMode::CorruptUpload).is_some();
    let keep = match st.faults.fire(FaultMode::TruncateUpload) {
        Some(_) => limit / 2,
        None => u64::MAX,
    };
    let mut seen = 0u64;
    let mut pending = Vec::with_capacity(WRITE_BLOCK);
    while let Some(chunk) = stream.next().await {
        let mut chunk = match chunk {
            Ok(c) => c,
            Err(_) => {
                let _ = tokio::fs::remove_file(&tmp).await;
                return Err(bad_request("upload body ended early"));
            }
        };
        seen += chunk.len() as u64;
        if seen > keep {
            let cut = chunk
                .len()
                .saturating_sub(usize::try_from(seen - keep).unwrap_or(usize::MAX));
            chunk.truncate(cut);
        }
        if corrupt && !chunk.is_empty() {
            let mut v = chunk.to_vec();
            v[0] ^= 0x5a;
            chunk = bytes::Bytes::from(v);
            corrupt = false;
        }
        n += chunk.len() as u64;
        if n > limit {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(hub_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                None,
                &format!("upload larger than the announced {limit} bytes"),
            ));
        }
        h.update(&chunk);
        // Writes go out in blocks of WRITE_BLOCK: each tokio file write is a trip to the blocking
        // pool, and a body arrives in frames of a few KiB (measured: per-frame writes made the
        // hub's CPU the bound of a 2.5 GB upload on loopback, docs/bench/upload.md).
        pending.extend_from_slice(&chunk);
        if pending.len() >= WRITE_BLOCK {
            if let Err(e) = f.write_all(&pending).await {
                return Err(internal("writing an upload", &e));
            }
            pending.clear();
        }
    }
    if let Err(e) = f.write_all(&pending).await {
        return Err(internal("writing an upload", &e));
    }
    if let Err(e) = f.sync_all().await {
        return Err(internal("syncing an upload", &e));
    }
    Ok((tmp, n, hex::encode(h.finalize())))
}

#[derive(Deserialize)]
struct Part {
    #[serde(rename = "partNumber")]
    part_number: u64,
    etag: String,
}

#[derive(Deserialize)]
struct Completion {
    oid: String,
    parts: Vec<Part>,
}

/// `PUT /lfs-upload/{oid}` (basic), `PUT /lfs-upload/{oid}/part/{n}`, `POST /lfs-upload/{oid}/complete`.
pub(crate) async fn upload(st: &Arc<AppState>, req: Req) -> Response {
    let segs = req.segs.clone();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let oid = s.get(1).copied().unwrap_or("");
    let size: Option<u64> = req.q("size").and_then(|v| v.parse().ok());
    let (true, Some(size)) = (names::is_sha256_lower(oid), size) else {
        return bad_request("upload URL lacks a valid oid or size");
    };
    if req.q("sig") != Some(st.sign("upload", &format!("{oid}:{size}")).as_str()) {
        return hub_error(
            StatusCode::FORBIDDEN,
            None,
            "invalid or missing upload signature",
        );
    }
    let chunk = st.opts.lfs_chunk_size.max(1);
    match (req.method.as_str(), s.get(2..).unwrap_or(&[])) {
        ("PUT", []) => {
            let (tmp, got_size, got) = match body_to_tmp(st, req.body.take(), size).await {
                Ok(x) => x,
                Err(r) => return r,
            };
            // Hashed as it arrived: the digest is checked without reading the file again.
            match st.store.adopt_lfs_hashed(&tmp, oid, size, &got, got_size) {
                Ok(Ok(())) => axum::Json(json!({})).into_response(),
                Ok(Err(m)) => bad_request(&m),
                Err(e) => internal("storing an LFS object", &e),
            }
        }
        ("PUT", ["part", n]) => {
            let Some(n) = n
                .parse::<u64>()
                .ok()
                .filter(|n| *n >= 1 && *n <= size.div_ceil(chunk))
            else {
                return bad_request("invalid part number");
            };
            let (tmp, _, digest) = match body_to_tmp(st, req.body.take(), chunk).await {
                Ok(x) => x,
                Err(r) => return r,
            };
            let dir = st.store.upload_dir(oid);
            let res = std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::rename(&tmp, dir.join(format!("part-{n}"))));
            if let Err(e) = res {
                return internal("storing an upload part", &e);
            }
            let mut r = axum::Json(json!({})).into_response();
            if let Ok(v) = HeaderValue::from_str(&format!("\"{digest}\"")) {
                r.headers_mut().insert("etag", v);
            }
            r
        }
        ("POST", ["complete"]) => complete(st, req, oid, size, chunk).await,
        _ => hub_error(StatusCode::NOT_FOUND, None, "no such upload route"),
    }
}

async fn complete(st: &Arc<AppState>, req: Req, oid: &str, size: u64, chunk: u64) -> Response {
    let body = match read_body(req.body, 4 * 1024 * 1024).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let c: Completion = match serde_json::from_slice(&body) {
        Ok(c) => c,
        Err(e) => return bad_request(&format!("invalid multipart completion body: {e}")),
    };
    let n_parts = size.div_ceil(chunk);
    if c.oid != oid || c.parts.len() as u64 != n_parts {
        return bad_request(&format!(
            "completion must name oid {oid} and {n_parts} parts"
        ));
    }
    let dir = st.store.upload_dir(oid);
    let tmp = st.store.tmp_path();
    let res = (|| -> std::io::Result<Result<(), String>> {
        use std::io::Write;
        let mut out = std::fs::File::create(&tmp)?;
        let mut parts: Vec<&Part> = c.parts.iter().collect();
        parts.sort_by_key(|p| p.part_number);
        for (i, p) in parts.iter().enumerate() {
            if p.part_number != i as u64 + 1 {
                return Ok(Err(format!("part numbers must be 1..={n_parts}")));
            }
            let data = match std::fs::read(dir.join(format!("part-{}", p.part_number))) {
                Ok(d) => d,
                Err(_) => return Ok(Err(format!("part {} was never uploaded", p.part_number))),
            };
            let want = p.etag.trim_start_matches("W/").trim_matches('"');
            if protocol::sha256_hex(&data) != want {
                return Ok(Err(format!(
                    "part {} does not match its etag",
                    p.part_number
                )));
            }
            out.write_all(&data)?;
        }
        out.sync_all()?;
        Ok(Ok(()))
    })();
    match res {
        Ok(Ok(())) => {}
        Ok(Err(m)) => {
            let _ = std::fs::remove_file(&tmp);
            return bad_request(&m);
        }
        Err(e) => return internal("assembling a multipart upload", &e),
    }
    match st.store.adopt_lfs(&tmp, oid, size) {
        Ok(Ok(())) => {
            let _ = std::fs::remove_dir_all(&dir);
            axum::Json(json!({})).into_response()
        }
        Ok(Err(m)) => bad_request(&m),
        Err(e) => internal("storing an LFS object", &e),
    }
}

/// `POST /lfs-verify/{plural}/{owner}/{name}/{oid}` with `{"oid","size"}` (authenticated).
pub(crate) async fn verify(st: &Arc<AppState>, req: Req) -> Response {
    let s: Vec<&str> = req.segs.iter().map(String::as_str).collect();
    let repo = match s.as_slice() {
        ["lfs-verify", plural, owner, name, _oid] => protocol::RepoType::from_plural(plural)
            .and_then(|k| RepoId::from_parts(k, owner, name).ok()),
        _ => None,
    };
    let Some(repo) = repo else {
        return bad_request("expected /lfs-verify/{type}/{owner}/{name}/{oid}");
    };
    if let Err(r) = st
        .require_write(&req.headers)
        .and_then(|()| st.readable_repo(&repo, &req.headers).map(|_| ()))
    {
        return r;
    }
    let body = match read_body(req.body, 64 * 1024).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let oid = v.get("oid").and_then(Value::as_str).unwrap_or("");
    let size = v.get("size").and_then(Value::as_u64);
    match (st.store.lfs_size(oid), size) {
        (Some(a), Some(b)) if a == b => lfs_json(json!({"message": "ok"}), StatusCode::OK),
        _ => lfs_json(
            json!({"message": format!("object {} of the announced size is not stored", protocol::printable(oid))}),
            StatusCode::NOT_FOUND,
        ),
    }
}
