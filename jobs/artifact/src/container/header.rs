//! Header encoding and the defensive header parser of `MNRNTIL1` (layout: `docs/container.md` §3).
//!
//! The parser never panics and never allocates more than the bytes it was given: every read is a
//! bounds-checked `get`, and the digest table is only materialised after its extent was checked
//! against the buffer. A header is accepted only when every recorded derived field (tile count,
//! region sizes, offsets, total size, flags) equals what [`Layout::compute`] derives from the
//! recorded geometry, so a header that breaks the alignment rules is refused, not trusted.

use super::geometry::{fixed_end, Layout};
use super::{
    flags, ContainerSpec, ContentKind, Dtype, GeometryError, Mode, NibbleOrder, ALIGN,
    DIGEST_BYTES, MAGIC, MAX_HEADER_BYTES, MAX_NAME_BYTES, MAX_VERSION, MIN_VERSION,
};

// Byte offsets of the fixed fields (all integers little-endian). Version 1.
pub const OFF_MAGIC: usize = 0;
pub const OFF_VERSION: usize = 8; // u16
pub const OFF_RESERVED_10: usize = 10; // u16, zero
pub const OFF_FLAGS: usize = 12; // u32
pub const OFF_MODE: usize = 16; // u8
pub const OFF_CONTENT_KIND: usize = 17; // u8
pub const OFF_ELEMENT_DTYPE: usize = 18; // u8
pub const OFF_ELEMENT_BITS: usize = 19; // u8
pub const OFF_SCALE_DTYPE: usize = 20; // u8
pub const OFF_BIAS_DTYPE: usize = 21; // u8 (0 = none)
pub const OFF_NIBBLE_ORDER: usize = 22; // u8
pub const OFF_RESERVED_23: usize = 23; // u8, zero
pub const OFF_ROWS: usize = 24; // u64
pub const OFF_COLS: usize = 32;
pub const OFF_GROUP: usize = 40;
pub const OFF_ROWS_PER_TILE: usize = 48;
pub const OFF_TILE_COUNT: usize = 56;
pub const OFF_TILE_STRIDE: usize = 64;
pub const OFF_PACKED_REGION: usize = 72;
pub const OFF_SCALE_REGION: usize = 80;
pub const OFF_BIAS_REGION: usize = 88;
pub const OFF_LAST_TILE_ROWS: usize = 96;
pub const OFF_LAST_PACKED_REGION: usize = 104;
pub const OFF_LAST_SCALE_REGION: usize = 112;
pub const OFF_LAST_BIAS_REGION: usize = 120;
pub const OFF_HEADER_BYTES: usize = 128;
pub const OFF_TOTAL_BYTES: usize = 136;
pub const OFF_GENERATOR_SEED: usize = 144;
pub const OFF_NAME_LEN: usize = 152; // u16
pub const OFF_RESERVED_154: usize = 154; // ..256, zero
pub const OFF_NAME: usize = 256; // ..512, UTF-8, zero-filled
                                 // Version 2.
pub const OFF_DIGEST_TABLE_OFFSET: usize = 512; // u64
pub const OFF_DIGEST_COUNT: usize = 520; // u64
                                         // Version 3 (where v2 kept the digest table).
pub const OFF_ROWS_PER_SCALE: usize = 528; // u64
pub const OFF_SCALE_GRID_ROWS: usize = 536; // u64
pub const OFF_SCALE_GRID_COLS: usize = 544; // u64

