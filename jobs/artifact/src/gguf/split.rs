//! The multi-part convention: part names, the greedy part assignment, writing a split, and
//! loading a split as one model — both our form (full metadata in every part) and llama.cpp
//! `gguf-split`'s (metadata only in part 0).
//!
//! Spec: seed 003 §1.6; ../shared/design/formats.md §5.6. Keys: `split.no` (uint16, 0-based),
//! `split.count` (uint16), `split.tensors.count` (int32); names `{stem}-NNNNN-of-MMMMM.gguf`,
//! 1-based, five digits. The reader accepts any non-negative integer type for the two counts
//! (older writers), the writer emits llama.cpp's types.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use super::metadata::Metadata;
use super::reader::{GgufFile, GgufModel};
use super::types::Value;
use super::writer::{write_file, TensorSpec};
use super::{pad, GgufError};

/// `split.no`.
pub const KEY_NO: &str = "split.no";
/// `split.count`.
pub const KEY_COUNT: &str = "split.count";
/// `split.tensors.count`.
pub const KEY_TENSORS: &str = "split.tensors.count";
/// Most parts a split can have (`split.count` is a uint16).
pub const MAX_PARTS: u64 = u16::MAX as u64;

/// `{stem}-NNNNN-of-MMMMM.gguf` for 0-based part `i` of `n`.
pub fn part_name(stem: &str, i: usize, n: usize) -> String {
    format!("{stem}-{:05}-of-{:05}.gguf", i + 1, n)
}

/// If `file_name` is a part name, `(stem, 1-based number, count)`.
pub fn parse_part_name(file_name: &str) -> Option<(String, u64, u64)> {
    let base = file_name.strip_suffix(".gguf")?;
    let (rest, m) = base.rsplit_once("-of-")?;
    let (stem, n) = rest.rsplit_once('-')?;
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(m) || !digits(n) || stem.is_empty() {
        return None;
    }
    Some((stem.to_string(), n.parse().ok()?, m.parse().ok()?))
}

/// Whether `metadata` carries any `split.*` key.
pub fn has_split_keys(metadata: &Metadata) -> bool {
    metadata.kv.iter().any(|(k, _)| k.starts_with("split."))
}

/// Greedy assignment by padded data size, never splitting a tensor (seed 003 §1.6 step 1).
/// Returns, per part, the range of tensor indices. `flag` names the option in the refusal.
pub fn assign(
    sizes: &[(String, u64)],
    alignment: u64,
    max_size: u64,
    flag: &str,
) -> Result<Vec<std::ops::Range<usize>>, GgufError> {
    let mut parts = Vec::new();
    let mut start = 0usize;
    let mut cur: u64 = 0;
    for (i, (name, n)) in sizes.iter().enumerate() {
        let p = pad(*n, alignment)
            .ok_or_else(|| GgufError::Split(format!("tensor '{name}' size overflows")))?;
        if p > max_size {
            return Err(GgufError::Split(format!(
                "tensor '{name}' is {p} bytes, larger than the {max_size}-byte part cap — a tensor cannot be split across parts; raise {flag} (at least {p} bytes) or use a smaller-capable format"
            )));
        }
        if i > start && cur.saturating_add(p) > max_size {
            parts.push(start..i);
            start = i;
            cur = 0;
        }
        cur += p;
    }
    parts.push(start..sizes.len());
    if parts.len() as u64 > MAX_PARTS {
        return Err(GgufError::Split(format!(
            "{} parts exceed the limit of {MAX_PARTS} (split.count is uint16); raise {flag}",
            parts.len()
        )));
    }
    Ok(parts)
}

/// The metadata of part `i` of `n` in our form: the split keys first (llama.cpp's order), then
/// the full model metadata.
pub fn part_metadata(base: &Metadata, i: usize, n: usize, total_tensors: usize) -> Metadata {
    let mut kv = vec![
        (KEY_NO.to_string(), Value::U16(i as u16)),
        (KEY_COUNT.to_string(), Value::U16(n as u16)),
        (KEY_TENSORS.to_string(), Value::I32(total_tensors as i32)),
    ];
    kv.extend(
        base.kv
            .iter()
            .filter(|(k, _)| !k.starts_with("split."))
            .cloned(),
    );
    Metadata { kv }
}

