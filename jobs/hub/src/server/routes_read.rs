//! Read routes (hub-protocol.md §3–§6, §9): resolve (HEAD/GET with single Range), the CDN origin,
//! repo/revision info, paged tree listing, paths-info, refs, commit history and repo listing.
//! File bodies pass through the body-level fault modes here.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use percent_encoding::utf8_percent_encode;
use serde_json::{json, Value};
use sha1::Digest as _;

use super::store::{Commit, FileEntry};
use super::{bad_request, check_rev, flips, hub_error, internal, AppState, FaultMode, Req};
use crate::protocol::{self, RepoId, RepoType};

pub(crate) fn enc(s: &str) -> String {
    utf8_percent_encode(s, protocol::QUOTE_ALL).to_string()
}

fn set(h: &mut HeaderMap, k: &'static str, v: &str) {
    if let Ok(v) = HeaderValue::from_str(v) {
        h.insert(k, v);
    }
}

/// Resolve a revision and read its commit, or the Hub's 404 `RevisionNotFound`.
pub(crate) fn commit_at(st: &AppState, repo: &RepoId, rev: &str) -> Result<Arc<Commit>, Response> {
    check_rev(rev)?;
    let not_found = || {
        hub_error(
            StatusCode::NOT_FOUND,
            Some("RevisionNotFound"),
            &format!("Invalid rev id: {}", protocol::printable(rev)),
        )
    };
    let id = match st.store.resolve_rev(repo, rev) {
        Ok(Some((id, _))) => id,
        Ok(None) => return Err(not_found()),
        Err(e) => return Err(internal("resolving a revision", &e)),
    };
    match st.store.read_commit(repo, &id) {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Err(not_found()),
        Err(e) => Err(internal("reading a commit", &e)),
    }
}

pub(crate) async fn resolve(
    st: &Arc<AppState>,
    req: &Req,
    repo: &RepoId,
    rev: &str,
    path: &str,
) -> Response {
    if let Err(r) = st.readable_repo(repo, &req.headers) {
        return r;
    }
    let commit = match commit_at(st, repo, rev) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let mut h = HeaderMap::new();
    set(&mut h, "x-repo-commit", &commit.id);
    if names::check_repo_path(path).is_err() {
        let mut r = bad_request(&format!("invalid path `{}`", protocol::printable(path)));
        r.headers_mut().extend(h);
        return r;
    }
    let Some(entry) = commit.files.get(path) else {
        let mut r = hub_error(
            StatusCode::NOT_FOUND,
            Some("EntryNotFound"),
            &format!("Entry not found: {}", protocol::printable(path)),
        );
        r.headers_mut().extend(h);
        return r;
    };
    set(&mut h, "etag", &format!("\"{}\"", entry.etag()));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    let source = match &entry.lfs {
        Some(sha) => {
            set(&mut h, "x-linked-etag", &format!("\"{sha}\""));
            set(&mut h, "x-linked-size", &entry.size.to_string());
            if let Some(cdn) = &st.cdn_origin {
                let loc = format!("{cdn}/cdn/{sha}?sig={}", st.sign("cdn", sha));
                set(&mut h, "location", &loc);
                h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
                return (StatusCode::FOUND, h).into_response();
            }
            Source::File(st.store.lfs_path(sha))
        }
        None => match st.store.read_git_object(&entry.oid) {
            Ok(b) => Source::Mem(Bytes::from(b)),
            Err(e) => return internal("reading a file object", &e),
        },
    };
    serve_blob(st, &req.method, &req.headers, h, (source, path), entry.size).await
}

/// The CDN-like second origin: `/cdn/{sha256}?sig=…` (no auth: the signature authorises).
pub(crate) async fn cdn(State(st): State<Arc<AppState>>, req: Request) -> Response {
    let (parts, _) = req.into_parts();
    st.record(format!(
        "CDN {} {} auth={}",
        parts.method,
        parts.uri.path(),
        if parts.headers.contains_key("authorization") {
            "yes"
        } else {
            "no"
        }
    ));
    let sha = parts.uri.path().strip_prefix("/cdn/").unwrap_or("");
    let sig = parts.uri.query().and_then(|q| {
        url::form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "sig")
            .map(|(_, v)| v.into_owned())
    });
    if !names::is_sha256_lower(sha) || sig.as_deref() != Some(st.sign("cdn", sha).as_str()) {
        return hub_error(StatusCode::FORBIDDEN, None, "invalid or missing signature");
    }
    let Some(size) = st.store.lfs_size(sha) else {
        return hub_error(StatusCode::NOT_FOUND, None, "no such object");
    };
    let mut h = HeaderMap::new();
    set(&mut h, "etag", &format!("\"{sha}\""));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    serve_blob(
        &st,
        &parts.method,
        &parts.headers,
        h,
        (Source::File(st.store.lfs_path(sha)), parts.uri.path()),
        size,
    )
    .await
}

