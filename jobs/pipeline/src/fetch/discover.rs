//! Discovery: pin each source's revision on the hub, check the tree against the revision's own
//! file list, and read every weight file's safetensors header (two Range requests, cached under
//! `upstream/_headers/`) into the tensor list the plan is resolved against.

use std::collections::BTreeMap;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use artifact::safetensors::{self, Header};
use hub::client::{FileMetadata, HubClient};
use hub::RepoId;

use super::{root, FetchError};
use crate::plan::{glob_match, Plan, Source, UpstreamTensor};
use crate::work::WorkDir;

/// What the hub holds of one weight file at the pinned revision.
#[derive(Debug, Clone)]
pub struct UpstreamFile {
    /// The source it belongs to.
    pub source: String,
    /// The repository.
    pub repo: RepoId,
    /// Its repository path.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// HEAD `/resolve` metadata (size, etag, byte location); `None` when loaded offline from the
    /// discovery record (repack, gate).
    pub meta: Option<FileMetadata>,
    /// The hub's content digest: LFS SHA-256 (64 hex) or git-blob SHA-1 (40 hex).
    pub digest: String,
    /// Its parsed safetensors header.
    pub header: Header,
}

/// Every weight file of every source, and the tensors they hold.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// By (source, path).
    pub files: BTreeMap<(String, String), UpstreamFile>,
    /// All tensors, in file order, for [`Plan::resolve`].
    pub tensors: Vec<UpstreamTensor>,
}

impl Upstream {
    /// The weight file `path` of `source`.
    pub fn file(&self, source: &str, path: &str) -> Option<&UpstreamFile> {
        self.files.get(&(source.to_owned(), path.to_owned()))
    }
}

fn upstream_err(src: &Source, detail: String) -> FetchError {
    FetchError::Upstream {
        repo: src.repo.as_str().to_owned(),
        revision: src.revision.as_str().to_owned(),
        detail,
    }
}

fn hub_err(what: String) -> impl FnOnce(hub::HubError) -> FetchError {
    move |source| FetchError::Hub { what, source }
}

/// What the hub holds of one source at its pinned revision: every file, checked between the
/// revision info and the tree listing.
#[derive(Debug, Clone)]
pub struct SourceListing {
    /// The repository.
    pub repo: RepoId,
    /// Every file of the revision with its size and digest.
    pub files: BTreeMap<String, RemoteFile>,
    /// The files the source's `weights` globs match, sorted.
    pub weights: Vec<String>,
}

/// Confirm `src`'s pin on the hub and list its files: the revision info (with blobs) must name
/// the pinned commit and agree with the tree listing file for file.
pub async fn list_source(client: &HubClient, src: &Source) -> Result<SourceListing, FetchError> {
    let repo = RepoId::model(src.repo.as_str()).map_err(|d| upstream_err(src, d))?;
    let rev = src.revision.as_str();
    let info = client
        .revision_info(&repo, rev, true)
        .await
        .map_err(hub_err(format!(
            "failed to read revision `{rev}` of `{}`",
            src.repo.as_str()
        )))?;
    if info.sha.as_deref() != Some(rev) {
        return Err(upstream_err(
            src,
            match info.sha.as_deref() {
                Some(sha) => format!("the hub resolved the pin to commit `{sha}`"),
                None => "the hub's answer names no commit".into(),
            },
        ));
    }
    let tree = client
        .list_tree(&repo, rev, None, true)
        .await
        .map_err(hub_err(format!(
            "failed to list the tree of `{}` at `{rev}`",
            src.repo.as_str()
        )))?;
    let tree_files: BTreeMap<&str, u64> = tree
        .iter()
        .filter(|e| e.kind == "file")
        .map(|e| (e.path.as_str(), e.size))
        .collect();
    let mut files = BTreeMap::new();
    for s in &info.siblings {
        let size = match tree_files.get(s.rfilename.as_str()) {
            None => {
                return Err(upstream_err(
                    src,
                    format!(
                        "`{}` is in the revision but not in its tree: the tree is incomplete",
                        s.rfilename
                    ),
                ))
            }
            Some(&size) if s.size.is_some_and(|rs| rs != size) => {
                return Err(upstream_err(
                    src,
                    format!(
                        "`{}` is {size} B in the tree but {:?} B in the revision",
                        s.rfilename, s.size
                    ),
                ));
            }
            Some(&size) => size,
        };
        let digest = match (&s.lfs, &s.blob_id) {
            (Some(lfs), _) => lfs.sha256.clone(),
            (None, Some(oid)) => oid.clone(),
            (None, None) => {
                return Err(upstream_err(
                    src,
                    format!("`{}` has no digest in the revision info", s.rfilename),
                ))
            }
        };
        files.insert(s.rfilename.clone(), RemoteFile { size, digest });
    }
    if tree_files.len() != info.siblings.len() {
        return Err(upstream_err(
            src,
            format!(
                "the tree lists {} files, the revision {}",
                tree_files.len(),
                info.siblings.len()
            ),
        ));
    }
    let weights = files
        .keys()
        .filter(|p| src.weights.iter().any(|g| glob_match(g, p)))
        .cloned()
        .collect();
    Ok(SourceListing {
        repo,
        files,
        weights,
    })
}

