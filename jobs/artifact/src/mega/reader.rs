//! `mega::reader`: bounded reading of a `.mega` shard (docs/mega.md §2-§5). [`ShardHeader::read`]
//! reads the fixed header, metadata, directory and footer, never the payload; it validates every
//! offset with checked arithmetic before allocating, so hostile input yields an error, not a panic
//! or a huge allocation. Tensor bytes and payload hashes are read on demand through [`ShardReader`].

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use sha2::{Digest, Sha256};

use super::layout::{
    align_up, tensor_nbytes, FixedHeader, FIXED_HEADER_LEN, FLAG_FOOTER, HEADER_CRC_AT,
    MAX_DTYPE_LEN, MAX_NAME_LEN, MAX_RANK,
};
use super::metadata::{check_read_section, decode_section, Cursor, Metadata, Section, Value};
use super::MegaError;

/// A readable, seekable byte source (a file, or a cursor in tests).
pub trait ReadSeek: Read + Seek {}
impl<T: Read + Seek> ReadSeek for T {}

/// Opens the files of a release by name. Runtime code uses [`DirOpener`]; tests wrap it to count
/// which shards were opened and which byte ranges were read.
pub trait Opener {
    /// Open `name` (a file name inside the release) for reading.
    fn open(&self, name: &str) -> Result<Box<dyn ReadSeek>, MegaError>;
}

impl<T: Opener + ?Sized> Opener for &T {
    fn open(&self, name: &str) -> Result<Box<dyn ReadSeek>, MegaError> {
        (**self).open(name)
    }
}

/// Opens files inside one directory.
#[derive(Debug, Clone)]
pub struct DirOpener {
    /// The release directory.
    pub dir: PathBuf,
}

impl Opener for DirOpener {
    fn open(&self, name: &str) -> Result<Box<dyn ReadSeek>, MegaError> {
        let path = self.dir.join(name);
        let f =
            File::open(&path).map_err(|e| MegaError::io("open", path.display().to_string(), e))?;
        Ok(Box::new(f))
    }
}

/// One tensor directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorEntry {
    /// Tensor name.
    pub name: String,
    /// dtype name.
    pub dtype: String,
    /// Shape in elements.
    pub shape: Vec<u64>,
    /// Offset relative to the payload start (a multiple of the alignment).
    pub offset: u64,
    /// Byte length.
    pub length: u64,
}

/// Everything of a shard except its payload, validated.
#[derive(Debug, Clone)]
pub struct ShardHeader {
    /// The file label used in errors.
    pub file: String,
    /// The fixed header.
    pub fixed: FixedHeader,
    /// Header metadata section.
    pub metadata: Metadata,
    /// Footer overlay (empty when absent).
    pub footer: Metadata,
    /// The directory, in payload order.
    pub tensors: Vec<TensorEntry>,
    /// Reserved keys unknown to this reader (only accepted from a newer minor version).
    pub unknown_reserved: Vec<String>,
}

/// Directory entries are at least 4+1+1+1+4+8+8 bytes.
const MIN_DIR_ENTRY: usize = 27;

fn read_exact_at<R: Read + Seek + ?Sized>(
    r: &mut R,
    file: &str,
    at: u64,
    buf: &mut [u8],
) -> Result<(), MegaError> {
    r.seek(SeekFrom::Start(at))
        .and_then(|_| r.read_exact(buf))
        .map_err(|e| MegaError::io("read", file, e))
}