/// A header that cannot be accepted. Wrapped with the file path in
/// [`super::ContainerError::Header`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("header is {len} bytes, needs at least {needed}")]
    TooShort { len: u64, needed: u64 },
    #[error("bad magic {found:02x?}, expected `MNRNTIL1`")]
    BadMagic { found: Vec<u8> },
    #[error("unsupported container version {version}; this build reads versions 1 to 3")]
    UnsupportedVersion { version: u16 },
    #[error("unknown feature flag bits {bits:#010x}; this build understands {known:#x} and refuses the rest")]
    UnknownFlags { bits: u32, known: u32 },
    #[error("unknown {field} code {code}")]
    UnknownCode { field: &'static str, code: u8 },
    #[error("reserved byte at offset {offset} is {value:#04x}, must be zero")]
    NonZeroReserved { offset: u64, value: u8 },
    #[error("tensor name is not {MAX_NAME_BYTES}-byte-bounded utf-8 (length field {len})")]
    BadName { len: u64 },
    #[error("version {version} cannot carry {feature}; needs version {required}")]
    VersionTooLow {
        version: u16,
        feature: &'static str,
        required: u16,
    },
    #[error("element dtype `{found}` does not match mode `{mode}`")]
    ElementDtype {
        mode: &'static str,
        found: &'static str,
    },
    #[error("content kind checkpoint-derived carries generator seed {seed}, must be 0")]
    SeedOnCheckpoint { seed: u64 },
    #[error("digest table at {offset} with {count} entries: {reason}")]
    DigestTable {
        offset: u64,
        count: u64,
        reason: &'static str,
    },
    #[error("geometry breaks the container rules")]
    Geometry(#[source] GeometryError),
    #[error("recorded {field} is {recorded}, the geometry derives {derived}")]
    Mismatch {
        field: &'static str,
        recorded: u64,
        derived: u64,
    },
}

fn u16_at(b: &[u8], off: usize) -> Result<u16, HeaderError> {
    let s = b.get(off..off + 2).ok_or(too_short(b, off + 2))?;
    Ok(u16::from_le_bytes([s[0], s[1]]))
}
fn u32_at(b: &[u8], off: usize) -> Result<u32, HeaderError> {
    let s = b.get(off..off + 4).ok_or(too_short(b, off + 4))?;
    let mut a = [0u8; 4];
    a.copy_from_slice(s);
    Ok(u32::from_le_bytes(a))
}
fn u64_at(b: &[u8], off: usize) -> Result<u64, HeaderError> {
    let s = b.get(off..off + 8).ok_or(too_short(b, off + 8))?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Ok(u64::from_le_bytes(a))
}
fn u8_at(b: &[u8], off: usize) -> Result<u8, HeaderError> {
    b.get(off).copied().ok_or(too_short(b, off + 1))
}
fn too_short(b: &[u8], needed: usize) -> HeaderError {
    HeaderError::TooShort {
        len: b.len() as u64,
        needed: needed as u64,
    }
}
fn zero_range(b: &[u8], from: usize, to: usize) -> Result<(), HeaderError> {
    let s = b.get(from..to).ok_or(too_short(b, to))?;
    match s.iter().position(|&v| v != 0) {
        Some(i) => Err(HeaderError::NonZeroReserved {
            offset: (from + i) as u64,
            value: s[i],
        }),
        None => Ok(()),
    }
}

/// The header region's length recorded in a header prefix (offset 128), so a reader knows how
/// much to read before calling [`parse_header`]. `None` if the prefix is too short.
pub fn recorded_header_bytes(prefix: &[u8]) -> Option<u64> {
    u64_at(prefix, OFF_HEADER_BYTES).ok()
}

/// A parsed, validated header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub layout: Layout,
    /// One SHA-256 per tile, in tile order (empty without the `DIGESTS` flag).
    pub digests: Vec<[u8; 32]>,
}

