//! Protocol types and rules shared by the client and the server: repo ids, revisions and paths
//! (validated the same way on both sides), git-blob and LFS hashing, and the JSON shapes of
//! `../shared/design/hub-protocol.md` §3–§9 (tree entries, siblings, refs, preupload, LFS batch,
//! NDJSON commit lines, the `{"error": …}` body).

use serde::{Deserialize, Serialize};
use sha1::Digest as _;

/// Python's `quote(s, safe="")`: everything but `A-Za-z0-9-_.~` percent-encoded.
pub const QUOTE_ALL: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The three repository kinds of the Hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum RepoType {
    /// `/api/models/…`, files under `/{id}/…`.
    Model,
    /// `/api/datasets/…`, files under `/datasets/{id}/…`.
    Dataset,
    /// `/api/spaces/…`, files under `/spaces/{id}/…`.
    Space,
}

impl RepoType {
    /// The plural used in API URLs (`models`).
    pub fn api_plural(self) -> &'static str {
        match self {
            RepoType::Model => "models",
            RepoType::Dataset => "datasets",
            RepoType::Space => "spaces",
        }
    }
    /// The prefix of file URLs (`""`, `"datasets/"`, `"spaces/"`).
    pub fn url_prefix(self) -> &'static str {
        match self {
            RepoType::Model => "",
            RepoType::Dataset => "datasets/",
            RepoType::Space => "spaces/",
        }
    }
    /// Parse `model`/`dataset`/`space` (singular, as in `/api/repos/create`).
    pub fn from_singular(s: &str) -> Option<RepoType> {
        match s {
            "model" => Some(RepoType::Model),
            "dataset" => Some(RepoType::Dataset),
            "space" => Some(RepoType::Space),
            _ => None,
        }
    }
    /// Parse `models`/`datasets`/`spaces`.
    pub fn from_plural(s: &str) -> Option<RepoType> {
        match s {
            "models" => Some(RepoType::Model),
            "datasets" => Some(RepoType::Dataset),
            "spaces" => Some(RepoType::Space),
            _ => None,
        }
    }
}

/// A canonical `owner/name` repo id with its kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepoId {
    /// Model, dataset or space.
    pub kind: RepoType,
    /// The namespace (user or organisation).
    pub owner: String,
    /// The repo name.
    pub name: String,
}

impl RepoId {
    /// A model repo from `owner/name`, validated ([`names::check_repo_id`]).
    pub fn model(id: &str) -> Result<RepoId, String> {
        RepoId::parse(RepoType::Model, id)
    }
    /// A repo of `kind` from `owner/name`, validated.
    pub fn parse(kind: RepoType, id: &str) -> Result<RepoId, String> {
        let (owner, name) = id
            .split_once('/')
            .ok_or_else(|| format!("repo id `{}` is not of the form owner/name", printable(id)))?;
        RepoId::from_parts(kind, owner, name)
    }
    /// A repo from its two parts, validated ([`names::check_repo_id`], the one repo-id rule of
    /// the plan, the client and this server).
    pub fn from_parts(kind: RepoType, owner: &str, name: &str) -> Result<RepoId, String> {
        let id = format!("{owner}/{name}");
        if let Err(e) = names::check_repo_id(&id) {
            return Err(format!(
                "repo id `{}` is not canonical: {e} (letters, digits, `-`, `_`, `.`; no `--` or `..`; each part at most 96 characters)",
                printable(&id)
            ));
        }
        Ok(RepoId {
            kind,
            owner: owner.to_string(),
            name: name.to_string(),
        })
    }
    /// `owner/name`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }
}

impl std::fmt::Display for RepoId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}/{}", self.kind.url_prefix(), self.owner, self.name)
    }
}

/// Control characters replaced by `?` so hostile input cannot forge log or error lines.
/// `s` with any userinfo (`user:secret@`) of a URL's authority replaced by `***@`, so a
/// message can name a refused endpoint without repeating its credential.
pub fn redact_userinfo(s: &str) -> String {
    let Some((scheme, rest)) = s.split_once("://") else {
        return s.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => s.to_string(),
    }
}

/// The one check of a hub endpoint, wherever it comes from (`--endpoint`, `HF_ENDPOINT`, a
/// plan): an `http(s)://host[:port][/path]` URL with a host, no whitespace, and no credentials
/// (tokens come from `HF_TOKEN` and token files, never a URL). Errors show the value with any
/// userinfo redacted.
pub fn parse_endpoint(s: &str) -> Result<url::Url, String> {
    let shown = redact_userinfo(s);
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "endpoint `{}` contains whitespace or control characters",
            printable(&shown)
        ));
    }
    if shown != s {
        return Err(format!(
            "endpoint `{}` carries credentials (user:password@); give the token in HF_TOKEN or a token file instead, never in the URL",
            printable(&shown)
        ));
    }
    let u = url::Url::parse(s.trim_end_matches('/'))
        .map_err(|e| format!("endpoint `{}` is not a URL: {e}", printable(s)))?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none_or(str::is_empty) {
        return Err(format!(
            "endpoint `{}` must be an http(s)://host[:port] URL",
            printable(s)
        ));
    }
    Ok(u)
}