pub(crate) enum Source {
    Mem(Bytes),
    File(PathBuf),
}

/// A single `bytes=` range against `size`: `None` = no usable Range (serve 200), `Some(Err)` =
/// unsatisfiable (416), `Some(Ok((start, end_inclusive)))`.
pub(crate) fn parse_range(v: &str, size: u64) -> Option<Result<(u64, u64), ()>> {
    let spec = v.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None; // multiple ranges: ignored, whole body (RFC 9110 allows this)
    }
    let (a, b) = spec.split_once('-')?;
    let (a, b) = (a.trim(), b.trim());
    if a.is_empty() {
        let n: u64 = b.parse().ok()?;
        if n == 0 || size == 0 {
            return Some(Err(()));
        }
        return Some(Ok((size.saturating_sub(n), size - 1)));
    }
    let start: u64 = a.parse().ok()?;
    let end: u64 = if b.is_empty() {
        u64::MAX
    } else {
        b.parse().ok()?
    };
    if end < start {
        return None;
    }
    if start >= size {
        return Some(Err(()));
    }
    Some(Ok((start, end.min(size - 1))))
}

/// A file answer: 206 for one satisfiable range, 416 for an unsatisfiable one, else 200 with the
/// whole body; the body-level faults apply (`name`, the request path, is what a fault's path
/// filter matches).
pub(crate) async fn serve_blob(
    st: &AppState,
    method: &Method,
    req_h: &HeaderMap,
    mut h: HeaderMap,
    (src, name): (Source, &str),
    size: u64,
) -> Response {
    let range = req_h
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_range(v, size));
    let is_get = method == Method::GET;
    let (mut status, mut start, mut len) = (StatusCode::OK, 0u64, size);
    match range {
        Some(Err(())) => {
            let mut r = hub_error(
                StatusCode::RANGE_NOT_SATISFIABLE,
                None,
                "requested range not satisfiable",
            );
            set(r.headers_mut(), "content-range", &format!("bytes */{size}"));
            return r;
        }
        Some(Ok((a, b))) => {
            if is_get && st.faults.fire(FaultMode::IgnoreRange).is_some() {
                // whole body with 200, as a server that ignores Range would send
            } else if is_get && st.faults.fire(FaultMode::Whole206).is_some() {
                status = StatusCode::PARTIAL_CONTENT;
                set(&mut h, "content-range", &format!("bytes {a}-{b}/{size}"));
            } else {
                status = StatusCode::PARTIAL_CONTENT;
                set(&mut h, "content-range", &format!("bytes {a}-{b}/{size}"));
                start = a;
                len = b - a + 1;
            }
        }
        None => {}
    }
    let mut fail_after = None;
    if is_get && len > 0 {
        if st.faults.fire(FaultMode::Truncate).is_some() {
            len /= 2;
        } else if st.faults.fire(FaultMode::Reset).is_some() {
            fail_after = Some(len / 2);
        }
    }
    set(&mut h, "content-length", &len.to_string());
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if !is_get {
        return (status, h).into_response();
    }
    // An open range (`bytes=A-`: a whole-file download or its resumption) is a whole-file read.
    let open = req_h
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_end().ends_with('-'));
    let closed = range.and_then(Result::ok).filter(|_| !open);
    let flip = flips::file_kind(st, &src, size, closed).await;
    let body = match src {
        Source::Mem(b) => {
            let lo = usize::try_from(start).unwrap_or(usize::MAX);
            let hi = usize::try_from(start + len)
                .unwrap_or(usize::MAX)
                .min(b.len());
            let chunk = b.slice(lo.min(hi)..hi);
            match fail_after {
                Some(n) => {
                    let n = usize::try_from(n).unwrap_or(0).min(chunk.len());
                    let items: Vec<Result<Bytes, std::io::Error>> = vec![
                        Ok(chunk.slice(..n)),
                        Err(std::io::Error::other("injected fault: connection reset")),
                    ];
                    flips::maybe(
                        st,
                        flip,
                        name,
                        (start, len),
                        futures_util::stream::iter(items),
                    )
                }
                None => {
                    let items = [Ok::<_, std::io::Error>(chunk)];
                    flips::maybe(
                        st,
                        flip,
                        name,
                        (start, len),
                        futures_util::stream::iter(items),
                    )
                }
            }
        }
        Source::File(p) => flips::maybe(
            st,
            flip,
            name,
            (start, len),
            file_stream(p, start, len, fail_after),
        ),
    };
    (status, h, body).into_response()
}

