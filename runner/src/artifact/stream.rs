//! Tile containers on the engine, streamed or resident (docs/runner.md "Streamed tiles of a
//! container"; seed 000 "Why 16 KiB" and "Tiling runs along output rows only").
//!
//! **Streamed**: each tile of a [`ContainerLoad`] is read with one `pread` (through the load
//! policy) into a 16 KiB-aligned host slot, written whole into one of two device slots
//! (alternating), and multiplied with its packed, scale and bias sub-regions bound as windows at
//! their own 16 KiB-aligned offsets — the container's layout is the upload layout — with the
//! tile's first row as the output offset. **Resident**: the tiles' payloads are reassembled into
//! the upstream streams and uploaded once ([`Engine::upload_matrix`]), then multiplied in one
//! dispatch per part. Tiles hold whole rows, so both give bit-identical outputs.

use artifact::container::{
    AlignedSlot, ContainerReader, DigestCheck, Dtype as CDtype, Header, Mode, NibbleOrder, TileView,
};
use kernels::gpu::Bind;
use kernels::{Dtype, WeightFormat};

use super::load::ContainerLoad;
use crate::engine::{Engine, ResidentMatrix, RowBuffers};
use crate::error::RunError;

/// A container whose tiles can be read one `pread` at a time: a [`ContainerLoad`] of a verified
/// artifact (its load policy), or a bare [`ContainerReader`] outside any artifact (tools and
/// tests; every tile's recorded SHA-256 is then required and checked).
pub trait TileSource {
    fn header(&self) -> &Header;
    /// The upstream tensor name (for messages and labels).
    fn name(&self) -> &str;
    /// The tiles of the matrix (all of them, or a stack member's) and its (first row, rows).
    fn extent(&self) -> (std::ops::Range<u64>, u64, u64) {
        let l = &self.header().layout;
        (0..l.tile_count, 0, l.spec.rows)
    }
    /// Reads tile `index` into `slot` (one `pread`).
    fn read_tile<'s>(
        &mut self,
        index: u64,
        slot: &'s mut AlignedSlot,
    ) -> Result<TileView<'s>, RunError>;
}

impl TileSource for ContainerLoad<'_> {
    fn header(&self) -> &Header {
        ContainerLoad::header(self)
    }
    fn name(&self) -> &str {
        self.tensor()
    }
    fn extent(&self) -> (std::ops::Range<u64>, u64, u64) {
        let (first, rows) = self.rows();
        (self.tiles(), first, rows)
    }
    fn read_tile<'s>(
        &mut self,
        index: u64,
        slot: &'s mut AlignedSlot,
    ) -> Result<TileView<'s>, RunError> {
        Ok(ContainerLoad::read_tile(self, index, slot)?)
    }
}

impl TileSource for ContainerReader {
    fn header(&self) -> &Header {
        ContainerReader::header(self)
    }
    fn name(&self) -> &str {
        &self.layout().spec.name
    }
    fn read_tile<'s>(
        &mut self,
        index: u64,
        slot: &'s mut AlignedSlot,
    ) -> Result<TileView<'s>, RunError> {
        ContainerReader::read_tile(self, index, slot, DigestCheck::Require).map_err(|e| {
            RunError::Tensor {
                name: self.layout().spec.name.clone(),
                detail: e.to_string(),
            }
        })
    }
}

/// The kernel format of a container, or why the kernels cannot multiply it.
pub fn weight_format(h: &Header) -> Result<WeightFormat, RunError> {
    let s = &h.layout.spec;
    let refuse = |why: String| RunError::Tensor {
        name: s.name.clone(),
        detail: format!("no kernel for this {} container: {why}", s.mode.name()),
    };
    let u32_of = |what: &str, v: u64| {
        u32::try_from(v).map_err(|_| refuse(format!("{what} {v} does not fit u32")))
    };
    match s.mode {
        Mode::Fp8E4m3Block => {
            if s.scale_dtype != CDtype::E8m0 {
                return Err(refuse(format!(
                    "scales are {}, the kernel reads e8m0",
                    s.scale_dtype.name()
                )));
            }
            Ok(WeightFormat::Fp8Block {
                block_rows: u32_of("rows_per_scale", s.rows_per_scale)?,
                group: u32_of("group", s.group)?,
            })
        }
        Mode::Mxfp4 => {
            if s.nibble_order != NibbleOrder::LowFirst {
                return Err(refuse(
                    "nibbles are high-first, the kernel reads low-first".into(),
                ));
            }
            Ok(WeightFormat::Mxfp4)
        }
        Mode::Affine => {
            let dt = |d: CDtype| match d {
                CDtype::Bf16 => Some(Dtype::Bf16),
                CDtype::F16 => Some(Dtype::F16),
                CDtype::F32 => Some(Dtype::F32),
                _ => None,
            };
            let scale = dt(s.scale_dtype);
            if s.element_bits != 8 || scale.is_none() || s.bias_dtype.and_then(dt) != scale {
                return Err(refuse(format!(
                    "{}-bit codes with {} scales and {:?} biases (the kernel reads 8-bit codes, scale and bias of one dtype among bf16, f16, f32)",
                    s.element_bits,
                    s.scale_dtype.name(),
                    s.bias_dtype.map(CDtype::name)
                )));
            }
            Ok(WeightFormat::Affine8 {
                group: u32_of("group", s.group)?,
                scale_dtype: scale.unwrap_or(Dtype::F32),
            })
        }
    }
}