pub fn printable(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(200)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if s.chars().count() > 200 {
        out.push('…');
    }
    out
}

/// The git blob SHA-1 of `data` (`sha1("blob <len>\0" + data)`), the oid of a regular file.
pub fn git_blob_sha1(data: &[u8]) -> String {
    let mut h = sha1::Sha1::new();
    h.update(format!("blob {}\0", data.len()).as_bytes());
    h.update(data);
    hex::encode(h.finalize())
}

/// SHA-256 of `data` as lower-case hex, the oid of an LFS object.
pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(data))
}

/// The git-lfs pointer file text for an object.
pub fn lfs_pointer(sha256: &str, size: u64) -> String {
    format!("version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n")
}

/// The LFS descriptor of a tree entry (`lfs` in tree listings, §5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeLfs {
    /// SHA-256 of the content.
    pub oid: String,
    /// Real size in bytes.
    pub size: u64,
    /// Size of the pointer file.
    #[serde(default)]
    pub pointer_size: u64,
}

/// One entry of `/tree` or `/paths-info` (§5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeEntry {
    /// `file` or `directory`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Git oid (blob SHA-1; of the pointer for LFS files).
    pub oid: String,
    /// Real size (0 for directories).
    #[serde(default)]
    pub size: u64,
    /// Repo-relative path.
    pub path: String,
    /// Present on LFS files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lfs: Option<TreeLfs>,
}

impl TreeEntry {
    /// True for files (not directories).
    pub fn is_file(&self) -> bool {
        self.kind == "file"
    }
}

/// The `lfs` object of a sibling (note: key `sha256`, not `oid`, §4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SiblingLfs {
    /// SHA-256 of the content.
    pub sha256: String,
    /// Real size.
    pub size: u64,
    /// Size of the pointer file.
    #[serde(default)]
    pub pointer_size: u64,
}

/// One `siblings` entry of repo info (§4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sibling {
    /// Repo-relative path.
    pub rfilename: String,
    /// Real size (with `blobs=true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Git oid (with `blobs=true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob_id: Option<String>,
    /// LFS descriptor (with `blobs=true`, LFS files only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lfs: Option<SiblingLfs>,
}

/// Repo info at a revision (`GET /api/models/{id}[/revision/{rev}]`, §4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepoInfo {
    /// `owner/name`.
    pub id: String,
    /// The commit the revision resolved to.
    #[serde(default)]
    pub sha: Option<String>,
    /// Private repo.
    #[serde(default)]
    pub private: bool,
    /// The files.
    #[serde(default)]
    pub siblings: Vec<Sibling>,
    /// The owner.
    #[serde(default)]
    pub author: Option<String>,
    /// Last commit date (ISO 8601).
    #[serde(default)]
    pub last_modified: Option<String>,
}

/// One ref of `/refs` (§6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitRef {
    /// Short name (`main`, `v1`, `1` for PR 1).
    pub name: String,
    /// Full ref (`refs/heads/main`).
    #[serde(rename = "ref")]
    pub full_ref: String,
    /// The commit it points to.
    pub target_commit: String,
}

/// `GET /api/models/{id}/refs` (§6).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Refs {
    /// Branches.
    #[serde(default)]
    pub branches: Vec<GitRef>,
    /// Conversion refs (always empty here).
    #[serde(default)]
    pub converts: Vec<GitRef>,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<GitRef>,
    /// Pull-request refs (with `include_prs=1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_requests: Option<Vec<GitRef>>,
}

/// One file of a preupload request (§7.2).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PreuploadFile {
    /// Repo-relative path.
    pub path: String,
    /// Base64 of the first ≤ 512 bytes.
    pub sample: String,
    /// Size in bytes.
    pub size: u64,
}

/// One file of a preupload answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreuploadResult {
    /// Repo-relative path.
    pub path: String,
    /// `lfs` or `regular`.
    pub upload_mode: String,
    /// Ignored by `.gitignore`.
    pub should_ignore: bool,
    /// The remote oid at the revision (sha256 for LFS, git SHA-1 otherwise), if the path exists.
    #[serde(default)]
    pub oid: Option<String>,
}

/// A model listing entry (`GET /api/models`, §9).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelSummary {
    /// `owner/name`.
    pub id: String,
    /// Private repo.
    #[serde(default)]
    pub private: bool,
}

/// The commit answer (§8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitResponse {
    /// Always true on 200.
    #[serde(default)]
    pub success: bool,
    /// The new commit id.
    pub commit_oid: String,
    /// `{endpoint}/{repo}/commit/{oid}`.
    pub commit_url: String,
    /// `{endpoint}/{repo}/discussions/N` with `create_pr`.
    #[serde(default)]
    pub pull_request_url: Option<String>,
}

/// The Hub's error body.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The message.
    pub error: String,
}

