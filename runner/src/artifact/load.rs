//! The load policy of a verified artifact (seed 000 "A result is bound to filesystem objects" and
//! "Verified tiles are not re-hashed at decode", ADR 0013; docs/runner.md "Load policy").
//!
//! Every load of a file — each time an adapter asks for a tensor, so once per matrix per forward
//! in a streamed run — performs, before a payload byte is read:
//! 1. the **rooted open**: every path component opened with `O_NOFOLLOW` under the artifact root
//!    (`artifact::fsid::open_nofollow`), only for paths of the verified tree;
//! 2. the **identity recheck** of the open descriptor against the evidence (`fsid::still_holds`:
//!    inode, size, nanosecond mtime and ctime, device or volume) — without evidence, against the
//!    identity the file had at its first load in this process;
//! 3. the **length reconciliation**: the file's current length against the unit manifest's byte
//!    count and, for a container, the header's `total_bytes`;
//! 4. for a container, the **requested geometry** (rows × cols) against the header, and for each
//!    tile read its **tile length** against the layout.
//!
//! Exactly one check is conditional: the SHA-256 of each tile (and of a plain stream) is skipped
//! when the artifact holds evidence naming the same repository and revision ([`Authority`]), and
//! computed — and a mismatch refused — otherwise.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use artifact::container::{AlignedSlot, ContainerReader, DigestCheck, Header, Streams, TileView};
use artifact::fsid::{self, Identity};
use sha2::{Digest, Sha256};

use super::error::{io, ArtifactError};

/// Verification authority: evidence of one complete verification of `repo` at `commit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authority {
    pub repo: String,
    pub commit: String,
}

/// The rooted file access of one artifact: which identities files must keep, the manifests'
/// byte counts, and counters that make the policy observable in tests.
pub(crate) struct Rooted {
    pub root: PathBuf,
    pub authority: Option<Authority>,
    /// From the evidence (authority); fixed for the artifact's lifetime.
    pub evidence: BTreeMap<String, Identity>,
    /// Without authority: the identity each file had at its first load.
    pub first_seen: Mutex<BTreeMap<String, Identity>>,
    /// Unit files (`unit/path`) → (bytes, SHA-256) from the unit manifests.
    pub manifest: BTreeMap<String, (u64, String)>,
    pub digest_checks: AtomicU64,
    pub loads: AtomicU64,
}

fn describe(want: &Identity, got: &Identity) -> String {
    let mut d = Vec::new();
    if want.ino != got.ino {
        d.push(format!(
            "inode {} → {} (another filesystem object: copied, moved or replaced)",
            want.ino, got.ino
        ));
    }
    if want.size != got.size {
        d.push(format!("size {} → {}", want.size, got.size));
    }
    if want.mtime_ns != got.mtime_ns {
        d.push(format!("mtime_ns {} → {}", want.mtime_ns, got.mtime_ns));
    }
    if want.ctime_ns != got.ctime_ns {
        d.push(format!("ctime_ns {} → {}", want.ctime_ns, got.ctime_ns));
    }
    if want.dev != got.dev || want.volume_uuid != got.volume_uuid {
        d.push(format!(
            "device {} ({:?}) → {} ({:?})",
            want.dev, want.volume_uuid, got.dev, got.volume_uuid
        ));
    }
    if d.is_empty() {
        "identity changed".into()
    } else {
        d.join(", ")
    }
}

impl Rooted {
    pub fn digest_check(&self) -> DigestCheck {
        if self.authority.is_some() {
            DigestCheck::Skip
        } else {
            DigestCheck::Require
        }
    }

    /// Steps 1–2: the rooted open and the identity recheck.
    pub fn open(&self, rel: &str) -> Result<(File, Identity), ArtifactError> {
        let want = match &self.authority {
            Some(a) => Some(self.evidence.get(rel).cloned().ok_or_else(|| {
                ArtifactError::NotInEvidence {
                    path: rel.to_owned(),
                    commit: a.commit.clone(),
                }
            })?),
            None => lock(&self.first_seen).get(rel).cloned(),
        };
        let f = fsid::open_nofollow(&self.root, rel).map_err(|source| ArtifactError::Open {
            path: rel.to_owned(),
            root: self.root.display().to_string(),
            source,
        })?;
        let now = fsid::identity(&f).map_err(io("stat", rel))?;
        match want {
            Some(want) if !fsid::still_holds(&want, &now) => {
                let (against, fix) = match &self.authority {
                    Some(a) => (
                        "its verification evidence",
                        format!(
                            "this is not the file that was verified (the directory was copied or moved, or the file modified, since it was verified; evidence never carries over to other filesystem objects); run `minirun-verify check {} --revision {} --dir {}`: it re-hashes the local bytes against the hub's pinned tree, downloads nothing that matches, and records new evidence (`--repair` downloads again only what differs)",
                            a.repo,
                            a.commit,
                            self.root.display()
                        ),
                    ),
                    None => (
                        "the file first loaded in this run",
                        "the artifact changed while it was in use".to_owned(),
                    ),
                };
                return Err(ArtifactError::Modified {
                    path: rel.to_owned(),
                    against,
                    detail: describe(&want, &now),
                    fix,
                });
            }
            Some(_) => {}
            None => {
                lock(&self.first_seen).insert(rel.to_owned(), now.clone());
            }
        }
        self.loads.fetch_add(1, Ordering::Relaxed);
        Ok((f, now))
    }

