//! `mega::layout`: the fixed 128-byte shard header, the limits a reader enforces, alignment
//! arithmetic and the dtype table. Byte layout: `docs/mega.md` §2 (MEGA seed `004`, "Shard layout",
//! leaves offsets open; this module is the frozen choice, checked by the golden files).

use super::MegaError;

/// First 8 bytes of every shard: `MEGA`, NUL, CR, LF, SUB (a text-mode transfer or a truncated
/// copy of the first line breaks the magic, PNG-style).
pub const MAGIC: [u8; 8] = *b"MEGA\0\r\n\x1a";
/// Major version this crate reads and writes; another major is refused.
pub const VERSION_MAJOR: u16 = 1;
/// Minor version this crate writes; a higher minor is readable (additions only, see docs §7).
pub const VERSION_MINOR: u16 = 0;
/// Size of the fixed header; the metadata section starts right after it.
pub const FIXED_HEADER_LEN: u64 = 128;
/// `flags` bit 0: a footer overlay follows the payload.
pub const FLAG_FOOTER: u32 = 1;
/// Default payload alignment: 4 KiB is the logical block size of common NVMe namespaces, the page
/// size of x86_64 and most aarch64 kernels (mmap granularity) and the `O_DIRECT` requirement, so a
/// tensor can be read or mapped without a bounce buffer. 64 KiB only helps object stores with large
/// range granularity; pass `--alignment 65536` there.
pub const DEFAULT_ALIGNMENT: u64 = 4096;
/// Smallest alignment: every tensor start stays 8-byte aligned so f64/u64 views are legal.
pub const MIN_ALIGNMENT: u64 = 8;
/// Largest alignment: 1 GiB; more would only waste space and invites absurd padding.
pub const MAX_ALIGNMENT: u64 = 1 << 30;
/// Metadata + directory may not exceed 256 MiB: a real tokenizer (~10 MB of tokens and merges)
/// and 100k tensor entries fit; a hostile `metadata_size` cannot make a reader allocate more.
pub const MAX_SECTIONS_LEN: u64 = 256 << 20;
/// The footer overlay carries signatures and small notes, never bulk data.
pub const MAX_FOOTER_LEN: u64 = 16 << 20;
/// Longest metadata key (bytes).
pub const MAX_KEY_LEN: usize = 1024;
/// Longest tensor name (bytes).
pub const MAX_NAME_LEN: usize = 4096;
/// Longest dtype name (bytes).
pub const MAX_DTYPE_LEN: usize = 32;
/// Most dimensions of a tensor.
pub const MAX_RANK: u32 = 16;
/// Deepest array nesting (an array of arrays is depth 2); bounds recursion on hostile input.
pub const MAX_ARRAY_DEPTH: u32 = 4;

/// Byte offset of `header_crc32` inside the fixed header.
pub const HEADER_CRC_AT: usize = 0x68;
/// Byte offset of `footer_crc32` inside the fixed header.
pub const FOOTER_CRC_AT: usize = 0x6C;

/// The decoded fixed header (docs/mega.md §2.1). All integers little-endian.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FixedHeader {
    /// Major format version (1).
    pub major: u16,
    /// Minor format version.
    pub minor: u16,
    /// Bit 0 = footer present; other bits must be zero.
    pub flags: u32,
    /// Payload alignment in bytes (power of two, 8..=2^30).
    pub alignment: u64,
    /// Number of entries in the metadata section.
    pub metadata_count: u64,
    /// Number of entries in the tensor directory.
    pub tensor_count: u64,
    /// Absolute offset of the metadata section (always 128).
    pub metadata_offset: u64,
    /// Byte length of the metadata section.
    pub metadata_size: u64,
    /// Absolute offset of the tensor directory (= metadata end).
    pub directory_offset: u64,
    /// Byte length of the tensor directory.
    pub directory_size: u64,
    /// Absolute offset of the payload (= directory end rounded up to `alignment`).
    pub payload_offset: u64,
    /// Byte length of the payload (end of the last tensor, no trailing padding).
    pub payload_size: u64,
    /// Absolute offset of the footer overlay (= payload end), 0 when absent.
    pub footer_offset: u64,
    /// Byte length of the footer overlay, 0 when absent.
    pub footer_size: u64,
    /// CRC-32 (IEEE) of bytes `[0, payload_offset)` with this field read as zero.
    pub header_crc32: u32,
    /// CRC-32 (IEEE) of the footer bytes, 0 when absent.
    pub footer_crc32: u32,
}

