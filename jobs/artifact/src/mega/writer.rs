//! `mega::writer`: the streaming shard writer and the release writer (docs/mega.md §2-§6; seed
//! `004`, "Shard layout", "Integrity"). Payload bytes are copied verbatim; CRC-32 and SHA-256 of the
//! payload are computed while the bytes stream to disk, then patched into the fixed-length hash
//! values of the already-written metadata section, and the header CRC is computed last.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::layout::{
    align_up, check_alignment, tensor_nbytes, FixedHeader, FIXED_HEADER_LEN, FLAG_FOOTER,
    HEADER_CRC_AT, MAX_DTYPE_LEN, MAX_FOOTER_LEN, MAX_NAME_LEN, MAX_RANK, MAX_SECTIONS_LEN,
    VERSION_MAJOR, VERSION_MINOR,
};
use super::metadata::{check_caller_key, encode_section, Metadata, Section, Value};
use super::MegaError;

/// Payload bytes are streamed in chunks of this size through the hashers.
const CHUNK: usize = 1 << 20;

/// One tensor to write: its bytes are copied verbatim (typically a slice of an mmapped source).
#[derive(Debug, Clone)]
pub struct TensorData<'a> {
    /// Tensor name (UTF-8, 1..=4096 bytes, unique in the release).
    pub name: String,
    /// dtype name (safetensors 0.8 names, `layout::dtype_bits`).
    pub dtype: String,
    /// Shape in elements.
    pub shape: Vec<u64>,
    /// The payload bytes.
    pub bytes: &'a [u8],
}

/// The order of tensors in the directory and the payload (`mega.layout.tensor_order`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TensorOrder {
    /// As given by the source (safetensors: source shards in `weight_map` order, then data offset).
    #[default]
    Source,
    /// Ascending byte order of the tensor name.
    Name,
}

impl TensorOrder {
    /// The metadata value.
    pub fn as_str(self) -> &'static str {
        match self {
            TensorOrder::Source => "source",
            TensorOrder::Name => "name",
        }
    }
}

/// What one written shard holds; the index lists these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardOutcome {
    /// File name inside the release directory.
    pub file: String,
    /// Size of the file in bytes.
    pub nbytes: u64,
    /// Absolute offset of the payload in the file.
    pub payload_offset: u64,
    /// Payload bytes of this shard.
    pub payload_nbytes: u64,
    /// Start of this shard's payload in the release's concatenated payload.
    pub payload_begin: u64,
    /// Tensors in this shard, in directory order.
    pub tensors: Vec<String>,
    /// Elements summed over the shard's tensors.
    pub parameter_count: u64,
    /// `mega.hash.payload.crc32` (8 lowercase hex).
    pub crc32: String,
    /// `mega.hash.payload.sha256` (64 lowercase hex).
    pub sha256: String,
}

/// Position of a shard in its release.
#[derive(Debug, Clone, Copy)]
pub struct ShardPosition {
    /// 0-based ordinal.
    pub ordinal: u64,
    /// Number of shards.
    pub count: u64,
    /// Start of the shard's payload in the release's concatenated payload.
    pub payload_begin: u64,
}

