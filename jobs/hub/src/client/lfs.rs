//! LFS uploads (hub-protocol.md §7.3): the batch call (with the token), then per object either a
//! basic `PUT` of the whole body or a multipart upload (part `PUT`s whose `ETag`s go into the
//! completion `POST`) — both to pre-signed URLs and WITHOUT the token — then the authenticated
//! verify. Objects the hub already has (no `actions`) are skipped.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use bytes::Bytes;
use reqwest::Method;
use serde_json::{json, Value};

use super::{HubClient, HubError, Idempotence};
use crate::protocol::RepoId;

/// One LFS object to upload.
#[derive(Debug, Clone)]
pub struct LfsObject {
    /// SHA-256 of the content.
    pub oid: String,
    /// Size in bytes.
    pub size: u64,
    /// Where the bytes are.
    pub source: super::UploadSource,
}

fn read_slice(src: &super::UploadSource, start: u64, len: u64) -> Result<Bytes, HubError> {
    match src {
        super::UploadSource::Bytes(b) => {
            let lo = usize::try_from(start).unwrap_or(usize::MAX).min(b.len());
            let hi = usize::try_from(start.saturating_add(len))
                .unwrap_or(usize::MAX)
                .min(b.len());
            Ok(b.slice(lo..hi))
        }
        super::UploadSource::File(p) => {
            let io = |source| HubError::Io {
                path: p.display().to_string(),
                source,
            };
            let mut f = std::fs::File::open(p).map_err(io)?;
            f.seek(SeekFrom::Start(start)).map_err(io)?;
            let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
            f.take(len).read_to_end(&mut buf).map_err(io)?;
            Ok(Bytes::from(buf))
        }
    }
}

/// Bytes read from a file per piece of an upload body.
const UPLOAD_BLOCK: usize = 1 << 20;

fn body_of(src: &super::UploadSource, path: &Option<PathBuf>) -> Result<reqwest::Body, HubError> {
    match (src, path) {
        (super::UploadSource::Bytes(b), _) => Ok(reqwest::Body::from(b.clone())),
        (super::UploadSource::File(p), _) => {
            let f = std::fs::File::open(p).map_err(|source| HubError::Io {
                path: p.display().to_string(),
                source,
            })?;
            // Read in blocks of UPLOAD_BLOCK: `Body::from(tokio::fs::File)` reads a few KiB per
            // trip to the blocking pool, and that context switching was most of the client's CPU
            // on a 2.5 GB upload (perf, docs/bench/upload.md).
            let file = tokio::fs::File::from_std(f);
            let stream = futures_util::stream::try_unfold(file, |mut f| async move {
                use tokio::io::AsyncReadExt as _;
                let mut buf = vec![0u8; UPLOAD_BLOCK];
                let mut n = 0;
                while n < buf.len() {
                    let k = f.read(&mut buf[n..]).await?;
                    if k == 0 {
                        break;
                    }
                    n += k;
                }
                if n == 0 {
                    return Ok::<_, std::io::Error>(None);
                }
                buf.truncate(n);
                Ok(Some((Bytes::from(buf), f)))
            });
            Ok(reqwest::Body::wrap_stream(stream))
        }
    }
}

/// Whether one object's transfer failed in a way another attempt can fix: the link (reset,
/// timeout, short body), the hub's integrity rejection of what arrived (400: digest or size
/// mismatch, body ended early), a verify that finds no object (404), or a busy hub (408, 429, 5xx).
fn object_transient(e: &HubError) -> bool {
    match e {
        HubError::Http { status, .. } => {
            matches!(status, 400 | 404) || super::retry::retryable_status(*status)
        }
        other => other.is_transient_body(),
    }
}