/// Write `tensors` under `out_dir` as `{stem}.gguf` (one part, no `split.*` keys) or as
/// `{stem}-NNNNN-of-MMMMM.gguf` parts. `payload(i)` gives tensor `i`'s bytes (global index).
/// Returns the paths written, in part order.
#[allow(clippy::too_many_arguments)]
pub fn write_split<'p>(
    out_dir: &Path,
    stem: &str,
    metadata: &Metadata,
    tensors: &[TensorSpec],
    alignment: u64,
    max_size: u64,
    flag: &str,
    mut payload: impl FnMut(usize) -> Result<Cow<'p, [u8]>, GgufError>,
) -> Result<Vec<PathBuf>, GgufError> {
    let sizes = tensors
        .iter()
        .map(|t| {
            super::reader::tensor_nbytes(t.ggml_type, &t.dims)
                .map(|n| (t.name.clone(), n))
                .map_err(|e| GgufError::Write(format!("tensor `{}`: {e}", t.name)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let parts = assign(&sizes, alignment, max_size, flag)?;
    // Validate every part's layout before writing any file.
    let metas: Vec<Metadata> = if parts.len() == 1 {
        let mut m = metadata.clone();
        m.kv.retain(|(k, _)| !k.starts_with("split."));
        vec![m]
    } else {
        (0..parts.len())
            .map(|i| part_metadata(metadata, i, parts.len(), tensors.len()))
            .collect()
    };
    for (m, r) in metas.iter().zip(&parts) {
        super::writer::layout(m, &tensors[r.clone()], alignment)?;
    }
    let mut out = Vec::new();
    for (i, (m, r)) in metas.iter().zip(&parts).enumerate() {
        let path = if parts.len() == 1 {
            out_dir.join(format!("{stem}.gguf"))
        } else {
            out_dir.join(part_name(stem, i, parts.len()))
        };
        let base = r.start;
        write_file(&path, m, &tensors[r.clone()], alignment, |j| {
            payload(base + j)
        })?;
        out.push(path);
    }
    Ok(out)
}

fn serr(s: String) -> GgufError {
    GgufError::Split(s)
}

/// Load `path` as a model: a plain file, or the first part of a split (seed 003 §1.6).
pub fn open_model(path: &Path) -> Result<GgufModel, GgufError> {
    let first = GgufFile::open(path)?;
    let shown = path.display().to_string();
    let file_name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let by_name = parse_part_name(&file_name);
    let md = first.header.metadata.clone();
    let count = match md.get(KEY_COUNT) {
        None => {
            if let Some((_, _, m)) = &by_name {
                if *m > 1 {
                    return Err(serr(format!(
                        "`{shown}` is named as part of a {m}-part split but has no split.count"
                    )));
                }
            }
            let tensors = first
                .header
                .tensors
                .iter()
                .map(|t| (0, t.clone()))
                .collect();
            return Ok(GgufModel {
                parts: vec![first],
                tensors,
            });
        }
        Some(_) => md
            .get_uint(KEY_COUNT)
            .map_err(|e| serr(format!("`{shown}`: {e}")))?,
    };
    if count == 0 || count > MAX_PARTS {
        return Err(serr(format!(
            "`{shown}`: split.count {count} is outside 1..={MAX_PARTS}"
        )));
    }
    let no = md
        .get_uint(KEY_NO)
        .map_err(|e| serr(format!("`{shown}`: {e}")))?;
    if no != 0 {
        return Err(serr(format!(
            "`{shown}` is part {} of {count} (split.no = {no}); open the first part (…-00001-of-{count:05}.gguf)",
            no + 1
        )));
    }
    let stem = match &by_name {
        Some((stem, n, m)) => {
            if *m != count {
                return Err(serr(format!(
                    "`{shown}`: the file name says {m} parts but split.count is {count}"
                )));
            }
            if *n != 1 {
                return Err(serr(format!(
                    "`{shown}`: the file name says part {n} but split.no is 0"
                )));
            }
            Some(stem.clone())
        }
        None if count == 1 => None,
        None => {
            return Err(serr(format!(
                "`{shown}` has split.count = {count} but its name is not `<stem>-00001-of-{count:05}.gguf`, so the other parts cannot be located"
            )))
        }
    };
    let dir = path.parent().unwrap_or_else(|| Path::new(""));
    let mut parts = vec![first];
    if let Some(stem) = stem {
        for i in 1..count as usize {
            let p = dir.join(part_name(&stem, i, count as usize));
            if !p.exists() {
                return Err(serr(format!(
                    "part {} of {count} is missing: `{}` does not exist",
                    i + 1,
                    p.display()
                )));
            }
            let f = GgufFile::open(&p)?;
            let pm = &f.header.metadata;
            let ps = p.display().to_string();
            let pno = pm
                .get_uint(KEY_NO)
                .map_err(|e| serr(format!("`{ps}`: {e}")))?;
            if pno != i as u64 {
                return Err(serr(format!(
                    "`{ps}` has split.no = {pno}, expected {i} for its position"
                )));
            }
            let pc = pm
                .get_uint(KEY_COUNT)
                .map_err(|e| serr(format!("`{ps}`: {e}")))?;
            if pc != count {
                return Err(serr(format!(
                    "`{ps}` has split.count = {pc}, but the first part says {count}"
                )));
            }
            parts.push(f);
        }
    }
    let mut tensors = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, p) in parts.iter().enumerate() {
        for t in &p.header.tensors {
            if !seen.insert(t.name.clone()) {
                return Err(serr(format!(
                    "tensor `{}` appears in more than one part (again in `{}`)",
                    t.name,
                    p.path().display()
                )));
            }
            tensors.push((i, t.clone()));
        }
    }
    if let Some(v) = md.get(KEY_TENSORS) {
        let want = v.as_u64();
        if want != Some(tensors.len() as u64) {
            return Err(serr(format!(
                "`{shown}`: split.tensors.count is {}, but the {count} parts hold {} tensors",
                v.summary(),
                tensors.len()
            )));
        }
    }
    Ok(GgufModel { parts, tensors })
}
