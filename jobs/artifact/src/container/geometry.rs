//! The container request ([`ContainerSpec`]) and its validated byte layout ([`Layout`]).
//!
//! All alignment rules of `docs/container.md` §5 are enforced here, once, for the writer (at
//! construction, before a byte is written) and for the reader (a header whose recorded geometry is
//! not the one these rules derive is refused). Every size is computed with checked arithmetic.

use super::{
    flags, ContentKind, Dtype, GeometryError, Mode, NibbleOrder, ALIGN, DIGEST_BYTES,
    MAX_HEADER_BYTES, MAX_NAME_BYTES,
};

/// End of the version-1 fixed fields (the v1 header has no digest table).
pub const V1_FIXED_END: u64 = 512;
/// End of the version-2 fixed fields; a v2 writer puts the digest table here.
pub const V2_FIXED_END: u64 = 528;
/// End of the version-3 fixed fields; v3 appends its fields where v2 kept the table, so the table
/// moves here.
pub const V3_FIXED_END: u64 = 552;

/// End of the fixed fields of `version` (1..=3).
pub const fn fixed_end(version: u16) -> u64 {
    match version {
        1 => V1_FIXED_END,
        2 => V2_FIXED_END,
        _ => V3_FIXED_END,
    }
}

/// What a caller asks the writer for: one matrix of `rows` output rows × `cols` reduction-axis
/// elements, tiled along rows only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSpec {
    /// Upstream tensor name (≤ 256 UTF-8 bytes; may be empty).
    pub name: String,
    pub mode: Mode,
    pub rows: u64,
    /// Reduction length K (elements per row).
    pub cols: u64,
    /// Columns covered by one scale (mxfp4: 32; affine: a power of two; fp8 block: block width).
    pub group: u64,
    /// Bits per packed element (mxfp4 4, fp8 8, affine 1..=8).
    pub element_bits: u8,
    pub rows_per_tile: u64,
    /// Matrix rows covered by one scale row: 1 except in the 2-D grid of fp8-e4m3-block.
    pub rows_per_scale: u64,
    pub scale_dtype: Dtype,
    /// `Some` in affine mode only.
    pub bias_dtype: Option<Dtype>,
    pub nibble_order: NibbleOrder,
    pub content: ContentKind,
    /// Record one SHA-256 per tile (needs version 2).
    pub digests: bool,
}

impl ContainerSpec {
    /// MXFP4 as DeepSeek V4 / gpt-oss store it: group 32, e8m0 scales, low nibble first,
    /// checkpoint-derived, with tile digests.
    pub fn mxfp4(name: &str, rows: u64, cols: u64, rows_per_tile: u64) -> Self {
        ContainerSpec {
            name: name.to_owned(),
            mode: Mode::Mxfp4,
            rows,
            cols,
            group: 32,
            element_bits: 4,
            rows_per_tile,
            rows_per_scale: 1,
            scale_dtype: Dtype::E8m0,
            bias_dtype: None,
            nibble_order: NibbleOrder::LowFirst,
            content: ContentKind::CheckpointDerived,
            digests: true,
        }
    }

    /// MLX affine: `bits`-bit codes packed LSB first, scale and bias in `scale_dtype`
    /// (the source tensor's dtype), checkpoint-derived, with tile digests.
    pub fn affine(
        name: &str,
        rows: u64,
        cols: u64,
        group: u64,
        bits: u8,
        rows_per_tile: u64,
        scale_dtype: Dtype,
    ) -> Self {
        ContainerSpec {
            name: name.to_owned(),
            mode: Mode::Affine,
            rows,
            cols,
            group,
            element_bits: bits,
            rows_per_tile,
            rows_per_scale: 1,
            scale_dtype,
            bias_dtype: Some(scale_dtype),
            nibble_order: if bits < 8 {
                NibbleOrder::LowFirst
            } else {
                NibbleOrder::NotApplicable
            },
            content: ContentKind::CheckpointDerived,
            digests: true,
        }
    }

