//! The one GGUF reader: parses a v3 header from a byte slice (an mmap) with checked arithmetic,
//! and serves zero-copy tensor bytes. [`GgufModel`] loads a single file or a multi-part set
//! (see [`super::split`]) as one model.
//!
//! Spec: ggml `docs/gguf.md` "File Structure" and ggml's `gguf.cpp` strictness: tensor names
//! < 64 bytes, no duplicates, `general.alignment` a `uint32` power of two, offsets equal to the
//! padded running sum, ARRAY of ARRAY refused (../shared/design/formats.md §5.1). Limits follow
//! the spirit of llama.cpp#19856 / candle#3533: every count is bounded by a named cap *and* by
//! what the remaining bytes could possibly hold, so a hostile header cannot cause a huge
//! allocation.

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::metadata::Metadata;
use super::types::{GgmlType, Value, ValueType};
use super::{pad, GgufError, MAX_DIMS, MAX_NAME_LEN};

/// "GGUF" as the little-endian u32 at offset 0.
pub const MAGIC: &[u8; 4] = b"GGUF";
/// The only version read and written.
pub const VERSION: u32 = 3;
/// Cap on the tensor count (ggml has no cap; one million is 30× the largest model seen).
pub const MAX_TENSORS: u64 = 1 << 20;
/// Cap on the metadata key count.
pub const MAX_KV: u64 = 1 << 20;
/// Cap on one string's length (keys, names, values): 256 MiB.
pub const MAX_STRING_LEN: u64 = 1 << 28;
/// Cap on a metadata key's length.
pub const MAX_KEY_LEN: u64 = 1 << 16;
/// Cap on the element count of one metadata array (vocabularies are ~10^5–10^6).
pub const MAX_ARRAY_LEN: u64 = 1 << 26;
/// Smallest possible tensor-info record: name length (8) + n_dims (4) + one ne (8) + type (4) +
/// offset (8).
const MIN_TENSOR_INFO: u64 = 32;
/// Smallest possible key/value record: key length (8) + type (4) + a one-byte value.
const MIN_KV: u64 = 13;

/// One tensor as the index describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// The name (< 64 bytes, UTF-8).
    pub name: String,
    /// `ne[0..n_dims]` exactly as stored (`ne[0]` is the contiguous row length).
    pub dims: Vec<u64>,
    /// Element type.
    pub ggml_type: GgmlType,
    /// Offset relative to the start of the data section.
    pub offset: u64,
    /// Payload bytes: `Π ne / block_size × type_size`.
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Number of elements.
    pub fn n_elements(&self) -> u64 {
        // Checked at parse time; saturates for hand-built values.
        self.dims.iter().fold(1u64, |a, &d| a.saturating_mul(d))
    }

    /// `ggml_n_dims`: the highest dimension index whose size is not 1, plus one (at least 1).
    pub fn n_dims(&self) -> usize {
        self.dims.iter().rposition(|&d| d != 1).map_or(1, |i| i + 1)
    }

    /// Row length `ne[0]`.
    pub fn row_len(&self) -> u64 {
        self.dims.first().copied().unwrap_or(1)
    }

    /// Number of rows (`Π ne[1..]`).
    pub fn n_rows(&self) -> u64 {
        self.dims
            .iter()
            .skip(1)
            .fold(1u64, |a, &d| a.saturating_mul(d))
    }
}

/// Payload size of a tensor of type `t` with dimensions `dims`, or why it is invalid.
pub fn tensor_nbytes(t: GgmlType, dims: &[u64]) -> Result<u64, String> {
    let mut n: u64 = 1;
    for &d in dims {
        n = n
            .checked_mul(d)
            .filter(|&n| n <= i64::MAX as u64)
            .ok_or_else(|| format!("element count of dims {dims:?} overflows int64"))?;
    }
    let row = dims.first().copied().unwrap_or(1);
    if row % t.block_size() != 0 {
        return Err(format!(
            "row length ne[0] = {row} is not a multiple of the {t} block size {}",
            t.block_size()
        ));
    }
    (n / t.block_size())
        .checked_mul(t.type_size())
        .ok_or_else(|| format!("byte size of dims {dims:?} at {t} overflows"))
}

/// A parsed header: metadata, tensor index, alignment and where the data section starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// Ordered metadata.
    pub metadata: Metadata,
    /// Tensor index in file order.
    pub tensors: Vec<TensorInfo>,
    /// `general.alignment`, else 32.
    pub alignment: u64,
    /// Absolute offset of the data section.
    pub data_start: u64,
    /// Absolute offset of the end of the data section (the last tensor's padded end).
    pub data_end: u64,
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    file: &'a Path,
}

impl<'a> Cursor<'a> {
    fn err(&self, detail: String) -> GgufError {
        GgufError::Format {
            file: self.file.to_path_buf(),
            detail,
        }
    }

    fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos.min(self.buf.len())) as u64
    }

    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], GgufError> {
        let start = self.pos;
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| start.checked_add(n))
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| {
                self.err(format!(
                    "truncated: {what} needs {n} bytes at offset {start}, the file has {} left",
                    self.remaining()
                ))
            })?;
        self.pos = end;
        Ok(&self.buf[start..end])
    }

    fn arr<const N: usize>(&mut self, what: &str) -> Result<[u8; N], GgufError> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self, what: &str) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }

    fn bytes_str(&mut self, what: &str, cap: u64) -> Result<Vec<u8>, GgufError> {
        let len = self.u64(what)?;
        if len > cap {
            return Err(self.err(format!(
                "{what} length {len} exceeds the limit of {cap} bytes"
            )));
        }
        Ok(self.take(len, what)?.to_vec())
    }

    fn utf8(&mut self, what: &str, cap: u64) -> Result<String, GgufError> {
        let b = self.bytes_str(what, cap)?;
        String::from_utf8(b).map_err(|_| self.err(format!("{what} is not valid UTF-8")))
    }

    fn count(&mut self, what: &str, cap: u64, min_each: u64) -> Result<u64, GgufError> {
        let n = self.u64(what)?;
        if n > cap {
            return Err(self.err(format!("{what} {n} exceeds the limit of {cap}")));
        }
        let room = self.remaining() / min_each;
        if n > room {
            return Err(self.err(format!(
                "{what} {n} cannot fit: the {} bytes left hold at most {room} (at least {min_each} bytes each)",
                self.remaining()
            )));
        }
        Ok(n)
    }

    fn scalar(&mut self, t: ValueType, what: &str) -> Result<Value, GgufError> {
        Ok(match t {
            ValueType::U8 => Value::U8(u8::from_le_bytes(self.arr(what)?)),
            ValueType::I8 => Value::I8(i8::from_le_bytes(self.arr(what)?)),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.arr(what)?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.arr(what)?)),
            ValueType::U32 => Value::U32(u32::from_le_bytes(self.arr(what)?)),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.arr(what)?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.arr(what)?)),
            ValueType::U64 => Value::U64(u64::from_le_bytes(self.arr(what)?)),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.arr(what)?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.arr(what)?)),
            ValueType::Bool => match self.arr::<1>(what)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(self.err(format!("{what}: bool byte {b} is neither 0 nor 1"))),
            },
            ValueType::String => Value::String(self.bytes_str(what, MAX_STRING_LEN)?),
            ValueType::Array => {
                let id = self.u32(what)?;
                let elem = ValueType::from_id(id).ok_or_else(|| {
                    self.err(format!("{what}: unknown array element type {id} (0..=12)"))
                })?;
                match elem {
                    ValueType::Array => {
                        return Err(self.err(format!(
                            "{what}: nested arrays (array of array) are refused, as ggml does"
                        )))
                    }
                    ValueType::String => {
                        let n = self.count(&format!("{what}: array length"), MAX_ARRAY_LEN, 8)?;
                        let mut items = Vec::with_capacity(n.min(4096) as usize);
                        for _ in 0..n {
                            items.push(self.bytes_str(what, MAX_STRING_LEN)?);
                        }
                        Value::StringArray(items)
                    }
                    num => {
                        let size = num.scalar_size().unwrap_or(1) as u64;
                        let n =
                            self.count(&format!("{what}: array length"), MAX_ARRAY_LEN, size)?;
                        let raw = self.take(n * size, what)?.to_vec();
                        if num == ValueType::Bool {
                            if let Some(b) = raw.iter().find(|&&b| b > 1) {
                                return Err(self.err(format!(
                                    "{what}: bool array byte {b} is neither 0 nor 1"
                                )));
                            }
                        }
                        Value::NumArray {
                            elem: num,
                            count: n,
                            raw,
                        }
                    }
                }
            }
        })
    }
}

/// Parse a GGUF v3 header from `buf` (the whole file). `file` names the source in errors.
pub fn parse_header(buf: &[u8], file: impl AsRef<Path>) -> Result<Header, GgufError> {
    let file = file.as_ref();
    let header = parse_index(buf, file)?;
    // A file whose last tensor is unpadded (some writers omit the final padding) is accepted:
    // only the payload itself must be inside the file.
    let payload_end = match header.tensors.last() {
        Some(t) => header
            .data_start
            .checked_add(t.offset)
            .and_then(|x| x.checked_add(t.n_bytes)),
        None => Some(header.data_start.min(buf.len() as u64)),
    };
    let err = |detail: String| GgufError::Format {
        file: file.to_path_buf(),
        detail,
    };
    match payload_end {
        Some(end) if end <= buf.len() as u64 => Ok(header),
        Some(end) => Err(err(format!(
            "the tensor data needs {end} bytes, the file has {} (truncated)",
            buf.len()
        ))),
        None => Err(err("data section end overflows".to_string())),
    }
}

