//! The server's file-backed store (docs/hub.md §1): content-addressed objects (regular files by
//! git-blob SHA-1, LFS blobs by SHA-256), per-repo immutable commit objects whose ids derive from
//! (tree, parent, message), and one `refs.json` per repo swapped atomically (write a temp file,
//! fsync, rename) so a crash mid-commit never exposes a half-applied commit.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sha1::Digest as _;

use crate::protocol::{self, RepoId, RepoType};

/// Non-LFS files above this size are refused (the Hub's 10 MiB rule, §10).
pub const MAX_REGULAR_SIZE: u64 = 10 * 1024 * 1024;

/// The `.gitattributes` a new repo starts with: the Hub's default model LFS patterns plus `*.gguf`
/// (docs/hub.md §3).
pub const DEFAULT_GITATTRIBUTES: &str = "\
*.7z filter=lfs diff=lfs merge=lfs -text
*.arrow filter=lfs diff=lfs merge=lfs -text
*.bin filter=lfs diff=lfs merge=lfs -text
*.bz2 filter=lfs diff=lfs merge=lfs -text
*.ckpt filter=lfs diff=lfs merge=lfs -text
*.ftz filter=lfs diff=lfs merge=lfs -text
*.gguf filter=lfs diff=lfs merge=lfs -text
*.gz filter=lfs diff=lfs merge=lfs -text
*.h5 filter=lfs diff=lfs merge=lfs -text
*.joblib filter=lfs diff=lfs merge=lfs -text
*.lfs.* filter=lfs diff=lfs merge=lfs -text
*.mlmodel filter=lfs diff=lfs merge=lfs -text
*.model filter=lfs diff=lfs merge=lfs -text
*.msgpack filter=lfs diff=lfs merge=lfs -text
*.npy filter=lfs diff=lfs merge=lfs -text
*.npz filter=lfs diff=lfs merge=lfs -text
*.onnx filter=lfs diff=lfs merge=lfs -text
*.ot filter=lfs diff=lfs merge=lfs -text
*.parquet filter=lfs diff=lfs merge=lfs -text
*.pb filter=lfs diff=lfs merge=lfs -text
*.pickle filter=lfs diff=lfs merge=lfs -text
*.pkl filter=lfs diff=lfs merge=lfs -text
*.pt filter=lfs diff=lfs merge=lfs -text
*.pth filter=lfs diff=lfs merge=lfs -text
*.rar filter=lfs diff=lfs merge=lfs -text
*.safetensors filter=lfs diff=lfs merge=lfs -text
saved_model/**/* filter=lfs diff=lfs merge=lfs -text
*.tar.* filter=lfs diff=lfs merge=lfs -text
*.tar filter=lfs diff=lfs merge=lfs -text
*.tflite filter=lfs diff=lfs merge=lfs -text
*.tgz filter=lfs diff=lfs merge=lfs -text
*.wasm filter=lfs diff=lfs merge=lfs -text
*.xz filter=lfs diff=lfs merge=lfs -text
*.zip filter=lfs diff=lfs merge=lfs -text
*.zst filter=lfs diff=lfs merge=lfs -text
*tfevents* filter=lfs diff=lfs merge=lfs -text
";

/// The server's LFS rule (docs/hub.md §3): empty files are regular; otherwise LFS when the size is
/// ≥ 10 MiB, the sample holds a NUL byte, or a `.gitattributes` LFS pattern matches the path.
pub fn wants_lfs(path: &str, size: u64, sample: &[u8], lfs_patterns: &[String]) -> bool {
    size > 0
        && (size >= MAX_REGULAR_SIZE
            || sample.contains(&0)
            || lfs_patterns.iter().any(|p| protocol::glob_match(p, path)))
}

/// One file of a commit's tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Real size in bytes.
    pub size: u64,
    /// Git oid: blob SHA-1 of the content, or of the LFS pointer.
    pub oid: String,
    /// SHA-256 of the content for LFS files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lfs: Option<String>,
}

