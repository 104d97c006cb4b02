//! The generator's tensor plan and shard writer: each planned tensor names its distribution
//! ([`Fill`]); [`write_shard`] lays a shard out in the upstream writer's order (dtype descending,
//! then name — formats.md §1.2), streams each tensor's bytes and hashes the file as it goes.
//!
//! Quantized pairs (`.weight` + `.scale`, `weight_packed` + `weight_scale`, MLX `weight` +
//! `scales` + `biases`) come from one f32 draw keyed by the pair's label, so the parts agree; the
//! part written second is taken from a per-shard cache.

use super::prng::Rng;
use super::quant;
use super::SynthError;
use artifact::dtype::Dtype;
use artifact::safetensors::{self as st, index::ShardIndex, TensorSpec};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

/// Which output of a quantizer a tensor holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The packed codes.
    Codes,
    /// The per-block scales.
    Scales,
    /// MLX affine biases.
    Biases,
}

/// How a tensor's values are drawn.
#[derive(Debug, Clone)]
pub enum Fill {
    /// `mean + std·N(0,1)`, stored in the spec's float dtype (BF16, F32, F16).
    Gauss { mean: f32, std: f32 },
    /// Like `Gauss` for the first `live` elements, exact zeros after (zero-padded tensors).
    ZeroTail { live: u64, mean: f32, std: f32 },
    /// FP8 e4m3 weight / e8m0 128×128 block scales of a `[rows, cols]` Gaussian matrix.
    Fp8 {
        label: String,
        rows: usize,
        cols: usize,
        std: f32,
        part: Part,
    },
    /// MXFP4: packed e2m1 (low nibble first) / e8m0 per-32 scales of `[rows, cols]`.
    Mxfp4 {
        label: String,
        rows: usize,
        cols: usize,
        std: f32,
        part: Part,
    },
    /// MLX affine 8-bit, group `group`: u32 codes / scales / biases of `[rows, cols]`.
    Mlx8 {
        label: String,
        rows: usize,
        cols: usize,
        group: usize,
        std: f32,
        scale_dtype: Dtype,
        part: Part,
    },
    /// Hash-gate table: each row `k` distinct expert ids below `n_experts`, as I64.
    Tid2eid { n_experts: u64 },
}

/// A tensor of the plan.
#[derive(Debug, Clone)]
pub struct Planned {
    /// Name, dtype, shape.
    pub spec: TensorSpec,
    /// Values.
    pub fill: Fill,
}

impl Planned {
    /// A plain float tensor.
    pub fn gauss(
        name: impl Into<String>,
        dtype: Dtype,
        shape: &[u64],
        mean: f32,
        std: f32,
    ) -> Self {
        Self {
            spec: TensorSpec::new(name, dtype, shape),
            fill: Fill::Gauss { mean, std },
        }
    }
}

/// Append `<base>.weight` (F8_E4M3 `[rows, cols]`) and `<base>.scale` (F8_E8M0 blocks).
pub fn push_fp8(out: &mut Vec<Planned>, base: &str, rows: u64, cols: u64) {
    let std = isqrt_f32(cols);
    let (r, c) = (rows as usize, cols as usize);
    let label = base.to_string();
    out.push(Planned {
        spec: TensorSpec::new(format!("{base}.weight"), Dtype::F8E4M3, &[rows, cols]),
        fill: Fill::Fp8 {
            label: label.clone(),
            rows: r,
            cols: c,
            std,
            part: Part::Codes,
        },
    });
    out.push(Planned {
        spec: TensorSpec::new(
            format!("{base}.scale"),
            Dtype::F8E8M0,
            &[rows.div_ceil(128), cols.div_ceil(128)],
        ),
        fill: Fill::Fp8 {
            label,
            rows: r,
            cols: c,
            std,
            part: Part::Scales,
        },
    });
}

/// 1/sqrt(n) without libm: Newton iterations from a power-of-two start at or below the root
/// (deterministic: only basic IEEE operations).
pub fn isqrt_f32(n: u64) -> f32 {
    let x = n.max(1) as f32;
    let mut y = quant::pow2(-((quant::floor_log2(x) + 2) / 2));
    for _ in 0..8 {
        y *= 1.5 - 0.5 * x * y * y;
    }
    y
}

fn encode_floats(dtype: Dtype, vals: &[f32], name: &str) -> Result<Vec<u8>, SynthError> {
    let mut out = Vec::with_capacity(vals.len() * 4);
    match dtype {
        Dtype::F32 => vals
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        Dtype::BF16 => vals
            .iter()
            .for_each(|v| out.extend_from_slice(&half::bf16::from_f32(*v).to_le_bytes())),
        Dtype::F16 => vals
            .iter()
            .for_each(|v| out.extend_from_slice(&half::f16::from_f32(*v).to_le_bytes())),
        other => {
            return Err(SynthError::Plan(format!(
                "tensor `{name}`: cannot fill {other} with floats"
            )))
        }
    }
    Ok(out)
}