impl ShardHeader {
    /// Read and validate the header, directory and footer of a shard (never the payload).
    pub fn read<R: Read + Seek + ?Sized>(file: &str, r: &mut R) -> Result<Self, MegaError> {
        let len = r
            .seek(SeekFrom::End(0))
            .map_err(|e| MegaError::io("seek in", file, e))?;
        if len < FIXED_HEADER_LEN {
            return Err(MegaError::Truncated {
                file: file.into(),
                what: "the fixed header".into(),
                need: FIXED_HEADER_LEN,
                have: len,
            });
        }
        let mut raw = [0u8; FIXED_HEADER_LEN as usize];
        read_exact_at(r, file, 0, &mut raw)?;
        let fixed = FixedHeader::decode(file, &raw)?;
        let want = fixed.file_len();
        if len < want {
            return Err(MegaError::Truncated {
                file: file.into(),
                what: "the sections the header declares".into(),
                need: want,
                have: len,
            });
        }
        if len > want {
            return Err(MegaError::BadHeader {
                file: file.into(),
                reason: format!("file is {len} bytes, the header declares {want}"),
            });
        }
        // The file is long enough, so these allocations are bounded by the real file size and by
        // MAX_SECTIONS_LEN (checked in `decode`).
        let sections_len = (fixed.directory_end() - FIXED_HEADER_LEN) as usize;
        let mut sections = vec![0u8; sections_len];
        read_exact_at(r, file, FIXED_HEADER_LEN, &mut sections)?;
        let mut crc = crc32fast::Hasher::new();
        let mut zeroed = raw;
        zeroed[HEADER_CRC_AT..HEADER_CRC_AT + 4].fill(0);
        crc.update(&zeroed);
        crc.update(&sections);
        // Padding up to the payload: zeros, streamed (it can be up to alignment - 1 bytes).
        let mut pad_left = fixed.payload_offset - fixed.directory_end();
        let mut buf = vec![0u8; pad_left.min(1 << 16) as usize];
        r.seek(SeekFrom::Start(fixed.directory_end()))
            .map_err(|e| MegaError::io("seek in", file, e))?;
        while pad_left > 0 {
            let n = pad_left.min(buf.len() as u64) as usize;
            let chunk = buf.get_mut(..n).unwrap_or_default();
            r.read_exact(chunk)
                .map_err(|e| MegaError::io("read", file, e))?;
            if chunk.iter().any(|&b| b != 0) {
                return Err(MegaError::BadHeader {
                    file: file.into(),
                    reason: "padding before the payload is not zero".into(),
                });
            }
            crc.update(chunk);
            pad_left -= n as u64;
        }
        let actual = crc.finalize();
        if actual != fixed.header_crc32 {
            return Err(MegaError::HeaderCrc {
                file: file.into(),
                expected: fixed.header_crc32,
                actual,
            });
        }
        let (meta, dir) = sections
            .split_at_checked(fixed.metadata_size as usize)
            .unwrap_or((&sections, &[]));
        let metadata = decode_section(meta, fixed.metadata_count, file)?;
        let tensors = decode_directory(dir, &fixed, file)?;
        let footer = if fixed.flags & FLAG_FOOTER != 0 {
            let mut fb = vec![0u8; fixed.footer_size as usize];
            read_exact_at(r, file, fixed.footer_offset, &mut fb)?;
            let actual = crc32fast::hash(&fb);
            if actual != fixed.footer_crc32 {
                return Err(MegaError::BadHeader {
                    file: file.into(),
                    reason: format!(
                        "footer checksum is {actual:08x}, the header records {:08x}",
                        fixed.footer_crc32
                    ),
                });
            }
            let mut fc = Cursor::new(&fb, file);
            let count = fc.u64("footer entry count")?;
            decode_section(fb.get(8..).unwrap_or_default(), count, file)?
        } else {
            Metadata::new()
        };
        let mut unknown_reserved =
            check_read_section(&metadata, Section::Header, fixed.minor, file)?;
        unknown_reserved.extend(check_read_section(
            &footer,
            Section::Footer,
            fixed.minor,
            file,
        )?);
        let h = ShardHeader {
            file: file.into(),
            fixed,
            metadata,
            footer,
            tensors,
            unknown_reserved,
        };
        h.check_required()?;
        Ok(h)
    }

    fn req_u64(&self, key: &str) -> Result<u64, MegaError> {
        self.metadata
            .get(key)
            .and_then(Value::as_u64)
            .ok_or_else(|| self.missing(key))
    }