impl Header {
    /// The header region bytes (`layout.header_bytes` long). `digests` must hold one entry per
    /// tile when the layout has digests (missing entries are written as zeros).
    pub fn encode(&self) -> Vec<u8> {
        let l = &self.layout;
        let s = &l.spec;
        // header_bytes ≤ MAX_HEADER_BYTES (64 MiB), checked by Layout::compute.
        let mut h = vec![0u8; l.header_bytes as usize];
        let mut put = |off: usize, bytes: &[u8]| {
            if let Some(dst) = h.get_mut(off..off + bytes.len()) {
                dst.copy_from_slice(bytes);
            }
        };
        put(OFF_MAGIC, &MAGIC);
        put(OFF_VERSION, &l.version.to_le_bytes());
        put(OFF_FLAGS, &l.flags.to_le_bytes());
        put(OFF_MODE, &[s.mode.code()]);
        put(OFF_CONTENT_KIND, &[s.content.code()]);
        put(OFF_ELEMENT_DTYPE, &[l.element_dtype().code()]);
        put(OFF_ELEMENT_BITS, &[s.element_bits]);
        put(OFF_SCALE_DTYPE, &[s.scale_dtype.code()]);
        put(OFF_BIAS_DTYPE, &[s.bias_dtype.map_or(0, Dtype::code)]);
        put(OFF_NIBBLE_ORDER, &[s.nibble_order.code()]);
        for (off, v) in [
            (OFF_ROWS, s.rows),
            (OFF_COLS, s.cols),
            (OFF_GROUP, s.group),
            (OFF_ROWS_PER_TILE, s.rows_per_tile),
            (OFF_TILE_COUNT, l.tile_count),
            (OFF_TILE_STRIDE, l.tile_stride),
            (OFF_PACKED_REGION, l.full.packed_region),
            (OFF_SCALE_REGION, l.full.scale_region),
            (OFF_BIAS_REGION, l.full.bias_region),
            (OFF_LAST_TILE_ROWS, l.last.rows),
            (OFF_LAST_PACKED_REGION, l.last.packed_region),
            (OFF_LAST_SCALE_REGION, l.last.scale_region),
            (OFF_LAST_BIAS_REGION, l.last.bias_region),
            (OFF_HEADER_BYTES, l.header_bytes),
            (OFF_TOTAL_BYTES, l.total_bytes),
        ] {
            put(off, &v.to_le_bytes());
        }
        if let ContentKind::SyntheticDeterministic { seed } = s.content {
            put(OFF_GENERATOR_SEED, &seed.to_le_bytes());
        }
        put(OFF_NAME_LEN, &(s.name.len() as u16).to_le_bytes());
        put(OFF_NAME, s.name.as_bytes());
        if l.version >= 2 {
            let count = if s.digests { l.tile_count } else { 0 };
            put(
                OFF_DIGEST_TABLE_OFFSET,
                &l.digest_table_offset.to_le_bytes(),
            );
            put(OFF_DIGEST_COUNT, &count.to_le_bytes());
            if s.digests {
                for (i, d) in self.digests.iter().enumerate().take(l.tile_count as usize) {
                    put(l.digest_table_offset as usize + i * DIGEST_BYTES, d);
                }
            }
        }
        if l.version >= 3 {
            put(OFF_ROWS_PER_SCALE, &s.rows_per_scale.to_le_bytes());
            put(OFF_SCALE_GRID_ROWS, &l.scale_grid_rows.to_le_bytes());
            put(OFF_SCALE_GRID_COLS, &l.scale_cols.to_le_bytes());
        }
        h
    }
}

impl Header {
    /// A JSON description of the header and every tile (for `minirun-inspect` and reports):
    /// field names as in `docs/container.md`, digests as lower-case hex.
    pub fn describe(&self) -> serde_json::Value {
        let l = &self.layout;
        let s = &l.spec;
        let (seed, kind) = match s.content {
            ContentKind::SyntheticDeterministic { seed } => (Some(seed), s.content.name()),
            ContentKind::CheckpointDerived => (None, s.content.name()),
        };
        let tiles: Vec<serde_json::Value> = (0..l.tile_count.min(1 << 20))
            .filter_map(|i| l.tile(i))
            .map(|t| {
                serde_json::json!({
                    "index": t.index,
                    "offset": t.offset,
                    "rows": t.shape.rows,
                    "first_row": t.first_row,
                    "packed": { "offset": t.offset, "payload": t.shape.packed_payload, "region": t.shape.packed_region },
                    "scale": { "offset": t.offset + t.scale_offset(), "payload": t.shape.scale_payload, "region": t.shape.scale_region },
                    "bias": { "offset": t.offset + t.bias_offset(), "payload": t.shape.bias_payload, "region": t.shape.bias_region },
                    "sha256": self.digests.get(t.index as usize).map(hex::encode),
                })
            })
            .collect();
        let flag_names: Vec<&str> = [
            (flags::BIAS, "bias"),
            (flags::DIGESTS, "digests"),
            (flags::SCALE_GRID_2D, "scale-grid-2d"),
            (flags::ZERO_PADDING, "zero-padding"),
        ]
        .iter()
        .filter(|(bit, _)| l.flags & bit != 0)
        .map(|(_, name)| *name)
        .collect();
        serde_json::json!({
            "magic": "MNRNTIL1",
            "version": l.version,
            "flags": flag_names,
            "name": s.name,
            "mode": s.mode.name(),
            "content_kind": kind,
            "generator_seed": seed,
            "element_dtype": l.element_dtype().name(),
            "element_bits": s.element_bits,
            "scale_dtype": s.scale_dtype.name(),
            "bias_dtype": s.bias_dtype.map(Dtype::name),
            "nibble_order": match s.nibble_order {
                NibbleOrder::NotApplicable => "not-applicable",
                NibbleOrder::LowFirst => "low-first",
                NibbleOrder::HighFirst => "high-first",
            },
            "rows": s.rows,
            "cols": s.cols,
            "group": s.group,
            "rows_per_tile": s.rows_per_tile,
            "rows_per_scale": s.rows_per_scale,
            "scale_grid": [l.scale_grid_rows, l.scale_cols],
            "tile_count": l.tile_count,
            "tile_stride": l.tile_stride,
            "header_bytes": l.header_bytes,
            "total_bytes": l.total_bytes,
            "digest_table_offset": l.digest_table_offset,
            "tiles": tiles,
        })
    }
}

