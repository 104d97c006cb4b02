//! Write endpoints of the client (hub-protocol.md §6–§9): repo create, branch create/delete,
//! preupload, the NDJSON commit with `parentCommit` (HTTP 412 → [`HubError::HeadMoved`], never
//! retried; a lost response → [`HubError::CommitOutcomeUnknown`]), and `upload_files`, the whole
//! publishing flow (preupload → LFS → commit).

use std::io::Read as _;
use std::path::PathBuf;

use base64::Engine as _;
use bytes::Bytes;
use reqwest::Method;
use serde_json::json;
use sha2::Digest as _;

use super::{enc, transport_detail, HubClient, HubError, Idempotence, LfsObject};
use crate::protocol::{self, CommitResponse, PreuploadFile, PreuploadResult, RepoId};

/// Where the bytes of a file to upload are.
#[derive(Debug, Clone)]
pub enum UploadSource {
    /// In memory.
    Bytes(Bytes),
    /// A local file (streamed).
    File(PathBuf),
}

/// One file for [`HubClient::upload_files`].
#[derive(Debug, Clone)]
pub struct UploadFile {
    /// Repo-relative destination path.
    pub path: String,
    /// The content.
    pub source: UploadSource,
}

/// One line of an NDJSON commit.
#[derive(Debug, Clone)]
pub enum CommitOperation {
    /// A regular file with inline content (`file`, base64).
    Regular {
        /// Repo path.
        path: String,
        /// Content.
        content: Bytes,
    },
    /// An LFS file by oid (`lfsFile`); `size: None` copies an object the hub already has.
    Lfs {
        /// Repo path.
        path: String,
        /// SHA-256.
        sha256: String,
        /// Size, or `None` for a copy.
        size: Option<u64>,
    },
    /// `deletedFile`.
    DeleteFile {
        /// Repo path.
        path: String,
    },
    /// `deletedFolder` (sent with a trailing `/`).
    DeleteFolder {
        /// Folder path.
        path: String,
    },
}

/// A commit to send.
#[derive(Debug, Clone, Default)]
pub struct CommitRequest {
    /// Title (non-empty).
    pub summary: String,
    /// Body.
    pub description: String,
    /// The head this commit must apply on (412 otherwise).
    pub parent_commit: Option<String>,
    /// The operations, in order.
    pub operations: Vec<CommitOperation>,
    /// Open a pull request (`refs/pr/N`) instead of moving the branch.
    pub create_pr: bool,
}

fn check_path(p: &str) -> Result<(), HubError> {
    if names::check_repo_path(p).is_ok() {
        Ok(())
    } else {
        Err(HubError::Config(format!(
            "invalid repo path `{}`",
            protocol::printable(p)
        )))
    }
}

impl CommitRequest {
    fn ndjson(&self) -> Result<Vec<u8>, HubError> {
        let mut header = json!({"summary": self.summary, "description": self.description});
        if let Some(p) = &self.parent_commit {
            if p.len() < 5 || p.len() > 40 || !p.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(HubError::Config(format!(
                    "parent commit `{}` is not 5-40 hex characters",
                    protocol::printable(p)
                )));
            }
            header["parentCommit"] = json!(p);
        }
        let mut lines = vec![json!({"key": "header", "value": header})];
        for op in &self.operations {
            lines.push(match op {
                CommitOperation::Regular { path, content } => {
                    check_path(path)?;
                    json!({"key": "file", "value": {"content": base64::engine::general_purpose::STANDARD.encode(content), "path": path, "encoding": "base64"}})
                }
                CommitOperation::Lfs { path, sha256, size } => {
                    check_path(path)?;
                    let mut v = json!({"path": path, "algo": "sha256", "oid": sha256});
                    if let Some(s) = size {
                        v["size"] = json!(s);
                    }
                    json!({"key": "lfsFile", "value": v})
                }
                CommitOperation::DeleteFile { path } => {
                    check_path(path)?;
                    json!({"key": "deletedFile", "value": {"path": path}})
                }
                CommitOperation::DeleteFolder { path } => {
                    let p = path.trim_end_matches('/');
                    check_path(p)?;
                    json!({"key": "deletedFolder", "value": {"path": format!("{p}/")}})
                }
            });
        }
        let mut out = Vec::new();
        for l in lines {
            out.extend(serde_json::to_vec(&l).map_err(|e| HubError::Config(e.to_string()))?);
            out.push(b'\n');
        }
        Ok(out)
    }
}

/// With `exist_ok` a create is idempotent (a repeat of an applied one answers 409, which is fine),
/// so it is retried like a read; without, only when nothing was sent.
fn idempotence(exist_ok: bool) -> Idempotence {
    if exist_ok {
        Idempotence::Idempotent
    } else {
        Idempotence::ConnectOnly
    }
}

/// The bytes of one preupload request for `batch` (what [`HubClient::preupload`] sends).
pub fn preupload_body(batch: &[PreuploadFile]) -> Result<Vec<u8>, HubError> {
    serde_json::to_vec(&json!({ "files": batch })).map_err(|e| HubError::Config(e.to_string()))
}

