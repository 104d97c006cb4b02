//! `pull` and `check --repair` (`docs/verify.md` §5): pin the revision, keep what already
//! verifies, download the rest over [`PullOpts::workers`] connections at once, hashing each file
//! as it is written, then verify and record evidence.
//!
//! Hashing while writing counts as verification only for bytes written through one rooted,
//! no-follow descriptor ([`fsid::open_dir_nofollow`], [`fsid::open_rw_at`]): the part file is
//! written and fsynced through it, renamed into place within the same directory descriptor, and
//! the evidence records the identity `fstat` gives on that descriptor after the rename. A part
//! file kept from a killed run is resumed with `Range`, its kept prefix re-read and hashed, never
//! trusted. Each finished file is also noted in a pull journal
//! (`.minirun-evidence/<commit>.pull.json`, replaced atomically at most every
//! [`JOURNAL_EVERY`]), so a killed pull neither downloads nor re-reads a file it had verified while
//! that file's identity still holds. The journal is per-file evidence only; it never stands for a
//! complete verification (the runner reads `<commit>.json` alone) and is removed once the full
//! evidence is written.

use std::collections::BTreeMap;
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use hub::client::HubClient;
use hub::protocol::{RepoId, TreeEntry};

use super::local::{Evidence, EvidenceFile, How, Known};
use super::{pin, verify_local, Pinned, VerifyError, VerifyReport};
use crate::progress::{Progress, ProgressMode};
use artifact::fsid;

/// The most often the pull journal is rewritten.
pub const JOURNAL_EVERY: Duration = Duration::from_secs(2);

/// Options of a pull.
#[derive(Debug, Clone, Copy)]
pub struct PullOpts {
    /// Downloads at once (`--workers`, default 8 as `huggingface_hub.snapshot_download`).
    pub workers: usize,
    /// Progress on stderr.
    pub progress: ProgressMode,
}

impl Default for PullOpts {
    fn default() -> PullOpts {
        PullOpts {
            workers: hub::client::DEFAULT_WORKERS,
            progress: ProgressMode::Off,
        }
    }
}

/// Where a pull of `commit` notes the files it has verified so far.
pub fn pull_journal_path(dir: &Path, commit: &str) -> PathBuf {
    dir.join(artifact::evidence::EVIDENCE_DIR)
        .join(format!("{commit}.pull.json"))
}

/// The per-file evidence a killed pull of `pinned` left (empty when none or unreadable).
pub(super) fn read_journal(dir: &Path, pinned: &Pinned) -> BTreeMap<String, EvidenceFile> {
    std::fs::read(pull_journal_path(dir, &pinned.commit))
        .ok()
        .and_then(|b| serde_json::from_slice::<Evidence>(&b).ok())
        .filter(|e| e.v == 1 && e.commit == pinned.commit && e.repo == pinned.repo.id())
        .map(|e| e.files.into_iter().map(|f| (f.path.clone(), f)).collect())
        .unwrap_or_default()
}

/// `pull`/`check`: pin `rev` of `repo`, then (when `download`) fetch every file that is missing or
/// fails, then verify `dir` against the pinned tree and record evidence.
pub fn pull(
    endpoint: Option<&str>,
    repo: &str,
    rev: &str,
    dir: &Path,
    download: bool,
    opts: &PullOpts,
) -> Result<VerifyReport, VerifyError> {
    let repo = RepoId::model(repo).map_err(VerifyError::Repo)?;
    let client = HubClient::from_env(endpoint)?.with_workers(opts.workers);
    let rt = crate::runtime().map_err(VerifyError::Runtime)?;
    let pinned = rt.block_on(pin(&client, &repo, rev))?;
    pull_pinned(&client, &pinned, dir, download, opts)
}

/// [`pull`] of a tree already pinned with `client` (the cache layout names its directory after
/// the commit, so it pins first and pulls that pin).
pub(super) fn pull_pinned(
    client: &HubClient,
    pinned: &Pinned,
    dir: &Path,
    download: bool,
    opts: &PullOpts,
) -> Result<VerifyReport, VerifyError> {
    let rt = crate::runtime().map_err(VerifyError::Runtime)?;
    if !download {
        return Ok(verify_local(dir, pinned, true, &Known::new())?.report);
    }
    std::fs::create_dir_all(dir).map_err(|source| VerifyError::Io {
        what: "create",
        path: dir.to_path_buf(),
        source,
    })?;
    // First pass: what already verifies is kept (evidence, the pull journal, or its digest), and
    // journaled so that a killed pull does not read it again.
    let first = verify_local(dir, pinned, true, &Known::new())?;
    if first.failing.is_empty() {
        return Ok(first.report);
    }
    let mut known = first.verified;
    write_journal(dir, pinned, &known)?;
    let progress = Progress::new("pull", "files", opts.progress);
    let fetched = rt.block_on(fetch_all(
        client,
        pinned,
        dir,
        &first.failing,
        &mut known,
        &progress,
    ));
    progress.finish();
    let (downloaded, bytes) = fetched?;
    let mut report = verify_local(dir, pinned, true, &known)?.report;
    report.downloaded = downloaded;
    report.bytes_downloaded = bytes;
    Ok(report)
}