impl FileEntry {
    /// A regular file of `data`.
    pub fn regular(data: &[u8]) -> FileEntry {
        FileEntry {
            size: data.len() as u64,
            oid: protocol::git_blob_sha1(data),
            lfs: None,
        }
    }
    /// An LFS file.
    pub fn lfs(sha256: &str, size: u64) -> FileEntry {
        let pointer = protocol::lfs_pointer(sha256, size);
        FileEntry {
            size,
            oid: protocol::git_blob_sha1(pointer.as_bytes()),
            lfs: Some(sha256.to_string()),
        }
    }
    /// The pointer size (LFS only).
    pub fn pointer_size(&self) -> u64 {
        self.lfs
            .as_deref()
            .map_or(0, |s| protocol::lfs_pointer(s, self.size).len() as u64)
    }
    /// The etag clients see: sha256 for LFS, git SHA-1 otherwise.
    pub fn etag(&self) -> &str {
        self.lfs.as_deref().unwrap_or(&self.oid)
    }
}

/// An immutable commit object.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Commit {
    /// The 40-hex id ([`commit_id`]).
    pub id: String,
    /// The parent commit.
    pub parent: Option<String>,
    /// Commit title.
    pub summary: String,
    /// Commit body.
    pub description: String,
    /// When first written (ISO 8601); not part of the id.
    pub date: String,
    /// Path → file.
    pub files: BTreeMap<String, FileEntry>,
}

/// The id of a commit: SHA-1 over a length-prefixed text of the tree hash, the parent and the
/// message, so equal pushes give equal ids (docs/hub.md §2).
pub fn commit_id(
    files: &BTreeMap<String, FileEntry>,
    parent: Option<&str>,
    summary: &str,
    description: &str,
) -> String {
    let mut tree = sha1::Sha1::new();
    for (path, f) in files {
        tree.update(
            format!(
                "{}\0{}\0{}\0{}\n",
                path,
                f.oid,
                f.size,
                f.lfs.as_deref().unwrap_or("-")
            )
            .as_bytes(),
        );
    }
    let tree = hex::encode(tree.finalize());
    let mut h = sha1::Sha1::new();
    h.update(
        format!(
            "minirun-hub commit v1\ntree {tree}\nparent {}\nsummary {}\n{summary}\ndescription {}\n{description}",
            parent.unwrap_or("-"),
            summary.len(),
            description.len()
        )
        .as_bytes(),
    );
    hex::encode(h.finalize())
}

/// Repo metadata (`repo.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepoMeta {
    /// Private repo.
    pub private: bool,
    /// Creation date (ISO 8601).
    pub created_at: String,
}

/// A repo's refs (`refs.json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RefsFile {
    /// Branch → commit.
    pub heads: BTreeMap<String, String>,
    /// Tag → commit.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// PR number → head commit.
    #[serde(default)]
    pub prs: BTreeMap<u64, String>,
}

/// How a revision string resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevKind {
    /// A branch (name).
    Branch(String),
    /// A tag.
    Tag(String),
    /// `refs/pr/N`.
    Pr(u64),
    /// A commit id.
    Commit,
}

/// The store rooted at one directory.
pub struct Store {
    root: PathBuf,
    locks: Mutex<HashMap<RepoId, Arc<tokio::sync::Mutex<()>>>>,
    commits: Mutex<HashMap<(RepoId, String), Arc<Commit>>>,
    tmp_seq: AtomicU64,
}

