//! Downloads (hub-protocol.md §3): HEAD metadata without automatic redirects (same-origin
//! redirects followed with the token, a cross-origin one read as the answer and later fetched
//! WITHOUT the token), single-range GETs that reject a 206 carrying the wrong bytes or a short body,
//! and resumable whole-file downloads checked against the etag (SHA-256 for LFS, git-blob SHA-1
//! otherwise). Nothing short or wrong is ever returned: such responses are retried, then reported.

use std::io::Write as _;
use std::path::Path;

use reqwest::header::{HeaderMap, CONTENT_LENGTH, CONTENT_RANGE, RANGE};
use reqwest::{Method, StatusCode};
use sha1::Digest as _;
use url::Url;

use super::{enc, enc_path, transport_detail, HubClient, HubError, Idempotence};
use crate::protocol::RepoId;

/// What HEAD `/resolve` says about a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMetadata {
    /// `X-Repo-Commit`: the commit the revision resolved to.
    pub commit: String,
    /// `X-Linked-Etag` or `ETag`, unquoted: SHA-256 for LFS files, git-blob SHA-1 otherwise.
    pub etag: String,
    /// `X-Linked-Size` or `Content-Length`.
    pub size: u64,
    /// Where the bytes are (the request URL, or a cross-origin redirect target).
    pub location: Url,
    /// True when the hub marked it as LFS (`X-Linked-Etag`).
    pub lfs: bool,
}

fn header(h: &HeaderMap, k: &str) -> Option<String> {
    h.get(k).and_then(|v| v.to_str().ok()).map(String::from)
}

fn unquote(e: &str) -> String {
    e.trim()
        .trim_start_matches("W/")
        .trim_matches('"')
        .to_string()
}

enum Digest {
    Sha256(sha2::Sha256),
    Git(sha1::Sha1),
}

impl Digest {
    fn new(meta: &FileMetadata) -> Digest {
        if names::is_sha256_lower(&meta.etag) {
            Digest::Sha256(sha2::Sha256::new())
        } else {
            let mut h = sha1::Sha1::new();
            h.update(format!("blob {}\0", meta.size).as_bytes());
            Digest::Git(h)
        }
    }
    fn update(&mut self, b: &[u8]) {
        match self {
            Digest::Sha256(h) => h.update(b),
            Digest::Git(h) => h.update(b),
        }
    }
    fn check(self, meta: &FileMetadata) -> Result<(), HubError> {
        let (algo, actual) = match self {
            Digest::Sha256(h) => ("sha256", hex::encode(h.finalize())),
            Digest::Git(h) => ("git-sha1", hex::encode(h.finalize())),
        };
        if actual != meta.etag {
            return Err(HubError::DigestMismatch {
                url: meta.location.to_string(),
                algo,
                expected: meta.etag.clone(),
                actual,
            });
        }
        Ok(())
    }
}

/// Hash the first `n` bytes of `f` (a kept part file) into a fresh digest for `meta`.
fn hash_prefix(meta: &FileMetadata, f: &mut std::fs::File, n: u64) -> std::io::Result<Digest> {
    use std::io::Read as _;
    std::io::Seek::rewind(f)?;
    let mut d = Digest::new(meta);
    let mut buf = vec![0u8; 1 << 20];
    let mut left = n;
    while left > 0 {
        let want = usize::try_from(left.min(buf.len() as u64)).unwrap_or(buf.len());
        let got = f.read(&mut buf[..want])?;
        if got == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the part file shrank while it was read",
            ));
        }
        d.update(&buf[..got]);
        left -= got as u64;
    }
    Ok(d)
}

impl HubClient {
    /// The resolve URL of a file.
    pub fn resolve_url(&self, repo: &RepoId, rev: &str, path: &str) -> Result<Url, HubError> {
        self.url(&format!(
            "{}/{}{}/resolve/{}/{}",
            self.endpoint(),
            repo.kind.url_prefix(),
            repo.id(),
            enc(rev),
            enc_path(path)
        ))
    }

    /// HEAD `/resolve/{rev}/{path}`: commit, etag, size and byte location of one file.
    pub async fn file_metadata(
        &self,
        repo: &RepoId,
        rev: &str,
        path: &str,
    ) -> Result<FileMetadata, HubError> {
        let mut u = self.resolve_url(repo, rev, path)?;
        for _ in 0..5 {
            let cur = u.clone();
            let r = self
                .send(&Method::HEAD, &cur, Idempotence::Idempotent, || {
                    Ok(self
                        .request(Method::HEAD, &cur)
                        .header("accept-encoding", "identity"))
                })
                .await?;
            let h = r.headers();
            let redirect = r.status().is_redirection();
            if redirect {
                let loc = header(h, "location").ok_or_else(|| HubError::Protocol {
                    url: cur.to_string(),
                    detail: "redirect without `Location`".into(),
                })?;
                let next = cur.join(&loc).map_err(|e| HubError::Protocol {
                    url: cur.to_string(),
                    detail: format!("bad `Location`: {e}"),
                })?;
                if self.same_origin(&next) {
                    u = next;
                    continue;
                }
                return metadata_from(&cur, h, next, true);
            }
            return metadata_from(&cur, h, cur.clone(), false);
        }
        Err(HubError::Protocol {
            url: u.to_string(),
            detail: "too many redirects".into(),
        })
    }

