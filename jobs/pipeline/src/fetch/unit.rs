//! Fetching one unit: the header and tensor ranges it needs from each upstream file, chunk by
//! chunk through the ledger's durable chunk log; then the arrival checks, the negative controls,
//! the whole-file digest when the unit covers a file, and the journal.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use artifact::safetensors::absolute_range;
use hub::client::HubClient;
use ledger::{ChunkLog, Journal, UnitLock};
use serde_json::json;

use super::controls;
use super::discover::{Upstream, UpstreamFile};
use super::ordered::OrderedHasher;
use super::plausible::{self, Content};
use super::ranges::RangeSet;
use super::transfer::{fetch_chunks, file_meta, Transfers};
use super::{FetchError, UnitReport, STAGE};
use crate::plan::{
    ContainerMode, ContainerPlacement, Placement, Plan, ResolvedUnit, UpstreamTensor,
};
use crate::progress::UnitProgress;
use crate::units::UnitStatus;
use crate::work::WorkDir;

/// The most bytes of one tensor the arrival check reads (whole rows from the start).
const CHECK_SAMPLE_BYTES: u64 = 64 << 20;

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> FetchError {
    let path = path.to_owned();
    move |source| FetchError::Io { what, path, source }
}

/// Every tensor a placement consumes, with what its bytes should look like.
fn tensors_with_content(p: &Placement) -> Vec<(&UpstreamTensor, Content)> {
    match p {
        Placement::Plain { tensor, .. } => vec![(tensor, Content::Plain)],
        _ => p
            .containers()
            .into_iter()
            .flat_map(container_content)
            .collect(),
    }
}

/// A container's weight, scale and bias with what their bytes should look like.
fn container_content(c: &ContainerPlacement) -> Vec<(&UpstreamTensor, Content)> {
    let weight = match &c.spec.mode {
        ContainerMode::Fp8E4m3Block { block, .. } => Content::Fp8Block { block: block[0] },
        ContainerMode::Mxfp4 { group, .. } => Content::E2m1Packed { group: *group },
        ContainerMode::Affine { .. } => Content::Plain,
    };
    let mut v = vec![(&c.weight, weight), (&c.scale, Content::Plain)];
    v.extend(c.bias.as_ref().map(|b| (b, Content::Plain)));
    v
}

/// Fetch unit `ru` and journal it as done. With `recheck`, a unit whose journal says done once
/// the lock is held (another process finished it after this run listed it as pending) is
/// reported done, not fetched again.
pub async fn fetch_unit(
    client: &HubClient,
    plan: &Plan,
    work: &WorkDir,
    upstream: &Upstream,
    ru: &ResolvedUnit,
    sem: &Arc<Transfers>,
    recheck: bool,
) -> Result<UnitReport, FetchError> {
    let unit = ru.name.as_str();
    let ledger_dir = work.ledger();
    let _lock = UnitLock::acquire(&ledger_dir, STAGE, unit)?;
    if recheck && super::unit_done(&ledger_dir, work, unit, false, true, false)?.is_done() {
        return Ok(UnitReport::new(
            unit,
            UnitStatus::AlreadyDone,
            Some(super::DONE_BY_OTHER.into()),
        ));
    }
    let up = sem.progress.unit(unit);
    let by_file = tensors_by_file(ru);
    let cx = UnitFetch {
        client,
        plan,
        work,
        upstream,
        unit,
        root: work.upstream_unit(unit),
        sem,
        up: &up,
    };
    let mut report = UnitReport::new(unit, UnitStatus::Fetched, None);
    let mut record = UnitRecord {
        journal: Journal::new(STAGE, unit)?,
        ranges_json: serde_json::Map::new(),
        controls: Vec::new(),
        digests: serde_json::Map::new(),
    };
    for ((source, path), tensors) in &by_file {
        fetch_file(&cx, source, path, tensors, &mut report, &mut record).await?;
    }
    finish_unit(&cx, &ledger_dir, report, record)
}