impl FixedHeader {
    /// Encode as the 128 bytes that start a shard.
    pub fn encode(&self) -> [u8; FIXED_HEADER_LEN as usize] {
        let mut b = [0u8; FIXED_HEADER_LEN as usize];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&self.major.to_le_bytes());
        b[10..12].copy_from_slice(&self.minor.to_le_bytes());
        b[12..16].copy_from_slice(&self.flags.to_le_bytes());
        let words = [
            self.alignment,
            self.metadata_count,
            self.tensor_count,
            self.metadata_offset,
            self.metadata_size,
            self.directory_offset,
            self.directory_size,
            self.payload_offset,
            self.payload_size,
            self.footer_offset,
            self.footer_size,
        ];
        for (i, w) in words.iter().enumerate() {
            let at = 0x10 + 8 * i;
            b[at..at + 8].copy_from_slice(&w.to_le_bytes());
        }
        b[HEADER_CRC_AT..HEADER_CRC_AT + 4].copy_from_slice(&self.header_crc32.to_le_bytes());
        b[FOOTER_CRC_AT..FOOTER_CRC_AT + 4].copy_from_slice(&self.footer_crc32.to_le_bytes());
        b
    }

    /// Decode and check the fields that need no file length: magic, version, flags, reserved bytes,
    /// alignment, and that the sections are contiguous without overflow.
    pub fn decode(file: &str, b: &[u8; FIXED_HEADER_LEN as usize]) -> Result<Self, MegaError> {
        if b[0..8] != MAGIC {
            return Err(MegaError::BadMagic { file: file.into() });
        }
        let u16_at = |at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
        let u32_at = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let u64_at = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(w)
        };
        let h = FixedHeader {
            major: u16_at(8),
            minor: u16_at(10),
            flags: u32_at(12),
            alignment: u64_at(0x10),
            metadata_count: u64_at(0x18),
            tensor_count: u64_at(0x20),
            metadata_offset: u64_at(0x28),
            metadata_size: u64_at(0x30),
            directory_offset: u64_at(0x38),
            directory_size: u64_at(0x40),
            payload_offset: u64_at(0x48),
            payload_size: u64_at(0x50),
            footer_offset: u64_at(0x58),
            footer_size: u64_at(0x60),
            header_crc32: u32_at(HEADER_CRC_AT),
            footer_crc32: u32_at(FOOTER_CRC_AT),
        };
        let bad = |reason: String| MegaError::BadHeader {
            file: file.into(),
            reason,
        };
        if h.major != VERSION_MAJOR {
            return Err(MegaError::UnsupportedVersion {
                file: file.into(),
                major: h.major,
                minor: h.minor,
            });
        }
        if h.flags & !FLAG_FOOTER != 0 {
            return Err(bad(format!("unknown flag bits {:#x}", h.flags)));
        }
        if b[0x70..0x80].iter().any(|&x| x != 0) {
            return Err(bad("reserved bytes 0x70..0x80 are not zero".into()));
        }
        check_alignment(h.alignment).map_err(|e| bad(e.to_string()))?;
        if h.metadata_offset != FIXED_HEADER_LEN {
            return Err(bad(format!(
                "metadata_offset is {}, must be {FIXED_HEADER_LEN}",
                h.metadata_offset
            )));
        }
        let sections = h
            .metadata_size
            .checked_add(h.directory_size)
            .filter(|&s| s <= MAX_SECTIONS_LEN)
            .ok_or_else(|| MegaError::SectionTooLarge {
                file: file.into(),
                section: "metadata + directory",
                len: h.metadata_size.saturating_add(h.directory_size),
                max: MAX_SECTIONS_LEN,
            })?;
        if h.directory_offset != FIXED_HEADER_LEN + h.metadata_size {
            return Err(bad(format!(
                "directory_offset {} does not follow the metadata section (ends at {})",
                h.directory_offset,
                FIXED_HEADER_LEN + h.metadata_size
            )));
        }
        let dir_end = FIXED_HEADER_LEN + sections;
        if h.payload_offset != align_up(dir_end, h.alignment).unwrap_or(0) {
            return Err(bad(format!(
                "payload_offset {} is not the directory end {dir_end} rounded up to the alignment {}",
                h.payload_offset, h.alignment
            )));
        }
        let payload_end = h
            .payload_offset
            .checked_add(h.payload_size)
            .ok_or_else(|| bad("payload_offset + payload_size overflows".into()))?;
        if h.flags & FLAG_FOOTER != 0 {
            if h.footer_offset != payload_end {
                return Err(bad(format!(
                    "footer_offset {} is not the payload end {payload_end}",
                    h.footer_offset
                )));
            }
            if h.footer_size < 8 || h.footer_size > MAX_FOOTER_LEN {
                return Err(MegaError::SectionTooLarge {
                    file: file.into(),
                    section: "footer (or shorter than its 8-byte count)",
                    len: h.footer_size,
                    max: MAX_FOOTER_LEN,
                });
            }
        } else if h.footer_offset != 0 || h.footer_size != 0 || h.footer_crc32 != 0 {
            return Err(bad("footer fields set but the footer flag is clear".into()));
        }
        Ok(h)
    }

    /// Byte length the file must have.
    pub fn file_len(&self) -> u64 {
        if self.flags & FLAG_FOOTER != 0 {
            self.footer_offset.saturating_add(self.footer_size)
        } else {
            self.payload_offset.saturating_add(self.payload_size)
        }
    }

    /// End of the tensor directory (start of the zero padding before the payload).
    pub fn directory_end(&self) -> u64 {
        self.directory_offset.saturating_add(self.directory_size)
    }
}

