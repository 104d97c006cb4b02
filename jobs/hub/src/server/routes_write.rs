//! Write routes (hub-protocol.md §6–§9): repo create/delete, branch create/delete, preupload, and
//! the NDJSON commit. A commit is applied under the repo's lock: objects and the commit object are
//! written first, then `refs.json` is replaced atomically (the only commit point), so concurrent
//! commits serialise and a crash leaves either the old or the new head, never a mixture.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};

use super::routes_read::commit_at;
use super::store::{self, FileEntry, RevKind};
use super::{
    bad_request, check_rev, hub_error, internal, read_body, repo_not_found, AppState, FaultMode,
    Req,
};
use crate::protocol::{self, RepoId, RepoType};

#[derive(Deserialize)]
struct CreateBody {
    name: String,
    #[serde(default)]
    organization: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    private: Option<bool>,
    #[serde(default)]
    visibility: Option<String>,
}

fn parse_repo_body(st: &AppState, body: &[u8]) -> Result<(RepoId, CreateBody), Response> {
    let b: CreateBody = serde_json::from_slice(body)
        .map_err(|e| bad_request(&format!("invalid repo request body: {e}")))?;
    let kind = match b.kind.as_deref() {
        None => RepoType::Model,
        Some(k) => RepoType::from_singular(k).ok_or_else(|| {
            bad_request(&format!("unknown repo type `{}`", protocol::printable(k)))
        })?,
    };
    let (owner, name) = match (&b.organization, b.name.split_once('/')) {
        (Some(o), _) => (o.clone(), b.name.clone()),
        (None, Some((o, n))) => (o.to_string(), n.to_string()),
        (None, None) => (st.opts.user.clone(), b.name.clone()),
    };
    let repo = RepoId::from_parts(kind, &owner, &name).map_err(|e| bad_request(&e))?;
    Ok((repo, b))
}

pub(crate) async fn create_repo(st: &Arc<AppState>, req: Req) -> Response {
    if let Err(r) = st.require_write(&req.headers) {
        return r;
    }
    let base = st.base_url(&req.headers);
    let body = match read_body(req.body, 64 * 1024).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let (repo, b) = match parse_repo_body(st, &body) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let private = b.private.unwrap_or(false) || b.visibility.as_deref() == Some("private");
    let url = format!("{base}/{repo}");
    let lock = st.store.repo_lock(&repo);
    let _g = lock.lock().await;
    let created = st.store.initial_files().and_then(|files| {
        st.store
            .create_repo(&repo, private, files, None, "initial commit")
    });
    match created {
        Ok(true) => {
            axum::Json(json!({"url": url, "name": repo.id(), "id": repo.id()})).into_response()
        }
        Ok(false) => (
            StatusCode::CONFLICT,
            axum::Json(json!({"error": "You already created this model repo", "url": url})),
        )
            .into_response(),
        Err(e) => internal("creating a repo", &e),
    }
}

pub(crate) async fn delete_repo(st: &Arc<AppState>, req: Req) -> Response {
    if let Err(r) = st.require_write(&req.headers) {
        return r;
    }
    let body = match read_body(req.body, 64 * 1024).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let (repo, _) = match parse_repo_body(st, &body) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let lock = st.store.repo_lock(&repo);
    let _g = lock.lock().await;
    match st.store.delete_repo(&repo) {
        Ok(true) => axum::Json(json!({})).into_response(),
        Ok(false) => repo_not_found(&repo),
        Err(e) => internal("deleting a repo", &e),
    }
}