impl HubClient {
    /// Upload the objects the hub lacks (batch → PUT or multipart → verify), 256 per batch call,
    /// [`HubClient::workers`] transfers at once. An object whose transfer fails transiently is
    /// asked of the batch again (fresh actions, or none when the hub now holds it) and re-sent
    /// after a backoff, up to the retry policy's attempts, while the others proceed.
    /// Returns how many objects were actually sent.
    pub async fn upload_lfs(
        &self,
        repo: &RepoId,
        rev: Option<&str>,
        objects: &[LfsObject],
    ) -> Result<usize, HubError> {
        use futures_util::{StreamExt as _, TryStreamExt as _};
        let mut sent = 0;
        for batch in objects.chunks(256) {
            let actions = self.lfs_batch(repo, rev, batch).await?;
            let todo: Vec<(&LfsObject, Value)> = batch
                .iter()
                .zip(actions)
                .filter_map(|(o, a)| a.map(|a| (o, a)))
                .collect();
            sent += todo.len();
            futures_util::stream::iter(todo)
                .map(Ok)
                .try_for_each_concurrent(self.workers, |(o, a)| {
                    self.transfer_retrying(repo, rev, o, a)
                })
                .await?;
        }
        Ok(sent)
    }

    /// The objects among `(oid, size)` the hub does not hold yet (the batch call offers an upload
    /// for them), 256 per call; nothing is uploaded. The distributed join asks this for objects its
    /// workers uploaded, before committing them by oid alone.
    pub async fn lfs_missing(
        &self,
        repo: &RepoId,
        rev: Option<&str>,
        objects: &[(String, u64)],
    ) -> Result<Vec<String>, HubError> {
        let objs: Vec<LfsObject> = objects
            .iter()
            .map(|(oid, size)| LfsObject {
                oid: oid.clone(),
                size: *size,
                source: super::UploadSource::Bytes(Bytes::new()),
            })
            .collect();
        let mut missing = Vec::new();
        for batch in objs.chunks(256) {
            let actions = self.lfs_batch(repo, rev, batch).await?;
            for (o, a) in batch.iter().zip(actions) {
                if a.is_some() {
                    missing.push(o.oid.clone());
                }
            }
        }
        Ok(missing)
    }

    /// The batch call for `batch`: per object, its actions, or `None` when the hub holds it.
    async fn lfs_batch(
        &self,
        repo: &RepoId,
        rev: Option<&str>,
        batch: &[LfsObject],
    ) -> Result<Vec<Option<Value>>, HubError> {
        let u = self.url(&format!(
            "{}/{}{}.git/info/lfs/objects/batch",
            self.endpoint(),
            repo.kind.url_prefix(),
            repo.id()
        ))?;
        let mut body = json!({
            "operation": "upload",
            "transfers": ["basic", "multipart"],
            "objects": batch.iter().map(|o| json!({"oid": o.oid, "size": o.size})).collect::<Vec<_>>(),
            "hash_algo": "sha256",
        });
        if let Some(r) = rev {
            body["ref"] = json!({"name": r});
        }
        let body = serde_json::to_vec(&body).map_err(|e| HubError::Protocol {
            url: u.to_string(),
            detail: e.to_string(),
        })?;
        let r = self
            .send(&Method::POST, &u, Idempotence::Idempotent, || {
                Ok(self
                    .request(Method::POST, &u)
                    .header("accept", "application/vnd.git-lfs+json")
                    .header("content-type", "application/vnd.git-lfs+json")
                    .body(body.clone()))
            })
            .await?;
        let bytes = super::body_bytes(&u, r).await?;
        let oids: Vec<&str> = batch.iter().map(|o| o.oid.as_str()).collect();
        super::answers::lfs_batch_actions(u.as_str(), &bytes, &oids)
    }