/// What every step of fetching one unit reads.
struct UnitFetch<'a> {
    client: &'a HubClient,
    plan: &'a Plan,
    work: &'a WorkDir,
    upstream: &'a Upstream,
    unit: &'a str,
    root: PathBuf,
    sem: &'a Arc<Transfers>,
    up: &'a UnitProgress<'a>,
}

/// What the unit's journal collects across its upstream files.
struct UnitRecord {
    journal: Journal,
    ranges_json: serde_json::Map<String, serde_json::Value>,
    controls: Vec<controls::ControlRecord>,
    digests: serde_json::Map<String, serde_json::Value>,
}

/// One upstream file of the unit, opened for fetching (the step that opens it fills this).
struct FileFetch<'u> {
    uf: &'u UpstreamFile,
    tensors: &'u [(&'u UpstreamTensor, Content)],
    rel: String,
    data_path: PathBuf,
    log_path: PathBuf,
    log: Arc<ChunkLog>,
    needed: RangeSet,
    proven: RangeSet,
    file: Arc<File>,
}

/// Group step: the unit's tensors by the upstream file (source, path) that holds them.
fn tensors_by_file(
    ru: &ResolvedUnit,
) -> BTreeMap<(String, String), Vec<(&UpstreamTensor, Content)>> {
    let mut by_file: BTreeMap<(String, String), Vec<(&UpstreamTensor, Content)>> = BTreeMap::new();
    for p in &ru.placements {
        for (t, c) in tensors_with_content(p) {
            by_file
                .entry((t.source.clone(), t.file.clone()))
                .or_default()
                .push((t, c));
        }
    }
    by_file
}

/// Per-file step: open one upstream file, fetch its missing chunks, check it and record it.
async fn fetch_file(
    cx: &UnitFetch<'_>,
    source: &str,
    path: &str,
    tensors: &[(&UpstreamTensor, Content)],
    report: &mut UnitReport,
    record: &mut UnitRecord,
) -> Result<(), FetchError> {
    let unit = cx.unit;
    let uf = cx
        .upstream
        .file(source, path)
        .ok_or_else(|| FetchError::NotDiscovered {
            unit: unit.to_string(),
            source_name: source.to_string(),
            path: path.to_string(),
        })?;
    let (ff, todo) = open_file(cx, uf, tensors, format!("{source}/{path}"), report)?;
    let (sink, hasher, one_chunk) = file_sink(cx, &ff, &todo);
    // No digest will cover a file the unit fetches in part: each chunk is read until two reads
    // agree instead.
    let agree = !ff.needed.covers(&(0..uf.size));
    let (bytes, chunks) =
        fetch_chunks(cx.client, cx.plan, uf, &sink, todo, cx.sem, cx.up, agree).await?;
    let streamed_sha = match hasher {
        Some(h) => h.finish(),
        None if one_chunk => sink.one_chunk_sha(),
        None => None,
    };
    let checked_in_memory = sink.checked();
    let (probes, outside) = outside_controls(cx, &ff).await?;
    report.bytes_fetched += bytes;
    report.chunks_fetched += chunks;
    let (whole, file_controls) =
        check_blocking(cx, &ff, checked_in_memory, probes, outside, streamed_sha).await?;
    super::proof::unit_header_matches(
        unit,
        &ff.file,
        &ff.data_path,
        &uf.path,
        &uf.header_proof,
        &cx.work.headers(source).join(path),
    )?;
    record_file(cx, &ff, whole, file_controls, report, record)
}

