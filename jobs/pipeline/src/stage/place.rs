//! Placing a release file in staging: a hard link where release and staging share a filesystem,
//! a copy where they do not (`docs/publish.md` §1, "Linked staging").
//!
//! A link saves the write, not the read: the staged file is hashed once through one descriptor
//! and compared with the digest the repack journaled (and the gate read back). Because the link
//! moves the shared inode's ctime, the repack journal's identity of that file is refreshed with
//! the identity just proven to hold its digest ([`refresh_repack_journals`]); otherwise the next
//! `minirun-repack` would find every unit's identities moved and redo it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

use ledger::{FileRecord, Journal, LedgerError, UnitLock};
use sha2::Digest as _;

use super::{io_err, StageError, StageReport};
use crate::work::WorkDir;

/// How files reach staging in this run: linked until a link is refused, then copied.
#[derive(Debug, Default)]
pub(crate) struct Placement {
    /// Why files are copied instead of linked (`None`: linking).
    pub copy_reason: Option<String>,
    /// Release files hashed with their identity this run, by unit: the repack journals' records
    /// of them are refreshed at the end ([`refresh_repack_journals`]).
    pub hashed: BTreeMap<String, Vec<(String, FileRecord)>>,
}

impl Placement {
    /// The plan of a dry run: link when the release and the staging tree's nearest existing
    /// ancestor are on one device.
    pub fn predict(release: &Path, staging: &Path) -> Placement {
        use std::os::unix::fs::MetadataExt as _;
        let dev = |p: &Path| {
            p.ancestors()
                .find_map(|a| std::fs::metadata(a).ok())
                .map(|m| m.dev())
        };
        let copy_reason = (dev(release) != dev(staging))
            .then(|| "the release and staging are on different filesystems".to_owned());
        Placement {
            copy_reason,
            hashed: BTreeMap::new(),
        }
    }

    /// Tell [`crate::space`] what this run writes under `staging`: the release files not yet
    /// there when copying; only the journal and directory entries when linking.
    pub fn expect_space(&self, files: &BTreeMap<String, std::path::PathBuf>, staging: &Path) {
        let need = match self.copy_reason {
            Some(_) => {
                let bytes: u64 = files
                    .values()
                    .filter_map(|p| p.metadata().ok())
                    .map(|m| m.len())
                    .sum();
                bytes.saturating_sub(crate::space::allocated(staging))
            }
            None => 0,
        };
        crate::space::expect(staging, need, "stage");
    }

    /// Note a release file `rel` (`unit/file`) hashed with its identity.
    pub fn note_hashed(&mut self, rel: &str, rec: &FileRecord) {
        if let Some((unit, file)) = rel.split_once('/') {
            self.hashed
                .entry(unit.to_owned())
                .or_default()
                .push((file.to_owned(), rec.clone()));
        }
    }
}

/// Put release file `src` at `dst` (through a temporary name and a rename), link or copy, and
/// return the staged file's record, checked against `known` when a digest was journaled, and
/// whether it is a link (then its identity is the release file's too).
pub(crate) fn place(
    src: &Path,
    dst: &Path,
    rel: &str,
    known: Option<&str>,
    how: &mut Placement,
    report: &mut StageReport,
) -> Result<(FileRecord, bool), StageError> {
    let dir = dst.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    let name = dst
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!("{}stage-{name}", ledger::TEMP_MARKER));
    let linked = how.copy_reason.is_none() && link(src, &tmp, how)?;
    let rec = if linked {
        std::fs::rename(&tmp, dst).map_err(io_err("rename into place", dst))?;
        let rec = FileRecord::hash(dst)?;
        how.note_hashed(rel, &rec);
        report.linked.push(rel.to_owned());
        rec
    } else {
        let (size, sha256) = copy_hashed(src, &tmp)?;
        std::fs::rename(&tmp, dst).map_err(io_err("rename into place", dst))?;
        report.copied.push(rel.to_owned());
        report.bytes_written += size;
        FileRecord {
            size,
            sha256,
            identity: ledger::FileIdentity::capture(dst)?,
        }
    };
    match known {
        Some(d) if d != rec.sha256 => Err(StageError::ReleaseChanged {
            path: rel.to_owned(),
            expected: d.to_owned(),
            found: rec.sha256,
        }),
        _ => Ok((rec, linked)),
    }
}

/// Hard-link `src` at `tmp` (a stale `tmp` from a killed run is replaced). `Ok(false)` when the
/// filesystem refuses links between the two (the reason kept in `how`): copy instead.
fn link(src: &Path, tmp: &Path, how: &mut Placement) -> Result<bool, StageError> {
    match std::fs::remove_file(tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(io_err("remove", tmp)(e));
        }
        _ => {}
    }
    let Err(e) = std::fs::hard_link(src, tmp) else {
        return Ok(true);
    };
    let reason = match e.raw_os_error() {
        Some(libc::EXDEV) => "the release and staging are on different filesystems",
        Some(libc::EPERM | libc::EOPNOTSUPP) => "the filesystem does not allow hard links",
        Some(libc::EMLINK) => "a release file has the most links its filesystem allows",
        _ => return Err(io_err("link", tmp)(e)),
    };
    tracing::info!(reason, "staging copies instead of linking");
    how.copy_reason = Some(reason.to_owned());
    Ok(false)
}

/// Copy `src` to `tmp`, hashing what was written; synced before it is renamed into place.
fn copy_hashed(src: &Path, tmp: &Path) -> Result<(u64, String), StageError> {
    let mut r = std::fs::File::open(src).map_err(io_err("open", src))?;
    let mut w = std::fs::File::create(tmp).map_err(io_err("create", tmp))?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n_total = 0u64;
    loop {
        let n = r.read(&mut buf).map_err(io_err("read", src))?;
        if n == 0 {
            break;
        }
        let chunk = buf.get(..n).unwrap_or(&[]);
        h.update(chunk);
        w.write_all(chunk).map_err(io_err("write", tmp))?;
        n_total += n as u64;
    }
    w.sync_all().map_err(io_err("sync", tmp))?;
    Ok((n_total, hex::encode(h.finalize())))
}

/// Give each unit's repack journal the identities this run proved for its release files (same
/// size and digest as recorded; [`Journal::refresh_identity`]), under the unit's repack lock. A
/// unit whose lock another process holds is left alone: its journal is only stale, and the next
/// repack of it re-hashes or redoes it. Returns the number of records refreshed.
pub(crate) fn refresh_repack_journals(
    work: &WorkDir,
    hashed: &BTreeMap<String, Vec<(String, FileRecord)>>,
) -> Result<usize, StageError> {
    let ledger_dir = work.ledger();
    let mut refreshed = 0;
    for (unit, files) in hashed {
        let _lock = match UnitLock::acquire(&ledger_dir, crate::repack::STAGE, unit) {
            Ok(l) => l,
            Err(LedgerError::Busy { .. }) => {
                tracing::warn!(unit, "repack holds the unit; its journal is not refreshed");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let Some(mut j) = Journal::load(&ledger_dir, crate::repack::STAGE, unit)? else {
            continue;
        };
        if j.status != ledger::Status::Done {
            continue;
        }
        let n = files
            .iter()
            .filter(|(file, rec)| j.refresh_identity(file, rec))
            .count();
        if n > 0 {
            j.store(&ledger_dir)?;
            refreshed += n;
        }
    }
    Ok(refreshed)
}