fn file_stream(
    path: PathBuf,
    start: u64,
    len: u64,
    fail_after: Option<u64>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    struct S {
        path: PathBuf,
        file: Option<tokio::fs::File>,
        pos: u64,
        left: u64,
        fail_after: Option<u64>,
        sent: u64,
    }
    let init = S {
        path,
        file: None,
        pos: start,
        left: len,
        fail_after,
        sent: 0,
    };
    futures_util::stream::unfold(Some(init), |state| async move {
        let mut s = state?;
        if s.left == 0 {
            return None;
        }
        if let Some(n) = s.fail_after {
            if s.sent >= n {
                return Some((
                    Err(std::io::Error::other("injected fault: connection reset")),
                    None,
                ));
            }
        }
        if s.file.is_none() {
            let mut f = match tokio::fs::File::open(&s.path).await {
                Ok(f) => f,
                Err(e) => return Some((Err(e), None)),
            };
            if let Err(e) = f.seek(std::io::SeekFrom::Start(s.pos)).await {
                return Some((Err(e), None));
            }
            s.file = Some(f);
        }
        let mut want = s.left.min(256 * 1024);
        if let Some(n) = s.fail_after {
            want = want.min(n.saturating_sub(s.sent).max(1));
        }
        let mut buf = vec![0u8; usize::try_from(want).unwrap_or(256 * 1024)];
        let f = s.file.as_mut()?;
        match f.read(&mut buf).await {
            Ok(0) => Some((
                Err(std::io::Error::other("object shorter than recorded")),
                None,
            )),
            Ok(n) => {
                buf.truncate(n);
                s.left -= n as u64;
                s.sent += n as u64;
                s.pos += n as u64;
                Some((Ok(Bytes::from(buf)), Some(s)))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
}

fn file_json(path: &str, f: &FileEntry) -> Value {
    let mut v = json!({"type": "file", "oid": f.oid, "size": f.size, "path": path});
    if let Some(sha) = &f.lfs {
        v["lfs"] = json!({"oid": sha, "size": f.size, "pointerSize": f.pointer_size()});
    }
    v
}

fn sibling_json(path: &str, f: &FileEntry, blobs: bool) -> Value {
    let mut v = json!({"rfilename": path});
    if blobs {
        v["size"] = json!(f.size);
        v["blobId"] = json!(f.oid);
        if let Some(sha) = &f.lfs {
            v["lfs"] = json!({"sha256": sha, "size": f.size, "pointerSize": f.pointer_size()});
        }
    }
    v
}

pub(crate) async fn info(st: &Arc<AppState>, req: &Req, repo: &RepoId, rev: &str) -> Response {
    let meta = match st.readable_repo(repo, &req.headers) {
        Ok(m) => m,
        Err(r) => return r,
    };
    let commit = match commit_at(st, repo, rev) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let blobs = req.q_bool("blobs");
    let siblings: Vec<Value> = commit
        .files
        .iter()
        .map(|(p, f)| sibling_json(p, f, blobs))
        .collect();
    let id = repo.id();
    let r = axum::Json(json!({
        "_id": id, "id": id, "modelId": id, "author": repo.owner, "sha": commit.id,
        "private": meta.private, "disabled": false, "gated": false, "downloads": 0, "likes": 0,
        "tags": [], "lastModified": commit.date, "createdAt": meta.created_at, "siblings": siblings,
    }))
    .into_response();
    st.branch_asked();
    r
}

/// Directory oids: SHA-1 over the sorted (path, oid) of everything below.
fn dir_entries(commit: &Commit) -> BTreeMap<String, String> {
    let mut hashers: BTreeMap<String, sha1::Sha1> = BTreeMap::new();
    for (path, f) in &commit.files {
        let mut dir = path.as_str();
        while let Some((parent, _)) = dir.rsplit_once('/') {
            hashers
                .entry(parent.to_string())
                .or_default()
                .update(format!("{path}\0{}\n", f.oid).as_bytes());
            dir = parent;
        }
    }
    hashers
        .into_iter()
        .map(|(k, h)| (k, hex::encode(h.finalize())))
        .collect()
}

pub(crate) async fn tree(
    st: &Arc<AppState>,
    req: &Req,
    repo: &RepoId,
    rev: &str,
    path: &str,
) -> Response {
    if let Err(r) = st.readable_repo(repo, &req.headers) {
        return r;
    }
    let commit = match commit_at(st, repo, rev) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let path = path.trim_end_matches('/');
    if !path.is_empty() && names::check_repo_path(path).is_err() {
        return bad_request(&format!("invalid path `{}`", protocol::printable(path)));
    }
    let recursive = req.q_bool("recursive");
    let expand = req.q_bool("expand");
    let prefix = if path.is_empty() {
        String::new()
    } else {
        format!("{path}/")
    };
    let under = |p: &str| {
        p.starts_with(&prefix) && (recursive || !p.get(prefix.len()..).unwrap_or("").contains('/'))
    };
    let mut entries: Vec<(String, Value)> = Vec::new();
    for (d, oid) in dir_entries(&commit) {
        if under(&d) {
            entries.push((
                d.clone(),
                json!({"type": "directory", "oid": oid, "size": 0, "path": d}),
            ));
        }
    }
    for (p, f) in &commit.files {
        if under(p) {
            let mut v = file_json(p, f);
            if expand {
                v["lastCommit"] =
                    json!({"id": commit.id, "title": commit.summary, "date": commit.date});
            }
            entries.push((p.clone(), v));
        }
    }
    if entries.is_empty() && !path.is_empty() {
        let mut r = hub_error(
            StatusCode::NOT_FOUND,
            Some("EntryNotFound"),
            &format!(
                "{} does not exist on \"{}\"",
                protocol::printable(path),
                protocol::printable(rev)
            ),
        );
        if let Ok(v) = HeaderValue::from_str(&commit.id) {
            r.headers_mut().insert("x-repo-commit", v);
        }
        return r;
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let page = if expand {
        50
    } else {
        st.opts.tree_page_size.max(1)
    };
    let from: usize = req.q("cursor").and_then(|c| c.parse().ok()).unwrap_or(0);
    let items: Vec<Value> = entries
        .iter()
        .skip(from)
        .take(page)
        .map(|(_, v)| v.clone())
        .collect();
    let mut r = axum::Json(items).into_response();
    if from.saturating_add(page) < entries.len() {
        let mut next = format!(
            "{}/api/{}/{}/tree/{}",
            st.base_url(&req.headers),
            repo.kind.api_plural(),
            repo.id(),
            enc(rev)
        );
        if !path.is_empty() {
            next.push('/');
            next.push_str(&enc(path));
        }
        next.push_str(&format!(
            "?recursive={recursive}&expand={expand}&cursor={}",
            from + page
        ));
        set(r.headers_mut(), "link", &format!("<{next}>; rel=\"next\""));
    }
    r
}

pub(crate) async fn paths_info(st: &Arc<AppState>, req: Req, repo: &RepoId, rev: &str) -> Response {
    if let Err(r) = st.readable_repo(repo, &req.headers) {
        return r;
    }
    let commit = match commit_at(st, repo, rev) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let body = match super::read_body(req.body, 4 * 1024 * 1024).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let paths: Vec<String> = match serde_json::from_slice::<Value>(&body) {
        Ok(v) => v
            .get("paths")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|p| p.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        Err(_) => url::form_urlencoded::parse(&body)
            .filter(|(k, _)| k == "paths")
            .map(|(_, v)| v.into_owned())
            .collect(),
    };
    if paths.len() > 1000 {
        return hub_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            None,
            "too many parameters (at most 1000 paths)",
        );
    }
    let dirs = dir_entries(&commit);
    let mut out = Vec::new();
    for p in paths {
        let p = p.trim_end_matches('/');
        if let Some(f) = commit.files.get(p) {
            out.push(file_json(p, f));
        } else if let Some(oid) = dirs.get(p) {
            out.push(json!({"type": "directory", "oid": oid, "size": 0, "path": p}));
        }
    }
    axum::Json(out).into_response()
}

pub(crate) async fn refs(st: &Arc<AppState>, req: &Req, repo: &RepoId) -> Response {
    if let Err(r) = st.readable_repo(repo, &req.headers) {
        return r;
    }
    let refs = match st.store.read_refs(repo) {
        Ok(r) => r,
        Err(e) => return internal("reading refs", &e),
    };
    let r =
        |name: &str, full: String, c: &str| json!({"name": name, "ref": full, "targetCommit": c});
    let mut v = json!({
        "branches": refs.heads.iter().map(|(n, c)| r(n, format!("refs/heads/{n}"), c)).collect::<Vec<_>>(),
        "converts": [],
        "tags": refs.tags.iter().map(|(n, c)| r(n, format!("refs/tags/{n}"), c)).collect::<Vec<_>>(),
    });
    if req.q_bool("include_prs") {
        v["pullRequests"] = json!(refs
            .prs
            .iter()
            .map(|(n, c)| r(&n.to_string(), format!("refs/pr/{n}"), c))
            .collect::<Vec<_>>());
    }
    let answer = axum::Json(v).into_response();
    st.branch_asked();
    answer
}

pub(crate) async fn commits(st: &Arc<AppState>, req: &Req, repo: &RepoId, rev: &str) -> Response {
    if let Err(r) = st.readable_repo(repo, &req.headers) {
        return r;
    }
    let mut cur = match commit_at(st, repo, rev) {
        Ok(c) => Some(c),
        Err(r) => return r,
    };
    let mut out = Vec::new();
    while let Some(c) = cur {
        out.push(json!({"id": c.id, "title": c.summary, "message": c.description, "authors": [{"user": st.opts.user}], "date": c.date}));
        if out.len() >= 10_000 {
            break;
        }
        cur = match c.parent.as_deref().map(|p| st.store.read_commit(repo, p)) {
            Some(Ok(p)) => p,
            Some(Err(e)) => return internal("reading a commit", &e),
            None => None,
        };
    }
    axum::Json(out).into_response()
}

pub(crate) async fn list_repos(st: &Arc<AppState>, req: &Req) -> Response {
    let kind = req
        .segs
        .get(1)
        .and_then(|p| RepoType::from_plural(p))
        .unwrap_or(RepoType::Model);
    let repos = match st.store.list_repos() {
        Ok(r) => r,
        Err(e) => return internal("listing repos", &e),
    };
    let authed = matches!(
        st.auth(&req.headers),
        super::Auth::Open | super::Auth::Valid
    );
    let author = req.q("author");
    let search = req.q("search").map(str::to_lowercase);
    let all: Vec<Value> = repos
        .into_iter()
        .filter(|(id, m)| id.kind == kind && (!m.private || authed))
        .filter(|(id, _)| author.is_none_or(|a| a.eq_ignore_ascii_case(&id.owner)))
        .filter(|(id, _)| search.as_deref().is_none_or(|s| id.id().to_lowercase().contains(s)))
        .map(|(id, m)| {
            let i = id.id();
            json!({"_id": i, "id": i, "modelId": i, "author": id.owner, "private": m.private, "likes": 0, "downloads": 0, "tags": [], "createdAt": m.created_at})
        })
        .collect();
    let mut page = st.opts.list_page_size.max(1);
    if let Some(l) = req.q("limit").and_then(|l| l.parse::<usize>().ok()) {
        page = page.min(l.max(1));
    }
    let from: usize = req.q("cursor").and_then(|c| c.parse().ok()).unwrap_or(0);
    let items: Vec<Value> = all.iter().skip(from).take(page).cloned().collect();
    let mut r = axum::Json(items).into_response();
    if from.saturating_add(page) < all.len() {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in req.query.iter().filter(|(k, _)| k != "cursor") {
            q.append_pair(k, v);
        }
        q.append_pair("cursor", &(from + page).to_string());
        let next = format!(
            "{}/api/{}?{}",
            st.base_url(&req.headers),
            kind.api_plural(),
            q.finish()
        );
        set(r.headers_mut(), "link", &format!("<{next}>; rel=\"next\""));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::parse_range;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-0", 10), Some(Ok((0, 0))));
        assert_eq!(parse_range("bytes=5-", 10), Some(Ok((5, 9))));
        assert_eq!(parse_range("bytes=-3", 10), Some(Ok((7, 9))));
        assert_eq!(parse_range("bytes=2-100", 10), Some(Ok((2, 9))));
        assert_eq!(parse_range("bytes=10-", 10), Some(Err(())));
        assert_eq!(parse_range("bytes=0-1,3-4", 10), None);
        assert_eq!(parse_range("items=0-1", 10), None);
        assert_eq!(parse_range("bytes=5-2", 10), None);
    }
}
