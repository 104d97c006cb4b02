//! `ChunkLog`: the durable record of chunks written into one file, so a killed fetch resumes from
//! what the disk proves (seed `001_…txt`: "a chunk digest and a file offset are recorded together
//! after every write, so a resume truncates back to a boundary that was actually durable").
//!
//! Ordering is the whole contract: the chunk's bytes are written and fsynced *first*, then one
//! fixed-size record (offset, length, SHA-256, CRC-32) is appended to the log and fsynced. A crash
//! between the two loses only the record, so the chunk is fetched again; a crash inside the
//! append leaves a torn last record, which fails its CRC and is cut off on open. Chunks may be
//! written concurrently and in any order: the proven part of the file is the *set* of recorded
//! chunks, not a prefix. Byte layout: `docs/ledger.md` ("Chunk log").

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use sha2::{Digest, Sha256};

use crate::atomic::write_atomic;
use crate::{LedgerError, Result};

/// The first line of every chunk log.
pub const CHUNK_LOG_HEADER: &[u8] = b"minirun-chunk-log v1\n";
/// One record: `{offset:016x} {len:016x} {sha256:64 hex} {crc32:08x}\n`.
const RECORD_LEN: usize = 108;
/// The CRC-32 covers the record's first 99 bytes (everything before the CRC field).
const CRC_COVERS: usize = 99;
/// Largest chunk log read, in bytes (about 620,000 records: with 1 MiB chunks, a 600 GB file).
const MAX_LOG_BYTES: u64 = 64 << 20;
/// Read buffer for re-verifying chunks.
const VERIFY_BUF: usize = 1 << 20;

/// One proven (or claimed, before [`ChunkLog::verify_and_truncate`]) chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChunkRecord {
    /// Offset of the chunk's first byte in the data file.
    pub offset: u64,
    /// Length in bytes, at least 1.
    pub len: u64,
    /// SHA-256 of the chunk's bytes.
    pub sha256: [u8; 32],
}

impl ChunkRecord {
    /// The byte range the chunk covers.
    pub fn range(&self) -> Range<u64> {
        // Records are validated on creation and on read: offset + len never overflows.
        self.offset..self.offset.saturating_add(self.len)
    }

    fn encode(&self) -> [u8; RECORD_LEN] {
        let body = format!(
            "{:016x} {:016x} {} ",
            self.offset,
            self.len,
            hex::encode(self.sha256)
        );
        let crc = crc32fast::hash(body.as_bytes());
        let line = format!("{body}{crc:08x}\n");
        let mut out = [0u8; RECORD_LEN];
        out.copy_from_slice(line.as_bytes());
        out
    }

    fn decode(raw: &[u8]) -> Option<Self> {
        if raw.len() != RECORD_LEN || raw.last() != Some(&b'\n') {
            return None;
        }
        let text = std::str::from_utf8(raw).ok()?;
        let crc = u32::from_str_radix(text.get(CRC_COVERS..CRC_COVERS + 8)?, 16).ok()?;
        if crc != crc32fast::hash(raw.get(..CRC_COVERS)?) {
            return None;
        }
        let offset = u64::from_str_radix(text.get(0..16)?, 16).ok()?;
        let len = u64::from_str_radix(text.get(17..33)?, 16).ok()?;
        let mut sha256 = [0u8; 32];
        hex::decode_to_slice(text.get(34..98)?, &mut sha256).ok()?;
        let rec = ChunkRecord {
            offset,
            len,
            sha256,
        };
        valid_extent(offset, len).ok()?;
        // Only the canonical encoding is accepted (lower-case hex, single spaces).
        (rec.encode() == raw).then_some(rec)
    }
}

fn valid_extent(offset: u64, len: u64) -> std::result::Result<(), &'static str> {
    if len == 0 {
        return Err("a chunk is at least one byte");
    }
    if offset
        .checked_add(len)
        .is_none_or(|end| end > i64::MAX as u64)
    {
        return Err("the chunk ends beyond the largest file offset");
    }
    Ok(())
}

/// What [`ChunkLog::verify_and_truncate`] kept and cut.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResumeReport {
    /// Chunks whose bytes re-hashed to their record, sorted by offset: these are never fetched
    /// again.
    pub kept: Vec<ChunkRecord>,
    /// Records that did not hold (bytes beyond the end of the file, or a different digest); their
    /// ranges must be fetched again.
    pub dropped: Vec<ChunkRecord>,
    /// The data file's length before the resume.
    pub len_before: u64,
    /// The data file's length after truncation: the end of the last kept chunk.
    pub len_after: u64,
}

