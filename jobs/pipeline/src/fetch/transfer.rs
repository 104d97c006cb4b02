//! The transfers of one upstream file's chunks, drawn from the run-wide pool: each chunk read
//! with one Range request (two that agree byte for byte where no digest will cover the file),
//! stored through the unit's sink, and hashed in file order when the file is proven whole.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use hub::client::{FileMetadata, HubClient};

use super::discover::UpstreamFile;
use super::proof::Agreement;
use super::unit::FileSink;
use super::FetchError;
use crate::plan::Plan;
use crate::progress::{Progress, ProgressMode, UnitProgress};

/// Fetch `todo` (chunks of `uf`) into `sink`; (bytes, chunks) fetched. With `agree`, each chunk
/// is read until two reads agree (a file no digest covers: it is shared with other units).
#[allow(clippy::too_many_arguments)]
pub(super) async fn fetch_chunks(
    client: &HubClient,
    plan: &Plan,
    uf: &UpstreamFile,
    sink: &Arc<FileSink>,
    todo: Vec<Range<u64>>,
    sem: &Arc<Transfers>,
    up: &UnitProgress<'_>,
    agree: bool,
) -> Result<(u64, u64), FetchError> {
    let data_path = sink.path.clone();
    let total: u64 = todo.iter().map(|r| r.end - r.start).sum();
    up.plan(total);
    if total == 0 && uf.meta.is_none() {
        return Ok((0, 0));
    }
    let meta = file_meta(client, plan, uf).await?;
    let mut set = tokio::task::JoinSet::new();
    let n = todo.len() as u64;
    for chunk in todo {
        let permit =
            sem.permits
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| FetchError::Upstream {
                    repo: uf.repo.id(),
                    revision: meta.commit.clone(),
                    detail: "transfer pool closed".into(),
                })?;
        let (client, meta, sink, pool) = (client.clone(), meta.clone(), sink.clone(), sem.clone());
        let (repo, file) = (uf.repo.id(), uf.path.clone());
        set.spawn(async move {
            let mut bytes = pool.take();
            read_chunk(&client, &meta, (&repo, &file), &chunk, &mut bytes, agree).await?;
            let len = bytes.len() as u64;
            tokio::task::spawn_blocking(move || {
                sink.store(chunk.start, &bytes)?;
                // The permit travels with the bytes: released once they are hashed in order.
                match &sink.hasher {
                    Some(h) => h.push(chunk.start, bytes, Some(permit)),
                    None => pool.give(bytes),
                }
                Ok::<(), FetchError>(())
            })
            .await
            .map_err(|e| FetchError::Io {
                what: "write chunk of",
                path: PathBuf::from(&meta.location.to_string()),
                source: std::io::Error::other(e.to_string()),
            })??;
            Ok::<u64, FetchError>(len)
        });
    }
    let mut bytes = 0;
    while let Some(r) = set.join_next().await {
        let len = r.map_err(|e| FetchError::Io {
            what: "join transfer task for",
            path: data_path.clone(),
            source: std::io::Error::other(e.to_string()),
        })??;
        bytes += len;
        up.advance(len);
    }
    Ok((bytes, n))
}

/// One chunk into `bytes`: one read, or with `agree` reads until two are byte-identical (the
/// agreed bytes are the last read's, still in `bytes`).
async fn read_chunk(
    client: &HubClient,
    meta: &FileMetadata,
    (repo, file): (&str, &str),
    chunk: &Range<u64>,
    bytes: &mut Vec<u8>,
    agree: bool,
) -> Result<(), FetchError> {
    let what = || {
        format!(
            "failed to fetch bytes {}..{} of `{file}` in `{repo}`",
            chunk.start, chunk.end
        )
    };
    let mut agreement = Agreement::default();
    loop {
        client
            .get_range_into(meta, chunk.start, Some(chunk.end - 1), bytes)
            .await
            .map_err(|source| FetchError::Hub {
                what: what(),
                source,
            })?;
        if bytes.len() as u64 != chunk.end - chunk.start {
            return Err(FetchError::Upstream {
                repo: repo.to_owned(),
                revision: meta.commit.clone(),
                detail: format!("{}: got {} bytes", what(), bytes.len()),
            });
        }
        if !agree || agreement.agrees(bytes) {
            return Ok(());
        }
        if agreement.exhausted() {
            return Err(FetchError::Disagree {
                repo: repo.to_owned(),
                file: file.to_owned(),
                what: format!("bytes {}..{}", chunk.start, chunk.end),
                why: agreement.why(),
            });
        }
    }
}

/// The resolved metadata (location, size, commit) of an upstream file: from discovery, else
/// resolved now and checked against the size the tree reported.
pub(super) async fn file_meta(
    client: &HubClient,
    plan: &Plan,
    uf: &UpstreamFile,
) -> Result<FileMetadata, FetchError> {
    Ok(match &uf.meta {
        Some(m) => m.clone(),
        None => {
            let src = plan
                .source(&uf.source)
                .ok_or_else(|| FetchError::UnknownSource {
                    source_name: uf.source.clone(),
                    path: uf.path.clone(),
                })?;
            let m = super::discover::resolve_file(client, src, &uf.repo, &uf.path).await?;
            if m.size != uf.size {
                return Err(FetchError::Upstream {
                    repo: uf.repo.id(),
                    revision: m.commit.clone(),
                    detail: format!(
                        "`{}` resolves to {} B, the tree says {} B",
                        uf.path, m.size, uf.size
                    ),
                });
            }
            m
        }
    })
}

/// The transfer pool shared by every unit of a run: `concurrency` permits, and the chunk buffers
/// of finished transfers kept for the next ones, and the progress report (a fresh 64 MiB buffer costs a page fault per
/// 4 KiB page as it fills; a recycled one is already mapped).
pub struct Transfers {
    permits: Arc<tokio::sync::Semaphore>,
    buffers: std::sync::Mutex<Vec<Vec<u8>>>,
    keep: usize,
    /// The run's progress report.
    pub progress: Progress,
}

impl Transfers {
    /// A pool of `n` concurrent transfers, reporting progress as `mode` says.
    pub fn new(n: usize, mode: ProgressMode) -> Self {
        Transfers {
            permits: Arc::new(tokio::sync::Semaphore::new(n)),
            buffers: std::sync::Mutex::new(Vec::new()),
            keep: n,
            progress: Progress::new("fetch", "units", mode),
        }
    }

    fn take(&self) -> Vec<u8> {
        self.buffers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .unwrap_or_default()
    }

    pub(super) fn give(&self, buf: Vec<u8>) {
        let mut b = self.buffers.lock().unwrap_or_else(|p| p.into_inner());
        if b.len() < self.keep {
            b.push(buf);
        }
    }
}