impl Store {
    /// Open (creating the layout if needed) the store at `root`.
    pub fn open(root: &Path) -> io::Result<Store> {
        for d in ["objects/lfs", "objects/git", "repos", "tmp", "uploads"] {
            fs::create_dir_all(root.join(d))?;
        }
        Ok(Store {
            root: root.to_path_buf(),
            locks: Mutex::default(),
            commits: Mutex::default(),
            tmp_seq: AtomicU64::new(0),
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The lock serialising writes to one repo.
    pub fn repo_lock(&self, repo: &RepoId) -> Arc<tokio::sync::Mutex<()>> {
        let mut m = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(repo.clone()).or_default().clone()
    }

    fn repo_dir(&self, repo: &RepoId) -> PathBuf {
        // Both parts are validated canonical ids: no separators, no `..`.
        self.root
            .join("repos")
            .join(repo.kind.api_plural())
            .join(&repo.owner)
            .join(&repo.name)
    }

    /// A fresh temp file path inside the store (same filesystem, so renames are atomic).
    pub fn tmp_path(&self) -> PathBuf {
        let n = self.tmp_seq.fetch_add(1, Ordering::Relaxed);
        self.root.join("tmp").join(format!(
            "{}-{n}-{}",
            std::process::id(),
            rand::random::<u32>()
        ))
    }

    /// The directory holding multipart parts of one upload.
    pub fn upload_dir(&self, sha256: &str) -> PathBuf {
        self.root.join("uploads").join(sha256)
    }

    /// Write `data` to `dest` atomically (temp file, fsync, rename).
    pub fn write_atomic(&self, dest: &Path, data: &[u8]) -> io::Result<()> {
        let tmp = self.tmp_path();
        let mut f = fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        drop(f);
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::rename(&tmp, dest)
    }

    /// Repo metadata, `None` if the repo does not exist.
    pub fn repo_meta(&self, repo: &RepoId) -> io::Result<Option<RepoMeta>> {
        match fs::read(self.repo_dir(repo).join("repo.json")) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(io::Error::other),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Create a repo whose `main` holds `files` at commit `id` (computed when `None`). Returns
    /// false if it already existed.
    pub fn create_repo(
        &self,
        repo: &RepoId,
        private: bool,
        files: BTreeMap<String, FileEntry>,
        id: Option<&str>,
        summary: &str,
    ) -> io::Result<bool> {
        if self.repo_meta(repo)?.is_some() {
            return Ok(false);
        }
        let commit = self.make_commit(files, None, summary, "", id);
        self.write_commit(repo, &commit)?;
        let mut refs = RefsFile::default();
        refs.heads.insert("main".into(), commit.id.clone());
        self.write_refs(repo, &refs)?;
        let meta = RepoMeta {
            private,
            created_at: iso8601_now(),
        };
        // repo.json last: the repo becomes visible only once its refs and commit exist.
        self.write_atomic(
            &self.repo_dir(repo).join("repo.json"),
            &serde_json::to_vec(&meta).map_err(io::Error::other)?,
        )?;
        Ok(true)
    }

    /// A new initial `.gitattributes` entry set.
    pub fn initial_files(&self) -> io::Result<BTreeMap<String, FileEntry>> {
        let data = DEFAULT_GITATTRIBUTES.as_bytes();
        self.put_git_object(data)?;
        Ok(BTreeMap::from([(
            ".gitattributes".to_string(),
            FileEntry::regular(data),
        )]))
    }

    /// Remove a repo (renamed into `tmp/` first, so it disappears atomically).
    pub fn delete_repo(&self, repo: &RepoId) -> io::Result<bool> {
        let dir = self.repo_dir(repo);
        if !dir.join("repo.json").exists() {
            return Ok(false);
        }
        let grave = self.tmp_path();
        fs::rename(&dir, &grave)?;
        self.commits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(r, _), _| r != repo);
        fs::remove_dir_all(&grave)?;
        Ok(true)
    }

    /// Every repo of the store, sorted.
    pub fn list_repos(&self) -> io::Result<Vec<(RepoId, RepoMeta)>> {
        let mut out = Vec::new();
        for kind in [RepoType::Model, RepoType::Dataset, RepoType::Space] {
            let kdir = self.root.join("repos").join(kind.api_plural());
            let Ok(owners) = fs::read_dir(&kdir) else {
                continue;
            };
            for o in owners.flatten() {
                let Ok(names) = fs::read_dir(o.path()) else {
                    continue;
                };
                for n in names.flatten() {
                    let (Some(owner), Some(name)) = (
                        o.file_name().to_str().map(String::from),
                        n.file_name().to_str().map(String::from),
                    ) else {
                        continue;
                    };
                    let Ok(id) = RepoId::from_parts(kind, &owner, &name) else {
                        continue;
                    };
                    if let Some(meta) = self.repo_meta(&id)? {
                        out.push((id, meta));
                    }
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The repo's refs.
    pub fn read_refs(&self, repo: &RepoId) -> io::Result<RefsFile> {
        let b = fs::read(self.repo_dir(repo).join("refs.json"))?;
        serde_json::from_slice(&b).map_err(io::Error::other)
    }

    /// Replace the repo's refs atomically (the commit point of every write).
    pub fn write_refs(&self, repo: &RepoId, refs: &RefsFile) -> io::Result<()> {
        self.write_atomic(
            &self.repo_dir(repo).join("refs.json"),
            &serde_json::to_vec_pretty(refs).map_err(io::Error::other)?,
        )
    }

    /// Build a commit object (id derived unless given).
    pub fn make_commit(
        &self,
        files: BTreeMap<String, FileEntry>,
        parent: Option<&str>,
        summary: &str,
        description: &str,
        id: Option<&str>,
    ) -> Commit {
        let id = id.map_or_else(
            || commit_id(&files, parent, summary, description),
            String::from,
        );
        Commit {
            id,
            parent: parent.map(String::from),
            summary: summary.into(),
            description: description.into(),
            date: iso8601_now(),
            files,
        }
    }

    /// Store a commit object (kept as is if one with that id exists: commits are immutable).
    pub fn write_commit(&self, repo: &RepoId, c: &Commit) -> io::Result<()> {
        let p = self
            .repo_dir(repo)
            .join("commits")
            .join(format!("{}.json", c.id));
        if p.exists() {
            return Ok(());
        }
        self.write_atomic(&p, &serde_json::to_vec(c).map_err(io::Error::other)?)
    }

    /// Read a commit object of `repo`.
    pub fn read_commit(&self, repo: &RepoId, id: &str) -> io::Result<Option<Arc<Commit>>> {
        if !names::is_commit_id(id) {
            return Ok(None);
        }
        let key = (repo.clone(), id.to_string());
        if let Some(c) = self
            .commits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(Some(c.clone()));
        }
        let c: Commit = match fs::read(
            self.repo_dir(repo)
                .join("commits")
                .join(format!("{id}.json")),
        ) {
            Ok(b) => serde_json::from_slice(&b).map_err(io::Error::other)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let c = Arc::new(c);
        let mut cache = self.commits.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() > 256 {
            cache.clear();
        }
        cache.insert(key, c.clone());
        Ok(Some(c))
    }

    /// Resolve a revision (branch, tag, `refs/heads|tags/…`, `refs/pr/N`, or a commit id of this
    /// repo) to a commit id.
    pub fn resolve_rev(&self, repo: &RepoId, rev: &str) -> io::Result<Option<(String, RevKind)>> {
        let refs = self.read_refs(repo)?;
        let name = rev.strip_prefix("refs/heads/").unwrap_or(rev);
        if let Some(c) = refs.heads.get(name) {
            return Ok(Some((c.clone(), RevKind::Branch(name.to_string()))));
        }
        let tag = rev.strip_prefix("refs/tags/").unwrap_or(rev);
        if let Some(c) = refs.tags.get(tag) {
            return Ok(Some((c.clone(), RevKind::Tag(tag.to_string()))));
        }
        if let Some(n) = rev
            .strip_prefix("refs/pr/")
            .and_then(|n| n.parse::<u64>().ok())
        {
            return Ok(refs.prs.get(&n).map(|c| (c.clone(), RevKind::Pr(n))));
        }
        if self.read_commit(repo, rev)?.is_some() {
            return Ok(Some((rev.to_string(), RevKind::Commit)));
        }
        Ok(None)
    }

    fn git_object_path(&self, sha1: &str) -> PathBuf {
        self.root
            .join("objects/git")
            .join(sha1.get(..2).unwrap_or("00"))
            .join(sha1)
    }

    /// Path of an LFS blob (`sha256` must be validated hex).
    pub fn lfs_path(&self, sha256: &str) -> PathBuf {
        self.root
            .join("objects/lfs")
            .join(sha256.get(..2).unwrap_or("00"))
            .join(sha256)
    }

    /// Store a regular file's content; returns its git oid.
    pub fn put_git_object(&self, data: &[u8]) -> io::Result<String> {
        let oid = protocol::git_blob_sha1(data);
        let p = self.git_object_path(&oid);
        if !p.exists() {
            self.write_atomic(&p, data)?;
        }
        Ok(oid)
    }

    /// Read a regular file's content.
    pub fn read_git_object(&self, oid: &str) -> io::Result<Vec<u8>> {
        fs::read(self.git_object_path(oid))
    }

    /// The size of an LFS blob, `None` if absent.
    pub fn lfs_size(&self, sha256: &str) -> Option<u64> {
        if !names::is_sha256_lower(sha256) {
            return None;
        }
        fs::metadata(self.lfs_path(sha256)).ok().map(|m| m.len())
    }

    /// Move a fully written temp file into the LFS store after checking its SHA-256 and size.
    pub fn adopt_lfs(&self, tmp: &Path, sha256: &str, size: u64) -> io::Result<Result<(), String>> {
        let (got, got_size) = sha256_file(tmp)?;
        self.adopt_lfs_hashed(tmp, sha256, size, &got, got_size)
    }

    /// As [`Self::adopt_lfs`] for a file whose digest and size were taken as it was written.
    pub fn adopt_lfs_hashed(
        &self,
        tmp: &Path,
        sha256: &str,
        size: u64,
        got: &str,
        got_size: u64,
    ) -> io::Result<Result<(), String>> {
        if got != sha256 || got_size != size {
            let _ = fs::remove_file(tmp);
            return Ok(Err(format!("uploaded object has sha256 {got} and size {got_size}, expected {sha256} and {size}")));
        }
        let dest = self.lfs_path(sha256);
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::rename(tmp, dest)?;
        Ok(Ok(()))
    }
}

/// SHA-256 and size of a file, streamed.
pub fn sha256_file(p: &Path) -> io::Result<(String, u64)> {
    use std::io::Read;
    let mut f = fs::File::open(p)?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n_total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(buf.get(..n).unwrap_or(&[]));
        n_total += n as u64;
    }
    Ok((hex::encode(h.finalize()), n_total))
}

pub use crate::protocol::iso8601;

/// Now as `YYYY-MM-DDTHH:MM:SS.000Z`.
pub fn iso8601_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    iso8601(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_ids_are_deterministic_and_sensitive() {
        let mut files = BTreeMap::new();
        files.insert("a".to_string(), FileEntry::regular(b"x"));
        let a = commit_id(&files, None, "s", "");
        assert_eq!(a, commit_id(&files, None, "s", ""));
        assert_ne!(a, commit_id(&files, Some(&a), "s", ""));
        assert_ne!(a, commit_id(&files, None, "t", ""));
        files.insert("b".to_string(), FileEntry::lfs(&"0".repeat(64), 3));
        assert_ne!(a, commit_id(&files, None, "s", ""));
    }

    #[test]
    fn lfs_rule() {
        let pats = crate::protocol::lfs_patterns(DEFAULT_GITATTRIBUTES);
        assert!(wants_lfs("m.safetensors", 10, b"{}", &pats));
        assert!(wants_lfs("x.dat", 10, b"a\0b", &pats));
        assert!(wants_lfs("x.txt", MAX_REGULAR_SIZE, b"text", &pats));
        assert!(!wants_lfs("x.txt", 10, b"text", &pats));
        assert!(!wants_lfs("empty.bin", 0, b"", &pats));
    }
}