impl HubClient {
    /// Create a repo; with `exist_ok` an existing one is fine (and the call is retried like a
    /// read). Returns its URL.
    pub async fn create_repo(
        &self,
        repo: &RepoId,
        private: bool,
        exist_ok: bool,
    ) -> Result<String, HubError> {
        let u = self.url(&format!("{}/api/repos/create", self.endpoint()))?;
        let kind = match repo.kind {
            protocol::RepoType::Model => "model",
            protocol::RepoType::Dataset => "dataset",
            protocol::RepoType::Space => "space",
        };
        let body = serde_json::to_vec(&json!({"name": repo.name, "organization": repo.owner, "type": kind, "private": private}))
            .map_err(|e| HubError::Config(e.to_string()))?;
        let r = self
            .send(&Method::POST, &u, idempotence(exist_ok), || {
                Ok(self
                    .request(Method::POST, &u)
                    .header("content-type", "application/json")
                    .body(body.clone()))
            })
            .await;
        let (r, conflict) = match r {
            Ok(r) => (r, false),
            Err(HubError::Http { status: 409, .. }) if exist_ok => {
                return Ok(format!("{}/{repo}", self.endpoint()))
            }
            Err(e) => return Err(e),
        };
        let _ = conflict;
        let bytes = super::body_bytes(&u, r).await?;
        super::answers::created_repo_url(u.as_str(), &bytes)
    }