    /// A small root or metadata file read whole after the rooted open (at most `max` bytes).
    pub fn read_small(&self, rel: &str, max: u64) -> Result<Vec<u8>, ArtifactError> {
        let (f, id) = self.open(rel)?;
        if id.size > max {
            return Err(ArtifactError::Malformed {
                path: rel.to_owned(),
                detail: format!("{} bytes, more than the {max} read for this file", id.size),
            });
        }
        let mut buf = vec![0u8; usize::try_from(id.size).unwrap_or(0)];
        f.read_exact_at(&mut buf, 0).map_err(io("read", rel))?;
        Ok(buf)
    }

    /// Step 3 (manifest half): the current length against the unit manifest.
    pub fn check_manifest_len(&self, rel: &str, id: &Identity) -> Result<(), ArtifactError> {
        let (size, _) = self
            .manifest
            .get(rel)
            .ok_or_else(|| ArtifactError::Malformed {
                path: rel.to_owned(),
                detail: "not listed in its unit's `manifest.json`".into(),
            })?;
        if *size != id.size {
            return Err(ArtifactError::Length {
                path: rel.to_owned(),
                what: "the unit manifest",
                actual: id.size,
                expected: *size,
            });
        }
        Ok(())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// One load of a tile container: the open descriptor (rooted, identity rechecked, length
/// reconciled with the manifest and the header, geometry checked) and its parsed header.
pub struct ContainerLoad<'a> {
    pub(crate) rooted: &'a Rooted,
    pub(crate) reader: ContainerReader,
    pub(crate) path: String,
    pub(crate) tensor: String,
    pub(crate) preads: u64,
    /// The tiles of the tensor's matrix: all of them, or a stack member's.
    pub(crate) tiles: std::ops::Range<u64>,
    /// The matrix's first row in the container (0, or a stack member's first).
    pub(crate) first_row: u64,
}

/// The tiles rows `[a, b)` of a container of `spec` occupy, when they start and end on tile
/// boundaries (a stack member always does: `plan::stack`).
pub fn member_tiles(
    spec: &artifact::container::ContainerSpec,
    [a, b]: [u64; 2],
) -> Option<std::ops::Range<u64>> {
    let rpt = spec.rows_per_tile.max(1);
    (a < b && b <= spec.rows && a % rpt == 0 && (b % rpt == 0 || b == spec.rows))
        .then(|| a / rpt..b.div_ceil(rpt))
}

impl<'a> ContainerLoad<'a> {
    /// Steps 1–4 for `rel`, whose header must describe a `rows` × `cols` matrix — or, for a
    /// stack member (`member`: its rows in the container), hold one at those rows.
    pub(crate) fn open(
        rooted: &'a Rooted,
        rel: &str,
        tensor: &str,
        [rows, cols]: [u64; 2],
        member: Option<[u64; 2]>,
    ) -> Result<Self, ArtifactError> {
        let (f, id) = rooted.open(rel)?;
        rooted.check_manifest_len(rel, &id)?;
        // `from_file` refuses a length other than the header's `total_bytes`.
        let reader = ContainerReader::from_file(f, &rooted.root.join(rel))?;
        let spec = &reader.layout().spec;
        let [a, b] = member.unwrap_or([0, spec.rows]);
        let tiles = member_tiles(spec, [a, b]).filter(|_| b - a == rows && spec.cols == cols);
        let Some(tiles) = tiles else {
            return Err(ArtifactError::Tensor {
                name: tensor.to_owned(),
                detail: format!(
                    "requested a {rows} × {cols} matrix at rows [{a}, {b}), the header of `{rel}` says {} × {} in tiles of {} rows",
                    spec.rows, spec.cols, spec.rows_per_tile
                ),
            });
        };
        Ok(Self {
            rooted,
            reader,
            path: rel.to_owned(),
            tensor: tensor.to_owned(),
            preads: 0,
            tiles,
            first_row: a,
        })
    }