struct Inner {
    file: File,
    records: Vec<ChunkRecord>,
}

/// The chunk log of one data file; share it between writer tasks behind an `Arc`.
pub struct ChunkLog {
    path: PathBuf,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for ChunkLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkLog")
            .field("path", &self.path)
            .finish()
    }
}

impl ChunkLog {
    /// Opens (or durably creates) the chunk log at `path`. A torn or corrupt tail is cut off at
    /// the first record that fails its CRC or format: everything from there on is unproven.
    pub fn open(path: &Path) -> Result<Self> {
        let bytes = match File::open(path) {
            Ok(f) => read_capped(f, path)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                write_atomic(path, CHUNK_LOG_HEADER)?;
                CHUNK_LOG_HEADER.to_vec()
            }
            Err(e) => return Err(LedgerError::io("open chunk log", path)(e)),
        };
        let (records, valid_len) = Self::parse(path, &bytes)?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(LedgerError::io("open chunk log for append", path))?;
        if valid_len < bytes.len() {
            file.set_len(valid_len as u64)
                .and_then(|()| file.sync_all())
                .map_err(LedgerError::io("cut the torn tail of chunk log", path))?;
        }
        Ok(ChunkLog {
            path: path.to_owned(),
            inner: Mutex::new(Inner { file, records }),
        })
    }

    /// Reads a chunk log's bytes (`path` only names it in errors): the records up to the first one
    /// that fails its CRC or format, and the length of the valid prefix (header plus those
    /// records). The one reader of the format; [`ChunkLog::open`] cuts the file to that length.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<(Vec<ChunkRecord>, usize)> {
        let body =
            bytes
                .strip_prefix(CHUNK_LOG_HEADER)
                .ok_or_else(|| LedgerError::BadChunkLog {
                    path: path.to_owned(),
                    reason: format!(
                        "it does not start with `{}`",
                        String::from_utf8_lossy(CHUNK_LOG_HEADER).trim_end()
                    ),
                })?;
        let records: Vec<ChunkRecord> = body
            .chunks(RECORD_LEN)
            .map_while(ChunkRecord::decode)
            .collect();
        let valid_len = CHUNK_LOG_HEADER.len() + records.len() * RECORD_LEN;
        Ok((records, valid_len))
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A writer that panicked mid-append left at worst a torn record, which the CRC rejects.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends one record and fsyncs the log. Call only after the chunk's bytes are durable
    /// (written and `sync_data`'d); [`ChunkLog::write_chunk`] does both in the right order.
    pub fn record(&self, offset: u64, len: u64, sha256: [u8; 32]) -> Result<()> {
        valid_extent(offset, len).map_err(|reason| LedgerError::BadChunk {
            path: self.path.clone(),
            offset,
            len,
            reason,
        })?;
        let rec = ChunkRecord {
            offset,
            len,
            sha256,
        };
        let mut inner = self.lock();
        inner
            .file
            .write_all(&rec.encode())
            .and_then(|()| inner.file.sync_data())
            .map_err(LedgerError::io("append to chunk log", &self.path))?;
        inner.records.push(rec);
        Ok(())
    }

    /// Writes `bytes` at `offset` of `data` (opened for writing, at `data_path`), makes them
    /// durable, then records the chunk. Safe to call from several threads on one log.
    pub fn write_chunk(
        &self,
        data: &File,
        data_path: &Path,
        offset: u64,
        bytes: &[u8],
    ) -> Result<()> {
        data.write_all_at(bytes, offset)
            .map_err(LedgerError::io("write chunk", data_path))?;
        data.sync_data()
            .map_err(LedgerError::io("fsync chunk", data_path))?;
        self.record(offset, bytes.len() as u64, Sha256::digest(bytes).into())
    }

    /// Every record, in the order written.
    pub fn records(&self) -> Vec<ChunkRecord> {
        self.lock().records.clone()
    }

    /// The union of the recorded ranges, sorted and merged. After
    /// [`ChunkLog::verify_and_truncate`] these are proven; before it they are only claimed.
    pub fn proven_ranges(&self) -> Vec<Range<u64>> {
        merge(self.lock().records.iter().map(ChunkRecord::range))
    }

    /// The parts of `0..total` no record covers: what is left to fetch.
    pub fn missing(&self, total: u64) -> Vec<Range<u64>> {
        let mut out = Vec::new();
        let mut at = 0;
        for r in self.proven_ranges() {
            if r.start >= total {
                break;
            }
            if r.start > at {
                out.push(at..r.start);
            }
            at = at.max(r.end);
        }
        if at < total {
            out.push(at..total);
        }
        out
    }

    /// Re-hashes every recorded chunk against `data_path`, keeps those that hold, truncates the
    /// file to the end of the last kept chunk, and rewrites the log (atomically) to exactly the
    /// kept records. Holes between kept chunks are unproven and must be fetched again. A missing
    /// data file drops every record.
    pub fn verify_and_truncate(&self, data_path: &Path) -> Result<ResumeReport> {
        let mut inner = self.lock();
        let mut unique = inner.records.clone();
        unique.sort();
        unique.dedup();
        let mut report = ResumeReport::default();
        let data = match OpenOptions::new().read(true).write(true).open(data_path) {
            Ok(f) => Some(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(LedgerError::io("open for resume", data_path)(e)),
        };
        if let Some(data) = &data {
            report.len_before = data
                .metadata()
                .map_err(LedgerError::io("stat", data_path))?
                .len();
            let mut buf = vec![0u8; VERIFY_BUF];
            for rec in unique {
                let holds = rec.range().end <= report.len_before
                    && hash_range(data, data_path, rec.range(), &mut buf)? == rec.sha256;
                if holds {
                    report.kept.push(rec);
                } else {
                    report.dropped.push(rec);
                }
            }
            report.len_after = report.kept.iter().map(|r| r.range().end).max().unwrap_or(0);
            if report.len_after < report.len_before {
                data.set_len(report.len_after)
                    .and_then(|()| data.sync_all())
                    .map_err(LedgerError::io(
                        "truncate to the proven boundary",
                        data_path,
                    ))?;
            }
        } else {
            report.dropped = unique;
        }
        if report.kept.len() != inner.records.len() {
            let mut bytes = CHUNK_LOG_HEADER.to_vec();
            for rec in &report.kept {
                bytes.extend_from_slice(&rec.encode());
            }
            write_atomic(&self.path, &bytes)?;
            inner.file = OpenOptions::new()
                .append(true)
                .open(&self.path)
                .map_err(LedgerError::io("open chunk log for append", &self.path))?;
            inner.records = report.kept.clone();
        }
        Ok(report)
    }

    /// Removes the log once its file is complete and journaled (the journal is then the proof).
    pub fn remove(self) -> Result<()> {
        std::fs::remove_file(&self.path).map_err(LedgerError::io("remove chunk log", &self.path))
    }
}