    /// [`Self::transfer`] with the per-object retries of [`Self::upload_lfs`].
    async fn transfer_retrying(
        &self,
        repo: &RepoId,
        rev: Option<&str>,
        o: &LfsObject,
        mut actions: Value,
    ) -> Result<(), HubError> {
        let mut attempt = 0u32;
        loop {
            match self.transfer(o, &actions).await {
                Ok(()) => return Ok(()),
                Err(e)
                    if object_transient(&e)
                        && attempt + 1 < self.retry.max_attempts
                        && e.long_rate_limit(self.retry.max_delay).is_none() =>
                {
                    let wait = self.retry.delay(attempt, e.retry_after());
                    tracing::warn!(oid = %o.oid, error = %e, wait_ms = wait.as_millis() as u64, "LFS object upload failed; sending it again");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                    match self
                        .lfs_batch(repo, rev, std::slice::from_ref(o))
                        .await?
                        .pop()
                        .flatten()
                    {
                        Some(a) => actions = a,
                        None => return Ok(()), // the hub holds it now
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn transfer(&self, o: &LfsObject, actions: &Value) -> Result<(), HubError> {
        let upload = actions.get("upload").ok_or_else(|| {
            HubError::Config(format!("LFS batch gave no upload action for {}", o.oid))
        })?;
        let href = upload.get("href").and_then(Value::as_str).unwrap_or("");
        let href = self.url(href)?;
        let header = upload.get("header");
        match header.and_then(|h| h.get("chunk_size")) {
            Some(cs) => {
                let chunk: u64 = cs
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .or_else(|| cs.as_u64())
                    .filter(|c| *c > 0)
                    .ok_or_else(|| HubError::Protocol {
                        url: href.to_string(),
                        detail: "bad `chunk_size`".into(),
                    })?;
                let parts = o.size.div_ceil(chunk);
                let mut etags = Vec::new();
                for n in 1..=parts {
                    let part_url = header
                        .and_then(|h| h.get(n.to_string()))
                        .and_then(Value::as_str)
                        .ok_or_else(|| HubError::Protocol {
                            url: href.to_string(),
                            detail: format!("multipart header lacks part {n} of {parts}"),
                        })?;
                    let pu = self.url(part_url)?;
                    let data = read_slice(&o.source, (n - 1) * chunk, chunk)?;
                    let r = self
                        .send(&Method::PUT, &pu, Idempotence::Idempotent, || {
                            Ok(self.request_anon(Method::PUT, &pu).body(data.clone()))
                        })
                        .await?;
                    let etag = r
                        .headers()
                        .get("etag")
                        .and_then(|v| v.to_str().ok())
                        .map(String::from)
                        .ok_or_else(|| HubError::Protocol {
                            url: pu.to_string(),
                            detail: "part upload answer has no `ETag`".into(),
                        })?;
                    etags.push(json!({"partNumber": n, "etag": etag}));
                }
                let body =
                    serde_json::to_vec(&json!({"oid": o.oid, "parts": etags})).map_err(|e| {
                        HubError::Protocol {
                            url: href.to_string(),
                            detail: e.to_string(),
                        }
                    })?;
                self.send(&Method::POST, &href, Idempotence::Idempotent, || {
                    Ok(self
                        .request_anon(Method::POST, &href)
                        .header("accept", "application/vnd.git-lfs+json")
                        .header("content-type", "application/vnd.git-lfs+json")
                        .body(body.clone()))
                })
                .await?;
            }
            None => {
                self.send(&Method::PUT, &href, Idempotence::Idempotent, || {
                    Ok(self
                        .request_anon(Method::PUT, &href)
                        .body(body_of(&o.source, &None)?))
                })
                .await?;
            }
        }
        if let Some(v) = actions
            .get("verify")
            .and_then(|v| v.get("href"))
            .and_then(Value::as_str)
        {
            let vu = self.url(v)?;
            let body = serde_json::to_vec(&json!({"oid": o.oid, "size": o.size})).map_err(|e| {
                HubError::Protocol {
                    url: vu.to_string(),
                    detail: e.to_string(),
                }
            })?;
            let r = self.send(&Method::POST, &vu, Idempotence::Idempotent, || {
                Ok(self
                    .request(Method::POST, &vu)
                    .header("accept", "application/vnd.git-lfs+json")
                    .header("content-type", "application/vnd.git-lfs+json")
                    .body(body.clone()))
            });
            let r = r.await?;
            if !r.status().is_success() {
                return Err(self.http_error(&Method::POST, &vu, r).await);
            }
        }
        Ok(())
    }
}