pub(crate) async fn branch(st: &Arc<AppState>, req: Req, repo: &RepoId, name: &str) -> Response {
    if let Err(r) = st
        .require_write(&req.headers)
        .and_then(|()| st.readable_repo(repo, &req.headers).map(|_| ()))
    {
        return r;
    }
    let delete = req.method == axum::http::Method::DELETE;
    let body = match read_body(req.body, 64 * 1024).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let lock = st.store.repo_lock(repo);
    let _g = lock.lock().await;
    let mut refs = match st.store.read_refs(repo) {
        Ok(r) => r,
        Err(e) => return internal("reading refs", &e),
    };
    if delete {
        if name == "main" {
            return hub_error(StatusCode::FORBIDDEN, None, "Cannot delete refs/heads/main");
        }
        if refs.heads.remove(name).is_none() {
            return hub_error(
                StatusCode::NOT_FOUND,
                Some("RevisionNotFound"),
                &format!("Invalid rev id: {}", protocol::printable(name)),
            );
        }
    } else {
        if names::check_ref_name(name).is_err() {
            return bad_request("Invalid reference for a branch");
        }
        if refs.heads.contains_key(name) {
            return hub_error(
                StatusCode::CONFLICT,
                None,
                &format!("Reference refs/heads/{name} already exists"),
            );
        }
        let start = serde_json::from_slice::<Value>(&body).ok().and_then(|v| {
            v.get("startingPoint")
                .and_then(Value::as_str)
                .map(String::from)
        });
        let start = start.unwrap_or_else(|| "main".into());
        let commit = match commit_at(st, repo, &start) {
            Ok(c) => c,
            Err(r) => return r,
        };
        refs.heads.insert(name.to_string(), commit.id.clone());
    }
    match st.store.write_refs(repo, &refs) {
        Ok(()) => axum::Json(json!({})).into_response(),
        Err(e) => internal("writing refs", &e),
    }
}

fn repo_text(st: &AppState, files: &BTreeMap<String, FileEntry>, path: &str) -> Option<String> {
    let f = files.get(path).filter(|f| f.lfs.is_none())?;
    st.store
        .read_git_object(&f.oid)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
}

fn ignored(gitignore: &str, path: &str) -> bool {
    gitignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .any(|pat| match pat.strip_suffix('/') {
            Some(dir) => {
                path.split('/')
                    .rev()
                    .skip(1)
                    .any(|c| protocol::glob_match(dir, c))
                    || path.starts_with(&format!("{dir}/"))
            }
            None => protocol::glob_match(pat, path),
        })
}

#[derive(Deserialize)]
struct PreuploadBody {
    files: Vec<protocol::PreuploadFile>,
    #[serde(default, rename = "gitIgnore")]
    git_ignore: Option<String>,
}

pub(crate) async fn preupload(st: &Arc<AppState>, req: Req, repo: &RepoId, rev: &str) -> Response {
    if let Err(r) = st
        .require_write(&req.headers)
        .and_then(|()| st.readable_repo(repo, &req.headers).map(|_| ()))
    {
        return r;
    }
    let commit = match commit_at(st, repo, rev) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let body = match read_body(req.body, 16 * 1024 * 1024).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let b: PreuploadBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => return bad_request(&format!("invalid preupload body: {e}")),
    };
    let cap = if st.faults.armed(FaultMode::PreuploadCap) {
        256
    } else {
        1000
    };
    if b.files.len() > cap {
        st.faults.fire(FaultMode::PreuploadCap);
        return bad_request(&format!(
            "too many files in one preupload call (at most {cap})"
        ));
    }
    let attrs = repo_text(st, &commit.files, ".gitattributes")
        .unwrap_or_else(|| store::DEFAULT_GITATTRIBUTES.to_string());
    let patterns = protocol::lfs_patterns(&attrs);
    let gitignore = b
        .git_ignore
        .or_else(|| repo_text(st, &commit.files, ".gitignore"))
        .unwrap_or_default();
    let mut out = Vec::new();
    for f in &b.files {
        if names::check_repo_path(&f.path).is_err() {
            return bad_request(&format!("invalid path `{}`", protocol::printable(&f.path)));
        }
        let sample = base64::engine::general_purpose::STANDARD
            .decode(&f.sample)
            .unwrap_or_default();
        let remote = commit.files.get(&f.path);
        let lfs = remote.is_some_and(|r| r.lfs.is_some())
            || store::wants_lfs(&f.path, f.size, &sample, &patterns);
        out.push(json!({
            "path": f.path,
            "uploadMode": if lfs { "lfs" } else { "regular" },
            "shouldIgnore": ignored(&gitignore, &f.path),
            "oid": remote.map(|r| r.etag().to_string()),
        }));
    }
    axum::Json(json!({ "files": out, "commitOid": commit.id })).into_response()
}

