//! Streaming writer of `MNRNTIL1` containers: tiles are written one at a time from the upstream
//! packed / scale / bias byte ranges (copied, never re-encoded), so memory stays bounded by one
//! tile however large the tensor. The header is written first with empty digests and rewritten at
//! [`ContainerWriter::finish`] once every tile's SHA-256 is known.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::geometry::{ContainerSpec, Layout};
use super::header::Header;
use super::{ContainerError, ALIGN};

static ZEROS: [u8; ALIGN as usize] = [0u8; ALIGN as usize];

/// What a finished container holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteSummary {
    pub layout: Layout,
    /// SHA-256 of every tile's bytes (padding included), in tile order — also computed for a
    /// version-1 container, which does not record them.
    pub tile_digests: Vec<[u8; 32]>,
}

/// Writes one container tile by tile: `new` → `write_tile` × tile count → `finish`.
///
/// `W` is positioned where the container starts (normally offset 0 of a fresh file); pass
/// `&mut File` to keep the file for an fsync afterwards.
pub struct ContainerWriter<W: Write + Seek> {
    out: W,
    start: u64,
    path: PathBuf,
    layout: Layout,
    next: u64,
    digests: Vec<[u8; 32]>,
}

impl<W: Write + Seek> ContainerWriter<W> {
    /// Validate `spec` (every geometry refusal happens here, before a byte is written) and write
    /// the provisional header.
    pub fn new(out: W, spec: &ContainerSpec) -> Result<Self, ContainerError> {
        let label = PathBuf::from(format!("<container {}>", spec.name));
        Self::with_path(out, spec, label)
    }