    fn req_str(&self, key: &str) -> Result<&str, MegaError> {
        self.metadata
            .get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| self.missing(key))
    }

    fn missing(&self, key: &str) -> MegaError {
        MegaError::BadMetadata {
            file: self.file.clone(),
            key: key.into(),
            reason: "required key is missing".into(),
        }
    }

    /// Cross-check the required `mega.*` keys against the header and the directory.
    fn check_required(&self) -> Result<(), MegaError> {
        let bad = |key: &str, reason: String| MegaError::BadMetadata {
            file: self.file.clone(),
            key: key.into(),
            reason,
        };
        let checks = [
            ("mega.tensor.count", self.fixed.tensor_count),
            ("mega.payload.nbytes", self.fixed.payload_size),
            ("mega.parameter.count", self.parameter_count()),
        ];
        for (key, want) in checks {
            let got = self.req_u64(key)?;
            if got != want {
                return Err(bad(key, format!("is {got}, the shard holds {want}")));
            }
        }
        match self.req_str("mega.layout.tensor_order")? {
            "source" => {}
            "name" => {
                if !self.tensors.windows(2).all(|w| w[0].name < w[1].name) {
                    return Err(bad(
                        "mega.layout.tensor_order",
                        "is `name` but the directory is not sorted by name".into(),
                    ));
                }
            }
            other => {
                return Err(bad(
                    "mega.layout.tensor_order",
                    format!("unknown order `{other}`"),
                ))
            }
        }
        let (ord, count) = (
            self.req_u64("mega.shard.ordinal")?,
            self.req_u64("mega.shard.count")?,
        );
        if count == 0 || ord >= count {
            return Err(bad(
                "mega.shard.ordinal",
                format!("ordinal {ord} of {count} shards"),
            ));
        }
        let (b, e) = (
            self.req_u64("mega.shard.payload.begin")?,
            self.req_u64("mega.shard.payload.end")?,
        );
        if e.checked_sub(b) != Some(self.fixed.payload_size) {
            return Err(bad(
                "mega.shard.payload.end",
                format!(
                    "range {b}..{e} does not span the {}-byte payload",
                    self.fixed.payload_size
                ),
            ));
        }
        for (key, n) in [
            ("mega.hash.payload.crc32", 8),
            ("mega.hash.payload.sha256", 64),
        ] {
            let v = self.req_str(key)?;
            if !is_lower_hex(v, n) {
                return Err(bad(key, format!("must be {n} lowercase hex digits")));
            }
        }
        Ok(())
    }

    /// Elements summed over all tensors (saturating; the schema check compares it exactly).
    pub fn parameter_count(&self) -> u64 {
        self.tensors.iter().fold(0u64, |acc, t| {
            acc.saturating_add(super::layout::numel(&t.shape).unwrap_or(u64::MAX))
        })
    }

    /// Tensor count per dtype.
    pub fn dtype_counts(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for t in &self.tensors {
            *m.entry(t.dtype.clone()).or_insert(0) += 1;
        }
        m
    }

    /// The directory entry of a tensor.
    pub fn tensor(&self, name: &str) -> Option<&TensorEntry> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// A string metadata value (header section, then footer overlay).
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.metadata
            .get(key)
            .or_else(|| self.footer.get(key))
            .and_then(Value::as_str)
    }

    /// A u64 metadata value of the header section.
    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.metadata.get(key).and_then(Value::as_u64)
    }
}

/// True when `s` is exactly `n` lowercase hex digits.
pub fn is_lower_hex(s: &str, n: usize) -> bool {
    s.len() == n
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn decode_directory(
    buf: &[u8],
    fixed: &FixedHeader,
    file: &str,
) -> Result<Vec<TensorEntry>, MegaError> {
    let count = fixed.tensor_count;
    if count > (buf.len() / MIN_DIR_ENTRY) as u64 {
        return Err(MegaError::BadHeader {
            file: file.into(),
            reason: format!(
                "{count} tensor entries cannot fit in a {}-byte directory",
                buf.len()
            ),
        });
    }
    let mut c = Cursor::new(buf, file);
    let mut out: Vec<TensorEntry> = Vec::with_capacity(count as usize);
    let mut names = std::collections::BTreeSet::new();
    let mut prev_end = 0u64;
    for i in 0..count {
        let what = format!("tensor entry #{i}");
        let nlen = c.u32(&what)?;
        let bad_i = |reason: String| MegaError::BadTensor {
            file: file.into(),
            tensor: format!("#{i}"),
            reason,
        };
        if nlen == 0 || nlen as usize > MAX_NAME_LEN {
            return Err(bad_i(format!(
                "name length {nlen} outside 1..={MAX_NAME_LEN}"
            )));
        }
        let name = std::str::from_utf8(c.take(u64::from(nlen), &what)?)
            .map_err(|e| bad_i(format!("name is not valid UTF-8 ({e})")))?
            .to_string();
        let bad = |reason: String| MegaError::BadTensor {
            file: file.into(),
            tensor: name.clone(),
            reason,
        };
        let dlen = c.u8(&what)?;
        if dlen == 0 || dlen as usize > MAX_DTYPE_LEN {
            return Err(bad(format!(
                "dtype length {dlen} outside 1..={MAX_DTYPE_LEN}"
            )));
        }
        let dtype = std::str::from_utf8(c.take(u64::from(dlen), &what)?)
            .map_err(|e| bad(format!("dtype is not valid UTF-8 ({e})")))?
            .to_string();
        let rank = c.u32(&what)?;
        if rank > MAX_RANK {
            return Err(bad(format!("rank {rank} exceeds {MAX_RANK}")));
        }
        let mut shape = Vec::with_capacity(rank as usize);
        for _ in 0..rank {
            shape.push(c.u64(&what)?);
        }
        let offset = c.u64(&what)?;
        let length = c.u64(&what)?;
        let want = tensor_nbytes(&dtype, &shape).map_err(&bad)?;
        if want != length {
            return Err(bad(format!(
                "length is {length}, dtype and shape need {want}"
            )));
        }
        let end = offset
            .checked_add(length)
            .filter(|&e| e <= fixed.payload_size)
            .ok_or_else(|| {
                bad(format!(
                    "bytes {offset}+{length} lie outside the {}-byte payload",
                    fixed.payload_size
                ))
            })?;
        if offset < prev_end {
            return Err(bad(format!(
                "offset {offset} overlaps the previous tensor, which ends at {prev_end}"
            )));
        }
        if offset % fixed.alignment != 0 {
            return Err(bad(format!(
                "offset {offset} is not aligned to {}",
                fixed.alignment
            )));
        }
        if Some(offset) != align_up(prev_end, fixed.alignment) {
            return Err(bad(format!(
                "offset {offset} leaves a gap after the previous tensor (ends at {prev_end})"
            )));
        }
        if !names.insert(name.clone()) {
            return Err(bad("duplicate tensor name".into()));
        }
        prev_end = end;
        out.push(TensorEntry {
            name,
            dtype,
            shape,
            offset,
            length,
        });
    }
    if c.remaining() != 0 {
        return Err(MegaError::BadHeader {
            file: file.into(),
            reason: format!(
                "{} trailing bytes after {count} tensor entries",
                c.remaining()
            ),
        });
    }
    if prev_end != fixed.payload_size {
        return Err(MegaError::BadHeader {
            file: file.into(),
            reason: format!(
                "payload_size is {}, the last tensor ends at {prev_end}",
                fixed.payload_size
            ),
        });
    }
    Ok(out)
}

/// Computed payload hashes of a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadHashes {
    /// CRC-32 (IEEE), 8 lowercase hex.
    pub crc32: String,
    /// SHA-256, 64 lowercase hex.
    pub sha256: String,
}