/// Open step: the data file and its chunk log (proven chunks kept), and the chunks still to fetch.
fn open_file<'u>(
    cx: &UnitFetch<'_>,
    uf: &'u UpstreamFile,
    tensors: &'u [(&'u UpstreamTensor, Content)],
    rel: String,
    report: &mut UnitReport,
) -> Result<(FileFetch<'u>, Vec<Range<u64>>), FetchError> {
    let data_path = cx.root.join(&rel);
    let log_path = cx.work.chunk_logs(cx.unit).join(format!("{rel}.chunks"));
    for p in [&data_path, &log_path] {
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        }
    }
    let log = Arc::new(ChunkLog::open(&log_path)?);
    let resume = log.verify_and_truncate(&data_path)?;
    report.chunks_kept += resume.kept.len() as u64;

    let data_start = uf.header.data_start;
    let mut needed = RangeSet::from_ranges(std::iter::once(0..data_start));
    for (t, _) in tensors {
        if let Some(ti) = uf.header.tensor(&t.name) {
            needed.insert(absolute_range(data_start, ti));
        }
    }
    let proven = RangeSet::from_ranges(resume.kept.iter().map(|r| r.range()));
    let todo = needed.subtract(&proven).chunks(cx.plan.run.chunk_bytes);
    let file = Arc::new(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&data_path)
            .map_err(io("open", &data_path))?,
    );
    let ff = FileFetch {
        uf,
        tensors,
        rel,
        data_path,
        log_path,
        log,
        needed,
        proven,
        file,
    };
    Ok((ff, todo))
}

/// Sink step: where the transfers write, with the whole-file hasher and arrival checks it runs.
fn file_sink(
    cx: &UnitFetch<'_>,
    ff: &FileFetch<'_>,
    todo: &[Range<u64>],
) -> (Arc<FileSink>, Option<Arc<OrderedHasher>>, bool) {
    let uf = ff.uf;
    // The whole-file SHA-256: when one chunk is the whole file, that chunk's digest (each byte
    // hashed once); otherwise hashed in order as the chunks arrive (no second read).
    let whole_sha256 = ff.needed.covers(&(0..uf.size)) && names::is_sha256_lower(&uf.digest);
    let one_chunk = whole_sha256 && todo.len() == 1 && todo.first() == Some(&(0..uf.size));
    let hasher = (whole_sha256 && !one_chunk).then(|| {
        Arc::new(OrderedHasher::new(
            ff.file.clone(),
            uf.size,
            ff.proven.clone(),
        ))
    });
    let data_start = uf.header.data_start;
    let arrival: Vec<ArrivalCheck> = ff
        .tensors
        .iter()
        .filter_map(|(t, content)| {
            let ti = uf.header.tensor(&t.name)?;
            let abs = absolute_range(data_start, ti);
            Some(ArrivalCheck {
                tensor: (*t).clone(),
                content: *content,
                sample: sample_range(&abs, &t.shape, *content),
            })
        })
        .collect();
    let sink = Arc::new(FileSink {
        unit: cx.unit.to_owned(),
        upstream_file: uf.path.clone(),
        file: ff.file.clone(),
        direct: crate::direct::open_direct(&ff.data_path),
        path: ff.data_path.clone(),
        log_path: ff.log_path.clone(),
        log: ff.log.clone(),
        hasher: hasher.clone(),
        checked: std::sync::Mutex::new(vec![false; arrival.len()]),
        arrival,
        one_chunk_sha: std::sync::Mutex::new(None),
    });
    (sink, hasher, one_chunk)
}

/// Controls step: the negative-control probes, and those outside the unit's ranges read now.
async fn outside_controls(
    cx: &UnitFetch<'_>,
    ff: &FileFetch<'_>,
) -> Result<(Vec<controls::Probe>, BTreeMap<(u64, u64), Vec<u8>>), FetchError> {
    // Controls whose bytes lie outside the unit's ranges are read from the hub now, so every
    // control runs (a unit that shares its shard with others needs this).
    let probes = controls::probes(ff.uf, ff.tensors);
    let outside = if probes.iter().any(|p| !ff.needed.covers(p.range())) {
        let meta = file_meta(cx.client, cx.plan, ff.uf).await?;
        controls::outside_reads(cx.client, &meta, &probes, &ff.needed).await?
    } else {
        BTreeMap::new()
    };
    Ok((probes, outside))
}

