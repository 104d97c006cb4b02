//! Reading `MNRNTIL1` containers: header validation against the file's real length, and the
//! streaming tile read of the seed — one `pread` of one whole tile into one 16 KiB-aligned slot,
//! whose packed / scale / bias sub-regions are then handed out as views at their own (16 KiB
//! aligned) offsets. The per-tile SHA-256 check is a parameter: the runner skips it when it holds
//! verification evidence for the exact revision (seed: "Verified tiles are not re-hashed").

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use super::geometry::{ContainerSpec, Layout, TileLayout};
use super::header::{parse_header, recorded_header_bytes, Header};
use super::{hex32, ContainerError, ALIGN, MAX_HEADER_BYTES};

/// Whether a tile read checks the tile's recorded SHA-256.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestCheck {
    /// Trust held verification evidence; do not hash.
    Skip,
    /// Check when the container records digests (version 2+ with the digests flag).
    IfPresent,
    /// Check, and refuse a container that records no digests.
    Require,
}

/// A heap buffer whose usable part starts on a 16 KiB boundary (a `Vec` over-allocated by 16 KiB
/// and offset, so no `unsafe` is needed). One slot holds one tile.
pub struct AlignedSlot {
    buf: Vec<u8>,
    start: usize,
    capacity: usize,
}

impl AlignedSlot {
    /// A slot of `capacity` usable bytes.
    pub fn new(capacity: usize) -> Self {
        let align = ALIGN as usize;
        let buf = vec![0u8; capacity.saturating_add(align)];
        let start = buf.as_ptr().align_offset(align).min(align);
        AlignedSlot {
            buf,
            start,
            capacity,
        }
    }
    /// A slot large enough for the biggest tile of `layout`.
    pub fn for_layout(layout: &Layout) -> Self {
        let len = layout.full.len().max(layout.last.len());
        Self::new(usize::try_from(len).unwrap_or(usize::MAX))
    }
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// The usable bytes (their first byte is 16 KiB aligned).
    pub fn as_slice(&self) -> &[u8] {
        self.buf
            .get(self.start..self.start + self.capacity)
            .unwrap_or(&[])
    }
    fn prefix_mut(&mut self, len: usize) -> Option<&mut [u8]> {
        if len > self.capacity {
            return None;
        }
        self.buf.get_mut(self.start..self.start + len)
    }
}

/// One tile read into a slot: views of its payloads at their sub-region offsets.
#[derive(Debug, Clone, Copy)]
pub struct TileView<'a> {
    pub tile: TileLayout,
    /// The whole tile, padding included (16 KiB aligned).
    pub bytes: &'a [u8],
    /// Packed payload (at offset 0 of the tile).
    pub packed: &'a [u8],
    /// Scale payload (at the scale sub-region offset, 16 KiB aligned), without padding.
    pub scale: &'a [u8],
    /// Bias payload (affine only), without padding.
    pub bias: Option<&'a [u8]>,
}

/// A matrix's upstream streams reassembled from all tiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Streams {
    pub packed: Vec<u8>,
    pub scale: Vec<u8>,
    pub bias: Option<Vec<u8>>,
}

/// An open, validated container.
pub struct ContainerReader {
    file: File,
    path: PathBuf,
    header: Header,
    preads: AtomicU64,
}

impl ContainerReader {
    /// Open `path` and validate its header and length.
    pub fn open(path: &Path) -> Result<Self, ContainerError> {
        let file = File::open(path).map_err(|source| ContainerError::Io {
            path: path.to_owned(),
            action: "opening",
            source,
        })?;
        Self::from_file(file, path)
    }