    /// FP8 e4m3 with a 2-D e8m0 grid: one scale byte per `rows_per_scale` × `group` block
    /// (DeepSeek: 128 × 128), checkpoint-derived, with tile digests.
    pub fn fp8_e4m3_block(
        name: &str,
        rows: u64,
        cols: u64,
        rows_per_scale: u64,
        group: u64,
        rows_per_tile: u64,
    ) -> Self {
        ContainerSpec {
            name: name.to_owned(),
            mode: Mode::Fp8E4m3Block,
            rows,
            cols,
            group,
            element_bits: 8,
            rows_per_tile,
            rows_per_scale,
            scale_dtype: Dtype::E8m0,
            bias_dtype: None,
            nibble_order: NibbleOrder::NotApplicable,
            content: ContentKind::CheckpointDerived,
            digests: true,
        }
    }

    pub fn with_digests(mut self, digests: bool) -> Self {
        self.digests = digests;
        self
    }
    pub fn with_content(mut self, content: ContentKind) -> Self {
        self.content = content;
        self
    }
    pub fn with_nibble_order(mut self, order: NibbleOrder) -> Self {
        self.nibble_order = order;
        self
    }
    pub fn with_scale_dtype(mut self, dtype: Dtype) -> Self {
        self.scale_dtype = dtype;
        self
    }

    /// The lowest format version that can express this request (seed: "a writer emits the lowest
    /// version that can express what it was asked to write").
    pub fn min_version(&self) -> u16 {
        if self.mode == Mode::Fp8E4m3Block {
            3
        } else if self.digests {
            2
        } else {
            1
        }
    }

    /// Validate the request into the layout the writer emits (lowest version, digest table right
    /// after the fixed fields).
    pub fn layout(&self) -> Result<Layout, GeometryError> {
        let version = self.min_version();
        Layout::compute(
            self,
            version,
            if self.digests { fixed_end(version) } else { 0 },
        )
    }
}

/// Byte sizes of one tile: payloads (upstream bytes) and regions (payload + zero padding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileShape {
    pub rows: u64,
    pub packed_payload: u64,
    pub scale_payload: u64,
    pub bias_payload: u64,
    /// Equals `packed_payload`: packed data is never padded.
    pub packed_region: u64,
    pub scale_region: u64,
    pub bias_region: u64,
}

impl TileShape {
    /// Bytes of the whole tile (all regions).
    pub fn len(&self) -> u64 {
        // Cannot overflow: checked when the layout was computed.
        self.packed_region + self.scale_region + self.bias_region
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn has_padding(&self) -> bool {
        self.scale_region > self.scale_payload || self.bias_region > self.bias_payload
    }
}

/// Where one tile lies in the file and in the upstream streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileLayout {
    pub index: u64,
    /// File offset of the tile (a multiple of 16 KiB).
    pub offset: u64,
    /// First matrix row of the tile.
    pub first_row: u64,
    pub shape: TileShape,
    /// Offsets of this tile's payloads inside the upstream packed / scale / bias streams.
    pub packed_stream_offset: u64,
    pub scale_stream_offset: u64,
    pub bias_stream_offset: u64,
}

impl TileLayout {
    /// Offset of the scale sub-region inside the tile.
    pub fn scale_offset(&self) -> u64 {
        self.shape.packed_region
    }
    /// Offset of the bias sub-region inside the tile.
    pub fn bias_offset(&self) -> u64 {
        self.shape.packed_region + self.shape.scale_region
    }
}

/// A validated container geometry: every offset and size of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub spec: ContainerSpec,
    pub version: u16,
    pub flags: u32,
    /// Packed bytes per matrix row.
    pub row_bytes: u64,
    /// Scale elements per scale row (`ceil(cols / group)`).
    pub scale_cols: u64,
    /// Bytes per scale row and per bias row.
    pub scale_row_bytes: u64,
    pub bias_row_bytes: u64,
    /// Rows of the scale grid (`ceil(rows / rows_per_scale)`).
    pub scale_grid_rows: u64,
    pub tile_count: u64,
    pub full: TileShape,
    pub last: TileShape,
    pub tile_stride: u64,
    /// 0 when the container carries no digests.
    pub digest_table_offset: u64,
    /// Header region length = offset of tile 0.
    pub header_bytes: u64,
    pub total_bytes: u64,
}