fn gauss_vec(rng: &mut Rng, n: usize, mean: f32, std: f32) -> Vec<f32> {
    (0..n).map(|_| mean + std * rng.gauss()).collect()
}

/// Produce one tensor's bytes. `cache` holds the other parts of quantized pairs.
fn produce(
    p: &Planned,
    seed: u64,
    cache: &mut HashMap<(String, u8), Vec<u8>>,
) -> Result<Vec<u8>, SynthError> {
    let name = p.spec.name.as_str();
    let numel = p.spec.shape.iter().product::<u64>() as usize;
    let mut rng = Rng::for_label(seed, name);
    let key = |label: &str, part: Part| (label.to_string(), part as u8);
    match &p.fill {
        Fill::Gauss { mean, std } => {
            encode_floats(p.spec.dtype, &gauss_vec(&mut rng, numel, *mean, *std), name)
        }
        Fill::ZeroTail { live, mean, std } => {
            let mut v = gauss_vec(&mut rng, numel, *mean, *std);
            v.iter_mut().skip(*live as usize).for_each(|x| *x = 0.0);
            encode_floats(p.spec.dtype, &v, name)
        }
        Fill::Tid2eid { n_experts } => {
            let k = p.spec.shape.get(1).copied().unwrap_or(1) as usize;
            let rows = p.spec.shape.first().copied().unwrap_or(0) as usize;
            let e = *n_experts;
            if (k as u64) > e {
                return Err(SynthError::Plan(format!(
                    "tensor `{name}`: top-{k} of {e} experts"
                )));
            }
            let mut out = Vec::with_capacity(rows * k * 8);
            let mut ids: Vec<u64> = (0..e).collect();
            for _ in 0..rows {
                // Partial Fisher–Yates: k distinct ids.
                for i in 0..k {
                    let j = i + rng.below(e - i as u64) as usize;
                    ids.swap(i, j);
                    out.extend_from_slice(&(ids[i] as i64).to_le_bytes());
                }
            }
            Ok(out)
        }
        Fill::Fp8 {
            label,
            rows,
            cols,
            std,
            part,
        } => {
            if let Some(b) = cache.remove(&key(label, *part)) {
                return Ok(b);
            }
            let w = gauss_vec(&mut Rng::for_label(seed, label), rows * cols, 0.0, *std);
            let (codes, scales) = quant::fp8_block_quantize(&w, *rows, *cols);
            Ok(split2(cache, label, *part, codes, scales))
        }
        Fill::Mxfp4 {
            label,
            rows,
            cols,
            std,
            part,
        } => {
            if let Some(b) = cache.remove(&key(label, *part)) {
                return Ok(b);
            }
            let w = gauss_vec(&mut Rng::for_label(seed, label), rows * cols, 0.0, *std);
            let (codes, scales) = quant::mxfp4_quantize(&w, *rows, *cols);
            Ok(split2(cache, label, *part, codes, scales))
        }
        Fill::Mlx8 {
            label,
            rows,
            cols,
            group,
            std,
            scale_dtype,
            part,
        } => {
            if let Some(b) = cache.remove(&key(label, *part)) {
                return Ok(b);
            }
            let w = gauss_vec(&mut Rng::for_label(seed, label), rows * cols, 0.0, *std);
            let (codes, scales, biases) = quant::mlx_affine8_quantize(&w, *rows, *cols, *group);
            let s = encode_floats(*scale_dtype, &scales, name)?;
            let b = encode_floats(*scale_dtype, &biases, name)?;
            let mut parts = [(Part::Codes, codes), (Part::Scales, s), (Part::Biases, b)];
            let mut mine = Vec::new();
            for (pp, bytes) in parts.iter_mut() {
                if *pp == *part {
                    mine = std::mem::take(bytes);
                } else {
                    cache.insert(key(label, *pp), std::mem::take(bytes));
                }
            }
            Ok(mine)
        }
    }
}

fn split2(
    cache: &mut HashMap<(String, u8), Vec<u8>>,
    label: &str,
    part: Part,
    codes: Vec<u8>,
    scales: Vec<u8>,
) -> Vec<u8> {
    match part {
        Part::Codes => {
            cache.insert((label.to_string(), Part::Scales as u8), scales);
            codes
        }
        _ => {
            cache.insert((label.to_string(), Part::Codes as u8), codes);
            scales
        }
    }
}

/// One written file: path relative to the output root, length, SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileDigest {
    /// Path relative to the output directory, `/`-separated.
    pub path: String,
    /// Bytes.
    pub bytes: u64,
    /// Lower-case hex SHA-256.
    pub sha256: String,
}

/// A `model.safetensors.index.json` built as its shards are written.
pub struct IndexBuilder(ShardIndex);