/// Refuse an alignment that is not a power of two in `MIN_ALIGNMENT..=MAX_ALIGNMENT`.
pub fn check_alignment(a: u64) -> Result<(), MegaError> {
    if a.is_power_of_two() && (MIN_ALIGNMENT..=MAX_ALIGNMENT).contains(&a) {
        Ok(())
    } else {
        Err(MegaError::BadAlignment { value: a })
    }
}

/// `x` rounded up to a multiple of the power of two `a`; `None` on overflow.
pub fn align_up(x: u64, a: u64) -> Option<u64> {
    let mask = a.checked_sub(1)?;
    x.checked_add(mask).map(|v| v & !mask)
}

/// Bits per element of a dtype name (safetensors 0.8 names, formats.md §1.3); `None` when unknown.
pub fn dtype_bits(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "F4" => 4,
        "F6_E2M3" | "F6_E3M2" => 6,
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" | "F8_E8M0" | "F8_E4M3FNUZ"
        | "F8_E5M2FNUZ" => 8,
        "I16" | "U16" | "F16" | "BF16" => 16,
        "I32" | "U32" | "F32" => 32,
        "C64" | "F64" | "I64" | "U64" => 64,
        _ => return None,
    })
}

/// Number of elements of a shape (1 for rank 0); `None` on overflow.
pub fn numel(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

/// Byte length of a tensor; `Err(reason)` for an unknown dtype, overflow, or a sub-byte total that
/// does not end on a byte boundary.
pub fn tensor_nbytes(dtype: &str, shape: &[u64]) -> Result<u64, String> {
    let bits = dtype_bits(dtype).ok_or_else(|| format!("unknown dtype `{dtype}`"))?;
    let total = numel(shape)
        .and_then(|n| n.checked_mul(bits))
        .ok_or_else(|| "element count overflows".to_string())?;
    if total % 8 != 0 {
        return Err(format!(
            "{total} bits of `{dtype}` do not end on a byte boundary"
        ));
    }
    Ok(total / 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let h = FixedHeader {
            major: 1,
            minor: 0,
            flags: 0,
            alignment: 64,
            metadata_count: 2,
            tensor_count: 1,
            metadata_offset: 128,
            metadata_size: 40,
            directory_offset: 168,
            directory_size: 30,
            payload_offset: 256,
            payload_size: 10,
            ..Default::default()
        };
        let b = h.encode();
        assert_eq!(FixedHeader::decode("x", &b).unwrap(), h);
    }

    #[test]
    fn alignment_rules() {
        assert!(check_alignment(4096).is_ok());
        for bad in [0, 1, 4, 12, 3 << 20, 1 << 31] {
            assert!(check_alignment(bad).is_err(), "{bad}");
        }
        assert_eq!(align_up(0, 64), Some(0));
        assert_eq!(align_up(65, 64), Some(128));
        assert_eq!(align_up(u64::MAX, 64), None);
    }

    #[test]
    fn sub_byte_sizes() {
        assert_eq!(tensor_nbytes("F4", &[4, 16]), Ok(32));
        assert!(tensor_nbytes("F4", &[3]).is_err());
        assert!(tensor_nbytes("Q9", &[3]).is_err());
        assert!(tensor_nbytes("F32", &[u64::MAX, 2]).is_err());
        assert_eq!(tensor_nbytes("BF16", &[]), Ok(2));
    }
}
