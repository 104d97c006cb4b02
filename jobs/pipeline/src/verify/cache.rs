//! Verified copies in the Hugging Face cache layout (`minirun-run --repo`, `minirun-serve
//! --repo`; docs/verify.md "The cache layout"): `$HF_HUB_CACHE` (else `$HF_HOME/hub`) /
//! `models--OWNER--NAME` / `snapshots/COMMIT/` holding the release as regular files with its
//! `.minirun-evidence/`, and `refs/REVISION` holding the commit a branch or tag resolved to — the
//! paths huggingface_hub reads, so its offline mode finds the same copy. huggingface_hub itself
//! links snapshot entries to `blobs/`; the verifier refuses links, so a snapshot another tool made
//! is re-materialised (each link replaced by a copy of its target, which the pull then hashes
//! like any kept file) before it is verified.

use std::path::{Path, PathBuf};

use hub::client::HubClient;
use hub::protocol::RepoId;

use super::pull::pull_pinned;
use super::{pin, PullOpts, VerifyError, VerifyReport};

/// The cache root: `HF_HUB_CACHE`, else `HF_HOME/hub` (with `HF_HOME` defaulting as the token
/// lookup does); `None` without any of them and without `HOME`.
pub fn hub_cache(var: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let set = |k: &str| var(k).filter(|v| !v.trim().is_empty());
    set("HF_HUB_CACHE")
        .map(PathBuf::from)
        .or_else(|| hub::client::hf_home(&var).map(|h| h.join("hub")))
}

/// `models--OWNER--NAME`, huggingface_hub's folder of a model repository.
pub fn repo_folder(cache: &Path, repo: &RepoId) -> PathBuf {
    cache.join(format!("models--{}", repo.id().replace('/', "--")))
}

/// A verified snapshot in the cache.
#[derive(Debug)]
pub struct Cached {
    /// `snapshots/COMMIT`.
    pub dir: PathBuf,
    pub commit: String,
    /// Links replaced by copies of their targets before the pull.
    pub rematerialised: usize,
    pub report: VerifyReport,
}

/// Pins `rev` of `repo` once, then pulls that pin into the snapshot folder of its commit (kept
/// files verified, the rest downloaded, resumable; [`super::pull`]) and records `refs/REV`. The verdict is the caller's
/// to act on (the runner runs `Verified` only).
pub fn pull_cached(
    endpoint: Option<&str>,
    repo: &str,
    rev: &str,
    opts: &PullOpts,
) -> Result<Cached, VerifyError> {
    let id = RepoId::model(repo).map_err(VerifyError::Repo)?;
    let cache = hub_cache(|k| std::env::var(k).ok()).ok_or_else(|| VerifyError::NoCache)?;
    let client = HubClient::from_env(endpoint)?.with_workers(opts.workers);
    let rt = crate::runtime().map_err(VerifyError::Runtime)?;
    let pinned = rt.block_on(pin(&client, &id, rev))?;
    let folder = repo_folder(&cache, &id);
    let dir = folder.join("snapshots").join(&pinned.commit);
    let rematerialised = rematerialise(&dir)?;
    let report = pull_pinned(&client, &pinned, &dir, true, opts)?;
    if rev != pinned.commit {
        write_ref(&folder, rev, &pinned.commit)?;
    }
    Ok(Cached {
        dir,
        commit: pinned.commit,
        rematerialised,
        report,
    })
}

/// Replaces every symbolic link under `dir` by a regular copy of what it points to (a dangling
/// one is removed: the pull downloads the file). Returns how many were replaced.
fn rematerialise(dir: &Path) -> Result<usize, VerifyError> {
    let io = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| VerifyError::Io { what, path, source }
    };
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io("read", &d)(e)),
        };
        for entry in entries {
            let path = entry.map_err(io("read", &d))?.path();
            let meta = std::fs::symlink_metadata(&path).map_err(io("stat", &path))?;
            if meta.is_dir() {
                stack.push(path);
            } else if meta.file_type().is_symlink() {
                let part = path.with_extension("rematerialise.part");
                match std::fs::copy(&path, &part) {
                    Ok(_) => std::fs::rename(&part, &path).map_err(io("replace", &path))?,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        std::fs::remove_file(&path).map_err(io("remove", &path))?
                    }
                    Err(e) => return Err(io("copy", &path)(e)),
                }
                n += 1;
            }
        }
    }
    Ok(n)
}

/// `refs/REV` ← `commit`, replaced atomically (huggingface_hub writes the bare hash).
fn write_ref(folder: &Path, rev: &str, commit: &str) -> Result<(), VerifyError> {
    let path = folder.join("refs").join(rev);
    let parent = path.parent().unwrap_or(folder).to_path_buf();
    std::fs::create_dir_all(&parent).map_err(|source| VerifyError::Io {
        what: "create",
        path: parent.clone(),
        source,
    })?;
    let mut tmp = tempfile::NamedTempFile::new_in(&parent).map_err(|source| VerifyError::Io {
        what: "create a temporary file in",
        path: parent.clone(),
        source,
    })?;
    std::io::Write::write_all(&mut tmp, commit.as_bytes()).map_err(|source| VerifyError::Io {
        what: "write",
        path: path.clone(),
        source,
    })?;
    tmp.persist(&path).map_err(|e| VerifyError::Io {
        what: "replace",
        path,
        source: e.error,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_root_follows_huggingface_hub() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_string())
            }
        };
        assert_eq!(
            hub_cache(env(&[("HF_HUB_CACHE", "/c"), ("HF_HOME", "/h")])),
            Some(PathBuf::from("/c"))
        );
        assert_eq!(
            hub_cache(env(&[("HF_HOME", "/h")])),
            Some(PathBuf::from("/h/hub"))
        );
        assert_eq!(
            hub_cache(env(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/home/u")])),
            Some(PathBuf::from("/x/huggingface/hub"))
        );
        assert_eq!(
            hub_cache(env(&[("HOME", "/home/u")])),
            Some(PathBuf::from("/home/u/.cache/huggingface/hub"))
        );
        assert_eq!(hub_cache(env(&[])), None);
        let id = RepoId::model("minirun/X-minirun").unwrap();
        assert_eq!(
            repo_folder(Path::new("/c"), &id),
            PathBuf::from("/c/models--minirun--X-minirun")
        );
    }

    #[test]
    fn links_are_replaced_by_copies_and_dangling_ones_removed() {
        let d = tempfile::tempdir().unwrap();
        let blobs = d.path().join("blobs");
        let snap = d.path().join("snapshots/abc/sub");
        std::fs::create_dir_all(&blobs).unwrap();
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::write(blobs.join("b1"), b"bytes").unwrap();
        std::os::unix::fs::symlink(blobs.join("b1"), snap.join("f")).unwrap();
        std::os::unix::fs::symlink(blobs.join("gone"), snap.join("g")).unwrap();
        std::fs::write(snap.join("plain"), b"p").unwrap();
        let n = rematerialise(&d.path().join("snapshots/abc")).unwrap();
        assert_eq!(n, 2);
        let f = std::fs::symlink_metadata(snap.join("f")).unwrap();
        assert!(f.file_type().is_file());
        assert_eq!(std::fs::read(snap.join("f")).unwrap(), b"bytes");
        assert!(!snap.join("g").exists() && std::fs::symlink_metadata(snap.join("g")).is_err());
        assert_eq!(
            std::fs::read(blobs.join("b1")).unwrap(),
            b"bytes",
            "the blob is kept"
        );
        assert_eq!(rematerialise(&d.path().join("missing")).unwrap(), 0);
    }
}