fn read_capped(f: File, path: &Path) -> Result<Vec<u8>> {
    let len = f
        .metadata()
        .map_err(LedgerError::io("stat chunk log", path))?
        .len();
    if len > MAX_LOG_BYTES {
        return Err(LedgerError::BadChunkLog {
            path: path.to_owned(),
            reason: format!("it is {len} bytes, more than the limit of {MAX_LOG_BYTES}"),
        });
    }
    let mut bytes = Vec::new();
    f.take(MAX_LOG_BYTES)
        .read_to_end(&mut bytes)
        .map_err(LedgerError::io("read chunk log", path))?;
    Ok(bytes)
}

fn hash_range(data: &File, path: &Path, range: Range<u64>, buf: &mut [u8]) -> Result<[u8; 32]> {
    let mut hasher = Sha256::new();
    let mut at = range.start;
    while at < range.end {
        let want = usize::try_from(range.end - at)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let slot = buf.get_mut(..want).unwrap_or_default();
        data.read_exact_at(slot, at)
            .map_err(LedgerError::io("read chunk for verification", path))?;
        hasher.update(&*slot);
        at += want as u64;
    }
    Ok(hasher.finalize().into())
}

fn merge(ranges: impl Iterator<Item = Range<u64>>) -> Vec<Range<u64>> {
    let mut v: Vec<Range<u64>> = ranges.collect();
    v.sort_by_key(|r| (r.start, r.end));
    let mut out: Vec<Range<u64>> = Vec::with_capacity(v.len());
    for r in v {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}