    /// The tiles holding this tensor's matrix (all the container's, or a stack member's).
    pub fn tiles(&self) -> std::ops::Range<u64> {
        self.tiles.clone()
    }

    /// The matrix's first row in the container and its row count.
    pub fn rows(&self) -> (u64, u64) {
        let spec = &self.reader.layout().spec;
        let end = (self.tiles.end * spec.rows_per_tile).min(spec.rows);
        (self.first_row, end - self.first_row)
    }

    /// The artifact-relative path.
    pub fn path(&self) -> &str {
        &self.path
    }
    /// The upstream name of the packed tensor.
    pub fn tensor(&self) -> &str {
        &self.tensor
    }
    pub fn header(&self) -> &Header {
        self.reader.header()
    }
    /// Tile reads issued through this load (one `pread` each).
    pub fn preads(&self) -> u64 {
        self.preads
    }
    /// A slot large enough for every tile of this container.
    pub fn slot(&self) -> AlignedSlot {
        AlignedSlot::for_layout(self.reader.layout())
    }

    /// Reads tile `index` with one `pread` after checking its length against the layout; its
    /// SHA-256 is checked unless the artifact holds authority for this revision.
    pub fn read_tile<'s>(
        &mut self,
        index: u64,
        slot: &'s mut AlignedSlot,
    ) -> Result<TileView<'s>, ArtifactError> {
        let layout = self.reader.layout();
        let tile = layout
            .tile(index)
            .filter(|_| self.tiles.contains(&index))
            .ok_or_else(|| ArtifactError::Tensor {
                name: self.tensor.clone(),
                detail: format!(
                    "tile {index} requested, the matrix is tiles {:?} of `{}`",
                    self.tiles, self.path
                ),
            })?;
        let end = tile.offset.checked_add(tile.shape.len());
        if end.is_none_or(|e| e > layout.total_bytes) || tile.shape.len() > slot.capacity() as u64 {
            return Err(ArtifactError::Tensor {
                name: self.tensor.clone(),
                detail: format!(
                    "tile {index} of `{}` ({} bytes at {}) does not fit the file or the slot",
                    self.path,
                    tile.shape.len(),
                    tile.offset
                ),
            });
        }
        let check = self.rooted.digest_check();
        self.preads += 1;
        if check != DigestCheck::Skip {
            self.rooted.digest_checks.fetch_add(1, Ordering::Relaxed);
        }
        Ok(self.reader.read_tile(index, slot, check)?)
    }

    /// The matrix's tiles' payloads reassembled (the resident upload), one `pread` per tile.
    pub fn reassemble(&mut self) -> Result<Streams, ArtifactError> {
        let mut slot = self.slot();
        let (mut p, mut s, mut b) = (Vec::new(), Vec::new(), Vec::new());
        let has_bias = self.reader.layout().spec.bias_dtype.is_some();
        for i in self.tiles() {
            let v = self.read_tile(i, &mut slot)?;
            p.extend_from_slice(v.packed);
            s.extend_from_slice(v.scale);
            if let Some(x) = v.bias {
                b.extend_from_slice(x);
            }
        }
        Ok(Streams {
            packed: p,
            scale: s,
            bias: has_bias.then_some(b),
        })
    }
}

/// One load of a plain stream: the whole file, or its span of a unit's file of plain streams, is
/// the upstream tensor's bytes.
pub struct PlainLoad<'a> {
    pub(crate) rooted: &'a Rooted,
    pub(crate) file: File,
    pub path: String,
    pub name: String,
    /// Safetensors dtype string (`BF16`, `F32`, …).
    pub dtype: String,
    pub shape: Vec<u64>,
    /// The tensor's byte range in the file (the whole file, or its span).
    pub range: std::ops::Range<u64>,
    pub(crate) sha256: String,
}

impl PlainLoad<'_> {
    /// The tensor's bytes (one `pread`); their SHA-256 is checked against `tensors.json` unless
    /// the artifact holds authority for this revision.
    pub fn read(&self) -> Result<Vec<u8>, ArtifactError> {
        let len = usize::try_from(self.range.end - self.range.start).map_err(|_| {
            ArtifactError::Tensor {
                name: self.name.clone(),
                detail: "too large for this platform".into(),
            }
        })?;
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, self.range.start)
            .map_err(io("read", &self.path))?;
        if self.rooted.authority.is_none() {
            self.rooted.digest_checks.fetch_add(1, Ordering::Relaxed);
            let got = hex::encode(Sha256::digest(&buf));
            if got != self.sha256 {
                return Err(ArtifactError::Digest {
                    path: self.path.clone(),
                    what: "tensors.json",
                    actual: got,
                    expected: self.sha256.clone(),
                });
            }
        }
        Ok(buf)
    }
}