/// An open shard: its validated header and the file, for tensor reads and hash checks.
pub struct ShardReader {
    /// The validated header.
    pub header: ShardHeader,
    file: Box<dyn ReadSeek>,
}

impl std::fmt::Debug for ShardReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardReader")
            .field("header", &self.header)
            .finish()
    }
}

impl ShardReader {
    /// Open `name` through `opener` and read its header (not its payload).
    pub fn open(opener: &dyn Opener, name: &str) -> Result<Self, MegaError> {
        let mut file = opener.open(name)?;
        let header = ShardHeader::read(name, &mut file)?;
        Ok(ShardReader { header, file })
    }

    /// The bytes of one tensor, exactly as stored.
    pub fn read_tensor(&mut self, name: &str) -> Result<Vec<u8>, MegaError> {
        let t = self
            .header
            .tensor(name)
            .ok_or_else(|| MegaError::TensorNotFound { name: name.into() })?;
        let at = self.header.fixed.payload_offset + t.offset;
        // Bounded: `length` was checked to lie inside the payload of a file of the declared size.
        let mut buf = vec![0u8; t.length as usize];
        read_exact_at(&mut self.file, &self.header.file, at, &mut buf)?;
        Ok(buf)
    }

    /// Stream the payload and compute its CRC-32 and SHA-256.
    pub fn payload_hashes(&mut self) -> Result<PayloadHashes, MegaError> {
        let label = self.header.file.clone();
        self.file
            .seek(SeekFrom::Start(self.header.fixed.payload_offset))
            .map_err(|e| MegaError::io("seek in", &label, e))?;
        let mut left = self.header.fixed.payload_size;
        let mut buf = vec![0u8; left.min(1 << 20) as usize];
        let mut crc = crc32fast::Hasher::new();
        let mut sha = Sha256::new();
        while left > 0 {
            let n = left.min(buf.len() as u64) as usize;
            let chunk = buf.get_mut(..n).unwrap_or_default();
            self.file
                .read_exact(chunk)
                .map_err(|e| MegaError::io("read", &label, e))?;
            crc.update(&*chunk);
            sha.update(&*chunk);
            left -= n as u64;
        }
        Ok(PayloadHashes {
            crc32: format!("{:08x}", crc.finalize()),
            sha256: hex::encode(sha.finalize()),
        })
    }
}