/// Check step: `check_file` on a blocking thread (arrival checks, controls, whole-file digest).
async fn check_blocking(
    cx: &UnitFetch<'_>,
    ff: &FileFetch<'_>,
    checked_in_memory: Vec<bool>,
    probes: Vec<controls::Probe>,
    outside: BTreeMap<(u64, u64), Vec<u8>>,
    streamed_sha: Option<String>,
) -> Result<(Option<Whole>, Vec<controls::ControlRecord>), FetchError> {
    // Arrival checks, negative controls and the whole-file digest read the bytes back: CPU
    // work, run on a blocking thread so other units' transfers go on meanwhile.
    let owned: Vec<(UpstreamTensor, Content, bool)> = ff
        .tensors
        .iter()
        .zip(checked_in_memory)
        .map(|((t, c), done)| ((*t).clone(), *c, done))
        .collect();
    let (uf2, needed2, data2, log2, rel2, unit2, file2) = (
        ff.uf.clone(),
        ff.needed.clone(),
        ff.data_path.clone(),
        ff.log_path.clone(),
        ff.rel.clone(),
        cx.unit.to_owned(),
        ff.file.clone(),
    );
    tokio::task::spawn_blocking(move || {
        check_file(
            &unit2,
            &uf2,
            &owned,
            (&probes, &outside),
            &needed2,
            &file2,
            &data2,
            &log2,
            &rel2,
            streamed_sha,
        )
    })
    .await
    .map_err(|e| FetchError::Io {
        what: "check",
        path: ff.data_path.clone(),
        source: std::io::Error::other(e.to_string()),
    })?
}

/// Record step: the file's controls, whole-file verdict, journal output, ranges and hub digest.
fn record_file(
    cx: &UnitFetch<'_>,
    ff: &FileFetch<'_>,
    whole: Option<Whole>,
    file_controls: Vec<controls::ControlRecord>,
    report: &mut UnitReport,
    record: &mut UnitRecord,
) -> Result<(), FetchError> {
    let (uf, rel) = (ff.uf, &ff.rel);
    record.controls.extend(file_controls);
    if whole.is_some() {
        report.files_verified.push(rel.clone());
    }
    match whole.and_then(|w| w.sha256) {
        Some(sha) => {
            record
                .journal
                .record_output_hashed(&cx.root, rel, uf.size, &sha)?;
        }
        None => {
            record.journal.record_output(&cx.root, rel)?;
        }
    }
    record.ranges_json.insert(
        rel.clone(),
        json!(ff
            .needed
            .ranges()
            .iter()
            .map(|r| [r.start, r.end])
            .collect::<Vec<_>>()),
    );
    record.digests.insert(
        rel.clone(),
        json!({
            "hub_digest": uf.digest,
            "size": uf.size,
            "repo": uf.repo.id(),
            "header_sha256": uf.header_proof.sha256,
            "proven_by": if ff.needed.covers(&(0..uf.size)) { "hub-digest" } else { "two-agreeing-reads" },
        }),
    );
    Ok(())
}

/// Finish step: store the done journal, end the unit's progress, remove its chunk logs.
fn finish_unit(
    cx: &UnitFetch<'_>,
    ledger_dir: &Path,
    mut report: UnitReport,
    record: UnitRecord,
) -> Result<UnitReport, FetchError> {
    let UnitRecord {
        mut journal,
        ranges_json,
        controls,
        digests,
    } = record;
    report.controls_run = controls.len() as u64;
    report.controls_rejected = controls.iter().filter(|c| c.rejected).count() as u64;
    journal
        .extra
        .insert("ranges".into(), serde_json::Value::Object(ranges_json));
    journal
        .extra
        .insert("upstream".into(), serde_json::Value::Object(digests));
    journal
        .extra
        .insert("negative_controls".into(), json!(controls));
    journal
        .extra
        .insert("files_verified_whole".into(), json!(report.files_verified));
    journal.mark_done();
    journal.store(ledger_dir)?;
    cx.up.finish();
    match std::fs::remove_dir_all(cx.work.chunk_logs(cx.unit)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(FetchError::Io {
                what: "remove chunk logs of",
                path: cx.work.chunk_logs(cx.unit),
                source: e,
            })
        }
        _ => {}
    }
    Ok(report)
}