/// Parse and validate a header region. `bytes` must hold at least the recorded header length
/// (16 KiB for every header whose digest table fits; see [`recorded_header_bytes`]); bytes beyond
/// it are ignored.
pub fn parse_header(bytes: &[u8]) -> Result<Header, HeaderError> {
    let (version, flag_word) = parse_prefix(bytes)?;
    let codes = parse_codes(bytes)?;
    let name = parse_name(bytes)?;
    let digests_flag = flag_word & flags::DIGESTS != 0;
    check_version_features(version, flag_word, codes.mode)?;
    let (table_offset, table_count) = parse_digest_fields(bytes, version, digests_flag)?;
    let spec = parse_spec(bytes, version, name, codes, digests_flag)?;
    let layout = Layout::compute(&spec, version, table_offset).map_err(HeaderError::Geometry)?;
    check_derived(
        bytes,
        version,
        flag_word,
        digests_flag,
        table_count,
        &layout,
    )?;
    let digests = parse_digest_table(bytes, version, digests_flag, table_offset, &layout)?;
    Ok(Header { layout, digests })
}

/// Step: minimum length, magic, version, known flag bits and the reserved bytes → (version, flags).
fn parse_prefix(bytes: &[u8]) -> Result<(u16, u32), HeaderError> {
    if (bytes.len() as u64) < ALIGN {
        return Err(HeaderError::TooShort {
            len: bytes.len() as u64,
            needed: ALIGN,
        });
    }
    let magic = bytes
        .get(OFF_MAGIC..OFF_MAGIC + 8)
        .ok_or(too_short(bytes, 8))?;
    if magic != MAGIC {
        return Err(HeaderError::BadMagic {
            found: magic.to_vec(),
        });
    }
    let version = u16_at(bytes, OFF_VERSION)?;
    if !(MIN_VERSION..=MAX_VERSION).contains(&version) {
        return Err(HeaderError::UnsupportedVersion { version });
    }
    let flag_word = u32_at(bytes, OFF_FLAGS)?;
    if flag_word & !flags::KNOWN != 0 {
        return Err(HeaderError::UnknownFlags {
            bits: flag_word & !flags::KNOWN,
            known: flags::KNOWN,
        });
    }
    zero_range(bytes, OFF_RESERVED_10, OFF_RESERVED_10 + 2)?;
    zero_range(bytes, OFF_RESERVED_23, OFF_RESERVED_23 + 1)?;
    zero_range(bytes, OFF_RESERVED_154, OFF_NAME)?;
    Ok((version, flag_word))
}

/// The code fields of a header, decoded by [`parse_codes`].
struct Codes {
    mode: Mode,
    scale_dtype: Dtype,
    bias_dtype: Option<Dtype>,
    nibble_order: NibbleOrder,
    content: ContentKind,
}

