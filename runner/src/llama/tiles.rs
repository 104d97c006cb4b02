//! Streamed GGUF tiles read ahead of the kernels (docs/runner.md "Streamed tiles"). A streamed
//! matrix is a run of row tiles (whole rows, at most `tile_bytes`, `WeightFormat::row_ranges`);
//! every forward uses the same tiles in the same order (the schedule), so a reader thread walks the
//! schedule cyclically with one positioned read (`pread`) per tile into recycled host buffers and
//! hands them over a bounded channel (`ahead` tiles deep) while the compute thread records and
//! submits. Tile `i` of the schedule lives in device ring slot `i % depth`; the compute thread
//! submits before it overwrites a slot that recorded work still reads (see `Runner::forward`).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use crate::error::RunError;

/// Device slot sizes are multiples of this (a container tile's alignment).
pub const SLOT_ALIGN: u64 = 16 * 1024;

/// Where one tile's bytes are.
#[derive(Debug, Clone)]
pub struct TileLoc {
    pub file: usize,
    pub offset: u64,
    pub len: usize,
}

/// A tile read by the reader thread: its schedule index and bytes (zero padded to 4).
pub struct Tile {
    pub index: usize,
    pub bytes: Vec<u8>,
}

type Read = Result<Tile, RunError>;

/// The schedule being built, then the running reader.
pub struct TileReader {
    files: Vec<(PathBuf, File)>,
    pub schedule: Vec<TileLoc>,
    running: Option<Running>,
    /// Tiles consumed (one positioned read each).
    pub reads: u64,
    pub bytes_read: u64,
}

struct Running {
    rx: Receiver<Read>,
    recycle: SyncSender<Vec<u8>>,
    _thread: JoinHandle<()>,
}

impl TileReader {
    pub fn new() -> Self {
        Self {
            files: Vec::new(),
            schedule: Vec::new(),
            running: None,
            reads: 0,
            bytes_read: 0,
        }
    }

    /// Appends a tile of `len` bytes at `offset` of `path` to the schedule; returns its index.
    pub fn add(&mut self, path: &Path, offset: u64, len: usize) -> Result<usize, RunError> {
        let file = match self.files.iter().position(|(p, _)| p == path) {
            Some(i) => i,
            None => {
                let f = File::open(path).map_err(|source| RunError::Io {
                    what: "open",
                    path: path.display().to_string(),
                    source,
                })?;
                self.files.push((path.to_path_buf(), f));
                self.files.len() - 1
            }
        };
        self.schedule.push(TileLoc { file, offset, len });
        Ok(self.schedule.len() - 1)
    }

    /// Starts the reader thread, `ahead` tiles ahead of the consumer.
    pub fn start(&mut self, ahead: usize) -> Result<(), RunError> {
        if self.schedule.is_empty() || self.running.is_some() {
            return Ok(());
        }
        let ahead = ahead.max(1);
        let (tx, rx) = sync_channel::<Read>(ahead);
        let (recycle, spare) = sync_channel::<Vec<u8>>(ahead + 2);
        let mut files = Vec::with_capacity(self.files.len());
        for (path, f) in &self.files {
            let f = f.try_clone().map_err(|source| RunError::Io {
                what: "reopen",
                path: path.display().to_string(),
                source,
            })?;
            files.push((path.clone(), f));
        }
        let schedule = self.schedule.clone();
        let thread = std::thread::Builder::new()
            .name("tile-reader".into())
            .spawn(move || read_loop(&files, &schedule, &tx, &spare))
            .map_err(|source| RunError::Io {
                what: "start the tile reader for",
                path: String::new(),
                source,
            })?;
        self.running = Some(Running {
            rx,
            recycle,
            _thread: thread,
        });
        Ok(())
    }

    /// The tile with schedule index `index` (the reader's next one unless an earlier forward
    /// stopped half-way: tiles before `index` are then skipped).
    pub fn take(&mut self, index: usize) -> Result<Tile, RunError> {
        let running = self.running.as_ref().ok_or_else(|| RunError::Tensor {
            name: "tile reader".into(),
            detail: "not started".into(),
        })?;
        loop {
            let tile = running.rx.recv().map_err(|_| RunError::Tensor {
                name: "tile reader".into(),
                detail: "the reader thread stopped".into(),
            })??;
            if tile.index == index {
                self.reads += 1;
                self.bytes_read += tile.bytes.len() as u64;
                return Ok(tile);
            }
            self.give_back(tile.bytes);
        }
    }

    /// Returns a host buffer for reuse.
    pub fn give_back(&self, bytes: Vec<u8>) {
        if let Some(r) = &self.running {
            let _ = r.recycle.try_send(bytes);
        }
    }
}

impl Default for TileReader {
    fn default() -> Self {
        Self::new()
    }
}

fn read_loop(
    files: &[(PathBuf, File)],
    schedule: &[TileLoc],
    tx: &SyncSender<Read>,
    spare: &Receiver<Vec<u8>>,
) {
    loop {
        for (index, loc) in schedule.iter().enumerate() {
            let mut bytes = spare.try_recv().unwrap_or_default();
            bytes.clear();
            bytes.resize(loc.len.div_ceil(4) * 4, 0);
            let read = match files.get(loc.file) {
                Some((path, f)) => match bytes.get_mut(..loc.len) {
                    Some(buf) => f
                        .read_exact_at(buf, loc.offset)
                        .map_err(|source| RunError::Io {
                            what: "read tile of",
                            path: path.display().to_string(),
                            source,
                        }),
                    None => Ok(()),
                },
                None => Err(RunError::Tensor {
                    name: "tile reader".into(),
                    detail: "file handle missing".into(),
                }),
            };
            let msg = read.map(|()| Tile { index, bytes });
            if tx.send(msg).is_err() {
                return; // the runner was dropped
            }
        }
    }
}