/// Parse a GGUF v3 header — metadata and tensor index — from `buf`, which may end anywhere
/// after the index (a header cut from a file at its data section: `minirun-gguf synth --like`).
/// [`parse_header`] also requires every payload inside `buf`.
pub fn parse_index(buf: &[u8], file: impl AsRef<Path>) -> Result<Header, GgufError> {
    let file = file.as_ref();
    let mut c = Cursor { buf, pos: 0, file };
    let magic = c.arr::<4>("magic")?;
    if &magic != MAGIC {
        return Err(c.err(format!("bad magic {magic:02x?}, expected \"GGUF\"")));
    }
    let version = c.u32("version")?;
    if version != VERSION {
        return Err(c.err(format!(
            "GGUF version {version} is not supported (only version 3)"
        )));
    }
    let n_tensors_raw = c.u64("tensor count")?;
    let n_kv_raw = c.u64("metadata key count")?;
    for (what, n, cap) in [
        ("tensor count", n_tensors_raw, MAX_TENSORS),
        ("metadata key count", n_kv_raw, MAX_KV),
    ] {
        if n > cap {
            return Err(c.err(format!("{what} {n} exceeds the limit of {cap}")));
        }
    }
    if n_kv_raw > c.remaining() / MIN_KV {
        return Err(c.err(format!(
            "metadata key count {n_kv_raw} cannot fit in the {} bytes left (at least {MIN_KV} bytes each)",
            c.remaining()
        )));
    }
    let mut metadata = Metadata::default();
    metadata.kv.reserve(n_kv_raw.min(4096) as usize);
    for i in 0..n_kv_raw {
        let key = c.utf8(&format!("metadata key #{i}"), MAX_KEY_LEN)?;
        if metadata.get(&key).is_some() {
            return Err(c.err(format!("duplicate metadata key `{key}`")));
        }
        let id = c.u32(&format!("type of `{key}`"))?;
        let t = ValueType::from_id(id)
            .ok_or_else(|| c.err(format!("key `{key}` has unknown value type {id} (0..=12)")))?;
        let v = c.scalar(t, &format!("value of `{key}`"))?;
        metadata.kv.push((key, v));
    }
    let alignment = match metadata.get("general.alignment") {
        None => super::DEFAULT_ALIGNMENT,
        Some(Value::U32(a)) if a.is_power_of_two() => u64::from(*a),
        Some(Value::U32(a)) => {
            return Err(c.err(format!(
                "general.alignment {a} is not a power of two (ggml requires one)"
            )))
        }
        Some(v) => {
            return Err(c.err(format!(
                "general.alignment has type {}, ggml requires uint32",
                v.value_type().name()
            )))
        }
    };
    if n_tensors_raw > c.remaining() / MIN_TENSOR_INFO {
        return Err(c.err(format!(
            "tensor count {n_tensors_raw} cannot fit in the {} bytes left (at least {MIN_TENSOR_INFO} bytes each)",
            c.remaining()
        )));
    }
    let mut tensors: Vec<TensorInfo> = Vec::with_capacity(n_tensors_raw.min(4096) as usize);
    let mut seen = std::collections::HashSet::new();
    let mut expect_offset: u64 = 0;
    for i in 0..n_tensors_raw {
        let name = c.utf8(&format!("tensor name #{i}"), MAX_STRING_LEN)?;
        if name.len() >= MAX_NAME_LEN {
            return Err(c.err(format!(
                "tensor name `{name}` is {} bytes; ggml requires fewer than {MAX_NAME_LEN} (GGML_MAX_NAME)",
                name.len()
            )));
        }
        if !seen.insert(name.clone()) {
            return Err(c.err(format!("duplicate tensor name `{name}`")));
        }
        let n_dims = c.u32(&format!("n_dims of `{name}`"))?;
        if n_dims == 0 || n_dims as usize > MAX_DIMS {
            return Err(c.err(format!(
                "tensor `{name}` has {n_dims} dimensions; allowed 1..={MAX_DIMS} (GGML_MAX_DIMS)"
            )));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            let d = c.u64(&format!("ne of `{name}`"))?;
            if d > i64::MAX as u64 {
                return Err(c.err(format!(
                    "tensor `{name}` dimension {d} exceeds int64 (ggml stores ne as int64)"
                )));
            }
            dims.push(d);
        }
        let id = c.u32(&format!("type of `{name}`"))?;
        let ggml_type = GgmlType::from_id(id)
            .ok_or_else(|| c.err(format!("tensor `{name}` has unknown ggml type id {id}")))?;
        let offset = c.u64(&format!("offset of `{name}`"))?;
        let n_bytes =
            tensor_nbytes(ggml_type, &dims).map_err(|e| c.err(format!("tensor `{name}`: {e}")))?;
        if offset != expect_offset {
            return Err(c.err(format!(
                "tensor `{name}` has offset {offset}, but the padded running sum of the preceding tensors is {expect_offset} (ggml requires equality)"
            )));
        }
        expect_offset = pad(n_bytes, alignment)
            .and_then(|p| expect_offset.checked_add(p))
            .ok_or_else(|| c.err(format!("data section size overflows at tensor `{name}`")))?;
        tensors.push(TensorInfo {
            name,
            dims,
            ggml_type,
            offset,
            n_bytes,
        });
    }
    let data_start = pad(c.pos as u64, alignment)
        .ok_or_else(|| c.err("data section offset overflows".to_string()))?;
    let data_end = data_start
        .checked_add(expect_offset)
        .ok_or_else(|| c.err("data section end overflows".to_string()))?;
    Ok(Header {
        metadata,
        tensors,
        alignment,
        data_start,
        data_end,
    })
}