enum Op {
    File {
        path: String,
        data: Vec<u8>,
    },
    Lfs {
        path: String,
        oid: String,
        size: Option<u64>,
    },
    DelFile(String),
    DelFolder(String),
}

struct Header {
    summary: String,
    description: String,
    parent: Option<String>,
}

fn parse_ndjson(body: &[u8], max_line: usize) -> Result<(Header, Vec<Op>), Response> {
    let mut header = None;
    let mut ops = Vec::new();
    for (i, line) in body.split(|c| *c == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if line.len() > max_line {
            return Err(hub_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                None,
                &format!("commit line {} is longer than {max_line} bytes", i + 1),
            ));
        }
        let v: Value = serde_json::from_slice(line)
            .map_err(|e| bad_request(&format!("commit line {}: invalid JSON: {e}", i + 1)))?;
        let key = v.get("key").and_then(Value::as_str).unwrap_or("");
        let val = v.get("value").cloned().unwrap_or(Value::Null);
        let s = |k: &str| val.get(k).and_then(Value::as_str).map(String::from);
        let path = || -> Result<String, Response> {
            let p = s("path")
                .ok_or_else(|| bad_request(&format!("commit line {}: missing `path`", i + 1)))?;
            if names::check_repo_path(&p).is_err() {
                return Err(bad_request(&format!(
                    "commit line {}: invalid path `{}`",
                    i + 1,
                    protocol::printable(&p)
                )));
            }
            Ok(p)
        };
        match key {
            "header" if header.is_none() && ops.is_empty() => {
                header = Some(Header {
                    summary: s("summary").unwrap_or_default(),
                    description: s("description").unwrap_or_default(),
                    parent: s("parentCommit"),
                })
            }
            "file" => {
                let p = path()?;
                let content = s("content").unwrap_or_default();
                let data = match s("encoding").as_deref() {
                    Some("utf-8") => content.into_bytes(),
                    _ => base64::engine::general_purpose::STANDARD
                        .decode(content.as_bytes())
                        .map_err(|_| {
                            bad_request(&format!("commit line {}: `content` is not base64", i + 1))
                        })?,
                };
                ops.push(Op::File { path: p, data });
            }
            "lfsFile" => {
                let p = path()?;
                let oid = s("oid").unwrap_or_default();
                if !names::is_sha256_lower(&oid) || s("algo").is_some_and(|a| a != "sha256") {
                    return Err(bad_request(&format!(
                        "commit line {}: `oid` must be a sha256 hex digest",
                        i + 1
                    )));
                }
                ops.push(Op::Lfs {
                    path: p,
                    oid,
                    size: val.get("size").and_then(Value::as_u64),
                });
            }
            "deletedFile" => ops.push(Op::DelFile(path()?)),
            "deletedFolder" => {
                let p = s("path").unwrap_or_default();
                let p = p.trim_end_matches('/').to_string();
                if names::check_repo_path(&p).is_err() {
                    return Err(bad_request(&format!(
                        "commit line {}: invalid folder path",
                        i + 1
                    )));
                }
                ops.push(Op::DelFolder(p));
            }
            other => {
                return Err(bad_request(&format!(
                    "commit line {}: unexpected key `{}`",
                    i + 1,
                    protocol::printable(other)
                )))
            }
        }
    }
    let header = header.ok_or_else(|| bad_request("commit body has no `header` line"))?;
    Ok((header, ops))
}

