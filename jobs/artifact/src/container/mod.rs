//! The tile container `MNRNTIL1`, versions 1, 2 and 3: a byte-preserving reordering of one
//! quantized matrix's upstream packed, scale (and, in affine mode, bias) streams into row tiles whose
//! sub-regions each start on a 16 KiB boundary, so one tile is one `pread` into one aligned slot.
//!
//! Spec: `../shared/seeds/000_*.txt` ("The tile container" … "Digests and feature flags"); the
//! byte layout designed here is frozen in `docs/container.md` and by the golden files under
//! `jobs/artifact/tests/golden/container/`.
//!
//! - [`geometry`]: the request ([`ContainerSpec`]) validated into a [`Layout`] (refusals at
//!   construction), tile offsets and the lowest version that can express the request.
//! - [`header`]: header encoding and the defensive parser ([`parse_header`]).
//! - [`writer`]: streaming [`ContainerWriter`] and [`write_container`].
//! - [`reader`]: [`ContainerReader`] with one-`pread`-per-tile reads into an [`AlignedSlot`].
//! - [`synthetic`]: the deterministic generator of synthetic containers and the regeneration check.

pub mod geometry;
pub mod header;
pub mod reader;
pub mod synthetic;
pub mod writer;

use std::path::PathBuf;

pub use geometry::{ContainerSpec, Layout, TileLayout};
pub use header::{parse_header, Header};
pub use reader::{AlignedSlot, ContainerReader, DigestCheck, Streams, TileView};
pub use synthetic::{regenerate_check, synthetic_streams, write_synthetic, RegenerationReport};
pub use writer::{write_container, ContainerWriter, WriteSummary};

/// The eight magic bytes every container starts with.
pub const MAGIC: [u8; 8] = *b"MNRNTIL1";

/// Header and sub-region alignment. A constant of the format, never the host page size: 16 KiB is a
/// multiple of both the 4 KiB x86-64 page and the 16 KiB Apple-silicon page, so a file written
/// anywhere is aligned everywhere (seed, "Why 16 KiB").
pub const ALIGN: u64 = 16_384;

/// Oldest and newest format versions this build reads and writes.
pub const MIN_VERSION: u16 = 1;
pub const MAX_VERSION: u16 = 3;

/// Longest tensor name the header carries (UTF-8 bytes).
pub const MAX_NAME_BYTES: usize = 256;

/// Largest header region (fixed fields + digest table) a reader accepts: 4096 × 16 KiB = 64 MiB,
/// room for ~2 million tile digests. The cap bounds what a hostile header can make us allocate.
pub const MAX_HEADER_BYTES: u64 = 4096 * ALIGN;

/// Size of one per-tile digest (SHA-256).
pub const DIGEST_BYTES: usize = 32;

/// Feature-flag bits of the header's flag word (seed: "Four flags are defined today").
pub mod flags {
    /// A bias sub-region follows the scale sub-region (affine mode).
    pub const BIAS: u32 = 1 << 0;
    /// The header carries one SHA-256 per tile (version 2 and later).
    pub const DIGESTS: u32 = 1 << 1;
    /// Scales form a two-dimensional block grid (`rows_per_scale` rows × `group` columns; v3).
    pub const SCALE_GRID_2D: u32 = 1 << 2;
    /// At least one sub-region's payload is followed by zero padding to the alignment.
    pub const ZERO_PADDING: u32 = 1 << 3;
    /// Every bit this build understands; any other set bit is refused.
    pub const KNOWN: u32 = BIAS | DIGESTS | SCALE_GRID_2D | ZERO_PADDING;
}

/// Quantization mode of a container (header byte 16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// OCP MX FP4: e2m1 elements, one u8 e8m0 exponent per group of 32, no bias.
    Mxfp4,
    /// MLX affine `w = scale × q + bias`, group a power of two, one scale and one bias per group.
    Affine,
    /// FP8 e4m3 elements with a 2-D grid of block scales (`rows_per_scale` × `group`).
    Fp8E4m3Block,
}

impl Mode {
    pub const fn code(self) -> u8 {
        match self {
            Mode::Mxfp4 => 1,
            Mode::Affine => 2,
            Mode::Fp8E4m3Block => 3,
        }
    }
    pub const fn from_code(code: u8) -> Option<Mode> {
        match code {
            1 => Some(Mode::Mxfp4),
            2 => Some(Mode::Affine),
            3 => Some(Mode::Fp8E4m3Block),
            _ => None,
        }
    }
    /// The name used in plans, docs and `minirun-inspect`.
    pub const fn name(self) -> &'static str {
        match self {
            Mode::Mxfp4 => "mxfp4",
            Mode::Affine => "affine",
            Mode::Fp8E4m3Block => "fp8-e4m3-block",
        }
    }
}

