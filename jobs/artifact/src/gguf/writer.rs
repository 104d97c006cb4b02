//! The one GGUF writer: emits exactly the bytes [`super::reader::parse_header`] reads back —
//! llama.cpp's `gguf_write_to_file` layout (header, metadata in the given order, tensor index,
//! zero padding to the alignment, payloads each padded to the alignment).
//!
//! Spec: seed 003 §1 "The writer contract"; ../shared/design/formats.md §5.1. The writer
//! validates before it writes a byte: names unique and < 64 bytes, 1..=4 dims each ≥ 1,
//! `ne[0]` a multiple of the block size, `general.alignment` (if present) equal to the alignment
//! used; while writing, each payload must be exactly the tensor's byte size.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::metadata::Metadata;
use super::reader::{tensor_nbytes, TensorInfo};
use super::types::{GgmlType, Value};
use super::{pad, GgufError, MAX_DIMS, MAX_NAME_LEN};

/// `GGUF_DEFAULT_ALIGNMENT`.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// A tensor to write: name, `ne` as it should appear in the index, and type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    /// Name (< 64 bytes, unique).
    pub name: String,
    /// `ne[0..n_dims]` written verbatim (a copy keeps its source's n_dims; a fresh tensor passes
    /// the dims with trailing 1s dropped, `ggml_n_dims`).
    pub dims: Vec<u64>,
    /// Element type.
    pub ggml_type: GgmlType,
}

impl From<&TensorInfo> for TensorSpec {
    fn from(t: &TensorInfo) -> TensorSpec {
        TensorSpec {
            name: t.name.clone(),
            dims: t.dims.clone(),
            ggml_type: t.ggml_type,
        }
    }
}

/// The validated layout: each tensor's byte size and offset in the data section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `(n_bytes, offset)` per tensor, in order.
    pub entries: Vec<(u64, u64)>,
    /// Data-section size (Σ padded sizes).
    pub data_size: u64,
}

fn werr(s: String) -> GgufError {
    GgufError::Write(s)
}

/// Validate `tensors` and compute offsets (seed 003 §1.4).
pub fn layout(
    metadata: &Metadata,
    tensors: &[TensorSpec],
    alignment: u64,
) -> Result<Layout, GgufError> {
    if !alignment.is_power_of_two() || alignment > u64::from(u32::MAX) {
        return Err(werr(format!(
            "alignment {alignment} is not a uint32 power of two"
        )));
    }
    match metadata.get("general.alignment") {
        None => {}
        Some(Value::U32(a)) if u64::from(*a) == alignment => {}
        Some(v) => {
            return Err(werr(format!(
                "metadata general.alignment = {} disagrees with the alignment {alignment} being written",
                v.summary()
            )))
        }
    }
    let mut keys = std::collections::HashSet::new();
    for (k, v) in &metadata.kv {
        if !keys.insert(k.as_str()) {
            return Err(werr(format!("duplicate metadata key `{k}`")));
        }
        if let Value::NumArray { elem, count, raw } = v {
            let size = elem.scalar_size().unwrap_or(0) as u64;
            if size == 0 || count.checked_mul(size) != Some(raw.len() as u64) {
                return Err(werr(format!(
                    "metadata key `{k}`: array of {count} {} holds {} bytes",
                    elem.name(),
                    raw.len()
                )));
            }
        }
    }
    let mut names = std::collections::HashSet::new();
    let mut entries = Vec::with_capacity(tensors.len());
    let mut off: u64 = 0;
    for t in tensors {
        if t.name.len() >= MAX_NAME_LEN {
            return Err(werr(format!(
                "tensor name `{}` is {} bytes; it must be shorter than {MAX_NAME_LEN} (GGML_MAX_NAME)",
                t.name,
                t.name.len()
            )));
        }
        if !names.insert(t.name.as_str()) {
            return Err(werr(format!("duplicate tensor name `{}`", t.name)));
        }
        if t.dims.is_empty() || t.dims.len() > MAX_DIMS || t.dims.contains(&0) {
            return Err(werr(format!(
                "tensor `{}` has dims {:?}; 1..={MAX_DIMS} dimensions, each at least 1",
                t.name, t.dims
            )));
        }
        let n = tensor_nbytes(t.ggml_type, &t.dims)
            .map_err(|e| werr(format!("tensor `{}`: {e}", t.name)))?;
        entries.push((n, off));
        off = pad(n, alignment)
            .and_then(|p| off.checked_add(p))
            .ok_or_else(|| werr(format!("data size overflows at `{}`", t.name)))?;
    }
    Ok(Layout {
        entries,
        data_size: off,
    })
}

