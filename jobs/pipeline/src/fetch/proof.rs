//! Proofs for the bytes no hub digest covers on their own (docs/fetch.md, "Bytes no digest
//! covers"): a safetensors header is read until two reads agree byte for byte, its SHA-256 is
//! recorded, and the header's tensor names must equal what the checkpoint's own index maps to that
//! shard; a unit's digest-proven copy of the header must equal the recorded one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use artifact::safetensors::{self, Header};
use hub::client::{FileMetadata, HubClient};

use super::discover::{Discovery, SourceListing};
use super::FetchError;
use crate::plan::Source;
use crate::work::WorkDir;

/// Reads of one byte range at most before two must have agreed.
pub const MAX_READS: u32 = 4;

/// What the discovery record proves of one cached header: its length `8 + N` and SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvenHeader {
    /// `8 + N`: the header's bytes, length prefix included.
    pub len: u64,
    /// SHA-256 of those bytes, lowercase hex.
    pub sha256: String,
}

impl ProvenHeader {
    /// The record of `bytes`.
    pub fn of(bytes: &[u8]) -> ProvenHeader {
        ProvenHeader {
            len: bytes.len() as u64,
            sha256: sha256_hex(bytes),
        }
    }

    /// True when `bytes` are the recorded ones.
    pub fn holds(&self, bytes: &[u8]) -> bool {
        bytes.len() as u64 == self.len && sha256_hex(bytes) == self.sha256
    }
}