impl Default for IndexBuilder {
    fn default() -> Self {
        IndexBuilder(ShardIndex {
            total_size: 0,
            extra_metadata: vec![],
            weight_map: vec![],
        })
    }
}

impl IndexBuilder {
    /// Record a shard the index names `file`, as [`write_shard`] returned it: its tensors map to
    /// `file`, its data bytes add to the total, its digest goes to `files` and its tensor count to
    /// `count`.
    pub fn add(
        &mut self,
        file: &str,
        (digest, data_len, names): (FileDigest, u64, Vec<String>),
        files: &mut Vec<FileDigest>,
        count: &mut usize,
    ) {
        self.0.total_size += data_len;
        *count += names.len();
        self.0
            .weight_map
            .extend(names.into_iter().map(|t| (t, file.to_owned())));
        files.push(digest);
    }

    /// The index file's bytes.
    pub fn to_json(&self) -> Vec<u8> {
        self.0.to_json()
    }
}

/// How a shard's writer lays it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardStyle {
    /// `safetensors.torch.save_file`: dtype descending then name, `{"format":"pt"}`, header
    /// padded to 8 bytes.
    Torch,
    /// `mx.save_safetensors`: name order, `{"format":"mlx"}`, no padding (formats.md §1.2).
    Mlx,
}

/// Write one safetensors shard at `root/rel` in the torch writer's layout. Returns the digest,
/// the tensors' data bytes (for `metadata.total_size`) and the names in file order.
pub fn write_shard(
    root: &Path,
    rel: &str,
    tensors: Vec<Planned>,
    seed: u64,
) -> Result<(FileDigest, u64, Vec<String>), SynthError> {
    write_shard_styled(root, rel, tensors, seed, ShardStyle::Torch)
}

/// [`write_shard`] in a chosen [`ShardStyle`].
pub fn write_shard_styled(
    root: &Path,
    rel: &str,
    mut tensors: Vec<Planned>,
    seed: u64,
    style: ShardStyle,
) -> Result<(FileDigest, u64, Vec<String>), SynthError> {
    let meta = match style {
        ShardStyle::Torch => {
            tensors.sort_by(|a, b| {
                let by_dtype = b.spec.dtype.rank().cmp(&a.spec.dtype.rank());
                by_dtype.then_with(|| a.spec.name.cmp(&b.spec.name))
            });
            st::pt_metadata()
        }
        ShardStyle::Mlx => {
            tensors.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
            vec![("format".to_string(), "mlx".to_string())]
        }
    };
    let specs: Vec<TensorSpec> = tensors.iter().map(|t| t.spec.clone()).collect();
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|source| SynthError::Io {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    let (prefix, header) =
        st::encode_header_padded(&specs, Some(&meta), style == ShardStyle::Torch).map_err(
            |source| SynthError::Safetensors {
                path: path.clone(),
                source,
            },
        )?;
    let file = std::fs::File::create(&path).map_err(|source| SynthError::Io {
        path: path.clone(),
        source,
    })?;
    let mut w = HashingWriter {
        inner: std::io::BufWriter::with_capacity(1 << 20, file),
        hash: Sha256::new(),
        n: 0,
    };
    let io = |source| SynthError::Io {
        path: path.clone(),
        source,
    };
    w.write_all(&prefix).map_err(io)?;
    let mut cache = HashMap::new();
    for (t, info) in tensors.iter().zip(&header.tensors) {
        let bytes = produce(t, seed, &mut cache)?;
        if bytes.len() as u64 != info.len() {
            return Err(SynthError::Plan(format!(
                "tensor `{}`: produced {} bytes, header says {}",
                t.spec.name,
                bytes.len(),
                info.len()
            )));
        }
        w.write_all(&bytes).map_err(io)?;
    }
    w.inner.flush().map_err(io)?;
    let names = header.tensors.iter().map(|t| t.name.clone()).collect();
    let digest = FileDigest {
        path: rel.to_string(),
        bytes: w.n,
        sha256: hex::encode(w.hash.finalize()),
    };
    Ok((digest, header.data_len, names))
}

/// Write a small text/JSON file and digest it.
pub fn write_bytes(root: &Path, rel: &str, bytes: &[u8]) -> Result<FileDigest, SynthError> {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|source| SynthError::Io {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    std::fs::write(&path, bytes).map_err(|source| SynthError::Io {
        path: path.clone(),
        source,
    })?;
    Ok(FileDigest {
        path: rel.to_string(),
        bytes: bytes.len() as u64,
        sha256: hex::encode(Sha256::digest(bytes)),
    })
}

struct HashingWriter<W: Write> {
    inner: W,
    hash: Sha256,
    n: u64,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let k = self.inner.write(buf)?;
        self.hash.update(&buf[..k]);
        self.n += k as u64;
        Ok(k)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
