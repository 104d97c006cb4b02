//! The DeepSeek V4 adapter's [`WeightSource`] over a [`VerifiedArtifact`] (docs/runner.md
//! "Verified-only execution"): every tensor the adapter asks for — at open, and again for each
//! routed expert a streamed run loads on demand — goes through the artifact's load policy: the
//! rooted `O_NOFOLLOW` open with its identity recheck against the evidence, the file length
//! reconciled with the unit manifest (and, for containers, with the header's `total_bytes`),
//! the requested geometry checked against the header, and tile / stream digests checked only
//! when no evidence is held for this revision (ADR 0013).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use artifact::container::{ContainerReader, DigestCheck};

use crate::artifact::load::{ContainerLoad, Rooted};
use crate::artifact::tensors::{TensorInfo, TensorKind};
use crate::artifact::VerifiedArtifact;
use crate::deepseek::error::V4Error;
use crate::deepseek::source::{Role, Tensor, WeightSource};

/// A weight source sharing a verified artifact's rooted access and tensor table.
pub struct VerifiedSource {
    rooted: Arc<Rooted>,
    tensors: BTreeMap<String, TensorInfo>,
    /// The reader of each container's most recent load (its reads are counted while it lives).
    open: Mutex<BTreeMap<String, Arc<ContainerReader>>>,
    /// Reads of readers a later load of the same file replaced.
    retired_reads: AtomicU64,
}

impl VerifiedSource {
    pub fn new(artifact: &VerifiedArtifact) -> Self {
        let (rooted, tensors) = artifact.shared();
        Self {
            rooted,
            tensors,
            open: Mutex::new(BTreeMap::new()),
            retired_reads: AtomicU64::new(0),
        }
    }

    fn info(&self, name: &str) -> Result<&TensorInfo, V4Error> {
        self.tensors.get(name).ok_or_else(|| V4Error::Tensor {
            name: name.to_owned(),
            detail: "not in any unit's `tensors.json` of the verified artifact".into(),
        })
    }

    fn container(&self, info: &TensorInfo) -> Result<Arc<ContainerReader>, V4Error> {
        // The geometry check needs the packed stream's matrix; a scale or bias stream is
        // opened through its file (same rooted open and length reconciliation).
        let (rows, cols) = match info.matrix() {
            Some([r, c]) => (r, c),
            None => {
                let (f, id) = self.rooted.open(&info.path)?;
                self.rooted.check_manifest_len(&info.path, &id)?;
                let reader = ContainerReader::from_file(f, &self.rooted.root.join(&info.path))
                    .map_err(|source| V4Error::Container {
                        path: info.path.clone(),
                        source,
                    })?;
                let spec = &reader.layout().spec;
                (spec.rows, spec.cols)
            }
        };
        let member = info.rows.filter(|_| info.matrix().is_some());
        let load = ContainerLoad::open(&self.rooted, &info.path, &info.name, [rows, cols], member)?;
        let reader = Arc::new(load.reader);
        let mut open = self
            .open
            .lock()
            .map_err(|_| V4Error::Input("container table poisoned by a panic".into()))?;
        if let Some(old) = open.insert(info.path.clone(), reader.clone()) {
            self.retired_reads
                .fetch_add(old.pread_count(), Ordering::Relaxed);
        }
        Ok(reader)
    }
}

impl WeightSource for VerifiedSource {
    fn tensor(&self, name: &str) -> Result<Tensor, V4Error> {
        let info = self.info(name)?;
        match &info.kind {
            TensorKind::Plain => Ok(Tensor::Plain {
                dtype: info.dtype.clone(),
                shape: info.shape.clone(),
                bytes: crate::artifact::plain_load(&self.rooted, info)?.read()?,
            }),
            TensorKind::Container { role } => {
                let role = match role.as_str() {
                    "packed" => Role::Packed,
                    "scale" => Role::Scale,
                    other => {
                        return Err(V4Error::Tensor {
                            name: name.to_owned(),
                            detail: format!("container role `{other}` is not one V4 reads"),
                        })
                    }
                };
                Ok(Tensor::Tiled {
                    dtype: info.dtype.clone(),
                    shape: info.shape.clone(),
                    role,
                    container: self.container(info)?,
                    rows: info.rows.map(|[a, b]| a..b),
                })
            }
        }
    }

    fn root_file(&self, name: &str) -> Result<Vec<u8>, V4Error> {
        Ok(self.rooted.read_small(name, 64 << 20)?)
    }

    fn tile_reads(&self) -> u64 {
        let live: u64 = self
            .open
            .lock()
            .map(|m| m.values().map(|c| c.pread_count()).sum())
            .unwrap_or(0);
        live + self.retired_reads.load(Ordering::Relaxed)
    }

    fn digest_check(&self) -> DigestCheck {
        self.rooted.digest_check()
    }
}