    /// Validate an already open descriptor (the runner opens rooted descriptors from its held
    /// evidence); `path` only names it in errors.
    pub fn from_file(file: File, path: &Path) -> Result<Self, ContainerError> {
        let path = path.to_owned();
        let io = |action| {
            let path = path.clone();
            move |source| ContainerError::Io {
                path,
                action,
                source,
            }
        };
        let actual = file.metadata().map_err(io("reading metadata"))?.len();
        let mut buf = vec![0u8; actual.min(ALIGN) as usize];
        file.read_exact_at(&mut buf, 0)
            .map_err(io("reading the header"))?;
        if let Some(hb) = recorded_header_bytes(&buf) {
            if hb > ALIGN && hb <= MAX_HEADER_BYTES && hb <= actual {
                buf = vec![0u8; hb as usize];
                file.read_exact_at(&mut buf, 0)
                    .map_err(io("reading the header"))?;
            }
        }
        let header = parse_header(&buf).map_err(|source| ContainerError::Header {
            path: path.clone(),
            source,
        })?;
        let recorded = header.layout.total_bytes;
        if actual != recorded {
            return Err(ContainerError::LengthMismatch {
                path,
                actual,
                recorded,
            });
        }
        Ok(ContainerReader {
            file,
            path,
            header,
            preads: AtomicU64::new(0),
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }
    pub fn layout(&self) -> &Layout {
        &self.header.layout
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Check a caller's expected geometry against the header before a byte of payload is read
    /// (the runner's "checks the requested geometry against the header"). Compares mode, shape,
    /// group, element bits, rows per scale and the scale / bias dtypes and nibble order; tiling
    /// (`rows_per_tile`), digests, name and content kind are the writer's choice and not compared.
    pub fn expect_geometry(&self, expected: &ContainerSpec) -> Result<(), ContainerError> {
        let h = &self.header.layout.spec;
        let d = |v: Option<super::Dtype>| v.map_or("none", super::Dtype::name).to_owned();
        let pairs: [(&'static str, String, String); 9] = [
            (
                "mode",
                expected.mode.name().to_owned(),
                h.mode.name().to_owned(),
            ),
            ("rows", expected.rows.to_string(), h.rows.to_string()),
            ("cols", expected.cols.to_string(), h.cols.to_string()),
            ("group", expected.group.to_string(), h.group.to_string()),
            (
                "element_bits",
                expected.element_bits.to_string(),
                h.element_bits.to_string(),
            ),
            (
                "rows_per_scale",
                expected.rows_per_scale.to_string(),
                h.rows_per_scale.to_string(),
            ),
            (
                "scale_dtype",
                d(Some(expected.scale_dtype)),
                d(Some(h.scale_dtype)),
            ),
            ("bias_dtype", d(expected.bias_dtype), d(h.bias_dtype)),
            (
                "nibble_order",
                format!("{:?}", expected.nibble_order),
                format!("{:?}", h.nibble_order),
            ),
        ];
        for (field, expected, found) in pairs {
            if expected != found {
                return Err(ContainerError::GeometryMismatch {
                    path: self.path.clone(),
                    field,
                    expected,
                    found,
                });
            }
        }
        Ok(())
    }

    /// How many tile `pread`s this reader issued (one per [`ContainerReader::read_tile`]).
    pub fn pread_count(&self) -> u64 {
        self.preads.load(Ordering::Relaxed)
    }

    /// Read tile `index` with one `pread` into `slot`, check its zero padding and (per `check`)
    /// its SHA-256, and return views of its payloads.
    pub fn read_tile<'s>(
        &self,
        index: u64,
        slot: &'s mut AlignedSlot,
        check: DigestCheck,
    ) -> Result<TileView<'s>, ContainerError> {
        let layout = &self.header.layout;
        let tile = layout
            .tile(index)
            .ok_or_else(|| ContainerError::TileOutOfRange {
                path: self.path.clone(),
                tile: index,
                tiles: layout.tile_count,
            })?;
        let s = tile.shape;
        let len = s.len();
        let capacity = slot.capacity() as u64;
        let buf = usize::try_from(len)
            .ok()
            .and_then(|n| slot.prefix_mut(n))
            .ok_or_else(|| ContainerError::SlotTooSmall {
                path: self.path.clone(),
                tile: index,
                needed: len,
                capacity,
            })?;
        self.preads.fetch_add(1, Ordering::Relaxed);
        buf.read_exact_at_file(&self.file, tile.offset)
            .map_err(|source| ContainerError::Io {
                path: self.path.clone(),
                action: "reading a tile",
                source,
            })?;
        let want = match check {
            DigestCheck::Skip => None,
            DigestCheck::IfPresent => self.header.digests.get(index as usize),
            DigestCheck::Require => Some(self.header.digests.get(index as usize).ok_or(
                ContainerError::NoDigests {
                    path: self.path.clone(),
                    version: layout.version,
                },
            )?),
        };
        if let Some(expected) = want {
            let actual: [u8; 32] = Sha256::digest(&*buf).into();
            if &actual != expected {
                return Err(ContainerError::DigestMismatch {
                    path: self.path.clone(),
                    tile: index,
                    expected: hex32(expected),
                    actual: hex32(&actual),
                });
            }
        }
        let bytes: &'s [u8] = buf;
        // All ranges lie within the tile: offsets are sums of the region sizes making up `len`.
        let region =
            |from: u64, n: u64| bytes.get(from as usize..(from + n) as usize).unwrap_or(&[]);
        let scale_at = tile.scale_offset();
        let bias_at = tile.bias_offset();
        let padding_zero = region(scale_at + s.scale_payload, s.scale_region - s.scale_payload)
            .iter()
            .chain(region(
                bias_at + s.bias_payload,
                s.bias_region - s.bias_payload,
            ))
            .all(|&b| b == 0);
        if !padding_zero {
            return Err(ContainerError::NonZeroPadding {
                path: self.path.clone(),
                tile: index,
            });
        }
        Ok(TileView {
            tile,
            bytes,
            packed: region(0, s.packed_payload),
            scale: region(scale_at, s.scale_payload),
            bias: layout
                .spec
                .bias_dtype
                .map(|_| region(bias_at, s.bias_payload)),
        })
    }

    /// Stream every tile's payloads, in order, into the three writers (bounded memory: one slot).
    /// `bias` receives nothing outside affine mode.
    pub fn reassemble_into(
        &self,
        check: DigestCheck,
        packed: &mut dyn Write,
        scale: &mut dyn Write,
        bias: &mut dyn Write,
    ) -> Result<(), ContainerError> {
        let mut slot = AlignedSlot::for_layout(self.layout());
        for i in 0..self.layout().tile_count {
            let view = self.read_tile(i, &mut slot, check)?;
            let io = |source| ContainerError::Io {
                path: self.path.clone(),
                action: "writing reassembled streams",
                source,
            };
            packed.write_all(view.packed).map_err(io)?;
            scale.write_all(view.scale).map_err(io)?;
            if let Some(b) = view.bias {
                bias.write_all(b).map_err(io)?;
            }
        }
        Ok(())
    }

    /// The matrix's packed / scale / bias streams reassembled in memory (for tensors that fit;
    /// use [`ContainerReader::reassemble_into`] for multi-GB ones).
    pub fn reassemble(&self, check: DigestCheck) -> Result<Streams, ContainerError> {
        let (mut p, mut s, mut b) = (Vec::new(), Vec::new(), Vec::new());
        self.reassemble_into(check, &mut p, &mut s, &mut b)?;
        let bias = self.layout().spec.bias_dtype.map(|_| b);
        Ok(Streams {
            packed: p,
            scale: s,
            bias,
        })
    }

    /// Read every tile and check every recorded digest and all padding.
    pub fn verify(&self) -> Result<(), ContainerError> {
        let mut slot = AlignedSlot::for_layout(self.layout());
        for i in 0..self.layout().tile_count {
            self.read_tile(i, &mut slot, DigestCheck::Require)?;
        }
        Ok(())
    }
}

/// `pread` helper kept in one place so every tile read is exactly one call site.
trait ReadAtFile {
    fn read_exact_at_file(&mut self, file: &File, offset: u64) -> std::io::Result<()>;
}

impl ReadAtFile for [u8] {
    fn read_exact_at_file(&mut self, file: &File, offset: u64) -> std::io::Result<()> {
        file.read_exact_at(self, offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_is_16k_aligned_for_any_capacity() {
        for cap in [0usize, 1, 4096, 16_384, 49_152, 100_000] {
            let slot = AlignedSlot::new(cap);
            assert_eq!(slot.as_slice().len(), cap);
            if cap > 0 {
                assert_eq!(slot.as_slice().as_ptr() as usize % ALIGN as usize, 0);
            }
        }
    }
}