fn ovf<T>(v: Option<T>) -> Result<T, GeometryError> {
    v.ok_or(GeometryError::Overflow)
}

fn round_up(n: u64) -> Result<u64, GeometryError> {
    Ok(ovf(n.checked_add(ALIGN - 1))? / ALIGN * ALIGN)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}

fn unsupported(mode: Mode, field: &'static str, value: impl ToString) -> GeometryError {
    GeometryError::Unsupported {
        mode: mode.name(),
        field,
        value: value.to_string(),
    }
}

impl Layout {
    /// Compute the layout of `spec` written as `version` with the digest table at
    /// `digest_table_offset` (ignored without digests). Refuses any geometry breaking the rules.
    pub fn compute(
        spec: &ContainerSpec,
        version: u16,
        digest_table_offset: u64,
    ) -> Result<Layout, GeometryError> {
        Self::check_fields(spec)?;
        let element_dtype = Self::check_mode_rules(spec)?;
        debug_assert_eq!(element_dtype, Layout::element_dtype_of(spec.mode));
        Self::check_mode_fields(spec)?;
        let row_bytes = Self::row_bytes_of(spec)?;
        Self::check_tiling(spec)?;
        let (scale_cols, scale_row_bytes, bias_row_bytes) = Self::scale_row_sizes(spec)?;
        let tile_count = spec.rows.div_ceil(spec.rows_per_tile);
        let last_rows = spec.rows - (tile_count - 1) * spec.rows_per_tile;
        let shape = |rows: u64, which: &'static str| {
            Self::tile_shape(
                spec,
                rows,
                which,
                row_bytes,
                scale_row_bytes,
                bias_row_bytes,
            )
        };
        let full = shape(spec.rows_per_tile, "a full")?;
        let last = shape(last_rows, "the last")?;
        let tile_stride = full.len();