/// Element, scale and bias dtype codes (header bytes 18, 20, 21). One table for all three fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// OCP e2m1 (4-bit float).
    E2m1,
    /// FP8 e4m3fn.
    E4m3,
    /// Unsigned integer code of `element_bits` bits (affine `q`).
    Uint,
    /// OCP e8m0: unsigned power-of-two exponent, bias 127.
    E8m0,
    Bf16,
    F16,
    F32,
}

impl Dtype {
    pub const fn code(self) -> u8 {
        match self {
            Dtype::E2m1 => 1,
            Dtype::E4m3 => 2,
            Dtype::Uint => 3,
            Dtype::E8m0 => 4,
            Dtype::Bf16 => 5,
            Dtype::F16 => 6,
            Dtype::F32 => 7,
        }
    }
    pub const fn from_code(code: u8) -> Option<Dtype> {
        match code {
            1 => Some(Dtype::E2m1),
            2 => Some(Dtype::E4m3),
            3 => Some(Dtype::Uint),
            4 => Some(Dtype::E8m0),
            5 => Some(Dtype::Bf16),
            6 => Some(Dtype::F16),
            7 => Some(Dtype::F32),
            _ => None,
        }
    }
    /// Bytes per scale or bias element (`None` for the sub-byte element codes).
    pub const fn scalar_bytes(self) -> Option<u64> {
        match self {
            Dtype::E8m0 | Dtype::E4m3 => Some(1),
            Dtype::Bf16 | Dtype::F16 => Some(2),
            Dtype::F32 => Some(4),
            Dtype::E2m1 | Dtype::Uint => None,
        }
    }
    pub const fn name(self) -> &'static str {
        match self {
            Dtype::E2m1 => "e2m1",
            Dtype::E4m3 => "e4m3",
            Dtype::Uint => "uint",
            Dtype::E8m0 => "e8m0",
            Dtype::Bf16 => "bf16",
            Dtype::F16 => "f16",
            Dtype::F32 => "f32",
        }
    }
}

/// Order of sub-byte elements within a byte (header byte 22). Recorded, never assumed: DeepSeek V4
/// and gpt-oss store element `2i` in the low nibble of byte `i` ([`NibbleOrder::LowFirst`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NibbleOrder {
    /// Elements are whole bytes (8-bit elements); code 0.
    NotApplicable,
    /// The first element of a byte occupies its least significant bits (LSB-first bit stream); code 1.
    LowFirst,
    /// The first element of a byte occupies its most significant bits; code 2.
    HighFirst,
}

impl NibbleOrder {
    pub const fn code(self) -> u8 {
        match self {
            NibbleOrder::NotApplicable => 0,
            NibbleOrder::LowFirst => 1,
            NibbleOrder::HighFirst => 2,
        }
    }
    pub const fn from_code(code: u8) -> Option<NibbleOrder> {
        match code {
            0 => Some(NibbleOrder::NotApplicable),
            1 => Some(NibbleOrder::LowFirst),
            2 => Some(NibbleOrder::HighFirst),
            _ => None,
        }
    }
}

/// Whether a container's bytes can be recomputed or only checked (header byte 17 + generator seed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContentKind {
    /// Bytes produced by [`synthetic::synthetic_streams`] from `seed` and the geometry (storage
    /// benchmarks); code 1.
    SyntheticDeterministic { seed: u64 },
    /// Bytes copied from an upstream checkpoint; only digests can check them; code 2.
    CheckpointDerived,
}

impl ContentKind {
    pub const fn code(self) -> u8 {
        match self {
            ContentKind::SyntheticDeterministic { .. } => 1,
            ContentKind::CheckpointDerived => 2,
        }
    }
    pub const fn name(self) -> &'static str {
        match self {
            ContentKind::SyntheticDeterministic { .. } => "synthetic-deterministic",
            ContentKind::CheckpointDerived => "checkpoint-derived",
        }
    }
}

