//! Whole upstream root files the artifact carries verbatim (tokenizer, configuration, licence and
//! the plan's `files`): downloaded once into `upstream/_root/<source>/`, checked against the
//! hub's digest, and kept; a present file whose digest holds is never downloaded again.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use hub::client::HubClient;
use hub::RepoId;
use sha1::Digest as _;

use super::discover::SourceRecord;
use super::FetchError;
use crate::plan::{Plan, Source};
use crate::work::WorkDir;

/// Repository paths of the root files `src` contributes to the artifact.
pub fn root_paths(plan: &Plan, src: &Source) -> Vec<String> {
    let mut paths: Vec<String> = src.files.iter().map(|p| p.as_str().to_owned()).collect();
    paths.extend(src.license.as_ref().map(|l| l.from.as_str().to_owned()));
    for id in [&plan.tokenizer, &plan.config].into_iter().flatten() {
        if id.source == src.name {
            paths.push(id.from.as_str().to_owned());
        }
    }
    paths.sort();
    paths.dedup();
    paths
}

/// Download every root file of `src` that is not already present with the right digest.
pub async fn fetch_root_files(
    client: &HubClient,
    plan: &Plan,
    src: &Source,
    repo: &RepoId,
    record: &SourceRecord,
    work: &WorkDir,
) -> Result<(), FetchError> {
    let dir = work.root_files(&src.name);
    for path in root_paths(plan, src) {
        let remote = record
            .files
            .get(&path)
            .ok_or_else(|| FetchError::Upstream {
                repo: src.repo.as_str().to_owned(),
                revision: src.revision.as_str().to_owned(),
                detail: format!(
                    "the plan names root file `{path}`, which the revision does not hold"
                ),
            })?;
        let local = dir.join(&path);
        if local.is_file() && hash_file(&local, &remote.digest, remote.size)?.1 == remote.digest {
            continue;
        }
        let (_, bytes) = client
            .download_bytes(repo, src.revision.as_str(), &path)
            .await
            .map_err(|source| FetchError::Hub {
                what: format!("failed to download `{path}` from `{}`", src.repo.as_str()),
                source,
            })?;
        // The download was checked against the HEAD answer's etag; the revision and tree agreed
        // on this digest independently of it.
        let actual = super::proof::digest_of(&bytes, &remote.digest);
        if actual != remote.digest {
            return Err(FetchError::Upstream {
                repo: src.repo.as_str().to_owned(),
                revision: src.revision.as_str().to_owned(),
                detail: format!(
                    "`{path}` downloaded as {actual}, the revision records {}",
                    remote.digest
                ),
            });
        }
        if let Some(parent) = local.parent() {
            std::fs::create_dir_all(parent).map_err(|source| FetchError::Io {
                what: "create",
                path: parent.to_owned(),
                source,
            })?;
        }
        ledger::write_atomic(&local, &bytes)?;
    }
    Ok(())
}

/// True when every root file of every source is present (checked by size only: fetch's
/// "nothing to do" path must send nothing and read little).
pub fn root_files_present(plan: &Plan, work: &WorkDir) -> bool {
    plan.sources.iter().all(|src| {
        root_paths(plan, src)
            .iter()
            .all(|p| work.root_files(&src.name).join(p).is_file())
    })
}

/// Hash a whole file the way the hub records it: SHA-256 for LFS (a 64-hex digest), git-blob
/// SHA-1 otherwise. Returns the algorithm's name and the hex digest.
pub fn hash_file(
    path: &Path,
    hub_digest: &str,
    size: u64,
) -> Result<(&'static str, String), FetchError> {
    let mut f = File::open(path).map_err(|source| FetchError::Io {
        what: "open",
        path: path.to_owned(),
        source,
    })?;
    let mut buf = vec![0u8; 1 << 20];
    let read = |f: &mut File, buf: &mut [u8]| {
        f.read(buf).map_err(|source| FetchError::Io {
            what: "read",
            path: path.to_owned(),
            source,
        })
    };
    if names::is_sha256_lower(hub_digest) {
        let mut h = sha2::Sha256::new();
        loop {
            let n = read(&mut f, &mut buf)?;
            if n == 0 {
                break;
            }
            h.update(buf.get(..n).unwrap_or(&[]));
        }
        Ok(("sha256", hex::encode(h.finalize())))
    } else {
        let mut h = sha1::Sha1::new();
        h.update(format!("blob {size}\0").as_bytes());
        loop {
            let n = read(&mut f, &mut buf)?;
            if n == 0 {
                break;
            }
            h.update(buf.get(..n).unwrap_or(&[]));
        }
        Ok(("git-sha1", hex::encode(h.finalize())))
    }
}
