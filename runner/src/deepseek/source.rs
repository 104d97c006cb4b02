//! Where the V4 adapter reads its tensors: the [`WeightSource`] trait (one upstream tensor name →
//! a plain stream or a tile container handle) and [`ReleaseDir`], which reads a Minirun release
//! directory directly: `release/<unit>/tensors.json` maps each upstream tensor to a `.bin` plain
//! stream or a `.til` container (docs/repack.md "A unit directory", docs/container.md §9).
//!
//! The integrator's verified-artifact registry implements the same trait over held evidence; this
//! reader trusts the directory (it checks lengths and, for containers, tile digests when recorded).

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use artifact::container::{ContainerReader, DigestCheck};
use artifact::tensor_map::{TensorEntry as Entry, TensorMap};

use super::error::V4Error;

/// The container stream an upstream tensor forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Packed,
    Scale,
}

/// One upstream tensor as the artifact stores it.
pub enum Tensor {
    /// The whole upstream bytes, verbatim.
    Plain {
        dtype: String,
        shape: Vec<u64>,
        bytes: Vec<u8>,
    },
    /// One stream of a tile container (the weight is `Packed`, its scale grid `Scale`); in a
    /// stacked container, `rows` are the container rows the matrix occupies.
    Tiled {
        dtype: String,
        shape: Vec<u64>,
        role: Role,
        container: Arc<ContainerReader>,
        rows: Option<Range<u64>>,
    },
}

impl Tensor {
    pub fn dtype(&self) -> &str {
        match self {
            Tensor::Plain { dtype, .. } | Tensor::Tiled { dtype, .. } => dtype,
        }
    }
    pub fn shape(&self) -> &[u64] {
        match self {
            Tensor::Plain { shape, .. } | Tensor::Tiled { shape, .. } => shape,
        }
    }
}

/// Anything that hands out upstream tensors by name and root files (`config.json`) by path.
pub trait WeightSource: Send + Sync {
    /// The tensor called `name` upstream (`layers.3.attn.wq_a.weight`).
    fn tensor(&self, name: &str) -> Result<Tensor, V4Error>;
    /// A release-root file such as `config.json`.
    fn root_file(&self, name: &str) -> Result<Vec<u8>, V4Error>;
    /// Total tile `pread`s issued by the containers this source opened.
    fn tile_reads(&self) -> u64;
    /// Whether tile digests are checked when a container is read whole: recorded ones by
    /// default; a verified artifact holding evidence for its revision skips them (ADR 0013),
    /// one without evidence requires them.
    fn digest_check(&self) -> DigestCheck {
        DigestCheck::IfPresent
    }
}

/// A release directory read in place.
pub struct ReleaseDir {
    root: PathBuf,
    entries: HashMap<String, (PathBuf, Entry)>,
    containers: Mutex<HashMap<PathBuf, Arc<ContainerReader>>>,
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> V4Error {
    let path = path.display().to_string();
    move |source| V4Error::Io { what, path, source }
}

/// Elements × bytes per element of a safetensors dtype string, if the dtype has whole bytes.
pub fn byte_len(dtype: &str, shape: &[u64]) -> Option<u64> {
    let size = match dtype {
        "F32" | "I32" | "U32" => 4,
        "F16" | "BF16" | "I16" | "U16" => 2,
        "F8_E4M3" | "F8_E8M0" | "I8" | "U8" | "BOOL" => 1,
        "F64" | "I64" | "U64" => 8,
        _ => return None,
    };
    shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))?
        .checked_mul(size)
}

impl ReleaseDir {
    /// Reads every `<unit>/tensors.json` under `root` (the directory holding `config.json`).
    pub fn open(root: &Path) -> Result<Self, V4Error> {
        let mut entries = HashMap::new();
        let dir = std::fs::read_dir(root).map_err(io("listing release directory", root))?;
        let mut units: Vec<PathBuf> = dir
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("tensors.json").is_file())
            .collect();
        units.sort();
        if units.is_empty() {
            return Err(V4Error::Input(format!(
                "`{}` holds no `<unit>/tensors.json`: pass the release directory written by `minirun-repack`",
                root.display()
            )));
        }
        for unit in units {
            let path = unit.join("tensors.json");
            let text = std::fs::read(&path).map_err(io("reading", &path))?;
            let map = TensorMap::parse(&text).map_err(|e| V4Error::Json {
                what: "a unit tensor map",
                path: path.display().to_string(),
                detail: e.to_string(),
            })?;
            for e in map.tensors {
                if let Some((other, _)) = entries.insert(e.name.clone(), (unit.clone(), e.clone()))
                {
                    return Err(V4Error::Tensor {
                        name: e.name,
                        detail: format!(
                            "listed by both `{}` and `{}`",
                            other.display(),
                            unit.display()
                        ),
                    });
                }
            }
        }
        Ok(Self {
            root: root.to_owned(),
            entries,
            containers: Mutex::new(HashMap::new()),
        })
    }

    fn container(&self, path: &Path) -> Result<Arc<ContainerReader>, V4Error> {
        let mut open = self
            .containers
            .lock()
            .map_err(|_| V4Error::Input("container table poisoned by a panic".into()))?;
        if let Some(c) = open.get(path) {
            return Ok(c.clone());
        }
        let c = Arc::new(
            ContainerReader::open(path).map_err(|source| V4Error::Container {
                path: path.display().to_string(),
                source,
            })?,
        );
        open.insert(path.to_owned(), c.clone());
        Ok(c)
    }
}