pub(crate) async fn commit(st: &Arc<AppState>, req: Req, repo: &RepoId, rev: &str) -> Response {
    let path = format!("/api/{}/commit/{rev}", repo.id());
    let (meta, ops) = match commit_request(st, req, repo, rev).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    if st.faults.armed(FaultMode::BinaryInline) {
        let binary = |op: &Op| matches!(op, Op::File { data, .. } if data.contains(&0));
        if ops.iter().any(binary) && st.faults.fire(FaultMode::BinaryInline).is_some() {
            return bad_request("Binary files are not allowed as regular files: upload them with LFS (preupload's `uploadMode`)");
        }
    }
    if let Some(ms) = st.faults.fire_where(FaultMode::Commit504, &path, |_| true) {
        return commit_later(st, repo, rev, meta, ops, ms).await;
    }
    match apply_commit(st, repo, rev, &meta, ops).await {
        Ok((id, pr_url)) => commit_response(st, repo, &meta.base, &id, pr_url),
        Err(r) => r,
    }
}

/// Under the repo's lock: the target, the operations, the commit point; the new id and PR URL.
async fn apply_commit(
    st: &AppState,
    repo: &RepoId,
    rev: &str,
    meta: &CommitMeta,
    ops: Vec<Op>,
) -> Result<(String, Value), Response> {
    let lock = st.store.repo_lock(repo);
    let _guard = lock.lock().await;
    let target = commit_target(st, repo, rev, meta)?;
    let files = apply_ops(st, repo, &target.head, ops)?;
    commit_point(st, repo, files, target, meta)
}