/// The safetensors header of every weight file of `listing` (`concurrency` files at a time:
/// each is a HEAD and two small Range requests, latency-bound), in file order, each checked
/// against the file's size. With a work directory, a cached header that implies the file's
/// exact size needs no request (the file is then resolved only when a unit needs its bytes), and
/// headers read are cached.
pub async fn read_headers(
    client: &HubClient,
    src: &Source,
    listing: &SourceListing,
    work: Option<&WorkDir>,
    concurrency: usize,
) -> Result<Vec<(String, Header, Option<FileMetadata>)>, FetchError> {
    let size_of = |path: &str| listing.files.get(path).map_or(0, |f| f.size);
    let heads: Vec<Result<(Header, Option<FileMetadata>), FetchError>> =
        futures_util::stream::iter(listing.weights.iter().map(|path| {
            let size = size_of(path);
            let repo = &listing.repo;
            async move {
                if let Some(h) = work.and_then(|w| cached_header(w, src, path, size)) {
                    return Ok((h, None));
                }
                let meta = resolve_file(client, src, repo, path).await?;
                let header = read_header(client, work, src, repo, path, &meta).await?;
                Ok((header, Some(meta)))
            }
        }))
        .buffered(concurrency.max(1))
        .collect()
        .await;
    let mut out = Vec::with_capacity(heads.len());
    for (path, head) in listing.weights.iter().zip(heads) {
        let (header, meta) = head?;
        header
            .check_file_len(size_of(path))
            .map_err(|source| FetchError::Header {
                repo: src.repo.as_str().to_owned(),
                file: path.clone(),
                source,
            })?;
        out.push((path.clone(), header, meta));
    }
    Ok(out)
}

/// Pin, check and read the headers of every source of `plan`.
pub async fn discover(
    client: &HubClient,
    plan: &Plan,
    work: &WorkDir,
) -> Result<Upstream, FetchError> {
    let mut up = Upstream {
        files: BTreeMap::new(),
        tensors: Vec::new(),
    };
    let mut discovery = Discovery {
        v: 1,
        sources: BTreeMap::new(),
    };
    for src in &plan.sources {
        let listing = list_source(client, src).await?;
        if listing.weights.is_empty() {
            return Err(upstream_err(
                src,
                format!("no file matches the weight globs {:?}", src.weights),
            ));
        }
        let concurrency = plan.run.concurrency as usize;
        for (path, header, meta) in
            read_headers(client, src, &listing, Some(work), concurrency).await?
        {
            for t in &header.tensors {
                up.tensors.push(
                    UpstreamTensor::new(&t.name, t.dtype.as_str(), &t.shape, &path)
                        .in_source(&src.name),
                );
            }
            let remote = listing.files.get(&path).cloned().unwrap_or(RemoteFile {
                size: header.file_len(),
                digest: String::new(),
            });
            up.files.insert(
                (src.name.clone(), path.clone()),
                UpstreamFile {
                    source: src.name.clone(),
                    repo: listing.repo.clone(),
                    path,
                    size: remote.size,
                    meta,
                    digest: remote.digest,
                    header,
                },
            );
        }
        let SourceListing {
            repo,
            files,
            weights,
        } = listing;
        let record = SourceRecord {
            repo: src.repo.as_str().to_owned(),
            commit: src.revision.as_str().to_owned(),
            weights,
            files,
        };
        root::fetch_root_files(client, plan, src, &repo, &record, work).await?;
        discovery.sources.insert(src.name.clone(), record);
    }
    let bytes = serde_json::to_vec_pretty(&discovery).map_err(|e| FetchError::Io {
        what: "encode",
        path: work.discovery(),
        source: std::io::Error::other(e),
    })?;
    if let Some(dir) = work.discovery().parent() {
        std::fs::create_dir_all(dir).map_err(|source| FetchError::Io {
            what: "create",
            path: dir.to_owned(),
            source,
        })?;
    }
    ledger::write_atomic(&work.discovery(), &bytes)?;
    Ok(up)
}

/// What fetch learned of one source at its pinned revision (`upstream/_discovery.json`), so
/// later stages resolve the plan offline.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SourceRecord {
    /// Repository id.
    pub repo: String,
    /// The pinned commit the hub confirmed.
    pub commit: String,
    /// Every file of the revision with its size and digest.
    pub files: BTreeMap<String, RemoteFile>,
    /// The weight files among them.
    pub weights: Vec<String>,
}

/// Size and hub digest (LFS SHA-256 or git-blob SHA-1) of one upstream file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RemoteFile {
    /// Bytes.
    pub size: u64,
    /// 64-hex LFS SHA-256 or 40-hex git-blob SHA-1.
    pub digest: String,
}

/// The discovery record of every source.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Discovery {
    /// Schema version (1).
    pub v: u32,
    /// By source name.
    pub sources: BTreeMap<String, SourceRecord>,
}

