//! Discovery: pin each source's revision on the hub, check the tree against the revision's own
//! file list, and read every weight file's safetensors header (read until two reads agree, checked
//! against the checkpoint's index, cached under `upstream/_headers/` with its SHA-256 in the
//! discovery record) into the tensor list the plan is resolved against.

use std::collections::BTreeMap;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use artifact::safetensors::{self, Header};
use hub::client::{FileMetadata, HubClient};
use hub::protocol::{Sibling, TreeEntry};
use hub::RepoId;

use super::proof::{self, ProvenHeader};
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
    /// The proof of the header's bytes `[0, 8+N)` (two agreeing reads), which a unit's copy of
    /// them must equal.
    pub header_proof: ProvenHeader,
}

/// Every weight file of every source, and the tensors they hold.
#[derive(Debug, Clone, Default)]
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

    /// The byte length of tensor `t` in its file (0 for a tensor no header names).
    pub fn tensor_bytes(&self, t: &UpstreamTensor) -> u64 {
        self.file(&t.source, &t.file)
            .and_then(|f| f.header.file_range(&t.name))
            .map_or(0, |r| r.end - r.start)
    }

    /// Add one weight file of `src` (listed in `listing`) and its tensors.
    pub fn add(&mut self, src: &Source, listing: &SourceListing, rh: ReadHeader) {
        add_file(self, src, &listing.repo, &listing.files, rh);
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
    let tree_files: BTreeMap<&str, &TreeEntry> = tree
        .iter()
        .filter(|e| e.kind == "file")
        .map(|e| (e.path.as_str(), e))
        .collect();
    let mut files = BTreeMap::new();
    for s in &info.siblings {
        let entry = tree_files.get(s.rfilename.as_str()).ok_or_else(|| {
            upstream_err(
                src,
                format!(
                    "`{}` is in the revision but not in its tree: the tree is incomplete",
                    s.rfilename
                ),
            )
        })?;
        files.insert(s.rfilename.clone(), agreed_file(src, s, entry)?);
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

/// Size and digest of one file, which the revision info and the tree listing must both state
/// alike: two independent answers, so a corrupted byte in either is a disagreement, never a
/// recorded size or digest.
fn agreed_file(src: &Source, s: &Sibling, entry: &TreeEntry) -> Result<RemoteFile, FetchError> {
    let path = &s.rfilename;
    let disagree = |what: &str, tree: &dyn std::fmt::Debug, rev: &dyn std::fmt::Debug| {
        upstream_err(
            src,
            format!("`{path}` has {what} {tree:?} in the tree but {rev:?} in the revision"),
        )
    };
    if s.size.is_some_and(|rs| rs != entry.size) {
        return Err(disagree("size", &entry.size, &s.size));
    }
    if s.blob_id.as_ref().is_some_and(|b| *b != entry.oid) {
        return Err(disagree("git oid", &entry.oid, &s.blob_id));
    }
    let tree_lfs = entry.lfs.as_ref().map(|l| (&l.oid, l.size));
    let rev_lfs = s.lfs.as_ref().map(|l| (&l.sha256, l.size));
    if tree_lfs.is_some() != rev_lfs.is_some() || tree_lfs.zip(rev_lfs).is_some_and(|(t, r)| t != r)
    {
        return Err(disagree("LFS object", &tree_lfs, &rev_lfs));
    }
    let digest = match (&s.lfs, &s.blob_id) {
        (Some(lfs), _) => lfs.sha256.clone(),
        (None, Some(oid)) => oid.clone(),
        (None, None) => {
            return Err(upstream_err(
                src,
                format!("`{path}` has no digest in the revision info"),
            ))
        }
    };
    Ok(RemoteFile {
        size: entry.size,
        digest,
    })
}

/// One weight file's header as discovery proved it.
#[derive(Debug, Clone)]
pub struct ReadHeader {
    /// The repository path.
    pub path: String,
    /// The parsed header.
    pub header: Header,
    /// HEAD `/resolve` metadata when the hub was asked (not for a cache the record proves).
    pub meta: Option<FileMetadata>,
    /// Length and SHA-256 of the header's bytes.
    pub proof: ProvenHeader,
}

/// The safetensors header of every weight file of `listing` (`concurrency` files at a time:
/// each is a HEAD and small Range requests, latency-bound), in file order, each read until two
/// reads agree byte for byte and checked against the file's size and the checkpoint's indexes.
/// With a work directory, a cached header that `recorded` (the last discovery record) proves
/// needs no request, an unproven cache counts as one read, and the agreed bytes are cached.
pub async fn read_headers(
    client: &HubClient,
    src: &Source,
    listing: &SourceListing,
    work: Option<&WorkDir>,
    recorded: Option<&SourceRecord>,
    concurrency: usize,
) -> Result<Vec<ReadHeader>, FetchError> {
    let size_of = |path: &str| listing.files.get(path).map_or(0, |f| f.size);
    let heads: Vec<Result<ReadHeader, FetchError>> =
        futures_util::stream::iter(listing.weights.iter().map(|path| {
            let size = size_of(path);
            let proof = recorded.and_then(|r| r.headers.get(path));
            async move { proven_header(client, src, listing, path, size, work, proof).await }
        }))
        .buffered(concurrency.max(1))
        .collect()
        .await;
    let heads: Vec<ReadHeader> = heads.into_iter().collect::<Result<_, _>>()?;
    let by_path: BTreeMap<String, &Header> =
        heads.iter().map(|h| (h.path.clone(), &h.header)).collect();
    proof::check_indexes(client, src, listing, &by_path, work).await?;
    Ok(heads)
}

/// One weight file's header: the cache when the record proves it, else read until two reads
/// agree (an unproven cache counting as one), parsed and checked against the file's size.
async fn proven_header(
    client: &HubClient,
    src: &Source,
    listing: &SourceListing,
    path: &str,
    size: u64,
    work: Option<&WorkDir>,
    recorded: Option<&ProvenHeader>,
) -> Result<ReadHeader, FetchError> {
    let herr = |source| FetchError::Header {
        repo: src.repo.as_str().to_owned(),
        file: path.to_owned(),
        source,
    };
    let cache = work.map(|w| w.headers(&src.name).join(path));
    let cached = cache.as_deref().and_then(|c| std::fs::read(c).ok());
    let (bytes, meta) = match (cached, recorded) {
        (Some(c), Some(r)) if r.holds(&c) => (c, None),
        (cached, _) => {
            let meta = resolve_file(client, src, &listing.repo, path).await?;
            if meta.size != size {
                return Err(upstream_err(
                    src,
                    format!(
                        "`{path}` resolves to {} B, the tree says {size} B",
                        meta.size
                    ),
                ));
            }
            let bytes = proof::agreed_header(client, src, path, &meta, cached.as_deref()).await?;
            if cached.as_deref() != Some(&bytes[..]) {
                if let Some(c) = &cache {
                    write_cache(c, &bytes)?;
                }
            }
            (bytes, Some(meta))
        }
    };
    let header = safetensors::parse_header(&bytes).map_err(herr)?;
    header.check_file_len(size).map_err(herr)?;
    Ok(ReadHeader {
        path: path.to_owned(),
        proof: ProvenHeader::of(&bytes),
        header,
        meta,
    })
}

/// Cache a header atomically under `upstream/_headers/`.
fn write_cache(cache: &std::path::Path, bytes: &[u8]) -> Result<(), FetchError> {
    if let Some(dir) = cache.parent() {
        std::fs::create_dir_all(dir).map_err(|source| FetchError::Io {
            what: "create",
            path: dir.to_owned(),
            source,
        })?;
    }
    ledger::write_atomic(cache, bytes)?;
    Ok(())
}

/// Pin, check and read the headers of every source of `plan`.
pub async fn discover(
    client: &HubClient,
    plan: &Plan,
    work: &WorkDir,
) -> Result<Upstream, FetchError> {
    let mut up = Upstream::default();
    // The last record proves the cached headers it names (a missing or unreadable one proves
    // none: each is then read again).
    let previous = Discovery::load(work).ok().flatten().unwrap_or_default();
    let mut discovery = Discovery {
        v: DISCOVERY_VERSION,
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
        let recorded = previous
            .sources
            .get(&src.name)
            .filter(|r| r.commit == src.revision.as_str());
        let concurrency = plan.run.concurrency as usize;
        let mut headers = BTreeMap::new();
        for rh in read_headers(client, src, &listing, Some(work), recorded, concurrency).await? {
            headers.insert(rh.path.clone(), rh.proof.clone());
            add_file(&mut up, src, &listing.repo, &listing.files, rh);
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
            headers,
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

/// Add one weight file and its tensors to `up`.
fn add_file(
    up: &mut Upstream,
    src: &Source,
    repo: &RepoId,
    files: &BTreeMap<String, RemoteFile>,
    rh: ReadHeader,
) {
    for t in &rh.header.tensors {
        up.tensors.push(
            UpstreamTensor::new(&t.name, t.dtype.as_str(), &t.shape, &rh.path).in_source(&src.name),
        );
    }
    let remote = files.get(&rh.path).cloned().unwrap_or(RemoteFile {
        size: rh.header.file_len(),
        digest: String::new(),
    });
    up.files.insert(
        (src.name.clone(), rh.path.clone()),
        UpstreamFile {
            source: src.name.clone(),
            repo: repo.clone(),
            path: rh.path,
            size: remote.size,
            meta: rh.meta,
            digest: remote.digest,
            header: rh.header,
            header_proof: rh.proof,
        },
    );
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
    /// The proof of each weight file's cached header (absent in a version-1 record: every
    /// header is then read again).
    #[serde(default)]
    pub headers: BTreeMap<String, ProvenHeader>,
}

/// The discovery record's schema version: 2 added the header proofs.
pub const DISCOVERY_VERSION: u32 = 2;

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
    /// Schema version ([`DISCOVERY_VERSION`]).
    pub v: u32,
    /// By source name.
    pub sources: BTreeMap<String, SourceRecord>,
}

/// A work directory fetched for another pin of one of the plan's sources: every stage refuses
/// it (its journals would call units done that were never fetched at this pin, and a release
/// record would name a revision its bytes do not come from).
#[derive(Debug, thiserror::Error)]
#[error(
    "work directory `{work_dir}` holds upstream source `{source_name}` as `{recorded}`, but the plan pins `{planned}`: a work directory belongs to one pin"
)]
pub struct OtherPin {
    pub work_dir: std::path::PathBuf,
    pub source_name: String,
    /// `repo@commit` as the work directory's discovery record has it.
    pub recorded: String,
    /// `repo@revision` as the plan pins it.
    pub planned: String,
}

impl OtherPin {
    /// The next step.
    pub fn hint(&self) -> String {
        format!(
            "give this plan a work directory of its own (`--work-dir DIR` or `[run] work_dir`), or remove `{}` to start this plan over; the plan that made it still runs on it",
            self.work_dir.display()
        )
    }
}

/// Refuses a work directory whose discovery record names another repository or commit for
/// one of `plan`'s sources. A missing or unreadable record passes (the stages' own checks
/// say "run minirun-fetch first").
pub fn check_pins(plan: &Plan, work: &WorkDir) -> Result<(), OtherPin> {
    match Discovery::load(work) {
        Ok(Some(discovery)) => discovery.check_pins(plan, work),
        _ => Ok(()),
    }
}

impl Discovery {
    /// [`check_pins`] of a record already read.
    pub fn check_pins(&self, plan: &Plan, work: &WorkDir) -> Result<(), OtherPin> {
        for src in &plan.sources {
            let Some(rec) = self.sources.get(&src.name) else {
                continue;
            };
            if rec.commit != src.revision.as_str() || rec.repo != src.repo.as_str() {
                return Err(OtherPin {
                    work_dir: work.root().to_owned(),
                    source_name: src.name.clone(),
                    recorded: format!("{}@{}", rec.repo, rec.commit),
                    planned: format!("{}@{}", src.repo.as_str(), src.revision.as_str()),
                });
            }
        }
        Ok(())
    }

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
/// Every cached header must be the bytes the record proves: a cache that differs, or a record
/// without the proof, is refused (run fetch again), never trusted.
pub fn load_offline(plan: &Plan, work: &WorkDir) -> Result<Upstream, FetchError> {
    let discovery = Discovery::load(work)?.ok_or_else(|| FetchError::NoDiscovery {
        plan: plan.name.clone(),
        path: work.discovery(),
    })?;
    discovery.check_pins(plan, work)?;
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
            let rh = offline_header(src, rec, work, path)?;
            add_file(&mut up, src, &repo, &rec.files, rh);
        }
    }
    Ok(up)
}

/// The cached header of `path`, checked against the record's proof and parsed.
fn offline_header(
    src: &Source,
    rec: &SourceRecord,
    work: &WorkDir,
    path: &str,
) -> Result<ReadHeader, FetchError> {
    let cache = work.headers(&src.name).join(path);
    let bytes = std::fs::read(&cache).map_err(|source| FetchError::Io {
        what: "read",
        path: cache.clone(),
        source,
    })?;
    let unproven = |why: &str| FetchError::HeaderUnproven {
        file: path.to_owned(),
        cache: cache.clone(),
        why: why.to_owned(),
    };
    let proof = rec
        .headers
        .get(path)
        .ok_or_else(|| unproven("the discovery record holds no proof of it (an older fetch)"))?;
    if !proof.holds(&bytes) {
        return Err(unproven(&format!(
            "its SHA-256 is {}, the discovery record proves {}",
            proof::sha256_hex(&bytes),
            proof.sha256
        )));
    }
    let header = safetensors::parse_header(&bytes).map_err(|source| FetchError::Header {
        repo: src.repo.as_str().to_owned(),
        file: path.to_owned(),
        source,
    })?;
    Ok(ReadHeader {
        path: path.to_owned(),
        header,
        meta: None,
        proof: proof.clone(),
    })
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