        let flags = Self::flags_of(spec, &full, &last);
        let (digest_table_offset, header_bytes) =
            Self::header_size(spec, version, tile_count, digest_table_offset)?;
        let body = ovf(ovf((tile_count - 1).checked_mul(tile_stride))?.checked_add(last.len()))?;
        let total_bytes = ovf(header_bytes.checked_add(body))?;
        Ok(Layout {
            spec: spec.clone(),
            version,
            flags,
            row_bytes,
            scale_cols,
            scale_row_bytes,
            bias_row_bytes,
            scale_grid_rows: spec.rows.div_ceil(spec.rows_per_scale),
            tile_count,
            full,
            last,
            tile_stride,
            digest_table_offset,
            header_bytes,
            total_bytes,
        })
    }

    /// Step: name length, no zero dimension, power-of-two group.
    fn check_fields(spec: &ContainerSpec) -> Result<(), GeometryError> {
        if spec.name.len() > MAX_NAME_BYTES {
            return Err(GeometryError::NameTooLong {
                len: spec.name.len(),
                max: MAX_NAME_BYTES,
            });
        }
        for (what, v) in [
            ("rows", spec.rows),
            ("cols", spec.cols),
            ("group", spec.group),
            ("rows_per_tile", spec.rows_per_tile),
            ("rows_per_scale", spec.rows_per_scale),
            ("element_bits", u64::from(spec.element_bits)),
        ] {
            if v == 0 {
                return Err(GeometryError::Zero { what });
            }
        }
        if !spec.group.is_power_of_two() {
            return Err(GeometryError::GroupNotPowerOfTwo { group: spec.group });
        }
        Ok(())
    }

    /// Step: per-mode element, scale and bias rules → the element dtype.
    fn check_mode_rules(spec: &ContainerSpec) -> Result<Dtype, GeometryError> {
        let mode = spec.mode;
        let element_dtype = match mode {
            Mode::Mxfp4 => {
                if spec.group != 32 {
                    return Err(GeometryError::GroupFixed {
                        mode: mode.name(),
                        required: 32,
                        group: spec.group,
                    });
                }
                if spec.element_bits != 4 {
                    return Err(unsupported(mode, "element_bits", spec.element_bits));
                }
                if spec.scale_dtype != Dtype::E8m0 {
                    return Err(unsupported(mode, "scale_dtype", spec.scale_dtype.name()));
                }
                Dtype::E2m1
            }
            Mode::Affine => {
                if spec.element_bits > 8 {
                    return Err(unsupported(mode, "element_bits", spec.element_bits));
                }
                if !matches!(spec.scale_dtype, Dtype::Bf16 | Dtype::F16 | Dtype::F32) {
                    return Err(unsupported(mode, "scale_dtype", spec.scale_dtype.name()));
                }
                match spec.bias_dtype {
                    Some(Dtype::Bf16 | Dtype::F16 | Dtype::F32) => {}
                    Some(d) => return Err(unsupported(mode, "bias_dtype", d.name())),
                    None => return Err(unsupported(mode, "bias_dtype", "none")),
                }
                Dtype::Uint
            }
            Mode::Fp8E4m3Block => {
                if spec.element_bits != 8 {
                    return Err(unsupported(mode, "element_bits", spec.element_bits));
                }
                if !matches!(spec.scale_dtype, Dtype::E8m0 | Dtype::F32) {
                    return Err(unsupported(mode, "scale_dtype", spec.scale_dtype.name()));
                }
                Dtype::E4m3
            }
        };
        Ok(element_dtype)
    }

    /// Step: fields only some modes may set (bias, rows_per_scale) and the nibble order.
    fn check_mode_fields(spec: &ContainerSpec) -> Result<(), GeometryError> {
        let mode = spec.mode;
        if mode != Mode::Affine && spec.bias_dtype.is_some() {
            return Err(unsupported(mode, "bias_dtype", "present"));
        }
        if mode != Mode::Fp8E4m3Block && spec.rows_per_scale != 1 {
            return Err(unsupported(mode, "rows_per_scale", spec.rows_per_scale));
        }
        let sub_byte = spec.element_bits < 8;
        match (sub_byte, spec.nibble_order) {
            (true, NibbleOrder::NotApplicable) => {
                Err(unsupported(mode, "nibble_order", "not-applicable"))
            }
            (false, NibbleOrder::LowFirst | NibbleOrder::HighFirst) => {
                Err(unsupported(mode, "nibble_order", "for 8-bit elements"))
            }
            _ => Ok(()),
        }
    }

    /// Step: columns in whole groups and whole bytes → packed bytes per row.
    fn row_bytes_of(spec: &ContainerSpec) -> Result<u64, GeometryError> {
        // Columns: whole groups (mxfp4, affine), whole bytes per row. fp8 block scale grids are
        // ceil-sized like DeepSeek's `weight_scale_inv`, so partial edge blocks are allowed there.
        if spec.mode != Mode::Fp8E4m3Block && spec.cols % spec.group != 0 {
            return Err(GeometryError::ColsNotMultipleOfGroup {
                cols: spec.cols,
                group: spec.group,
            });
        }
        let row_bits = ovf(spec.cols.checked_mul(u64::from(spec.element_bits)))?;
        if row_bits % 8 != 0 {
            return Err(GeometryError::RowNotWholeBytes {
                cols: spec.cols,
                bits: spec.element_bits,
            });
        }
        Ok(row_bits / 8)
    }

    /// Step: a tile fits in the matrix and holds whole scale blocks.
    fn check_tiling(spec: &ContainerSpec) -> Result<(), GeometryError> {
        if spec.rows_per_tile > spec.rows {
            return Err(GeometryError::TileTallerThanMatrix {
                rows_per_tile: spec.rows_per_tile,
                rows: spec.rows,
            });
        }
        if spec.rows_per_tile % spec.rows_per_scale != 0 {
            return Err(GeometryError::TileSplitsScaleBlock {
                rows_per_tile: spec.rows_per_tile,
                rows_per_scale: spec.rows_per_scale,
            });
        }
        Ok(())
    }

    /// Step: scale elements per scale row, and bytes per scale row and per bias row.
    fn scale_row_sizes(spec: &ContainerSpec) -> Result<(u64, u64, u64), GeometryError> {
        let scale_cols = spec.cols.div_ceil(spec.group);
        let scale_elem = spec
            .scale_dtype
            .scalar_bytes()
            .ok_or(GeometryError::Overflow)?;
        let scale_row_bytes = ovf(scale_cols.checked_mul(scale_elem))?;
        let bias_row_bytes = match spec.bias_dtype {
            Some(d) => {
                ovf(scale_cols.checked_mul(d.scalar_bytes().ok_or(GeometryError::Overflow)?))?
            }
            None => 0,
        };
        Ok((scale_cols, scale_row_bytes, bias_row_bytes))
    }

    /// Step: byte sizes of a tile of `rows` rows (`which` names it in the alignment error).
    fn tile_shape(
        spec: &ContainerSpec,
        rows: u64,
        which: &'static str,
        row_bytes: u64,
        scale_row_bytes: u64,
        bias_row_bytes: u64,
    ) -> Result<TileShape, GeometryError> {
        let row_multiple = ALIGN / gcd(row_bytes, ALIGN);
        let packed = ovf(rows.checked_mul(row_bytes))?;
        if packed % ALIGN != 0 {
            return Err(GeometryError::PackedNotAligned {
                which,
                tile_rows: rows,
                bytes: packed,
                row_multiple,
            });
        }
        let scale_rows = rows.div_ceil(spec.rows_per_scale);
        let scale_payload = ovf(scale_rows.checked_mul(scale_row_bytes))?;
        let bias_payload = ovf(scale_rows.checked_mul(bias_row_bytes))?;
        let s = TileShape {
            rows,
            packed_payload: packed,
            scale_payload,
            bias_payload,
            packed_region: packed,
            scale_region: round_up(scale_payload)?,
            bias_region: round_up(bias_payload)?,
        };
        ovf(s.packed_region.checked_add(s.scale_region))?
            .checked_add(s.bias_region)
            .ok_or(GeometryError::Overflow)?;
        Ok(s)
    }

    /// Step: the feature flag word the geometry implies.
    fn flags_of(spec: &ContainerSpec, full: &TileShape, last: &TileShape) -> u32 {
        let mode = spec.mode;
        let mut flags = 0;
        if mode == Mode::Affine {
            flags |= flags::BIAS;
        }
        if spec.digests {
            flags |= flags::DIGESTS;
        }
        if mode == Mode::Fp8E4m3Block {
            flags |= flags::SCALE_GRID_2D;
        }
        if full.has_padding() || last.has_padding() {
            flags |= flags::ZERO_PADDING;
        }
        flags
    }

    /// Step: the digest table's offset (0 without digests) and the header region's length.
    fn header_size(
        spec: &ContainerSpec,
        version: u16,
        tile_count: u64,
        digest_table_offset: u64,
    ) -> Result<(u64, u64), GeometryError> {
        let end_of_fields = fixed_end(version);
        let (digest_table_offset, table_end) = if spec.digests {
            let table = ovf(tile_count.checked_mul(DIGEST_BYTES as u64))?;
            (
                digest_table_offset,
                ovf(digest_table_offset.checked_add(table))?,
            )
        } else {
            (0, 0)
        };
        let header_bytes = round_up(end_of_fields.max(table_end))?;
        if header_bytes > MAX_HEADER_BYTES {
            return Err(GeometryError::HeaderTooLarge {
                tiles: tile_count,
                bytes: header_bytes,
                max: MAX_HEADER_BYTES,
            });
        }
        Ok((digest_table_offset, header_bytes))
    }

    /// Layout of tile `index` (`None` when out of range).
    pub fn tile(&self, index: u64) -> Option<TileLayout> {
        if index >= self.tile_count {
            return None;
        }
        let shape = if index + 1 == self.tile_count {
            self.last
        } else {
            self.full
        };
        let scale_rows_per_tile = self.spec.rows_per_tile / self.spec.rows_per_scale;
        // In range by construction: index < tile_count and total_bytes did not overflow.
        Some(TileLayout {
            index,
            offset: self.header_bytes + index * self.tile_stride,
            first_row: index * self.spec.rows_per_tile,
            shape,
            packed_stream_offset: index * self.full.packed_payload,
            scale_stream_offset: index * scale_rows_per_tile * self.scale_row_bytes,
            bias_stream_offset: index * scale_rows_per_tile * self.bias_row_bytes,
        })
    }

    /// Total bytes of the upstream packed, scale and bias streams of the whole matrix.
    pub fn stream_lengths(&self) -> (u64, u64, u64) {
        let n = self.tile_count - 1;
        (
            n * self.full.packed_payload + self.last.packed_payload,
            n * self.full.scale_payload + self.last.scale_payload,
            n * self.full.bias_payload + self.last.bias_payload,
        )
    }

    /// Element dtype implied by the mode.
    pub fn element_dtype(&self) -> Dtype {
        Self::element_dtype_of(self.spec.mode)
    }

    pub(crate) fn element_dtype_of(mode: Mode) -> Dtype {
        match mode {
            Mode::Mxfp4 => Dtype::E2m1,
            Mode::Affine => Dtype::Uint,
            Mode::Fp8E4m3Block => Dtype::E4m3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DeepSeek-V4-Flash shapes (`../shared/design/models.md` §1.4): the derived scale grids
    /// equal the upstream `.scale` tensor shapes, and the tiling rules accept real row counts.
    #[test]
    fn deepseek_v4_flash_geometries_are_accepted() {
        // ffn.experts.{e}.w1.weight I8 [2048, 2048] = e2m1 [2048, 4096]; .scale [2048, 128].
        let l = ContainerSpec::mxfp4("w1", 2048, 4096, 256)
            .layout()
            .expect("w1");
        assert_eq!((l.row_bytes, l.scale_cols), (2048, 128));
        assert_eq!(
            (l.tile_count, l.full.packed_region, l.full.scale_payload),
            (8, 524_288, 32_768)
        );
        // ffn.experts.{e}.w2.weight I8 [4096, 1024] = e2m1 [4096, 2048]; .scale [4096, 64].
        let l = ContainerSpec::mxfp4("w2", 4096, 2048, 16)
            .layout()
            .expect("w2");
        assert_eq!((l.row_bytes, l.scale_cols, l.tile_count), (1024, 64, 256));
        // FP8 128x128 blocks: weight [rows, cols] -> scale [ceil(rows/128), ceil(cols/128)].
        for (rows, cols, grid) in [
            (1024, 4096, (8, 32)),
            (32_768, 1024, (256, 8)),
            (512, 4096, (4, 32)),
            (4096, 8192, (32, 64)),
        ] {
            let l = ContainerSpec::fp8_e4m3_block("fp8", rows, cols, 128, 128, 128)
                .layout()
                .expect("fp8");
            assert_eq!(l.version, 3);
            assert_eq!((l.scale_grid_rows, l.scale_cols), grid);
            assert_eq!(
                l.full.scale_payload, grid.1,
                "one grid row of e8m0 bytes per 128-row tile"
            );
        }
    }

    #[test]
    fn large_tile_counts_grow_the_header_in_16k_steps() {
        let l = ContainerSpec::mxfp4("many", 64 * 600, 512, 64)
            .layout()
            .expect("layout");
        assert_eq!(l.tile_count, 600);
        assert_eq!(l.header_bytes, 2 * ALIGN);
        assert_eq!(l.digest_table_offset, V2_FIXED_END);
        let small = ContainerSpec::mxfp4("few", 64 * 495, 512, 64)
            .layout()
            .expect("layout");
        assert_eq!(
            small.header_bytes, ALIGN,
            "495 digests still fit a v2 16 KiB header"
        );
    }
}
