//! Where each upstream tensor lives in the artifact: the units' `tensors.json` (docs/repack.md
//! "`tensors.json`") read strictly, indexed by upstream name.

use std::collections::BTreeMap;

pub use artifact::tensor_map::{TensorEntry, TensorMap};

/// How an upstream tensor is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TensorKind {
    /// In a tile container as its `packed`, `scale` or `bias` stream.
    Container { role: String },
    /// A plain stream: the whole file, or its `span`, is the tensor's bytes.
    Plain,
}

/// An upstream tensor in the artifact (no I/O: what `tensors.json` says).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Upstream name.
    pub name: String,
    /// The unit directory.
    pub unit: String,
    /// Artifact-relative path of the file (`layers00/layers.0.attn.wq_a.til`).
    pub path: String,
    pub kind: TensorKind,
    /// Safetensors dtype string as stored upstream.
    pub dtype: String,
    /// Shape as stored upstream.
    pub shape: Vec<u64>,
    /// SHA-256 of the tensor's upstream bytes.
    pub sha256: String,
    /// In a stacked container: the rows `[first, end)` this tensor's matrix occupies.
    pub rows: Option<[u64; 2]>,
    /// In a unit's file of plain streams: the bytes `[start, end)` that are this tensor's.
    pub span: Option<[u64; 2]>,
}

impl TensorInfo {
    /// For the packed stream of a container: the matrix `[rows, cols]` in elements, from the
    /// upstream dtype (`F8_E4M3` one element per byte, `I8`/`U8` MXFP4 two per byte). `None`
    /// where the upstream dtype does not fix it (MLX affine `U32` words: the bit width is a
    /// converter choice).
    pub fn matrix(&self) -> Option<[u64; 2]> {
        let (TensorKind::Container { role }, [rows, c]) = (&self.kind, self.shape.as_slice())
        else {
            return None;
        };
        if role != "packed" {
            return None;
        }
        match self.dtype.as_str() {
            "F8_E4M3" => Some([*rows, *c]),
            "I8" | "U8" => c.checked_mul(2).map(|cols| [*rows, cols]),
            _ => None,
        }
    }
}

/// Every tensor of the artifact by upstream name.
pub(crate) fn index(maps: &[TensorMap]) -> Result<BTreeMap<String, TensorInfo>, (String, String)> {
    let mut out = BTreeMap::new();
    for m in maps {
        for t in &m.tensors {
            let kind = match t.role.as_str() {
                "plain" => TensorKind::Plain,
                "packed" | "scale" | "bias" => TensorKind::Container {
                    role: t.role.clone(),
                },
                other => {
                    return Err((
                        format!("{}/tensors.json", m.unit),
                        format!("tensor `{}` has unknown role `{other}`", t.name),
                    ))
                }
            };
            let info = TensorInfo {
                name: t.name.clone(),
                unit: m.unit.clone(),
                path: format!("{}/{}", m.unit, t.file),
                kind,
                dtype: t.dtype.clone(),
                shape: t.shape.clone(),
                sha256: t.sha256.clone(),
                rows: t.rows,
                span: t.span,
            };
            if out.insert(t.name.clone(), info).is_some() {
                return Err((
                    format!("{}/tensors.json", m.unit),
                    format!("tensor `{}` is listed twice in the artifact", t.name),
                ));
            }
        }
    }
    Ok(out)
}
