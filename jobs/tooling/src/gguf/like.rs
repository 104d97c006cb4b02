//! `minirun-gguf synth --like HEADER`: a GGUF with the metadata and tensor index of another
//! file — its names, dimensions and types, so its tokenizer, architecture keys and quantization
//! mixture — and generated weights. `HEADER` may be the whole file or only its first
//! `data_start` bytes (`minirun-gguf info`'s field): that is how a SmolLM2-shaped model reaches a
//! machine that receives 64 MiB of files (ci/device-prepare.sh carries the 1.7 MB header, and
//! ci/device-check.sh generates the 98 MB model there). The weights are no model's: a
//! splitmix64 stream per tensor (the seed and the tensor's index), 1-D tensors (norms) 1.0 and
//! the rest unit normals × 0.02, encoded in the tensor's own type by this crate's quantizers,
//! so every block holds valid scales. The same header and seed give the same bytes. Spec:
//! docs/gguf.md "synth --like".

use std::borrow::Cow;
use std::path::Path;

use artifact::gguf::quant::{encode, FmaContract};
use artifact::gguf::reader::{parse_index, TensorInfo};
use artifact::gguf::writer::{write_file, TensorSpec};
use artifact::gguf::GgufError;

use super::ops::ToolError;
use super::testmodel::Rng;

/// What [`synth_like`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synthesized {
    /// Tensors written.
    pub tensors: usize,
    /// Bytes of the file.
    pub bytes: u64,
}

/// Writes `out`: `header`'s metadata and tensor index with generated weights (module docs).
pub fn synth_like(header: &Path, out: &Path, seed: u64) -> Result<Synthesized, ToolError> {
    let gguf = |err: GgufError| ToolError::Gguf { cmd: "synth", err };
    let buf = std::fs::read(header).map_err(|e| gguf(GgufError::io("read", header, e)))?;
    let h = parse_index(&buf, header).map_err(gguf)?;
    let specs: Vec<TensorSpec> = h.tensors.iter().map(TensorSpec::from).collect();
    let bytes = write_file(out, &h.metadata, &specs, h.alignment, |i| {
        let t = h.tensors.get(i).ok_or_else(|| {
            GgufError::Write(format!("the writer asked for tensor #{i}, past the index"))
        })?;
        weights(t, seed, i as u64).map(Cow::Owned)
    })
    .map_err(gguf)?;
    Ok(Synthesized {
        tensors: h.tensors.len(),
        bytes,
    })
}

/// Tensor `t`'s generated payload in its own type (the `index`-th tensor of the file).
fn weights(t: &TensorInfo, seed: u64, index: u64) -> Result<Vec<u8>, GgufError> {
    let n = usize::try_from(t.n_elements())
        .map_err(|_| GgufError::Write(format!("{}: too many elements", t.name)))?;
    let row = t.dims.first().copied().unwrap_or(1) as usize;
    let mut rng = Rng(seed ^ index.wrapping_mul(0xd6e8_feb8_6659_fd93));
    let x: Vec<f32> = if t.dims.len() == 1 {
        vec![1.0; n]
    } else {
        (0..n).map(|_| (rng.normal() * 0.02) as f32).collect()
    };
    let mut out = Vec::with_capacity(t.n_bytes as usize);
    encode(t.ggml_type, &x, row, &mut out, FmaContract::Off)
        .map_err(|e| GgufError::Write(format!("tensor `{}` ({}): {e}", t.name, t.ggml_type)))?;
    if out.len() as u64 != t.n_bytes {
        return Err(GgufError::Write(format!(
            "tensor `{}`: {} bytes encoded, the index says {}",
            t.name,
            out.len(),
            t.n_bytes
        )));
    }
    Ok(out)
}
