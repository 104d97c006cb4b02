//! GGUF tile streaming (docs/runner.md "Streamed tiles"): a streamed tile of a GGUF tensor is a
//! block of whole rows (`WeightFormat::row_ranges`), at most `tile_bytes` long, read with one
//! positioned read (`pread`) from the file into a host buffer and written into one of two reused
//! device slots (16 KiB-aligned sizes), alternating, then multiplied by `Engine::matmul_rows` with
//! the tile's first row as `row0`. Queue order makes the reuse safe: a slot's next write is applied
//! only after the dispatch that read it was submitted. Rows never split along K, so the streamed
//! product is bit-identical to the resident one (docs/kernels.md, accumulation-order invariant;
//! the negative control is `kernels::reference` test `splitting_k_changes_the_bits`).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use kernels::gpu::Bind;

use crate::engine::{Engine, RowBuffers};
use crate::error::RunError;
use crate::model::MatrixRef;

/// Slot sizes are multiples of this (a container tile's alignment).
pub const SLOT_ALIGN: u64 = 16 * 1024;

/// A matrix left in the file: where its rows start.
#[derive(Debug, Clone)]
pub struct StreamedMatrix {
    pub m: MatrixRef,
    pub file: usize,
    pub offset: u64,
    pub row_bytes: usize,
}

/// The open files, the two slots, the host staging buffer and the read counter.
pub struct Streamer {
    files: Vec<(PathBuf, File)>,
    slots: [wgpu::Buffer; 2],
    next_slot: usize,
    host: Vec<u8>,
    tile_bytes: usize,
    /// Positioned reads performed (one per tile).
    pub reads: u64,
    /// Bytes read.
    pub bytes_read: u64,
}

impl Streamer {
    /// Two slots of `tile_bytes` rounded up to [`SLOT_ALIGN`].
    pub fn new(engine: &Engine, tile_bytes: usize) -> Result<Self, RunError> {
        let size = (tile_bytes as u64).div_ceil(SLOT_ALIGN).max(1) * SLOT_ALIGN;
        let g = engine.gpu();
        let slot = |label| g.zeros(label, size).map_err(RunError::Kernel);
        Ok(Self {
            files: Vec::new(),
            slots: [slot("tile slot a")?, slot("tile slot b")?],
            next_slot: 0,
            host: Vec::new(),
            tile_bytes: usize::try_from(size).unwrap_or(usize::MAX),
            reads: 0,
            bytes_read: 0,
        })
    }

    /// Registers a matrix at `offset` of `path`.
    pub fn add(
        &mut self,
        m: &MatrixRef,
        path: &Path,
        offset: u64,
    ) -> Result<StreamedMatrix, RunError> {
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
        let row_bytes = m.format.packed_len(1, m.k)?;
        if m.format.buffer_count() != 1 || row_bytes == 0 || row_bytes > self.tile_bytes {
            return Err(RunError::Tensor {
                name: m.name.clone(),
                detail: format!(
                    "cannot stream {} rows of {row_bytes} bytes through {}-byte slots",
                    m.format.name(),
                    self.tile_bytes
                ),
            });
        }
        Ok(StreamedMatrix {
            m: m.clone(),
            file,
            offset,
            row_bytes,
        })
    }

    /// Rows per tile for `s`.
    pub fn tile_rows(&self, s: &StreamedMatrix) -> usize {
        (self.tile_bytes / s.row_bytes).max(1)
    }

    /// y [tokens, rows] = x · Wᵀ, streaming W tile by tile.
    pub fn matmul(
        &mut self,
        engine: &Engine,
        s: &StreamedMatrix,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
        tokens: usize,
    ) -> Result<(), RunError> {
        let tile_rows = self.tile_rows(s);
        let mut row0 = 0;
        while row0 < s.m.rows {
            let rows = tile_rows.min(s.m.rows - row0);
            let len = rows * s.row_bytes;
            let at = s.offset + (row0 * s.row_bytes) as u64;
            let padded = len.div_ceil(4) * 4;
            self.host.clear();
            self.host.resize(padded, 0);
            let (path, file) = self.files.get(s.file).ok_or_else(|| RunError::Tensor {
                name: s.m.name.clone(),
                detail: "file handle missing".to_string(),
            })?;
            let buf = self.host.get_mut(..len).unwrap_or_default();
            file.read_exact_at(buf, at).map_err(|source| RunError::Io {
                what: "read tile of",
                path: path.display().to_string(),
                source,
            })?;
            self.reads += 1;
            self.bytes_read += len as u64;
            let slot = &self.slots[self.next_slot % 2];
            self.next_slot += 1;
            engine.gpu().queue().write_buffer(slot, 0, &self.host);
            let w = RowBuffers {
                packed: Bind {
                    buffer: slot,
                    offset: 0,
                    size: Some(padded as u64),
                },
                scales: None,
                biases: None,
            };
            engine.matmul_rows(s.m.format, s.m.k, rows, row0, s.m.rows, tokens, w, x, y)?;
            row0 += rows;
        }
        Ok(())
    }
}