/// A file verified whole against the hub's digest; `sha256` is its SHA-256 when that digest was
/// one (LFS), so the journal need not hash it again.
struct Whole {
    sha256: Option<String>,
}

/// The arrival checks of one fetched file, its negative controls, and — when the unit covers the
/// whole file — its digest against the hub's record. Bad bytes are discarded, never journaled.
/// Returns the file's SHA-256 when it was verified whole against an LFS digest (so the journal
/// need not hash it again), and the controls.
#[allow(clippy::too_many_arguments)]
#[allow(clippy::type_complexity)]
fn check_file(
    unit: &str,
    uf: &UpstreamFile,
    tensors: &[(UpstreamTensor, Content, bool)],
    (probes, outside): (&[controls::Probe], &BTreeMap<(u64, u64), Vec<u8>>),
    needed: &RangeSet,
    file: &File,
    data_path: &Path,
    log_path: &Path,
    rel: &str,
    streamed_sha: Option<String>,
) -> Result<(Option<Whole>, Vec<controls::ControlRecord>), FetchError> {
    let data_start = uf.header.data_start;
    // Tensors whose sample arrived within one chunk of this run were checked in memory before a
    // byte of them was written; the rest (split across chunks, or kept from an earlier run) are
    // read back here.
    for (t, content, _) in tensors.iter().filter(|(_, _, in_memory)| !in_memory) {
        let Some(ti) = uf.header.tensor(&t.name) else {
            continue;
        };
        let abs = absolute_range(data_start, ti);
        let sample = read_at(file, data_path, sample_range(&abs, &t.shape, *content))?;
        if let Err(source) = plausible::check(&t.dtype, *content, &t.shape, &sample) {
            discard(data_path, log_path);
            return Err(FetchError::Implausible {
                unit: unit.into(),
                tensor: t.name.clone(),
                file: uf.path.clone(),
                source,
            });
        }
    }
    let refs: Vec<(&UpstreamTensor, Content)> = tensors.iter().map(|(t, c, _)| (t, *c)).collect();
    let mut controls = controls::run(&refs, probes, outside, needed, file, data_path, rel)?;
    file.sync_all().map_err(io("fsync", data_path))?;
    if !needed.covers(&(0..uf.size)) {
        controls::mark_no_digest(&mut controls);
        return Ok((None, controls));
    }
    // The SHA-256 computed in order while the chunks arrived, else one pass over the file.
    let (algo, actual) = match streamed_sha {
        Some(sha) => ("sha256", sha),
        None => super::root::hash_file(data_path, &uf.digest, uf.size)?,
    };
    if actual != uf.digest {
        discard(data_path, log_path);
        return Err(FetchError::Digest {
            unit: unit.into(),
            file: uf.path.clone(),
            algo,
            expected: uf.digest.clone(),
            actual,
        });
    }
    // The file is now proven byte for byte: a control the content rules could not tell from real
    // data is decided by the digest (see `reject_by_digest`).
    controls::reject_by_digest(&mut controls, uf, file, data_path)?;
    Ok((
        Some(Whole {
            sha256: (algo == "sha256").then_some(actual),
        }),
        controls,
    ))
}

/// One tensor's arrival check: the absolute byte range it reads.
struct ArrivalCheck {
    tensor: UpstreamTensor,
    content: Content,
    sample: Range<u64>,
}