/// SHA-256 of `b`, lowercase hex.
pub fn sha256_hex(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// Reads of one byte range until two agree: each read's SHA-256 is kept, and a read whose digest
/// an earlier read already had is the agreed answer (its bytes are still in the caller's buffer,
/// so one buffer serves every read).
#[derive(Debug, Default)]
pub(crate) struct Agreement {
    seen: Vec<[u8; 32]>,
    /// Fresh reads so far (a read that failed counts).
    pub reads: u32,
    /// Why the last failed read failed.
    pub last_error: Option<String>,
}

impl Agreement {
    /// Count bytes read earlier (a cache) as one answer, without counting a fresh read.
    pub fn prior(&mut self, bytes: &[u8]) {
        self.seen.push(Sha256::digest(bytes).into());
    }

    /// One fresh read's bytes: true when an earlier answer had exactly these bytes.
    pub fn agrees(&mut self, bytes: &[u8]) -> bool {
        self.reads += 1;
        let d: [u8; 32] = Sha256::digest(bytes).into();
        let hit = self.seen.contains(&d);
        self.seen.push(d);
        hit
    }

    /// One fresh read that failed.
    pub fn failed(&mut self, why: impl std::fmt::Display) {
        self.reads += 1;
        self.last_error = Some(why.to_string());
    }

    /// No read left.
    pub fn exhausted(&self) -> bool {
        self.reads >= MAX_READS
    }

    /// Why no two answers agreed, for an error.
    pub fn why(&self) -> String {
        let answers = self.seen.len();
        match &self.last_error {
            Some(e) => format!(
                "{} reads, {answers} answers and no two identical (last failure: {e})",
                self.reads
            ),
            None => format!("{} reads and no two identical", self.reads),
        }
    }
}

/// One read of a header: the 8-byte length, then the JSON (two Range requests).
async fn read_once(client: &HubClient, meta: &FileMetadata) -> Result<Vec<u8>, String> {
    let first = client
        .get_range(meta, 0, Some(7))
        .await
        .map_err(|e| e.to_string())?;
    let first8: [u8; 8] = first
        .as_slice()
        .try_into()
        .map_err(|_| format!("the length prefix came back as {} bytes", first.len()))?;
    let n = safetensors::header_len(first8).map_err(|e| e.to_string())?;
    if n.saturating_add(8) > meta.size {
        return Err(format!(
            "the length prefix says {n} B of header in a {} B file",
            meta.size
        ));
    }
    let mut bytes = first;
    if n > 0 {
        let json = client
            .get_range(meta, 8, Some(7 + n))
            .await
            .map_err(|e| e.to_string())?;
        bytes.extend_from_slice(&json);
    }
    Ok(bytes)
}

/// The header bytes `[0, 8+N)` of `path`, read until two reads agree byte for byte (`prior`, a
/// cached copy, counts as an earlier answer), at most [`MAX_READS`] fresh reads.
pub async fn agreed_header(
    client: &HubClient,
    src: &Source,
    path: &str,
    meta: &FileMetadata,
    prior: Option<&[u8]>,
) -> Result<Vec<u8>, FetchError> {
    let mut agreement = Agreement::default();
    if let Some(p) = prior {
        agreement.prior(p);
    }
    while !agreement.exhausted() {
        match read_once(client, meta).await {
            Ok(bytes) if agreement.agrees(&bytes) => return Ok(bytes),
            Ok(_) => {}
            Err(e) => agreement.failed(e),
        }
    }
    Err(FetchError::Disagree {
        repo: src.repo.as_str().to_owned(),
        file: path.to_owned(),
        what: "safetensors header".into(),
        why: agreement.why(),
    })
}

/// Every index of `listing` (`*.safetensors.index.json` in a folder that holds weight files):
/// downloaded and proven by the hub's digest (cached under `upstream/_index/` with a work
/// directory), then each weight file of its folder must hold exactly the tensors the index maps
/// to it. Returns the indexes checked.
pub(crate) async fn check_indexes(
    client: &HubClient,
    src: &Source,
    listing: &SourceListing,
    headers: &BTreeMap<String, &Header>,
    work: Option<&WorkDir>,
) -> Result<Vec<String>, FetchError> {
    let indexes: Vec<&String> = listing
        .files
        .keys()
        .filter(|p| p.ends_with(".safetensors.index.json"))
        .filter(|p| listing.weights.iter().any(|w| folder(w) == folder(p)))
        .collect();
    let mut named: BTreeMap<&str, usize> = BTreeMap::new();
    for index in &indexes {
        let bytes = proven_index(client, src, listing, index, work).await?;
        let map = weight_map(&bytes).map_err(|detail| index_err(src, index, detail))?;
        check_one_index(src, listing, index, &map, headers)?;
        for w in listing
            .weights
            .iter()
            .filter(|w| folder(w) == folder(index))
        {
            if map.values().any(|f| f == base(w)) {
                *named.entry(w.as_str()).or_default() += 1;
            }
        }
    }
    if let Some(w) = listing
        .weights
        .iter()
        .find(|w| indexes.iter().any(|i| folder(i) == folder(w)) && !named.contains_key(w.as_str()))
    {
        return Err(index_err(
            src,
            indexes
                .iter()
                .find(|i| folder(i) == folder(w))
                .map_or("", |i| i.as_str()),
            format!("weight file `{w}` is in the index's folder but no index maps a tensor to it"),
        ));
    }
    Ok(indexes.into_iter().cloned().collect())
}

/// The header of every weight file the index maps tensors to names exactly those tensors, and
/// every file it names exists.
fn check_one_index(
    src: &Source,
    listing: &SourceListing,
    index: &str,
    map: &BTreeMap<String, String>,
    headers: &BTreeMap<String, &Header>,
) -> Result<(), FetchError> {
    let dir = folder(index);
    let mut by_file: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for (tensor, file) in map {
        let path = if dir.is_empty() {
            file.clone()
        } else {
            format!("{dir}/{file}")
        };
        by_file.entry(path).or_default().insert(tensor.as_str());
    }
    for (path, want) in &by_file {
        if !listing.files.contains_key(path) {
            return Err(index_err(
                src,
                index,
                format!("it maps tensors to `{path}`, which the revision does not hold"),
            ));
        }
        let Some(header) = headers.get(path) else {
            // A shard the plan's weight globs leave out: nothing of it is read.
            continue;
        };
        let have: BTreeSet<&str> = header.tensors.iter().map(|t| t.name.as_str()).collect();
        if &have != want {
            let extra: Vec<&&str> = have.difference(want).take(3).collect();
            let missing: Vec<&&str> = want.difference(&have).take(3).collect();
            return Err(index_err(
                src,
                index,
                format!(
                    "the header of `{path}` names {} tensors, the index maps {} to it; in the header only: {extra:?}; in the index only: {missing:?}",
                    have.len(),
                    want.len()
                ),
            ));
        }
    }
    Ok(())
}

/// The bytes of `index`, proven by the hub's digest: the cached copy when it still hashes to it,
/// else downloaded (and cached with a work directory).
async fn proven_index(
    client: &HubClient,
    src: &Source,
    listing: &SourceListing,
    index: &str,
    work: Option<&WorkDir>,
) -> Result<Vec<u8>, FetchError> {
    let remote = listing
        .files
        .get(index)
        .ok_or_else(|| index_err(src, index, "not in the revision".into()))?;
    let cache = work.map(|w| w.indexes(&src.name).join(index));
    if let Some(bytes) = cache.as_deref().and_then(|c| std::fs::read(c).ok()) {
        if digest_of(&bytes, &remote.digest) == remote.digest {
            return Ok(bytes);
        }
    }
    let (_, bytes) = client
        .download_bytes(&listing.repo, src.revision.as_str(), index)
        .await
        .map_err(|source| FetchError::Hub {
            what: format!("failed to download `{index}` from `{}`", src.repo.as_str()),
            source,
        })?;
    let actual = digest_of(&bytes, &remote.digest);
    if actual != remote.digest {
        return Err(index_err(
            src,
            index,
            format!(
                "downloaded bytes hash to {actual}, the revision records {}",
                remote.digest
            ),
        ));
    }
    if let Some(c) = cache {
        if let Some(dir) = c.parent() {
            std::fs::create_dir_all(dir).map_err(|source| FetchError::Io {
                what: "create",
                path: dir.to_owned(),
                source,
            })?;
        }
        ledger::write_atomic(&c, &bytes)?;
    }
    Ok(bytes)
}

/// `bytes` hashed the way `hub_digest` was: SHA-256 (64 hex) or git-blob SHA-1.
pub(crate) fn digest_of(bytes: &[u8], hub_digest: &str) -> String {
    if names::is_sha256_lower(hub_digest) {
        sha256_hex(bytes)
    } else {
        use sha1::Digest as _;
        let mut h = sha1::Sha1::new();
        h.update(format!("blob {}\0", bytes.len()).as_bytes());
        h.update(bytes);
        hex::encode(h.finalize())
    }
}

/// The `weight_map` of an index: tensor name → shard file name (relative to the index).
fn weight_map(bytes: &[u8]) -> Result<BTreeMap<String, String>, String> {
    #[derive(Deserialize)]
    struct Index {
        weight_map: BTreeMap<String, String>,
    }
    serde_json::from_slice::<Index>(bytes)
        .map(|i| i.weight_map)
        .map_err(|e| format!("not an index with a `weight_map`: {e}"))
}

fn index_err(src: &Source, index: &str, detail: String) -> FetchError {
    FetchError::Index {
        repo: src.repo.as_str().to_owned(),
        index: index.to_owned(),
        detail,
    }
}

fn folder(p: &str) -> &str {
    p.rsplit_once('/').map_or("", |(d, _)| d)
}

fn base(p: &str) -> &str {
    p.rsplit_once('/').map_or(p, |(_, b)| b)
}

/// A unit's copy of the header `[0, len)` of an upstream file must be the recorded header: the
/// unit's bytes are proven (by the file's digest, or by two agreeing reads), the cache was proven
/// by two agreeing reads, and the two must be the same bytes. On a mismatch the cached header is
/// removed (the next run reads it again) and the unit fails naming the file.
pub(crate) fn unit_header_matches(
    unit: &str,
    file: &std::fs::File,
    data_path: &Path,
    upstream_file: &str,
    recorded: &ProvenHeader,
    cache: &Path,
) -> Result<(), FetchError> {
    let bytes = super::unit::read_at(file, data_path, 0..recorded.len)?;
    let actual = sha256_hex(&bytes);
    if actual == recorded.sha256 {
        return Ok(());
    }
    let _ = std::fs::remove_file(cache);
    Err(FetchError::HeaderMismatch {
        unit: unit.to_owned(),
        file: upstream_file.to_owned(),
        cached: recorded.sha256.clone(),
        proven: actual,
    })
}

/// True when every cached header of `plan`'s sources is the one the discovery record proves (a
/// header changed or lost on disk sends fetch back to the hub for it, even with every unit done).
pub(crate) fn cached_headers_hold(
    plan: &crate::plan::Plan,
    work: &WorkDir,
    discovery: Option<&Discovery>,
) -> bool {
    let Some(d) = discovery else {
        return false;
    };
    plan.sources.iter().all(|src| {
        d.sources.get(&src.name).is_some_and(|rec| {
            rec.weights.iter().all(|path| {
                let bytes = std::fs::read(work.headers(&src.name).join(path));
                rec.headers
                    .get(path)
                    .zip(bytes.ok())
                    .is_some_and(|(proof, b)| proof.holds(&b))
            })
        })
    })
}

/// Why a done unit is no longer done by the header proofs, if it is not: every upstream file its
/// journal records must carry the header SHA-256 that the discovery record proves for that file
/// (a journal from before header proofs, or a header proven anew since, is fetched again).
pub(crate) fn stale_headers(
    ledger_dir: &Path,
    unit: &str,
    discovery: Option<&Discovery>,
) -> Result<Option<String>, FetchError> {
    let Some(discovery) = discovery else {
        return Ok(Some(
            "no discovery record proves the headers (upstream/_discovery.json)".into(),
        ));
    };
    let Some(journal) = ledger::Journal::load(ledger_dir, super::STAGE, unit)? else {
        return Ok(Some(crate::units::NO_JOURNAL.into()));
    };
    let files = journal
        .extra
        .get("upstream")
        .and_then(serde_json::Value::as_object);
    for (rel, rec) in files.into_iter().flatten() {
        let journaled = rec.get("header_sha256").and_then(serde_json::Value::as_str);
        let proven = rel
            .split_once('/')
            .and_then(|(source, path)| discovery.sources.get(source)?.headers.get(path));
        match (journaled, proven) {
            (Some(j), Some(p)) if j == p.sha256 => {}
            (None, _) => {
                return Ok(Some(format!(
                    "the journal records no header proof for `{rel}` (an older fetch)"
                )))
            }
            _ => {
                return Ok(Some(format!(
                    "the header of `{rel}` the journal proves is not the one the discovery record proves"
                )))
            }
        }
    }
    Ok(None)
}