/// Encode the tensor directory; returns the bytes and each tensor's payload-relative offset.
fn encode_directory(
    tensors: &[&TensorData<'_>],
    alignment: u64,
) -> Result<(Vec<u8>, Vec<u64>, u64), MegaError> {
    let mut out = Vec::new();
    let mut offsets = Vec::with_capacity(tensors.len());
    let mut end = 0u64;
    for t in tensors {
        let off = align_up(end, alignment).ok_or_else(|| MegaError::TensorRefused {
            name: t.name.clone(),
            reason: "payload offset overflows".into(),
        })?;
        let len = t.bytes.len() as u64;
        end = off
            .checked_add(len)
            .ok_or_else(|| MegaError::TensorRefused {
                name: t.name.clone(),
                reason: "payload size overflows".into(),
            })?;
        offsets.push(off);
        out.extend_from_slice(&(t.name.len() as u32).to_le_bytes());
        out.extend_from_slice(t.name.as_bytes());
        out.push(t.dtype.len() as u8);
        out.extend_from_slice(t.dtype.as_bytes());
        out.extend_from_slice(&(t.shape.len() as u32).to_le_bytes());
        for d in &t.shape {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
    }
    Ok((out, offsets, end))
}

/// Check one tensor before anything is written.
fn check_tensor(t: &TensorData<'_>) -> Result<(), MegaError> {
    let refuse = |reason: String| MegaError::TensorRefused {
        name: t.name.clone(),
        reason,
    };
    if t.name.is_empty() || t.name.len() > MAX_NAME_LEN {
        return Err(refuse(format!(
            "name length must be 1..={MAX_NAME_LEN} bytes"
        )));
    }
    if t.dtype.is_empty() || t.dtype.len() > MAX_DTYPE_LEN || !t.dtype.is_ascii() {
        return Err(refuse(format!(
            "dtype `{}` is not a short ASCII name",
            t.dtype
        )));
    }
    if t.shape.len() > MAX_RANK as usize {
        return Err(refuse(format!("rank {} exceeds {MAX_RANK}", t.shape.len())));
    }
    let want = tensor_nbytes(&t.dtype, &t.shape).map_err(refuse)?;
    if want != t.bytes.len() as u64 {
        return Err(refuse(format!(
            "{} bytes given, dtype and shape need {want}",
            t.bytes.len()
        )));
    }
    Ok(())
}

/// Everything before the payload: fixed header, metadata, directory, zero padding.
fn build_header(
    md: &Metadata,
    dir: &[u8],
    tensor_count: u64,
    alignment: u64,
    payload_size: u64,
    file: &str,
) -> Result<(FixedHeader, Vec<u8>), MegaError> {
    let meta = encode_section(md)?;
    let sections = (meta.len() + dir.len()) as u64;
    if sections > MAX_SECTIONS_LEN {
        return Err(MegaError::SectionTooLarge {
            file: file.into(),
            section: "metadata + directory",
            len: sections,
            max: MAX_SECTIONS_LEN,
        });
    }
    let dir_end = FIXED_HEADER_LEN + sections;
    let payload_offset =
        align_up(dir_end, alignment).ok_or(MegaError::BadAlignment { value: alignment })?;
    let mut h = FixedHeader {
        major: VERSION_MAJOR,
        minor: VERSION_MINOR,
        flags: 0,
        alignment,
        metadata_count: md.len() as u64,
        tensor_count,
        metadata_offset: FIXED_HEADER_LEN,
        metadata_size: meta.len() as u64,
        directory_offset: FIXED_HEADER_LEN + meta.len() as u64,
        directory_size: dir.len() as u64,
        payload_offset,
        payload_size,
        ..Default::default()
    };
    let mut bytes = Vec::with_capacity(payload_offset as usize);
    bytes.extend_from_slice(&h.encode());
    bytes.extend_from_slice(&meta);
    bytes.extend_from_slice(dir);
    bytes.resize(payload_offset as usize, 0);
    h.header_crc32 = crc32fast::hash(&bytes);
    if let Some(slot) = bytes.get_mut(HEADER_CRC_AT..HEADER_CRC_AT + 4) {
        slot.copy_from_slice(&h.header_crc32.to_le_bytes());
    }
    Ok((h, bytes))
}

/// Write one shard to `path` (through `path.partial`, renamed when complete). `caller_md` must have
/// passed [`check_caller_key`]; the writer adds the computed `mega.*` keys.
pub fn write_shard(
    path: &Path,
    caller_md: &Metadata,
    alignment: u64,
    order: TensorOrder,
    pos: ShardPosition,
    tensors: &[&TensorData<'_>],
) -> Result<ShardOutcome, MegaError> {
    check_alignment(alignment)?;
    let label = path.display().to_string();
    let mut parameter_count = 0u64;
    for t in tensors {
        check_tensor(t)?;
        let n = super::layout::numel(&t.shape).unwrap_or(0);
        parameter_count = parameter_count.saturating_add(n);
    }
    let (dir, offsets, payload_size) = encode_directory(tensors, alignment)?;
    let mut md = caller_md.clone();
    let computed = [
        ("mega.tensor.count", Value::U64(tensors.len() as u64)),
        ("mega.payload.nbytes", Value::U64(payload_size)),
        ("mega.parameter.count", Value::U64(parameter_count)),
        (
            "mega.layout.tensor_order",
            Value::Str(order.as_str().into()),
        ),
        ("mega.shard.ordinal", Value::U64(pos.ordinal)),
        ("mega.shard.count", Value::U64(pos.count)),
        ("mega.shard.payload.begin", Value::U64(pos.payload_begin)),
        (
            "mega.shard.payload.end",
            Value::U64(pos.payload_begin.saturating_add(payload_size)),
        ),
        ("mega.hash.payload.crc32", Value::Str("0".repeat(8))),
        ("mega.hash.payload.sha256", Value::Str("0".repeat(64))),
    ];
    for (k, v) in computed {
        md.insert(k.into(), v);
    }
    let (_, placeholder) = build_header(
        &md,
        &dir,
        tensors.len() as u64,
        alignment,
        payload_size,
        &label,
    )?;

    let partial = path.with_extension("mega.partial");
    let plabel = partial.display().to_string();
    let mut f = File::create(&partial).map_err(|e| MegaError::io("create", &plabel, e))?;
    f.write_all(&placeholder)
        .map_err(|e| MegaError::io("write", &plabel, e))?;
    let mut crc = crc32fast::Hasher::new();
    let mut sha = Sha256::new();
    let mut written = 0u64;
    let zeros = vec![0u8; alignment.min(CHUNK as u64) as usize];
    for (t, &off) in tensors.iter().zip(&offsets) {
        while written < off {
            let n = (off - written).min(zeros.len() as u64) as usize;
            let z = zeros.get(..n).unwrap_or_default();
            crc.update(z);
            sha.update(z);
            f.write_all(z)
                .map_err(|e| MegaError::io("write", &plabel, e))?;
            written += n as u64;
        }
        for chunk in t.bytes.chunks(CHUNK) {
            crc.update(chunk);
            sha.update(chunk);
            f.write_all(chunk)
                .map_err(|e| MegaError::io("write", &plabel, e))?;
        }
        written += t.bytes.len() as u64;
    }
    let crc32 = format!("{:08x}", crc.finalize());
    let sha256 = hex::encode(sha.finalize());
    md.insert("mega.hash.payload.crc32".into(), Value::Str(crc32.clone()));
    md.insert(
        "mega.hash.payload.sha256".into(),
        Value::Str(sha256.clone()),
    );
    let (h, header) = build_header(
        &md,
        &dir,
        tensors.len() as u64,
        alignment,
        payload_size,
        &label,
    )?;
    if header.len() != placeholder.len() {
        return Err(MegaError::BadHeader {
            file: label,
            reason: "header length changed while patching the hashes (writer bug)".into(),
        });
    }
    f.seek(SeekFrom::Start(0))
        .and_then(|_| f.write_all(&header))
        .and_then(|_| f.sync_all())
        .map_err(|e| MegaError::io("write", &plabel, e))?;
    drop(f);
    fs::rename(&partial, path).map_err(|e| MegaError::io("rename into", &label, e))?;
    Ok(ShardOutcome {
        file: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        nbytes: h.file_len(),
        payload_offset: h.payload_offset,
        payload_nbytes: payload_size,
        payload_begin: pos.payload_begin,
        tensors: tensors.iter().map(|t| t.name.clone()).collect(),
        parameter_count,
        crc32,
        sha256,
    })
}

/// Encode a footer overlay region: `u64 count` then entries as in the metadata section.
pub fn encode_footer(md: &Metadata) -> Result<Vec<u8>, MegaError> {
    let mut out = (md.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&encode_section(md)?);
    Ok(out)
}

/// Add (or replace) keys of the footer overlay of an existing shard: only `mega.trust.*` and custom
/// keys. The payload is not touched; the fixed header's footer fields and header CRC are rewritten.
pub fn append_footer(path: &Path, overlay: &Metadata) -> Result<(), MegaError> {
    for (k, v) in overlay {
        check_caller_key(k, v, Section::Footer)?;
    }
    let label = path.display().to_string();
    let mut f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| MegaError::io("open", &label, e))?;
    let header = super::reader::ShardHeader::read(&label, &mut f)?;
    let mut md = header.footer.clone();
    md.extend(overlay.iter().map(|(k, v)| (k.clone(), v.clone())));
    let footer = encode_footer(&md)?;
    if footer.len() as u64 > MAX_FOOTER_LEN {
        return Err(MegaError::SectionTooLarge {
            file: label,
            section: "footer",
            len: footer.len() as u64,
            max: MAX_FOOTER_LEN,
        });
    }
    let mut h = header.fixed.clone();
    let payload_end = h.payload_offset + h.payload_size;
    h.flags |= FLAG_FOOTER;
    h.footer_offset = payload_end;
    h.footer_size = footer.len() as u64;
    h.footer_crc32 = crc32fast::hash(&footer);
    h.header_crc32 = 0;
    // The header CRC covers [0, payload_offset): recompute it over the new fixed header and the
    // unchanged sections that follow it.
    let mut prefix = vec![0u8; (h.payload_offset - FIXED_HEADER_LEN) as usize];
    f.seek(SeekFrom::Start(FIXED_HEADER_LEN))
        .and_then(|_| std::io::Read::read_exact(&mut f, &mut prefix))
        .map_err(|e| MegaError::io("read", &label, e))?;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&h.encode());
    crc.update(&prefix);
    h.header_crc32 = crc.finalize();
    f.set_len(payload_end)
        .and_then(|_| f.seek(SeekFrom::Start(payload_end)))
        .and_then(|_| f.write_all(&footer))
        .and_then(|_| f.seek(SeekFrom::Start(0)))
        .and_then(|_| f.write_all(&h.encode()))
        .and_then(|_| f.sync_all())
        .map_err(|e| MegaError::io("write", &label, e))
}

/// Options of [`write_release`].
#[derive(Debug, Clone)]
pub struct ReleaseOptions {
    /// Payload alignment (power of two, 8..=2^30); default [`super::DEFAULT_ALIGNMENT`].
    pub alignment: u64,
    /// Largest payload per shard; a single tensor larger than this gets a shard of its own.
    pub max_shard_size: Option<u64>,
    /// Directory and payload order.
    pub order: TensorOrder,
    /// Caller metadata written to every shard and (as strings) to the index.
    pub metadata: Metadata,
    /// Caller metadata written to the first shard only (the tokenizer, which can be megabytes).
    pub first_shard_metadata: Metadata,
    /// File stem: `model` gives `model.mega`, or `model-00001-of-00003.mega` + `model.mega.index.json`.
    pub base_name: String,
}

impl Default for ReleaseOptions {
    fn default() -> Self {
        ReleaseOptions {
            alignment: super::DEFAULT_ALIGNMENT,
            max_shard_size: None,
            order: TensorOrder::Source,
            metadata: Metadata::new(),
            first_shard_metadata: Metadata::new(),
            base_name: "model".into(),
        }
    }
}

/// What [`write_release`] wrote.
#[derive(Debug, Clone)]
pub struct ReleaseSummary {
    /// The shards, in ordinal order.
    pub shards: Vec<ShardOutcome>,
    /// The index file name, when more than one shard was written.
    pub index_file: Option<String>,
}

/// Split tensors into shards greedily by payload size (aligned offsets count).
fn plan_shards(tensors: &[&TensorData<'_>], alignment: u64, max: Option<u64>) -> Vec<usize> {
    let mut cuts = vec![0];
    let mut end = 0u64;
    for (i, t) in tensors.iter().enumerate() {
        let start = align_up(end, alignment).unwrap_or(u64::MAX);
        let new_end = start.saturating_add(t.bytes.len() as u64);
        if let Some(max) = max {
            if end > 0 && new_end > max && cuts.last() != Some(&i) {
                cuts.push(i);
                end = t.bytes.len() as u64;
                continue;
            }
        }
        end = new_end;
    }
    cuts
}

/// Write a release into `dir`: one `.mega` file, or several shards plus `.mega.index.json`.
pub fn write_release(
    dir: &Path,
    tensors: &[TensorData<'_>],
    opts: &ReleaseOptions,
) -> Result<ReleaseSummary, MegaError> {
    check_alignment(opts.alignment)?;
    for md in [&opts.metadata, &opts.first_shard_metadata] {
        for (k, v) in md {
            check_caller_key(k, v, Section::Header)?;
        }
    }
    let mut seen = BTreeSet::new();
    for t in tensors {
        check_tensor(t)?;
        if !seen.insert(t.name.as_str()) {
            return Err(MegaError::TensorRefused {
                name: t.name.clone(),
                reason: "duplicate tensor name".into(),
            });
        }
    }
    let mut ordered: Vec<&TensorData<'_>> = tensors.iter().collect();
    if opts.order == TensorOrder::Name {
        ordered.sort_by(|a, b| a.name.cmp(&b.name));
    }
    let cuts = plan_shards(&ordered, opts.alignment, opts.max_shard_size);
    let count = cuts.len() as u64;
    fs::create_dir_all(dir).map_err(|e| MegaError::io("create", dir.display().to_string(), e))?;
    let mut shards = Vec::with_capacity(cuts.len());
    let mut begin = 0u64;
    for (i, &cut) in cuts.iter().enumerate() {
        let end = cuts.get(i + 1).copied().unwrap_or(ordered.len());
        let name = if count == 1 {
            format!("{}.mega", opts.base_name)
        } else {
            format!("{}-{:05}-of-{:05}.mega", opts.base_name, i + 1, count)
        };
        let mut md = opts.metadata.clone();
        if i == 0 {
            md.extend(opts.first_shard_metadata.clone());
        }
        let pos = ShardPosition {
            ordinal: i as u64,
            count,
            payload_begin: begin,
        };
        let part = ordered.get(cut..end).unwrap_or_default();
        let out = write_shard(&dir.join(&name), &md, opts.alignment, opts.order, pos, part)?;
        begin = begin.saturating_add(out.payload_nbytes);
        shards.push(out);
    }
    let index_file = if count > 1 {
        let name = format!("{}.mega.index.json", opts.base_name);
        let index = super::index::Index::from_release(&shards, &opts.metadata, opts.order);
        let bytes = index.to_json_bytes()?;
        let path = dir.join(&name);
        fs::write(&path, bytes)
            .map_err(|e| MegaError::io("write", path.display().to_string(), e))?;
        Some(name)
    } else {
        None
    };
    Ok(ReleaseSummary { shards, index_file })
}