/// Download `failing` (paths of `pinned`) into `dir`, `client.workers()` at once, adding each
/// file hashed as written to `known` and to the pull journal; returns how many files were
/// downloaded and their bytes.
async fn fetch_all(
    client: &HubClient,
    pinned: &Pinned,
    dir: &Path,
    failing: &[String],
    known: &mut Known,
    progress: &Progress,
) -> Result<(usize, u64), VerifyError> {
    let by_path: BTreeMap<&str, &TreeEntry> =
        pinned.files.iter().map(|e| (e.path.as_str(), e)).collect();
    let todo: Vec<&TreeEntry> = failing
        .iter()
        .filter_map(|p| by_path.get(p.as_str()).copied())
        .collect();
    progress.plan(todo.iter().map(|e| e.size).sum());
    let (mut n, mut bytes) = (0, 0);
    let mut last = Instant::now();
    let mut done = futures_util::stream::iter(todo)
        .map(|e| fetch_one(client, pinned, dir, e))
        .buffer_unordered(client.workers());
    while let Some(ev) = done.next().await {
        let (ev, size) = ev?;
        progress.advance(size);
        progress.item_done();
        known.insert(ev.path.clone(), (ev, How::OnWrite));
        n += 1;
        bytes += size;
        if last.elapsed() >= JOURNAL_EVERY {
            write_journal(dir, pinned, known)?;
            last = Instant::now();
        }
    }
    write_journal(dir, pinned, known)?;
    Ok((n, bytes))
}

fn write_journal(dir: &Path, pinned: &Pinned, files: &Known) -> Result<(), VerifyError> {
    let path = pull_journal_path(dir, &pinned.commit);
    let doc = Evidence {
        v: 1,
        repo: pinned.repo.id(),
        commit: pinned.commit.clone(),
        files: files.values().map(|(f, _)| f.clone()).collect(),
    };
    let io = |source| VerifyError::Io {
        what: "write",
        path: path.clone(),
        source,
    };
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).map_err(io)?;
    }
    let bytes = serde_json::to_vec(&doc).map_err(|e| io(std::io::Error::other(e)))?;
    ledger::write_atomic(&path, &bytes).map_err(|e| io(std::io::Error::other(e.to_string())))
}

/// Download one file through a rooted, no-follow descriptor (module docs); returns its evidence
/// and size.
async fn fetch_one(
    client: &HubClient,
    pinned: &Pinned,
    dir: &Path,
    e: &TreeEntry,
) -> Result<(EvidenceFile, u64), VerifyError> {
    let (check, want) = match &e.lfs {
        Some(l) => ("sha256", l.oid.clone()),
        None => ("git-sha1", e.oid.clone()),
    };
    let shown = dir.join(&e.path);
    let io = |what: &'static str| {
        let path = shown.clone();
        move |source| VerifyError::Io { what, path, source }
    };
    let meta = client
        .file_metadata(&pinned.repo, &pinned.commit, &e.path)
        .await?;
    if meta.etag != want || meta.size != e.size {
        return Err(VerifyError::Io {
            what: "download",
            path: shown,
            source: std::io::Error::other(format!(
                "the hub serves etag {} ({} bytes) where the pinned tree says {want} ({} bytes)",
                meta.etag, meta.size, e.size
            )),
        });
    }
    let (parent, name) = e.path.rsplit_once('/').unwrap_or(("", e.path.as_str()));
    let d = fsid::open_dir_nofollow(dir, parent, true).map_err(io("open the directory of"))?;
    let part = format!("{name}.part");
    let mut f = fsid::open_rw_at(d.as_fd(), &part).map_err(io("open the part file of"))?;
    client.fetch_into(&meta, &mut f, &shown).await?;
    // The rename replaces whatever held the final name (a wrong file, a link), never writing
    // through it.
    // The data is fsynced (by `fetch_into`) before its identity is recorded: evidence must never
    // outlive the bytes it vouches for. The directory is not: a rename lost in a crash leaves the
    // file missing, which the next run sees and downloads again.
    fsid::rename_at(d.as_fd(), &part, name).map_err(io("rename into"))?;
    let identity = fsid::identity(&f).map_err(io("stat"))?;
    Ok((
        EvidenceFile {
            path: e.path.clone(),
            check: check.into(),
            digest: want,
            identity,
        },
        e.size,
    ))
}