/// Step: decode the mode, dtype, nibble-order and content-kind codes (with the generator seed).
fn parse_codes(bytes: &[u8]) -> Result<Codes, HeaderError> {
    let code = |field: &'static str, off: usize| u8_at(bytes, off).map(|c| (field, c));
    let (f, c) = code("mode", OFF_MODE)?;
    let mode = Mode::from_code(c).ok_or(HeaderError::UnknownCode { field: f, code: c })?;
    let (f, c) = code("element dtype", OFF_ELEMENT_DTYPE)?;
    let element = Dtype::from_code(c).ok_or(HeaderError::UnknownCode { field: f, code: c })?;
    if element != Layout::element_dtype_of(mode) {
        return Err(HeaderError::ElementDtype {
            mode: mode.name(),
            found: element.name(),
        });
    }
    let (f, c) = code("scale dtype", OFF_SCALE_DTYPE)?;
    let scale_dtype = Dtype::from_code(c).ok_or(HeaderError::UnknownCode { field: f, code: c })?;
    let (f, c) = code("bias dtype", OFF_BIAS_DTYPE)?;
    let bias_dtype = match c {
        0 => None,
        c => Some(Dtype::from_code(c).ok_or(HeaderError::UnknownCode { field: f, code: c })?),
    };
    let (f, c) = code("nibble order", OFF_NIBBLE_ORDER)?;
    let nibble_order =
        NibbleOrder::from_code(c).ok_or(HeaderError::UnknownCode { field: f, code: c })?;
    let seed = u64_at(bytes, OFF_GENERATOR_SEED)?;
    let (f, c) = code("content kind", OFF_CONTENT_KIND)?;
    let content = match c {
        1 => ContentKind::SyntheticDeterministic { seed },
        2 if seed == 0 => ContentKind::CheckpointDerived,
        2 => return Err(HeaderError::SeedOnCheckpoint { seed }),
        _ => return Err(HeaderError::UnknownCode { field: f, code: c }),
    };
    Ok(Codes {
        mode,
        scale_dtype,
        bias_dtype,
        nibble_order,
        content,
    })
}

/// Step: the tensor name (bounded UTF-8) and the zero fill after it.
fn parse_name(bytes: &[u8]) -> Result<String, HeaderError> {
    let name_len = u64::from(u16_at(bytes, OFF_NAME_LEN)?);
    if name_len > MAX_NAME_BYTES as u64 {
        return Err(HeaderError::BadName { len: name_len });
    }
    let name_end = OFF_NAME + name_len as usize;
    let name = bytes
        .get(OFF_NAME..name_end)
        .and_then(|n| std::str::from_utf8(n).ok())
        .ok_or(HeaderError::BadName { len: name_len })?
        .to_owned();
    zero_range(bytes, name_end, OFF_NAME + MAX_NAME_BYTES)?;
    Ok(name)
}

/// Step: refuse features (digests, a 2-D scale grid) that the recorded version cannot carry.
fn check_version_features(version: u16, flag_word: u32, mode: Mode) -> Result<(), HeaderError> {
    let digests_flag = flag_word & flags::DIGESTS != 0;
    if digests_flag && version < 2 {
        return Err(HeaderError::VersionTooLow {
            version,
            feature: "tile digests",
            required: 2,
        });
    }
    if (flag_word & flags::SCALE_GRID_2D != 0 || mode == Mode::Fp8E4m3Block) && version < 3 {
        return Err(HeaderError::VersionTooLow {
            version,
            feature: "a 2-d scale grid (rows_per_scale)",
            required: 3,
        });
    }
    Ok(())
}

/// Step: the digest table's offset and count fields, checked against the flag and fixed fields.
fn parse_digest_fields(
    bytes: &[u8],
    version: u16,
    digests_flag: bool,
) -> Result<(u64, u64), HeaderError> {
    let (table_offset, table_count) = if version >= 2 {
        (
            u64_at(bytes, OFF_DIGEST_TABLE_OFFSET)?,
            u64_at(bytes, OFF_DIGEST_COUNT)?,
        )
    } else {
        (0, 0)
    };
    if !digests_flag && (table_offset != 0 || table_count != 0) {
        return Err(HeaderError::DigestTable {
            offset: table_offset,
            count: table_count,
            reason: "present although the digests flag is clear",
        });
    }
    let end_of_fields = fixed_end(version);
    if digests_flag && table_offset < end_of_fields {
        return Err(HeaderError::DigestTable {
            offset: table_offset,
            count: table_count,
            reason: "overlaps the fixed header fields",
        });
    }
    Ok((table_offset, table_count))
}