impl WeightSource for ReleaseDir {
    fn tensor(&self, name: &str) -> Result<Tensor, V4Error> {
        let (unit, e) = self.entries.get(name).ok_or_else(|| V4Error::Tensor {
            name: name.to_owned(),
            detail: format!(
                "not listed by any tensors.json under `{}`",
                self.root.display()
            ),
        })?;
        if e.file.contains('/') || e.file.contains("..") {
            return Err(V4Error::Tensor {
                name: name.to_owned(),
                detail: format!("file `{}` leaves its unit directory", e.file),
            });
        }
        let path = unit.join(&e.file);
        let role = match e.role.as_str() {
            "plain" => None,
            "packed" => Some(Role::Packed),
            "scale" => Some(Role::Scale),
            other => {
                return Err(V4Error::Tensor {
                    name: name.to_owned(),
                    detail: format!("role `{other}` is not one this adapter reads"),
                })
            }
        };
        match role {
            None => {
                let want = byte_len(&e.dtype, &e.shape).ok_or_else(|| V4Error::Tensor {
                    name: name.to_owned(),
                    detail: format!("dtype `{}` shape {:?} has no byte length", e.dtype, e.shape),
                })?;
                let meta = std::fs::metadata(&path).map_err(io("reading metadata of", &path))?;
                // The whole file, or the tensor's span of the unit's file of plain streams.
                let [a, b] = e.span.unwrap_or([0, meta.len()]);
                if b.checked_sub(a) != Some(want) || b > meta.len() {
                    return Err(V4Error::Tensor {
                        name: name.to_owned(),
                        detail: format!(
                            "bytes [{a}, {b}) of `{}` ({} bytes) for {} {:?}, which needs {want}",
                            path.display(),
                            meta.len(),
                            e.dtype,
                            e.shape
                        ),
                    });
                }
                let mut bytes = vec![0u8; usize::try_from(want).unwrap_or(0)];
                std::fs::File::open(&path)
                    .and_then(|f| std::os::unix::fs::FileExt::read_exact_at(&f, &mut bytes, a))
                    .map_err(io("reading", &path))?;
                Ok(Tensor::Plain {
                    dtype: e.dtype.clone(),
                    shape: e.shape.clone(),
                    bytes,
                })
            }
            Some(role) => Ok(Tensor::Tiled {
                dtype: e.dtype.clone(),
                shape: e.shape.clone(),
                role,
                container: self.container(&path)?,
                rows: e.rows.map(|[a, b]| a..b),
            }),
        }
    }

    fn root_file(&self, name: &str) -> Result<Vec<u8>, V4Error> {
        let path = self.root.join(name);
        std::fs::read(&path).map_err(io("reading", &path))
    }

    fn tile_reads(&self) -> u64 {
        self.containers
            .lock()
            .map(|m| m.values().map(|c| c.pread_count()).sum())
            .unwrap_or(0)
    }
}

/// Reads the tiles of a matrix back into its whole packed and scale streams (digests checked
/// when the container records them): every tile, or those of a stack member's `rows`.
pub fn whole_streams(
    c: &ContainerReader,
    rows: Option<&Range<u64>>,
    check: DigestCheck,
) -> Result<(Vec<u8>, Vec<u8>), V4Error> {
    let err = |source| V4Error::Container {
        path: c.path().display().to_string(),
        source,
    };
    let Some(r) = rows else {
        let s = c.reassemble(check).map_err(err)?;
        return Ok((s.packed, s.scale));
    };
    let spec = &c.layout().spec;
    let tiles = crate::artifact::load::member_tiles(spec, [r.start, r.end]).ok_or_else(|| {
        V4Error::Tensor {
            name: spec.name.clone(),
            detail: format!(
                "rows {r:?} are not whole tiles of `{}` ({} rows in tiles of {})",
                c.path().display(),
                spec.rows,
                spec.rows_per_tile
            ),
        }
    })?;
    let mut slot = artifact::container::AlignedSlot::for_layout(c.layout());
    let (mut p, mut s) = (Vec::new(), Vec::new());
    for i in tiles {
        let v = c.read_tile(i, &mut slot, check).map_err(err)?;
        p.extend_from_slice(v.packed);
        s.extend_from_slice(v.scale);
    }
    Ok((p, s))
}