/// The `commit-504` fault: the commit is answered 504 after `ms` (the Hub times a commit request
/// out at 60 s), and lands only once the client has next asked the branch — so that ask still
/// sees the old head, as on the Hub, where the commit can land after the timeout.
async fn commit_later(
    st: &Arc<AppState>,
    repo: &RepoId,
    rev: &str,
    meta: CommitMeta,
    ops: Vec<Op>,
    ms: u64,
) -> Response {
    let asked = st.branch_asks.load(std::sync::atomic::Ordering::SeqCst);
    let (st2, repo2, rev2) = (st.clone(), repo.clone(), rev.to_owned());
    tokio::spawn(async move {
        loop {
            let next = st2.branch_asked.notified();
            if st2.branch_asks.load(std::sync::atomic::Ordering::SeqCst) > asked {
                break;
            }
            next.await;
        }
        if let Err(r) = apply_commit(&st2, &repo2, &rev2, &meta, ops).await {
            tracing::warn!(status = %r.status(), "the deferred commit of `commit-504` was refused");
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    hub_error(
        StatusCode::GATEWAY_TIMEOUT,
        None,
        "injected fault: the commit request timed out (it lands later)",
    )
}

/// A commit request's header and its query and host facts, carried from parsing to the refs.
struct CommitMeta {
    header: Header,
    create_pr: bool,
    base: String,
}

/// The request: write access, a readable repo, a valid rev, the NDJSON body and `parentCommit`.
async fn commit_request(
    st: &Arc<AppState>,
    req: Req,
    repo: &RepoId,
    rev: &str,
) -> Result<(CommitMeta, Vec<Op>), Response> {
    st.require_write(&req.headers)
        .and_then(|()| st.readable_repo(repo, &req.headers).map(|_| ()))?;
    check_rev(rev)?;
    let create_pr = req.q_bool("create_pr");
    let base = st.base_url(&req.headers);
    let body = read_body(req.body, st.opts.max_body).await?;
    let (header, ops) = parse_ndjson(&body, st.opts.max_line)?;
    if let Some(p) = &header.parent {
        if p.len() < 5 || p.len() > 40 || !p.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad_request("`parentCommit` must be 5 to 40 hex characters"));
        }
    }
    let meta = CommitMeta {
        header,
        create_pr,
        base,
    };
    Ok((meta, ops))
}

/// What a commit builds on, read under the repo's lock: the refs, the rev's kind, the head.
struct Target {
    refs: store::RefsFile,
    kind: RevKind,
    head: String,
}

/// Under the lock: the rev resolved to a branch head (or PR head) and the `parentCommit` guard.
fn commit_target(
    st: &AppState,
    repo: &RepoId,
    rev: &str,
    meta: &CommitMeta,
) -> Result<Target, Response> {
    let refs = match st.store.read_refs(repo) {
        Ok(r) => r,
        Err(e) => return Err(internal("reading refs", &e)),
    };
    let kind = match st.store.resolve_rev(repo, rev) {
        Ok(Some((_, k))) => k,
        Ok(None) => {
            return Err(hub_error(
                StatusCode::NOT_FOUND,
                Some("RevisionNotFound"),
                &format!("Invalid rev id: {}", protocol::printable(rev)),
            ))
        }
        Err(e) => return Err(internal("resolving a revision", &e)),
    };
    let head = match (&kind, meta.create_pr) {
        (RevKind::Branch(b), _) => refs.heads.get(b).cloned(),
        (RevKind::Pr(n), false) => refs.prs.get(n).cloned(),
        _ => None,
    };
    let Some(head) = head else {
        return Err(hub_error(
            StatusCode::NOT_FOUND,
            Some("RevisionNotFound"),
            &format!(
                "cannot commit to `{}`: not a branch",
                protocol::printable(rev)
            ),
        ));
    };
    if let Some(p) = &meta.header.parent {
        if !head.starts_with(&p.to_ascii_lowercase()) {
            return Err(hub_error(
                StatusCode::PRECONDITION_FAILED,
                None,
                "The branch was updated since you opened this page. Please refresh and try again.",
            ));
        }
    }
    Ok(Target { refs, kind, head })
}

/// The new tree: the head commit's files with every operation applied, new LFS paths tracked.
fn apply_ops(
    st: &AppState,
    repo: &RepoId,
    head: &str,
    ops: Vec<Op>,
) -> Result<BTreeMap<String, FileEntry>, Response> {
    let parent = match st.store.read_commit(repo, head) {
        Ok(Some(c)) => c,
        Ok(None) => {
            return Err(internal(
                "reading the head commit",
                &std::io::Error::other("missing commit object"),
            ))
        }
        Err(e) => return Err(internal("reading the head commit", &e)),
    };
    let mut files = parent.files.clone();
    let mut lfs_paths = Vec::new();
    for op in ops {
        apply_op(st, &mut files, &mut lfs_paths, op)?;
    }
    if let Err(e) = track_lfs_paths(st, &mut files, &lfs_paths) {
        return Err(internal("updating .gitattributes", &e));
    }
    Ok(files)
}

/// One operation applied to `files` (an LFS path also noted in `lfs_paths`).
fn apply_op(
    st: &AppState,
    files: &mut BTreeMap<String, FileEntry>,
    lfs_paths: &mut Vec<String>,
    op: Op,
) -> Result<(), Response> {
    match op {
        Op::File { path, data } => {
            if data.len() as u64 > store::MAX_REGULAR_SIZE {
                return Err(bad_request("Your push was rejected because it contains files larger than 10 MiB. Please use LFS for large files"));
            }
            if let Err(e) = st.store.put_git_object(&data) {
                return Err(internal("storing a file object", &e));
            }
            files.insert(path, FileEntry::regular(&data));
        }
        Op::Lfs { path, oid, size } => {
            let Some(actual) = st.store.lfs_size(&oid) else {
                return Err(bad_request(&format!(
                    "LFS object {oid} for `{path}` was never uploaded"
                )));
            };
            if size.is_some_and(|s| s != actual) {
                return Err(bad_request(&format!(
                    "LFS object {oid} for `{path}` has size {actual}, not {}",
                    size.unwrap_or(0)
                )));
            }
            lfs_paths.push(path.clone());
            files.insert(path, FileEntry::lfs(&oid, actual));
        }
        Op::DelFile(path) => {
            if files.remove(&path).is_none() {
                return Err(hub_error(
                    StatusCode::NOT_FOUND,
                    Some("EntryNotFound"),
                    &format!("A file with this name doesn't exist: {path}"),
                ));
            }
        }
        Op::DelFolder(path) => {
            let prefix = format!("{path}/");
            let before = files.len();
            files.retain(|p, _| !p.starts_with(&prefix));
            if files.len() == before {
                return Err(hub_error(
                    StatusCode::NOT_FOUND,
                    Some("EntryNotFound"),
                    &format!("A folder with this name doesn't exist: {path}"),
                ));
            }
        }
    }
    Ok(())
}

/// The commit point: the commit object, then `refs.json`; the new id and the PR URL (or null).
fn commit_point(
    st: &AppState,
    repo: &RepoId,
    files: BTreeMap<String, FileEntry>,
    target: Target,
    meta: &CommitMeta,
) -> Result<(String, Value), Response> {
    let Target {
        mut refs,
        kind,
        head,
    } = target;
    let c = st.store.make_commit(
        files,
        Some(&head),
        &meta.header.summary,
        &meta.header.description,
        None,
    );
    if let Err(e) = st.store.write_commit(repo, &c) {
        return Err(internal("writing a commit", &e));
    }
    let base = &meta.base;
    let mut pr_url = Value::Null;
    match (&kind, meta.create_pr) {
        (_, true) => {
            let n = refs.prs.keys().next_back().map_or(1, |n| n + 1);
            refs.prs.insert(n, c.id.clone());
            pr_url = json!(format!("{base}/{repo}/discussions/{n}"));
        }
        (RevKind::Pr(n), false) => {
            refs.prs.insert(*n, c.id.clone());
        }
        (RevKind::Branch(b), false) => {
            refs.heads.insert(b.clone(), c.id.clone());
        }
        _ => {}
    }
    if let Err(e) = st.store.write_refs(repo, &refs) {
        return Err(internal("writing refs", &e));
    }
    Ok((c.id, pr_url))
}

/// The response, after the lock is released (or, under an injected fault, a dropped body).
fn commit_response(st: &AppState, repo: &RepoId, base: &str, id: &str, pr_url: Value) -> Response {
    let body = json!({"success": true, "commitOid": id, "commitUrl": format!("{base}/{repo}/commit/{id}"), "pullRequestUrl": pr_url, "hookOutput": ""});
    if st.faults.fire(FaultMode::DropAfterCommit).is_some() {
        let items: Vec<Result<Bytes, std::io::Error>> = vec![Err(std::io::Error::other(
            "injected fault: response dropped after commit",
        ))];
        let len = body.to_string().len();
        let mut r = (
            StatusCode::OK,
            Body::from_stream(futures_util::stream::iter(items)),
        )
            .into_response();
        if let Ok(v) = HeaderValue::from_str(&len.to_string()) {
            r.headers_mut().insert("content-length", v);
        }
        return r;
    }
    axum::Json(body).into_response()
}

/// The platform-managed `.gitattributes`: every LFS path not covered by an existing `filter=lfs`
/// pattern is appended as its own line (paths with whitespace are left alone).
fn track_lfs_paths(
    st: &AppState,
    files: &mut BTreeMap<String, FileEntry>,
    lfs_paths: &[String],
) -> std::io::Result<()> {
    let mut text = repo_text(st, files, ".gitattributes").unwrap_or_default();
    let patterns = protocol::lfs_patterns(&text);
    let mut changed = false;
    for p in lfs_paths {
        if p.chars().any(char::is_whitespace)
            || patterns.iter().any(|pat| protocol::glob_match(pat, p))
        {
            continue;
        }
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("{p} filter=lfs diff=lfs merge=lfs -text\n"));
        changed = true;
    }
    if changed {
        st.store.put_git_object(text.as_bytes())?;
        files.insert(".gitattributes".into(), FileEntry::regular(text.as_bytes()));
    }
    Ok(())
}