/// Step: assemble the recorded geometry into a [`ContainerSpec`].
fn parse_spec(
    bytes: &[u8],
    version: u16,
    name: String,
    codes: Codes,
    digests_flag: bool,
) -> Result<ContainerSpec, HeaderError> {
    let rows_per_scale = if version >= 3 {
        u64_at(bytes, OFF_ROWS_PER_SCALE)?
    } else {
        1
    };
    Ok(ContainerSpec {
        name,
        mode: codes.mode,
        rows: u64_at(bytes, OFF_ROWS)?,
        cols: u64_at(bytes, OFF_COLS)?,
        group: u64_at(bytes, OFF_GROUP)?,
        element_bits: u8_at(bytes, OFF_ELEMENT_BITS)?,
        rows_per_tile: u64_at(bytes, OFF_ROWS_PER_TILE)?,
        rows_per_scale,
        scale_dtype: codes.scale_dtype,
        bias_dtype: codes.bias_dtype,
        nibble_order: codes.nibble_order,
        content: codes.content,
        digests: digests_flag,
    })
}

/// Step: every recorded derived field must equal what the layout derives.
fn check_derived(
    bytes: &[u8],
    version: u16,
    flag_word: u32,
    digests_flag: bool,
    table_count: u64,
    layout: &Layout,
) -> Result<(), HeaderError> {
    let mut checks = vec![("flags", u64::from(flag_word), u64::from(layout.flags))];
    // Read in field order; every read happens before the first comparison.
    for (field, off, derived) in [
        ("tile_count", OFF_TILE_COUNT, layout.tile_count),
        ("tile_stride", OFF_TILE_STRIDE, layout.tile_stride),
        (
            "packed_region_bytes",
            OFF_PACKED_REGION,
            layout.full.packed_region,
        ),
        (
            "scale_region_bytes",
            OFF_SCALE_REGION,
            layout.full.scale_region,
        ),
        (
            "bias_region_bytes",
            OFF_BIAS_REGION,
            layout.full.bias_region,
        ),
        ("last_tile_rows", OFF_LAST_TILE_ROWS, layout.last.rows),
        (
            "last_packed_region_bytes",
            OFF_LAST_PACKED_REGION,
            layout.last.packed_region,
        ),
        (
            "last_scale_region_bytes",
            OFF_LAST_SCALE_REGION,
            layout.last.scale_region,
        ),
        (
            "last_bias_region_bytes",
            OFF_LAST_BIAS_REGION,
            layout.last.bias_region,
        ),
        ("header_bytes", OFF_HEADER_BYTES, layout.header_bytes),
        ("total_bytes", OFF_TOTAL_BYTES, layout.total_bytes),
    ] {
        checks.push((field, u64_at(bytes, off)?, derived));
    }
    if digests_flag {
        checks.push(("digest_count", table_count, layout.tile_count));
    }
    if version >= 3 {
        checks.push((
            "scale_grid_rows",
            u64_at(bytes, OFF_SCALE_GRID_ROWS)?,
            layout.scale_grid_rows,
        ));
        checks.push((
            "scale_grid_cols",
            u64_at(bytes, OFF_SCALE_GRID_COLS)?,
            layout.scale_cols,
        ));
    }
    for (field, recorded, derived) in checks {
        if recorded != derived {
            return Err(HeaderError::Mismatch {
                field,
                recorded,
                derived,
            });
        }
    }
    Ok(())
}

/// Step: read the digest table and check that the rest of the header region is zero.
fn parse_digest_table(
    bytes: &[u8],
    version: u16,
    digests_flag: bool,
    table_offset: u64,
    layout: &Layout,
) -> Result<Vec<[u8; 32]>, HeaderError> {
    let end_of_fields = fixed_end(version);
    // The whole header region must be in hand before the table and the zero tail are read.
    debug_assert!(layout.header_bytes <= MAX_HEADER_BYTES);
    let header_len = layout.header_bytes as usize;
    if bytes.len() < header_len {
        return Err(HeaderError::TooShort {
            len: bytes.len() as u64,
            needed: layout.header_bytes,
        });
    }
    let mut digests = Vec::new();
    if digests_flag {
        // table_offset + count × 32 ≤ header_bytes ≤ bytes.len(), checked by Layout::compute.
        let start = table_offset as usize;
        let end = start + layout.tile_count as usize * DIGEST_BYTES;
        zero_range(bytes, end_of_fields as usize, start)?;
        let table = bytes.get(start..end).ok_or(too_short(bytes, end))?;
        digests = table
            .chunks_exact(DIGEST_BYTES)
            .map(|c| {
                let mut d = [0u8; 32];
                d.copy_from_slice(c);
                d
            })
            .collect();
        zero_range(bytes, end, header_len)?;
    } else {
        zero_range(bytes, end_of_fields as usize, header_len)?;
    }
    Ok(digests)
}