fn size_of(what: &'static str, v: u64) -> Result<usize, RunError> {
    usize::try_from(v).map_err(|_| RunError::Tensor {
        name: what.into(),
        detail: format!("{v} does not fit this platform"),
    })
}

/// Uploads a container whole (its tiles reassembled into the upstream streams, one `pread` per
/// tile) for resident multiplication.
pub fn upload_resident(
    engine: &Engine,
    src: &mut dyn TileSource,
) -> Result<ResidentMatrix, RunError> {
    let format = weight_format(src.header())?;
    let layout = src.header().layout.clone();
    let (tiles, _, rows) = src.extent();
    let mut slot = AlignedSlot::for_layout(&layout);
    let (mut packed, mut scale, mut bias) = (Vec::new(), Vec::new(), Vec::new());
    for i in tiles {
        let v = src.read_tile(i, &mut slot)?;
        packed.extend_from_slice(v.packed);
        scale.extend_from_slice(v.scale);
        bias.extend_from_slice(v.bias.unwrap_or(&[]));
    }
    Ok(engine.upload_matrix(
        src.name(),
        format,
        size_of("rows", rows)?,
        size_of("cols", layout.spec.cols)?,
        [&packed, &scale, &bias],
        None,
    )?)
}

/// Two reused device slots for container tiles and the read counter.
pub struct ContainerStreamer {
    slots: Vec<wgpu::Buffer>,
    slot_bytes: u64,
    next: usize,
    /// Tile reads (one `pread` each) issued by [`ContainerStreamer::matmul`].
    pub reads: u64,
}

impl Default for ContainerStreamer {
    fn default() -> Self {
        Self::new()
    }
}

impl ContainerStreamer {
    /// No slots yet: they are allocated at the size of the largest tile seen.
    pub fn new() -> Self {
        Self {
            slots: Vec::new(),
            slot_bytes: 0,
            next: 0,
            reads: 0,
        }
    }

    fn ensure(&mut self, engine: &Engine, bytes: u64) -> Result<(), RunError> {
        if bytes > self.slot_bytes || self.slots.len() != 2 {
            let g = engine.gpu();
            self.slots = vec![
                g.zeros("container tile slot a", bytes)?,
                g.zeros("container tile slot b", bytes)?,
            ];
            self.slot_bytes = bytes;
        }
        Ok(())
    }

    /// y [tokens, rows] = x [tokens, cols] · Wᵀ, streaming W tile by tile from `src`.
    pub fn matmul(
        &mut self,
        engine: &Engine,
        src: &mut dyn TileSource,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
        tokens: usize,
    ) -> Result<(), RunError> {
        let format = weight_format(src.header())?;
        let layout = src.header().layout.clone();
        let (tiles, first, rows) = src.extent();
        let rows = size_of("rows", rows)?;
        let k = size_of("cols", layout.spec.cols)?;
        self.ensure(engine, layout.full.len().max(layout.last.len()))?;
        let mut host = AlignedSlot::for_layout(&layout);
        let n = format.buffer_count();
        for i in tiles {
            let view = src.read_tile(i, &mut host)?;
            self.reads += 1;
            let t = view.tile;
            let slot = self
                .slots
                .get(self.next % 2)
                .ok_or_else(|| RunError::Tensor {
                    name: load_name(&layout),
                    detail: "tile slots missing".into(),
                })?;
            self.next += 1;
            engine.gpu().write(slot, 0, view.bytes);
            let window = |offset: u64, payload: u64| Bind {
                buffer: slot,
                offset,
                // A 4-byte multiple inside the (16 KiB-multiple) region: padding is zero.
                size: Some(payload.div_ceil(4).max(1) * 4),
            };
            let w = RowBuffers {
                packed: window(0, t.shape.packed_payload),
                scales: (n >= 2).then(|| window(t.scale_offset(), t.shape.scale_payload)),
                biases: (n >= 3).then(|| window(t.bias_offset(), t.shape.bias_payload)),
            };
            engine.matmul_rows(
                format,
                k,
                size_of("tile rows", t.shape.rows)?,
                size_of("first row", t.first_row - first)?,
                rows,
                tokens,
                w,
                x,
                y,
            )?;
            // Inside a batch the slot written next must not land before this dispatch runs.
            engine.flush();
        }
        Ok(())
    }
}

fn load_name(l: &artifact::container::Layout) -> String {
    l.spec.name.clone()
}