    /// Create `branch` at `starting_point` (default: `main`); with `exist_ok` a 409 is fine (and
    /// the call is retried like a read).
    pub async fn create_branch(
        &self,
        repo: &RepoId,
        branch: &str,
        starting_point: Option<&str>,
        exist_ok: bool,
    ) -> Result<(), HubError> {
        let u = self.api_url(repo, &format!("/branch/{}", enc(branch)))?;
        let body = match starting_point {
            Some(s) => json!({"startingPoint": s}),
            None => json!({}),
        };
        let body = serde_json::to_vec(&body).map_err(|e| HubError::Config(e.to_string()))?;
        match self
            .send(&Method::POST, &u, idempotence(exist_ok), || {
                Ok(self
                    .request(Method::POST, &u)
                    .header("content-type", "application/json")
                    .body(body.clone()))
            })
            .await
        {
            Ok(_) => Ok(()),
            Err(HubError::Http { status: 409, .. }) if exist_ok => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Delete `branch`.
    pub async fn delete_branch(&self, repo: &RepoId, branch: &str) -> Result<(), HubError> {
        let u = self.api_url(repo, &format!("/branch/{}", enc(branch)))?;
        self.send(&Method::DELETE, &u, Idempotence::Idempotent, || {
            Ok(self.request(Method::DELETE, &u))
        })
        .await
        .map(|_| ())
    }

    /// Ask the hub how each file must be uploaded (256 per call).
    pub async fn preupload(
        &self,
        repo: &RepoId,
        rev: &str,
        files: &[PreuploadFile],
        create_pr: bool,
    ) -> Result<Vec<PreuploadResult>, HubError> {
        let u = self.api_url(
            repo,
            &format!(
                "/preupload/{}{}",
                enc(rev),
                if create_pr { "?create_pr=1" } else { "" }
            ),
        )?;
        let mut out = Vec::new();
        for batch in files.chunks(256) {
            let body = preupload_body(batch)?;
            let r = self
                .send(&Method::POST, &u, Idempotence::Idempotent, || {
                    Ok(self
                        .request(Method::POST, &u)
                        .header("content-type", "application/json")
                        .body(body.clone()))
                })
                .await?;
            let bytes = super::body_bytes(&u, r).await?;
            out.extend(super::answers::preupload_results(u.as_str(), &bytes)?);
        }
        Ok(out)
    }

    /// Send one NDJSON commit to `rev`. A 412 (stale `parent_commit`) is [`HubError::HeadMoved`];
    /// the POST is retried only when the connection could not be opened, and a response lost after
    /// sending is [`HubError::CommitOutcomeUnknown`].
    pub async fn commit(
        &self,
        repo: &RepoId,
        rev: &str,
        req: &CommitRequest,
    ) -> Result<CommitResponse, HubError> {
        let u = self.api_url(
            repo,
            &format!(
                "/commit/{}{}",
                enc(rev),
                if req.create_pr { "?create_pr=1" } else { "" }
            ),
        )?;
        let body = Bytes::from(req.ndjson()?);
        let r = self
            .send(&Method::POST, &u, Idempotence::ConnectOnly, || {
                Ok(self
                    .request(Method::POST, &u)
                    .header("content-type", "application/x-ndjson")
                    .body(body.clone()))
            })
            .await;
        let r = match r {
            Ok(r) => r,
            Err(HubError::Http {
                status: 412,
                request_id,
                message,
                ..
            }) => {
                return Err(HubError::HeadMoved {
                    url: u.to_string(),
                    revision: rev.to_string(),
                    parent: req.parent_commit.clone().unwrap_or_default(),
                    request_id,
                    message,
                })
            }
            Err(HubError::Transport {
                url,
                detail,
                source,
            }) if !source.is_connect() => {
                return Err(HubError::CommitOutcomeUnknown { url, detail })
            }
            Err(e) => return Err(e),
        };
        if !r.status().is_success() {
            return Err(self.http_error(&Method::POST, &u, r).await);
        }
        let bytes = r
            .bytes()
            .await
            .map_err(|e| HubError::CommitOutcomeUnknown {
                url: u.to_string(),
                detail: transport_detail(&e),
            })?;
        super::answers::commit_answer(u.as_str(), &bytes)
    }

    /// Publish files to `branch` in one commit: preupload, LFS upload of what the hub lacks,
    /// then the commit (guarded by `parent_commit` when given; an unknown outcome is resolved by
    /// [`HubClient::commit_guarded`]). Files whose remote oid at the
    /// branch already equals the local one are left out; when nothing differs no commit is made
    /// and the branch head is returned.
    pub async fn upload_files(
        &self,
        repo: &RepoId,
        branch: &str,
        files: &[UploadFile],
        summary: &str,
        parent_commit: Option<&str>,
    ) -> Result<CommitResponse, HubError> {
        let mut pre = Vec::new();
        let mut digests = Vec::new();
        for f in files {
            check_path(&f.path)?;
            let (size, sample, sha) = describe(&f.source)?;
            pre.push(PreuploadFile {
                path: f.path.clone(),
                sample: base64::engine::general_purpose::STANDARD.encode(&sample),
                size,
            });
            digests.push((size, sha));
        }
        let modes = self.preupload(repo, branch, &pre, false).await?;
        let mut lfs = Vec::new();
        let mut ops = Vec::new();
        for (f, (size, sha)) in files.iter().zip(&digests) {
            let mode =
                modes
                    .iter()
                    .find(|m| m.path == f.path)
                    .ok_or_else(|| HubError::Protocol {
                        url: self.endpoint().to_string(),
                        detail: format!("preupload answer lacks `{}`", f.path),
                    })?;
            if mode.should_ignore {
                continue;
            }
            if mode.upload_mode == "lfs" {
                if mode.oid.as_deref() == Some(sha.as_str()) {
                    continue; // already there with this content
                }
                lfs.push(LfsObject {
                    oid: sha.clone(),
                    size: *size,
                    source: f.source.clone(),
                });
                ops.push(CommitOperation::Lfs {
                    path: f.path.clone(),
                    sha256: sha.clone(),
                    size: Some(*size),
                });
            } else {
                let content = match &f.source {
                    UploadSource::Bytes(b) => b.clone(),
                    UploadSource::File(p) => {
                        Bytes::from(std::fs::read(p).map_err(|source| HubError::Io {
                            path: p.display().to_string(),
                            source,
                        })?)
                    }
                };
                if mode.oid.as_deref() == Some(protocol::git_blob_sha1(&content).as_str()) {
                    continue;
                }
                ops.push(CommitOperation::Regular {
                    path: f.path.clone(),
                    content,
                });
            }
        }
        if ops.is_empty() {
            // Nothing differs from the branch: no commit (as huggingface_hub does); report the head.
            let head = self
                .revision_info(repo, branch, false)
                .await?
                .sha
                .unwrap_or_default();
            return Ok(CommitResponse {
                success: true,
                commit_url: format!("{}/{repo}/commit/{head}", self.endpoint()),
                commit_oid: head,
                pull_request_url: None,
            });
        }
        self.upload_lfs(repo, Some(branch), &lfs).await?;
        let req = CommitRequest {
            summary: summary.into(),
            description: String::new(),
            parent_commit: parent_commit.map(String::from),
            operations: ops,
            create_pr: false,
        };
        self.commit_guarded(repo, branch, &req).await
    }
}

/// Size, first ≤ 512 bytes, and SHA-256 of a source (files streamed).
pub(crate) fn describe(src: &UploadSource) -> Result<(u64, Vec<u8>, String), HubError> {
    match src {
        UploadSource::Bytes(b) => Ok((
            b.len() as u64,
            b.get(..b.len().min(512)).unwrap_or(&[]).to_vec(),
            protocol::sha256_hex(b),
        )),
        UploadSource::File(p) => {
            let io = |source| HubError::Io {
                path: p.display().to_string(),
                source,
            };
            let mut f = std::fs::File::open(p).map_err(io)?;
            let mut h = sha2::Sha256::new();
            let mut buf = vec![0u8; 1 << 20];
            let mut sample = Vec::new();
            let mut n_total = 0u64;
            loop {
                let n = f.read(&mut buf).map_err(io)?;
                if n == 0 {
                    break;
                }
                let chunk = buf.get(..n).unwrap_or(&[]);
                if sample.len() < 512 {
                    sample
                        .extend_from_slice(chunk.get(..(512 - sample.len()).min(n)).unwrap_or(&[]));
                }
                h.update(chunk);
                n_total += n as u64;
            }
            Ok((n_total, sample, hex::encode(h.finalize())))
        }
    }
}