/// A request or a header whose geometry cannot satisfy the container's rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    #[error("{what} must be positive")]
    Zero { what: &'static str },
    #[error("group {group} is not a power of two")]
    GroupNotPowerOfTwo { group: u64 },
    #[error("mode `{mode}` requires group {required}, got {group}")]
    GroupFixed {
        mode: &'static str,
        required: u64,
        group: u64,
    },
    #[error("cols {cols} is not a multiple of group {group}")]
    ColsNotMultipleOfGroup { cols: u64, group: u64 },
    #[error("a row of {cols} elements × {bits} bits is not a whole number of bytes")]
    RowNotWholeBytes { cols: u64, bits: u8 },
    #[error("mode `{mode}` does not allow {field} = {value}")]
    Unsupported {
        mode: &'static str,
        field: &'static str,
        value: String,
    },
    #[error("rows_per_tile {rows_per_tile} exceeds rows {rows}; use rows_per_tile = rows")]
    TileTallerThanMatrix { rows_per_tile: u64, rows: u64 },
    #[error("rows_per_tile {rows_per_tile} is not a multiple of rows_per_scale {rows_per_scale}")]
    TileSplitsScaleBlock {
        rows_per_tile: u64,
        rows_per_scale: u64,
    },
    #[error(
        "{which} tile of {tile_rows} rows holds {bytes} packed bytes, not a multiple of 16384; \
         packed data is never padded: choose rows_per_tile a multiple of {row_multiple} and rows \
         whose remainder is too, or store the tensor as a plain stream"
    )]
    PackedNotAligned {
        which: &'static str,
        tile_rows: u64,
        bytes: u64,
        row_multiple: u64,
    },
    #[error("tensor name is {len} bytes, longer than {max}")]
    NameTooLong { len: usize, max: usize },
    #[error("content kind checkpoint-derived carries generator seed {seed}, must be 0")]
    SeedOnCheckpoint { seed: u64 },
    #[error("container sizes overflow 64 bits")]
    Overflow,
    #[error("{tiles} tile digests need a {bytes}-byte header, more than the {max}-byte limit")]
    HeaderTooLarge { tiles: u64, bytes: u64, max: u64 },
}

/// Everything that can go wrong reading or writing a container. Variants name the file or tensor.
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    #[error("invalid container geometry for tensor `{tensor}`")]
    Geometry {
        tensor: String,
        #[source]
        source: GeometryError,
    },
    #[error("invalid container header in `{path}`")]
    Header {
        path: PathBuf,
        #[source]
        source: header::HeaderError,
    },
    #[error("i/o error on `{path}` while {action}")]
    Io {
        path: PathBuf,
        action: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "`{path}` is {actual} bytes but its header records {recorded}: the file is {}; re-fetch or \
         re-repack it",
        if actual < recorded { "truncated" } else { "longer than its header" }
    )]
    LengthMismatch {
        path: PathBuf,
        actual: u64,
        recorded: u64,
    },
    #[error("tile {tile} of `{path}`: sha-256 {actual} does not match the recorded {expected}")]
    DigestMismatch {
        path: PathBuf,
        tile: u64,
        expected: String,
        actual: String,
    },
    #[error(
        "`{path}` carries no tile digests (version {version}) but digest verification was required"
    )]
    NoDigests { path: PathBuf, version: u16 },
    #[error("tile {tile} of `{path}` has non-zero bytes in its zero padding")]
    NonZeroPadding { path: PathBuf, tile: u64 },
    #[error("tile {tile} is out of range: `{path}` has {tiles} tiles")]
    TileOutOfRange {
        path: PathBuf,
        tile: u64,
        tiles: u64,
    },
    #[error(
        "tensor `{tensor}`: tile {tile} {stream} stream is {actual} bytes, the geometry needs {expected}"
    )]
    StreamLength {
        tensor: String,
        tile: u64,
        stream: &'static str,
        expected: u64,
        actual: u64,
    },
    #[error(
        "tensor `{tensor}`: the {stream} stream is {actual} bytes, the geometry needs {expected}"
    )]
    MatrixStreamLength {
        tensor: String,
        stream: &'static str,
        expected: u64,
        actual: u64,
    },
    #[error("tensor `{tensor}`: {written} tiles written, the geometry has {expected}")]
    TileCount {
        tensor: String,
        written: u64,
        expected: u64,
    },
    #[error(
        "`{path}` is checkpoint-derived: its bytes came from an upstream checkpoint and cannot be \
         regenerated; verify it against its tile digests or the upstream bytes instead"
    )]
    NotRegenerable { path: PathBuf },
    #[error("`{path}` differs from its regenerated synthetic content at {region}")]
    RegenerationMismatch { path: PathBuf, region: String },
    #[error(
        "`{path}` holds {field} = {found} but {expected} was requested; the artifact does not match \
         the plan or model adapter that asked for it"
    )]
    GeometryMismatch {
        path: PathBuf,
        field: &'static str,
        expected: String,
        found: String,
    },
    #[error("slot of {capacity} bytes cannot hold tile {tile} of `{path}` ({needed} bytes)")]
    SlotTooSmall {
        path: PathBuf,
        tile: u64,
        needed: u64,
        capacity: u64,
    },
}

fn hex32(d: &[u8; 32]) -> String {
    hex::encode(d)
}