impl Discovery {
    /// Read `upstream/_discovery.json`; `None` when fetch has not run.
    pub fn load(work: &WorkDir) -> Result<Option<Discovery>, FetchError> {
        let path = work.discovery();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(FetchError::Io {
                    what: "read",
                    path,
                    source,
                })
            }
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| FetchError::Io {
                what: "parse",
                path,
                source: std::io::Error::other(e),
            })
    }
}

/// The upstream files and tensors as the last fetch recorded them: no network (repack, gate).
pub fn load_offline(plan: &Plan, work: &WorkDir) -> Result<Upstream, FetchError> {
    let discovery = Discovery::load(work)?.ok_or_else(|| FetchError::NoDiscovery {
        plan: plan.name.clone(),
        path: work.discovery(),
    })?;
    let mut up = Upstream {
        files: BTreeMap::new(),
        tensors: Vec::new(),
    };
    for src in &plan.sources {
        let rec = discovery
            .sources
            .get(&src.name)
            .filter(|r| r.commit == src.revision.as_str())
            .ok_or_else(|| {
                upstream_err(
                    src,
                    "no discovery record for this pin: run minirun-fetch first".into(),
                )
            })?;
        let repo = RepoId::model(src.repo.as_str()).map_err(|d| upstream_err(src, d))?;
        for path in &rec.weights {
            let cache = work.headers(&src.name).join(path);
            let bytes = std::fs::read(&cache).map_err(|source| FetchError::Io {
                what: "read",
                path: cache.clone(),
                source,
            })?;
            let header =
                safetensors::parse_header(&bytes).map_err(|source| FetchError::Header {
                    repo: src.repo.as_str().to_owned(),
                    file: path.clone(),
                    source,
                })?;
            for t in &header.tensors {
                up.tensors.push(
                    UpstreamTensor::new(&t.name, t.dtype.as_str(), &t.shape, path)
                        .in_source(&src.name),
                );
            }
            let remote = rec.files.get(path).cloned().unwrap_or(RemoteFile {
                size: header.file_len(),
                digest: String::new(),
            });
            up.files.insert(
                (src.name.clone(), path.clone()),
                UpstreamFile {
                    source: src.name.clone(),
                    repo: repo.clone(),
                    path: path.clone(),
                    size: remote.size,
                    meta: None,
                    digest: remote.digest,
                    header,
                },
            );
        }
    }
    Ok(up)
}

/// HEAD `/resolve` of one file at the pinned revision: its size, digest and byte location.
pub async fn resolve_file(
    client: &HubClient,
    src: &Source,
    repo: &RepoId,
    path: &str,
) -> Result<FileMetadata, FetchError> {
    let rev = src.revision.as_str();
    let meta = client
        .file_metadata(repo, rev, path)
        .await
        .map_err(hub_err(format!(
            "failed to resolve `{path}` in `{}`",
            src.repo.as_str()
        )))?;
    if meta.commit != rev {
        return Err(upstream_err(
            src,
            format!("`{path}` resolved at commit `{}`", meta.commit),
        ));
    }
    Ok(meta)
}

/// The cached header of `path`, if it parses and implies a file of exactly `size` bytes.
fn cached_header(work: &WorkDir, src: &Source, path: &str, size: u64) -> Option<Header> {
    let bytes = std::fs::read(work.headers(&src.name).join(path)).ok()?;
    safetensors::parse_header(&bytes)
        .ok()
        .filter(|h| h.file_len() == size)
}

/// The header of `path` with two Range requests (the 8-byte length, then the JSON), cached
/// atomically under `upstream/_headers/` when there is a work directory.
async fn read_header(
    client: &HubClient,
    work: Option<&WorkDir>,
    src: &Source,
    repo: &RepoId,
    path: &str,
    meta: &FileMetadata,
) -> Result<Header, FetchError> {
    let herr = |source| FetchError::Header {
        repo: src.repo.as_str().to_owned(),
        file: path.to_owned(),
        source,
    };
    let what = || format!("failed to read the header of `{path}` in `{}`", repo.id());
    let first = client
        .get_range(meta, 0, Some(7))
        .await
        .map_err(hub_err(what()))?;
    let first8: [u8; 8] = first.as_slice().try_into().map_err(|_| {
        herr(safetensors::SafetensorsError::Truncated {
            need: 8,
            have: first.len() as u64,
        })
    })?;
    let n = safetensors::header_len(first8).map_err(herr)?;
    let mut bytes = first;
    if n > 0 {
        let json = client
            .get_range(meta, 8, Some(7 + n))
            .await
            .map_err(hub_err(what()))?;
        bytes.extend_from_slice(&json);
    }
    let header = safetensors::parse_header(&bytes).map_err(herr)?;
    let Some(work) = work else {
        return Ok(header);
    };
    let cache = work.headers(&src.name).join(path);
    if let Some(dir) = cache.parent() {
        std::fs::create_dir_all(dir).map_err(|source| FetchError::Io {
            what: "create",
            path: dir.to_owned(),
            source,
        })?;
    }
    ledger::write_atomic(&cache, &bytes)?;
    Ok(header)
}