/// Encode one metadata value (type id first, as in a KV record).
fn encode_value(out: &mut Vec<u8>, v: &Value) {
    out.extend_from_slice(&(v.value_type() as u32).to_le_bytes());
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::String(s) => put_str(out, s),
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::StringArray(items) => {
            out.extend_from_slice(&(super::ValueType::String as u32).to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for s in items {
                put_str(out, s);
            }
        }
        Value::NumArray { elem, count, raw } => {
            out.extend_from_slice(&(*elem as u32).to_le_bytes());
            out.extend_from_slice(&count.to_le_bytes());
            out.extend_from_slice(raw);
        }
    }
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s);
}

/// The header bytes up to (and including) the padding before the data section.
pub fn encode_header(
    metadata: &Metadata,
    tensors: &[TensorSpec],
    layout: &Layout,
    alignment: u64,
) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(super::reader::MAGIC);
    out.extend_from_slice(&super::reader::VERSION.to_le_bytes());
    out.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&(metadata.kv.len() as u64).to_le_bytes());
    for (k, v) in &metadata.kv {
        put_str(&mut out, k.as_bytes());
        encode_value(&mut out, v);
    }
    for (t, (_, off)) in tensors.iter().zip(&layout.entries) {
        put_str(&mut out, t.name.as_bytes());
        out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&t.ggml_type.id().to_le_bytes());
        out.extend_from_slice(&off.to_le_bytes());
    }
    let padded = pad(out.len() as u64, alignment).unwrap_or(out.len() as u64);
    out.resize(padded as usize, 0);
    out
}

/// Write a GGUF to `out`. `payload(i)` is asked for tensor `i`'s bytes, one tensor at a time in
/// order; a short or long payload is refused before anything of it is written. Returns the
/// bytes written.
pub fn write_to<'p, W: Write>(
    out: &mut W,
    metadata: &Metadata,
    tensors: &[TensorSpec],
    alignment: u64,
    mut payload: impl FnMut(usize) -> Result<Cow<'p, [u8]>, GgufError>,
) -> Result<u64, GgufError> {
    let lay = layout(metadata, tensors, alignment)?;
    let head = encode_header(metadata, tensors, &lay, alignment);
    let io = |e| GgufError::Write(format!("write failed: {e}"));
    out.write_all(&head).map_err(io)?;
    let mut written = head.len() as u64;
    let zeros = vec![0u8; alignment as usize];
    for (i, (t, (n, _))) in tensors.iter().zip(&lay.entries).enumerate() {
        let bytes = payload(i)?;
        if bytes.len() as u64 != *n {
            return Err(werr(format!(
                "tensor `{}` ({} {:?}) needs exactly {n} bytes, the provider gave {} ({})",
                t.name,
                t.ggml_type,
                t.dims,
                bytes.len(),
                if (bytes.len() as u64) < *n {
                    "short"
                } else {
                    "long"
                }
            )));
        }
        out.write_all(&bytes).map_err(io)?;
        let p = pad(*n, alignment).unwrap_or(*n) - n;
        out.write_all(&zeros[..p as usize]).map_err(io)?;
        written += n + p;
    }
    out.flush().map_err(io)?;
    Ok(written)
}

/// Write a GGUF file atomically: into `PATH.partial` beside it, then rename over `path`.
pub fn write_file<'p>(
    path: &Path,
    metadata: &Metadata,
    tensors: &[TensorSpec],
    alignment: u64,
    payload: impl FnMut(usize) -> Result<Cow<'p, [u8]>, GgufError>,
) -> Result<u64, GgufError> {
    // Validate first so a refused file leaves nothing behind.
    layout(metadata, tensors, alignment)?;
    let mut tmp = PathBuf::from(path);
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".partial");
    tmp.set_file_name(name);
    let f = File::create(&tmp).map_err(|e| GgufError::io("create", &tmp, e))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let res = write_to(&mut w, metadata, tensors, alignment, payload).and_then(|n| {
        let f = w
            .into_inner()
            .map_err(|e| GgufError::io("write", &tmp, e.into_error()))?;
        f.sync_all().map_err(|e| GgufError::io("write", &tmp, e))?;
        Ok(n)
    });
    match res {
        Ok(n) => {
            std::fs::rename(&tmp, path).map_err(|e| GgufError::io("rename", path, e))?;
            Ok(n)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Write a GGUF into memory (tests, small files).
pub fn write_vec<'p>(
    metadata: &Metadata,
    tensors: &[TensorSpec],
    alignment: u64,
    payload: impl FnMut(usize) -> Result<Cow<'p, [u8]>, GgufError>,
) -> Result<Vec<u8>, GgufError> {
    let mut v = Vec::new();
    write_to(&mut v, metadata, tensors, alignment, payload)?;
    Ok(v)
}
