//! `minirun-hub import` (docs/hub.md §3): mirror a local directory as a repo whose `main` is the
//! given upstream commit id exactly, so an upstream revision can be served offline. Files become
//! LFS by the server's rule ([`super::store::wants_lfs`], patterns from the directory's own
//! `.gitattributes` when it has one). Symlinks are refused; `.git/` is skipped.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::store::{self, FileEntry, Store};
use crate::protocol::{self, RepoId};

/// An import failure.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A file could not be read or stored.
    #[error("failed to import `{path}`")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The input cannot be imported as asked.
    #[error("{0}")]
    Invalid(String),
}

/// What an import did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportSummary {
    /// Files imported.
    pub files: usize,
    /// Of which LFS.
    pub lfs_files: usize,
    /// False when the repo already had exactly this commit (nothing changed).
    pub changed: bool,
}

fn walk(dir: &Path, rel: &str, out: &mut Vec<(String, PathBuf)>) -> Result<(), ImportError> {
    let io = |source| ImportError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().into_string().map_err(|n| {
            ImportError::Invalid(format!(
                "file name {n:?} in `{}` is not UTF-8",
                dir.display()
            ))
        })?;
        let path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let ft = e.file_type().map_err(|source| ImportError::Io {
            path: e.path(),
            source,
        })?;
        if ft.is_symlink() {
            return Err(ImportError::Invalid(format!(
                "`{}` is a symlink; import copies regular files only",
                e.path().display()
            )));
        }
        if ft.is_dir() {
            if rel.is_empty() && name == ".git" {
                continue;
            }
            walk(&e.path(), &path, out)?;
        } else if ft.is_file() {
            if names::check_repo_path(&path).is_err() {
                return Err(ImportError::Invalid(format!(
                    "`{}` is not a valid repo path",
                    protocol::printable(&path)
                )));
            }
            out.push((path, e.path()));
        }
    }
    Ok(())
}

/// Import `dir` into the store at `root` as `repo` with `main` at commit `revision`.
pub fn import_dir(
    root: &Path,
    repo: &RepoId,
    revision: &str,
    dir: &Path,
    private: bool,
) -> Result<ImportSummary, ImportError> {
    if !names::is_commit_id(revision) {
        return Err(ImportError::Invalid(format!(
            "revision `{}` is not a 40-hex commit id",
            protocol::printable(revision)
        )));
    }
    let st = Store::open(root).map_err(|source| ImportError::Io {
        path: root.to_path_buf(),
        source,
    })?;
    let mut list = Vec::new();
    walk(dir, "", &mut list)?;
    let attrs = std::fs::read_to_string(dir.join(".gitattributes"))
        .unwrap_or_else(|_| store::DEFAULT_GITATTRIBUTES.to_string());
    let patterns = protocol::lfs_patterns(&attrs);
    let mut files = BTreeMap::new();
    let mut lfs_files = 0;
    for (path, src) in &list {
        let io = |source| ImportError::Io {
            path: src.clone(),
            source,
        };
        let size = std::fs::metadata(src).map_err(io)?.len();
        let mut sample = Vec::new();
        std::fs::File::open(src)
            .map_err(io)?
            .take(512)
            .read_to_end(&mut sample)
            .map_err(io)?;
        if store::wants_lfs(path, size, &sample, &patterns) {
            let tmp = st.tmp_path();
            std::fs::copy(src, &tmp).map_err(io)?;
            let (sha, n) = store::sha256_file(&tmp).map_err(io)?;
            if st.lfs_size(&sha).is_some() {
                let _ = std::fs::remove_file(&tmp);
            } else {
                st.adopt_lfs(&tmp, &sha, n).map_err(io)?.map_err(|m| {
                    ImportError::Invalid(format!(
                        "`{}` changed while importing: {m}",
                        src.display()
                    ))
                })?;
            }
            files.insert(path.clone(), FileEntry::lfs(&sha, n));
            lfs_files += 1;
        } else {
            let data = std::fs::read(src).map_err(io)?;
            st.put_git_object(&data).map_err(io)?;
            files.insert(path.clone(), FileEntry::regular(&data));
        }
    }
    let n = files.len();
    let rio = |source| ImportError::Io {
        path: root.to_path_buf(),
        source,
    };
    let summary = format!("mirror of upstream revision {revision}");
    if st.repo_meta(repo).map_err(rio)?.is_none() {
        st.create_repo(repo, private, files, Some(revision), &summary)
            .map_err(rio)?;
        return Ok(ImportSummary {
            files: n,
            lfs_files,
            changed: true,
        });
    }
    if let Some(existing) = st.read_commit(repo, revision).map_err(rio)? {
        if existing.files != files {
            return Err(ImportError::Invalid(format!("`{repo}` already has commit {revision} with a different tree; refusing to rewrite an immutable commit")));
        }
        let refs = st.read_refs(repo).map_err(rio)?;
        if refs.heads.get("main").map(String::as_str) == Some(revision) {
            return Ok(ImportSummary {
                files: n,
                lfs_files,
                changed: false,
            });
        }
    }
    let mut refs = st.read_refs(repo).map_err(rio)?;
    let parent = refs.heads.get("main").cloned();
    let c = st.make_commit(files, parent.as_deref(), &summary, "", Some(revision));
    st.write_commit(repo, &c).map_err(rio)?;
    refs.heads.insert("main".into(), revision.to_string());
    st.write_refs(repo, &refs).map_err(rio)?;
    Ok(ImportSummary {
        files: n,
        lfs_files,
        changed: true,
    })
}