/// Where the chunks of one upstream file go, shared by its transfer tasks.
pub(super) struct FileSink {
    unit: String,
    upstream_file: String,
    file: Arc<File>,
    /// The same file opened `O_DIRECT`, for the block-aligned middle of each chunk (`None`
    /// where the filesystem refuses it): no copy into the page cache (crate::direct).
    direct: Option<File>,
    pub(super) path: PathBuf,
    log_path: PathBuf,
    log: Arc<ChunkLog>,
    pub(super) hasher: Option<Arc<OrderedHasher>>,
    arrival: Vec<ArrivalCheck>,
    /// Which arrival checks ran in memory on a chunk of this run.
    checked: std::sync::Mutex<Vec<bool>>,
    /// The SHA-256 of the last chunk written, hex (the whole file's when one chunk is the file).
    one_chunk_sha: std::sync::Mutex<Option<String>>,
}

impl FileSink {
    fn checked(&self) -> Vec<bool> {
        self.checked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn one_chunk_sha(&self) -> Option<String> {
        self.one_chunk_sha
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Store one fetched chunk: the arrival checks of every tensor sample inside it run on the
    /// buffer first (bad bytes are never written), then the bytes are written and hashed slice by
    /// slice, fsynced, and only then recorded in the chunk log (the ledger's ordering contract).
    pub(super) fn store(&self, offset: u64, bytes: &[u8]) -> Result<[u8; 32], FetchError> {
        let end = offset + bytes.len() as u64;
        for (i, c) in self.arrival.iter().enumerate() {
            if c.sample.start < offset || c.sample.end > end {
                continue;
            }
            let lo = usize::try_from(c.sample.start - offset).unwrap_or(usize::MAX);
            let hi = usize::try_from(c.sample.end - offset).unwrap_or(usize::MAX);
            let sample = bytes.get(lo..hi).unwrap_or(&[]);
            if let Err(source) =
                plausible::check(&c.tensor.dtype, c.content, &c.tensor.shape, sample)
            {
                discard(&self.path, &self.log_path);
                return Err(FetchError::Implausible {
                    unit: self.unit.clone(),
                    tensor: c.tensor.name.clone(),
                    file: self.upstream_file.clone(),
                    source,
                });
            }
            if let Some(done) = self
                .checked
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_mut(i)
            {
                *done = true;
            }
        }
        let mut sha = Sha256::new();
        crate::direct::write_hashed(&self.file, self.direct.as_ref(), offset, bytes, &mut sha)
            .map_err(io("write chunk of", &self.path))?;
        self.file
            .sync_data()
            .map_err(io("fsync chunk of", &self.path))?;
        let digest: [u8; 32] = sha.finalize().into();
        self.log.record(offset, bytes.len() as u64, digest)?;
        *self.one_chunk_sha.lock().unwrap_or_else(|p| p.into_inner()) = Some(hex::encode(digest));
        Ok(digest)
    }
}

/// The prefix of whole rows (whole block rows for FP8 blocks) the arrival check reads.
fn sample_range(abs: &Range<u64>, shape: &[u64], content: Content) -> Range<u64> {
    let len = abs.end - abs.start;
    if len <= CHECK_SAMPLE_BYTES {
        return abs.clone();
    }
    let cols = shape.iter().skip(1).product::<u64>().max(1);
    let elem = len / shape.iter().product::<u64>().max(1);
    let row = (cols * elem.max(1)).max(1);
    let unit = match content {
        Content::Fp8Block { block } => row * u64::from(block),
        _ => row,
    };
    let take = (CHECK_SAMPLE_BYTES / unit).max(1) * unit;
    abs.start..abs.start + take.min(len)
}

pub(super) fn read_at(file: &File, path: &Path, r: Range<u64>) -> Result<Vec<u8>, FetchError> {
    let len = usize::try_from(r.end - r.start).map_err(|_| FetchError::Io {
        what: "read (range too large)",
        path: path.to_owned(),
        source: std::io::Error::other("range does not fit in memory"),
    })?;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, r.start)
        .map_err(io("read", path))?;
    Ok(buf)
}

/// Removes a unit's data file and chunk log for one upstream file, so a re-run fetches it anew.
fn discard(data: &Path, log: &Path) {
    // Best effort: a file that cannot be removed is re-verified by the next run's chunk log.
    let _ = std::fs::remove_file(log);
    let _ = std::fs::remove_file(data);
}