/// One GGUF file, memory-mapped, with its parsed header.
#[derive(Debug)]
pub struct GgufFile {
    path: PathBuf,
    map: Option<Mmap>,
    /// The parsed header.
    pub header: Header,
}

impl GgufFile {
    /// Open and parse `path`.
    pub fn open(path: &Path) -> Result<GgufFile, GgufError> {
        let f = File::open(path).map_err(|e| GgufError::io("open", path, e))?;
        let len = f
            .metadata()
            .map_err(|e| GgufError::io("read", path, e))?
            .len();
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the file is opened read-only; like every mmap reader we rely on no other
            // process truncating it while mapped (documented in docs/gguf.md).
            Some(unsafe { Mmap::map(&f) }.map_err(|e| GgufError::io("map", path, e))?)
        };
        let header = parse_header(map.as_deref().unwrap_or(&[]), path)?;
        Ok(GgufFile {
            path: path.to_path_buf(),
            map,
            header,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// All bytes of the file.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// Zero-copy payload of `t` (which must come from this file's index).
    pub fn tensor_bytes(&self, t: &TensorInfo) -> Result<&[u8], GgufError> {
        let start = self.header.data_start.checked_add(t.offset);
        let end = start.and_then(|s| s.checked_add(t.n_bytes));
        match (start, end) {
            (Some(s), Some(e)) => {
                self.bytes()
                    .get(s as usize..e as usize)
                    .ok_or_else(|| GgufError::Format {
                        file: self.path.clone(),
                        detail: format!("tensor `{}` lies outside the file", t.name),
                    })
            }
            _ => Err(GgufError::Format {
                file: self.path.clone(),
                detail: format!("tensor `{}` offset overflows", t.name),
            }),
        }
    }

    /// The tensor named `name` in this file.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.header.tensors.iter().find(|t| t.name == name)
    }
}

/// A model: one file or a multi-part set loaded as one (tensors of every part in part order).
#[derive(Debug)]
pub struct GgufModel {
    /// The parts in order (a single file is one part).
    pub parts: Vec<GgufFile>,
    /// `(part index, tensor)` in global order.
    pub tensors: Vec<(usize, TensorInfo)>,
}

impl GgufModel {
    /// Open `path`: a plain file, or the first part (`…-00001-of-0000M.gguf`) of a split.
    pub fn open(path: &Path) -> Result<GgufModel, GgufError> {
        super::split::open_model(path)
    }

    /// Metadata of the model (part 0's, which holds the full metadata in both split forms).
    pub fn metadata(&self) -> &Metadata {
        static EMPTY: std::sync::OnceLock<Metadata> = std::sync::OnceLock::new();
        self.parts
            .first()
            .map(|p| &p.header.metadata)
            .unwrap_or_else(|| EMPTY.get_or_init(Metadata::default))
    }

    /// Number of parts (1 for a plain file).
    pub fn n_parts(&self) -> usize {
        self.parts.len()
    }

    /// Tensor infos in global order.
    pub fn tensor_infos(&self) -> impl Iterator<Item = &TensorInfo> {
        self.tensors.iter().map(|(_, t)| t)
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_infos().find(|t| t.name == name)
    }

    /// Zero-copy payload of the tensor named `name`.
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8], GgufError> {
        let (part, t) = self
            .tensors
            .iter()
            .find(|(_, t)| t.name == name)
            .ok_or_else(|| GgufError::Format {
                file: self
                    .parts
                    .first()
                    .map(|p| p.path.clone())
                    .unwrap_or_default(),
                detail: format!("no tensor named `{name}`"),
            })?;
        let file = self.parts.get(*part).ok_or_else(|| {
            GgufError::Split(format!(
                "tensor `{name}` refers to part {part}, which is not loaded"
            ))
        })?;
        file.tensor_bytes(t)
    }
}