/// Whether a `.gitattributes`-style glob matches `path`. A pattern without `/` matches the base
/// name; with `/` the whole path (a leading `/` anchors). `*` and `?` do not cross `/`; `**`
/// matches across directories.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    let pat = pattern.strip_prefix('/').unwrap_or(pattern);
    if pattern.contains('/') {
        glob_bytes(pat.as_bytes(), path.as_bytes())
    } else {
        let base = path.rsplit('/').next().unwrap_or(path);
        glob_bytes(pat.as_bytes(), base.as_bytes())
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Tok {
    Lit(u8),
    One,
    Star,
    DStar,
}

/// Wildcard matching by dynamic programming: O(len(pattern) × len(path)) time, never exponential
/// (patterns can come from request bodies, e.g. preupload's `gitIgnore`). Patterns longer than
/// 1024 bytes never match.
fn glob_bytes(p: &[u8], s: &[u8]) -> bool {
    if p.len() > 1024 {
        return false;
    }
    let mut toks = Vec::with_capacity(p.len());
    let mut i = 0;
    while let Some(&c) = p.get(i) {
        match c {
            b'*' if p.get(i + 1) == Some(&b'*') => {
                toks.push(Tok::DStar);
                i += if p.get(i + 2) == Some(&b'/') { 3 } else { 2 };
            }
            b'*' => {
                toks.push(Tok::Star);
                i += 1;
            }
            b'?' => {
                toks.push(Tok::One);
                i += 1;
            }
            c => {
                toks.push(Tok::Lit(c));
                i += 1;
            }
        }
    }
    // row[j]: toks[k..] matches s[j..], computed for k from the end.
    let n = s.len();
    let mut next = vec![false; n + 1];
    if let Some(last) = next.last_mut() {
        *last = true;
    }
    for tok in toks.iter().rev() {
        let mut row = vec![false; n + 1];
        for j in (0..=n).rev() {
            let here = s.get(j).copied();
            let after = next.get(j + 1).copied().unwrap_or(false);
            let skip = row.get(j + 1).copied().unwrap_or(false);
            let m = match *tok {
                Tok::Lit(c) => here == Some(c) && after,
                Tok::One => here.is_some_and(|c| c != b'/') && after,
                Tok::Star => {
                    next.get(j).copied().unwrap_or(false)
                        || (here.is_some_and(|c| c != b'/') && skip)
                }
                Tok::DStar => next.get(j).copied().unwrap_or(false) || (here.is_some() && skip),
            };
            if let Some(r) = row.get_mut(j) {
                *r = m;
            }
        }
        next = row;
    }
    next.first().copied().unwrap_or(false)
}

/// LFS patterns of a `.gitattributes` text (lines with `filter=lfs`).
pub fn lfs_patterns(gitattributes: &str) -> Vec<String> {
    gitattributes
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let pat = it.next()?;
            it.any(|a| a == "filter=lfs").then(|| pat.to_string())
        })
        .collect()
}

/// One commit of a branch's history (`GET /api/models/{id}/commits/{rev}`, newest first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitInfo {
    /// The commit id.
    pub id: String,
    /// Its summary.
    #[serde(default)]
    pub title: String,
    /// When it was made (ISO 8601).
    #[serde(default)]
    pub date: String,
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SS.000Z` (proleptic Gregorian, days-from-civil inverse).
pub fn iso8601(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.000Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_700_000_000), "2023-11-14T22:13:20.000Z");
    }

    #[test]
    fn git_hash_matches_git() {
        assert_eq!(
            git_blob_sha1(b"Hello, World!"),
            "b45ef6fec89518d314f546fd6c3025367b721684"
        );
    }

    #[test]
    fn repo_ids_are_canonical() {
        assert!(RepoId::model("ns/model-1_x.y").is_ok());
        // the plan accepts it, so candidate-upload must too (one rule: names::check_repo_id)
        assert!(RepoId::model("_org/x-minirun").is_ok());
        for bad in [
            "ns",
            "../x",
            "ns/..",
            "ns/a--b",
            "ns/a..b",
            "/x",
            "ns/x.git",
            "ns/x/y",
            "ns/\u{0}x",
            "ns/-x",
        ] {
            assert!(RepoId::model(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn globs() {
        assert!(glob_match("*.bin", "a/b/c.bin"));
        assert!(!glob_match("*.bin", "a/b/c.binx"));
        assert!(glob_match("saved_model/**/*", "saved_model/x/y"));
        assert!(glob_match("/top.gguf", "top.gguf"));
        assert!(!glob_match("/top.gguf", "d/top.gguf"));
        assert!(glob_match("*tfevents*", "runs/events.out.tfevents.1"));
        assert!(glob_match("d/*.x", "d/a.x"));
        assert!(!glob_match("d/*.x", "d/e/a.x"));
        assert!(glob_match("a/**/b", "a/b"));
        assert!(glob_match("a/**/b", "a/x/y/b"));
        assert!(glob_match("*.tar.*", "x.tar.gz"));
        assert!(!glob_match("?", "/"));
        // no exponential blow-up on hostile patterns
        let hostile = "*a".repeat(200) + "b";
        assert!(!glob_match(&hostile, &"a".repeat(1000)));
    }
}