    /// Bytes `start..=end` (`end` `None` = to the end) of a file described by `meta`. The answer
    /// must be a 206 whose `Content-Range` and body match the request exactly; a 200 (Range
    /// ignored) is accepted only for objects ≤ 64 MiB and sliced locally after checking its size.
    pub async fn get_range(
        &self,
        meta: &FileMetadata,
        start: u64,
        end: Option<u64>,
    ) -> Result<Vec<u8>, HubError> {
        let mut out = Vec::new();
        self.get_range_into(meta, start, end, &mut out).await?;
        Ok(out)
    }

    /// As [`HubClient::get_range`], into `out` (cleared first; its capacity is reused, so a caller
    /// that recycles buffers does not fault in fresh pages for every range).
    pub async fn get_range_into(
        &self,
        meta: &FileMetadata,
        start: u64,
        end: Option<u64>,
        out: &mut Vec<u8>,
    ) -> Result<(), HubError> {
        let end = end
            .unwrap_or(meta.size.saturating_sub(1))
            .min(meta.size.saturating_sub(1));
        let mut attempt = 0;
        loop {
            out.clear();
            match self.get_range_once(meta, start, end, out).await {
                Err(e) if e.is_transient_body() && attempt + 1 < self.retry.max_attempts => {
                    tracing::warn!(url = %meta.location, error = %e, "ranged download failed; retrying");
                    tokio::time::sleep(self.retry.delay(attempt, None)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn get_range_once(
        &self,
        meta: &FileMetadata,
        start: u64,
        end: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), HubError> {
        let u = &meta.location;
        let range = format!("bytes={start}-{end}");
        let want = end
            .checked_sub(start)
            .map(|d| d + 1)
            .ok_or_else(|| HubError::BadRange {
                url: u.to_string(),
                range: range.clone(),
                detail: "empty range".into(),
            })?;
        let mut r = self
            .send(&Method::GET, u, Idempotence::Idempotent, || {
                Ok(self.request(Method::GET, u).header(RANGE, range.as_str()))
            })
            .await?;
        let bad = |detail: String| HubError::BadRange {
            url: u.to_string(),
            range: range.clone(),
            detail,
        };
        let whole = match r.status() {
            StatusCode::PARTIAL_CONTENT => {
                let cr = header(r.headers(), "content-range").unwrap_or_default();
                if cr != format!("bytes {start}-{end}/{}", meta.size) {
                    return Err(bad(format!("`Content-Range: {cr}`")));
                }
                false
            }
            StatusCode::OK => {
                if meta.size > 64 * 1024 * 1024 {
                    return Err(bad(
                        "the server ignored Range and sent the whole object".into()
                    ));
                }
                true
            }
            s => return Err(bad(format!("unexpected status {s}"))),
        };
        let expect_body = if whole { meta.size } else { want };
        if let Some(cl) = r
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
        {
            if cl != expect_body {
                return Err(HubError::BodyLength {
                    url: u.to_string(),
                    expected: expect_body,
                    got: cl,
                });
            }
        }
        out.reserve(usize::try_from(expect_body.min(64 << 20)).unwrap_or(0));
        let mut got = 0u64;
        while let Some(chunk) = r.chunk().await.map_err(|e| HubError::Transport {
            url: u.to_string(),
            detail: transport_detail(&e),
            source: e,
        })? {
            got += chunk.len() as u64;
            if got > expect_body {
                return Err(HubError::BodyLength {
                    url: u.to_string(),
                    expected: expect_body,
                    got,
                });
            }
            out.extend_from_slice(&chunk);
        }
        if got != expect_body {
            return Err(HubError::BodyLength {
                url: u.to_string(),
                expected: expect_body,
                got,
            });
        }
        if whole {
            let lo = usize::try_from(start).unwrap_or(usize::MAX);
            let hi = usize::try_from(end + 1).unwrap_or(usize::MAX);
            if lo > hi || hi > out.len() {
                return Err(bad("range outside the object".into()));
            }
            out.truncate(hi);
            out.drain(..lo);
        }
        Ok(())
    }

    /// The whole file in memory, checked against its etag. Bytes that fail it are asked for
    /// again (metadata included: the etag may be what was corrupted), as a transient fault is,
    /// up to the retry policy's attempts; then the mismatch is reported.
    pub async fn download_bytes(
        &self,
        repo: &RepoId,
        rev: &str,
        path: &str,
    ) -> Result<(FileMetadata, Vec<u8>), HubError> {
        let mut attempt = 0u32;
        loop {
            let meta = self.file_metadata(repo, rev, path).await?;
            let data = if meta.size == 0 {
                Vec::new()
            } else {
                self.get_range(&meta, 0, None).await?
            };
            let mut d = Digest::new(&meta);
            d.update(&data);
            match d.check(&meta) {
                Ok(()) => return Ok((meta, data)),
                Err(e) if attempt + 1 < self.retry.max_attempts => {
                    tracing::warn!(url = %meta.location, error = %e, "download failed its digest; asking again");
                    tokio::time::sleep(self.retry.delay(attempt, None)).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Download a file to `dest` (via `dest.part`, resuming with `Range` after a cut), checked
    /// against its etag before the final rename.
    pub async fn download_to_file(
        &self,
        repo: &RepoId,
        rev: &str,
        path: &str,
        dest: &Path,
    ) -> Result<FileMetadata, HubError> {
        let meta = self.file_metadata(repo, rev, path).await?;
        let part = dest.with_extension("part");
        let io = |p: &Path| {
            let p = p.display().to_string();
            move |source| HubError::Io {
                path: p.clone(),
                source,
            }
        };
        let mut f = std::fs::File::create(&part).map_err(io(&part))?;
        self.fetch_into(&meta, &mut f, &part).await?;
        drop(f);
        std::fs::rename(&part, dest).map_err(io(dest))?;
        Ok(meta)
    }

    /// Write the bytes `meta` names into `f` (open for reading and writing; `label` names it in
    /// errors), hashing them as they are written, and return once they match the etag and are
    /// fsynced. A cut is resumed with `Range`; wrong-length or wrong-range answers start over.
    /// Bytes `f` already holds (a part file kept from a killed run) are re-read and hashed, never
    /// trusted: only the rest is requested, and if the whole then fails its digest, the download
    /// starts over from byte 0 (as it does, up to the retry policy's attempts, when bytes were
    /// corrupted on the way).
    pub async fn fetch_into(
        &self,
        meta: &FileMetadata,
        f: &mut std::fs::File,
        label: &Path,
    ) -> Result<(), HubError> {
        let io = |source| HubError::Io {
            path: label.display().to_string(),
            source,
        };
        let kept = f.metadata().map_err(io)?.len();
        let (mut have, mut digest) = if kept > 0 && kept <= meta.size {
            (kept, hash_prefix(meta, f, kept).map_err(io)?)
        } else {
            f.set_len(0).map_err(io)?;
            (0, Digest::new(meta))
        };
        std::io::Seek::seek(f, std::io::SeekFrom::Start(have)).map_err(io)?;
        let mut resumed = have > 0;
        let mut attempt = 0u32;
        loop {
            while have < meta.size {
                match self.download_from(meta, have, f, &mut digest, label).await {
                    Ok(n) => have = n,
                    Err((n, e)) => {
                        have = n;
                        if !e.is_transient_body() || attempt + 1 >= self.retry.max_attempts {
                            return Err(e);
                        }
                        if !matches!(e, HubError::Transport { .. }) {
                            // Wrong-length or wrong-range bytes may already be on disk: start over.
                            have = 0;
                            digest = Digest::new(meta);
                            f.set_len(0)
                                .and_then(|()| std::io::Seek::rewind(f))
                                .map_err(io)?;
                        }
                        tracing::warn!(url = %meta.location, error = %e, offset = have, "download cut; resuming");
                        tokio::time::sleep(self.retry.delay(attempt, None)).await;
                        attempt += 1;
                    }
                }
            }
            // fsync off the async thread: concurrent downloads must not queue behind it.
            let g = f.try_clone().map_err(io)?;
            tokio::task::spawn_blocking(move || g.sync_all())
                .await
                .map_err(|e| io(std::io::Error::other(e)))?
                .map_err(io)?;
            match std::mem::replace(&mut digest, Digest::new(meta)).check(meta) {
                Err(e) if resumed || attempt + 1 < self.retry.max_attempts => {
                    // The kept prefix was not the file's, or bytes were corrupted on the way:
                    // fetch it all again (a corrupting link is a transient fault too).
                    tracing::warn!(url = %meta.location, error = %e, "downloaded bytes failed their digest; downloading again");
                    if !resumed {
                        tokio::time::sleep(self.retry.delay(attempt, None)).await;
                        attempt += 1;
                    }
                    resumed = false;
                    have = 0;
                    f.set_len(0)
                        .and_then(|()| std::io::Seek::rewind(f))
                        .map_err(io)?;
                }
                other => return other,
            }
        }
    }

    /// One GET from `offset`; returns the new offset, or the offset reached with the error.
    async fn download_from(
        &self,
        meta: &FileMetadata,
        offset: u64,
        f: &mut std::fs::File,
        digest: &mut Digest,
        part: &Path,
    ) -> Result<u64, (u64, HubError)> {
        let u = &meta.location;
        let range = format!("bytes={offset}-");
        let r = self.send(&Method::GET, u, Idempotence::Idempotent, || {
            let rb = self.request(Method::GET, u);
            Ok(if offset > 0 {
                rb.header(RANGE, range.as_str())
            } else {
                rb
            })
        });
        let mut r = r.await.map_err(|e| (offset, e))?;
        let mut pos = offset;
        if offset > 0 {
            match r.status() {
                StatusCode::PARTIAL_CONTENT => {
                    let cr = header(r.headers(), CONTENT_RANGE.as_str()).unwrap_or_default();
                    if cr != format!("bytes {offset}-{}/{}", meta.size - 1, meta.size) {
                        return Err((
                            offset,
                            HubError::BadRange {
                                url: u.to_string(),
                                range,
                                detail: format!("`Content-Range: {cr}`"),
                            },
                        ));
                    }
                }
                StatusCode::OK => {
                    // Range ignored: start over from byte 0.
                    *digest = Digest::new(meta);
                    f.set_len(0)
                        .and_then(|()| std::io::Seek::rewind(f))
                        .map_err(|source| {
                            (
                                0,
                                HubError::Io {
                                    path: part.display().to_string(),
                                    source,
                                },
                            )
                        })?;
                    pos = 0;
                }
                s => {
                    return Err((
                        offset,
                        HubError::Protocol {
                            url: u.to_string(),
                            detail: format!("unexpected status {s} for a resumed download"),
                        },
                    ))
                }
            }
        }
        let remaining = meta.size - pos;
        if let Some(cl) = r
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
        {
            if cl != remaining {
                return Err((
                    pos,
                    HubError::BodyLength {
                        url: u.to_string(),
                        expected: remaining,
                        got: cl,
                    },
                ));
            }
        }
        loop {
            let chunk = match r.chunk().await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => {
                    return Err((
                        pos,
                        HubError::Transport {
                            url: u.to_string(),
                            detail: transport_detail(&e),
                            source: e,
                        },
                    ))
                }
            };
            if pos + chunk.len() as u64 > meta.size {
                // Too many bytes (e.g. a 206 that ships the whole object): nothing past `pos` is kept.
                return Err((
                    pos,
                    HubError::BodyLength {
                        url: u.to_string(),
                        expected: meta.size - offset,
                        got: pos + chunk.len() as u64 - offset,
                    },
                ));
            }
            f.write_all(&chunk).map_err(|source| {
                (
                    pos,
                    HubError::Io {
                        path: part.display().to_string(),
                        source,
                    },
                )
            })?;
            digest.update(&chunk);
            pos += chunk.len() as u64;
        }
        if pos < meta.size {
            return Err((
                pos,
                HubError::BodyLength {
                    url: u.to_string(),
                    expected: meta.size - offset,
                    got: pos - offset,
                },
            ));
        }
        Ok(pos)
    }
}

fn metadata_from(
    u: &Url,
    h: &HeaderMap,
    location: Url,
    redirect: bool,
) -> Result<FileMetadata, HubError> {
    let missing = |what: &str| HubError::Protocol {
        url: u.to_string(),
        detail: format!("no `{what}` header: not served by a Hugging Face Hub endpoint?"),
    };
    let commit = header(h, "x-repo-commit").ok_or_else(|| missing("X-Repo-Commit"))?;
    let linked = header(h, "x-linked-etag");
    let etag = linked
        .clone()
        .or_else(|| header(h, "etag"))
        .map(|e| unquote(&e))
        .ok_or_else(|| missing("ETag"))?;
    let size = header(h, "x-linked-size").or_else(|| {
        if redirect {
            None
        } else {
            header(h, "content-length")
        }
    });
    let size = size
        .and_then(|s| s.trim().parse::<u64>().ok())
        .ok_or_else(|| missing("X-Linked-Size or Content-Length"))?;
    Ok(FileMetadata {
        commit,
        etag,
        size,
        location,
        lfs: linked.is_some(),
    })
}