    /// As [`ContainerWriter::new`], naming `path` in i/o errors.
    pub fn with_path(
        mut out: W,
        spec: &ContainerSpec,
        path: impl Into<PathBuf>,
    ) -> Result<Self, ContainerError> {
        let path = path.into();
        let layout = spec.layout().map_err(|source| ContainerError::Geometry {
            tensor: spec.name.clone(),
            source,
        })?;
        let io = |action| {
            let path = path.clone();
            move |source| ContainerError::Io {
                path,
                action,
                source,
            }
        };
        let start = out.stream_position().map_err(io("seeking"))?;
        let provisional = Header {
            layout: layout.clone(),
            digests: Vec::new(),
        }
        .encode();
        out.write_all(&provisional)
            .map_err(io("writing the header"))?;
        Ok(ContainerWriter {
            out,
            start,
            path,
            layout,
            next: 0,
            digests: Vec::new(),
        })
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Tiles written so far.
    pub fn tiles_written(&self) -> u64 {
        self.next
    }

    /// Append the next tile from its exact upstream payloads. `bias` is `Some` in affine mode
    /// only. Lengths must equal the tile's payloads (the last tile may be shorter).
    pub fn write_tile(
        &mut self,
        packed: &[u8],
        scale: &[u8],
        bias: Option<&[u8]>,
    ) -> Result<(), ContainerError> {
        let tensor = &self.layout.spec.name;
        let tile = self
            .layout
            .tile(self.next)
            .ok_or_else(|| ContainerError::TileCount {
                tensor: tensor.clone(),
                written: self.next + 1,
                expected: self.layout.tile_count,
            })?;
        let s = tile.shape;
        let bias_bytes = bias.unwrap_or(&[]);
        for (stream, expected, actual) in [
            ("packed", s.packed_payload, packed.len() as u64),
            ("scale", s.scale_payload, scale.len() as u64),
            ("bias", s.bias_payload, bias_bytes.len() as u64),
        ] {
            if expected != actual {
                return Err(ContainerError::StreamLength {
                    tensor: tensor.clone(),
                    tile: tile.index,
                    stream,
                    expected,
                    actual,
                });
            }
        }
        if bias.is_some() != self.layout.spec.bias_dtype.is_some() {
            return Err(ContainerError::StreamLength {
                tensor: tensor.clone(),
                tile: tile.index,
                stream: "bias",
                expected: s.bias_payload,
                actual: if bias.is_some() {
                    bias_bytes.len() as u64
                } else {
                    0
                },
            });
        }
        let mut tile_hash = Sha256::new();
        // Region sizes are payload + (region − payload) zero bytes, padding < 16 KiB.
        for (payload, region) in [
            (packed, s.packed_region),
            (scale, s.scale_region),
            (bias_bytes, s.bias_region),
        ] {
            let pad = (region - payload.len() as u64) as usize;
            let zeros = ZEROS.get(..pad).unwrap_or(&[]);
            for part in [payload, zeros] {
                tile_hash.update(part);
                self.out
                    .write_all(part)
                    .map_err(|source| ContainerError::Io {
                        path: self.path.clone(),
                        action: "writing a tile",
                        source,
                    })?;
            }
        }
        self.digests.push(tile_hash.finalize().into());
        self.next += 1;
        Ok(())
    }

    /// Check that every tile was written, rewrite the header with the digests and flush.
    pub fn finish(mut self) -> Result<WriteSummary, ContainerError> {
        if self.next != self.layout.tile_count {
            return Err(ContainerError::TileCount {
                tensor: self.layout.spec.name.clone(),
                written: self.next,
                expected: self.layout.tile_count,
            });
        }
        let header = Header {
            layout: self.layout.clone(),
            digests: if self.layout.spec.digests {
                self.digests.clone()
            } else {
                Vec::new()
            },
        };
        let bytes = header.encode();
        let path = self.path.clone();
        let io = |action| {
            let path = path.clone();
            move |source| ContainerError::Io {
                path,
                action,
                source,
            }
        };
        if self.layout.spec.digests {
            self.out
                .seek(SeekFrom::Start(self.start))
                .map_err(io("seeking to the header"))?;
            self.out
                .write_all(&bytes)
                .map_err(io("writing the header"))?;
            let end = self.start + self.layout.total_bytes;
            self.out
                .seek(SeekFrom::Start(end))
                .map_err(io("seeking to the end"))?;
        }
        self.out.flush().map_err(io("flushing"))?;
        Ok(WriteSummary {
            layout: self.layout,
            tile_digests: self.digests,
        })
    }
}

/// Write a whole container at `path` from the complete upstream streams (convenience over
/// [`ContainerWriter`]; the file is created or truncated, then fsynced).
pub fn write_container(
    path: &Path,
    spec: &ContainerSpec,
    packed: &[u8],
    scale: &[u8],
    bias: Option<&[u8]>,
) -> Result<WriteSummary, ContainerError> {
    let layout = spec.layout().map_err(|source| ContainerError::Geometry {
        tensor: spec.name.clone(),
        source,
    })?;
    let (np, ns, nb) = layout.stream_lengths();
    let bias_len = bias.map_or(0, |b| b.len() as u64);
    for (stream, expected, actual) in [
        ("packed", np, packed.len() as u64),
        ("scale", ns, scale.len() as u64),
        ("bias", nb, bias_len),
    ] {
        if expected != actual {
            return Err(ContainerError::MatrixStreamLength {
                tensor: spec.name.clone(),
                stream,
                expected,
                actual,
            });
        }
    }
    let io = |action| {
        move |source| ContainerError::Io {
            path: path.to_owned(),
            action,
            source,
        }
    };
    let mut file = File::create(path).map_err(io("creating"))?;
    let mut w = ContainerWriter::with_path(std::io::BufWriter::new(&mut file), spec, path)?;
    for i in 0..layout.tile_count {
        let t = layout.tile(i).ok_or(ContainerError::TileCount {
            tensor: spec.name.clone(),
            written: i,
            expected: layout.tile_count,
        })?;
        let s = t.shape;
        // In range: the stream lengths were checked against the layout above.
        let p = sub(packed, t.packed_stream_offset, s.packed_payload);
        let sc = sub(scale, t.scale_stream_offset, s.scale_payload);
        let b = bias.map(|b| sub(b, t.bias_stream_offset, s.bias_payload));
        w.write_tile(p, sc, b)?;
    }
    let summary = w.finish()?;
    file.sync_all().map_err(io("syncing"))?;
    Ok(summary)
}

fn sub(data: &[u8], off: u64, len: u64) -> &[u8] {
    let start = usize::try_from(off).unwrap_or(usize::MAX);
    let end = start.saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
    data.get(start..end).unwrap_or(&[])
}
