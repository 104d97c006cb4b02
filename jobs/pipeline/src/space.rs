//! Disk space (issue 52 item 4, docs/publish.md "A full disk"): what a stage expects to write and
//! where, so that a run stopped by a full disk (ENOSPC) says how much it needs, and the figures an
//! operator needs to size a work directory (free and allocated bytes).
//!
//! A stage states its expectation once it knows it ([`expect`]); a failure whose cause chain holds
//! ENOSPC or EDQUOT ([`is_full`]) is printed by `cli::finish` with [`full_hint`] instead of the
//! error's own hint. Every stage writes through temporary files and journals replaced atomically,
//! so what a full disk stops is only unproven work: the next run, once space is freed, resumes
//! from the journals and chunk logs.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What the running stage expects to write.
#[derive(Debug, Clone)]
struct Expectation {
    dir: PathBuf,
    bytes: u64,
    /// `bytes` is a lower bound (repack: containers add alignment padding to the fetched bytes).
    at_least: bool,
    what: String,
}

static EXPECTED: Mutex<Option<Expectation>> = Mutex::new(None);

/// The running stage expects to write about `bytes` under `dir` for `what` (e.g. "fetch of 3
/// pending units"). Logged; a warning when the filesystem has less free now.
pub fn expect(dir: &Path, bytes: u64, what: impl Into<String>) {
    set(dir, bytes, false, what.into());
}

/// [`expect`] with `bytes` a lower bound.
pub fn expect_at_least(dir: &Path, bytes: u64, what: impl Into<String>) {
    set(dir, bytes, true, what.into());
}

fn set(dir: &Path, bytes: u64, at_least: bool, what: String) {
    let free = free_bytes(dir);
    match free {
        Some(f) if f < bytes => tracing::warn!(
            dir = %dir.display(),
            need = bytes,
            free = f,
            "{what}: needs about {} under `{}`, {} free: the disk may fill before it ends",
            human(bytes),
            dir.display(),
            human(f)
        ),
        _ => tracing::debug!(dir = %dir.display(), need = bytes, "{what}"),
    }
    if let Ok(mut e) = EXPECTED.lock() {
        *e = Some(Expectation {
            dir: dir.to_path_buf(),
            bytes,
            at_least,
            what,
        });
    }
}

/// Bytes an unprivileged writer may still use on the filesystem holding `path` (its nearest
/// existing ancestor), from `statvfs(3)`.
pub fn free_bytes(path: &Path) -> Option<u64> {
    let dir = path.ancestors().find(|a| a.exists())?;
    fs2::available_space(dir).ok()
}

/// Bytes allocated on disk to the files under `dir` (hard links counted once, sparse holes not at
/// all): what `du` says, and what a stage has already written there.
pub fn allocated(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    let mut seen = std::collections::BTreeSet::new();
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                stack.push(e.path());
            } else if seen.insert((m.dev(), m.ino())) {
                total += m.blocks() * 512;
            }
        }
    }
    total
}

/// Whether `err` or any error in its cause chain is a full disk (ENOSPC) or an exhausted quota
/// (EDQUOT).
pub fn is_full(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if matches!(io.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) {
                return true;
            }
        }
        cur = e.source();
    }
    false
}

/// The hint printed for a full disk: where, how much the stage expected to write, how much is
/// free now, and that the next run resumes.
pub fn full_hint() -> String {
    let exp = EXPECTED.lock().ok().and_then(|e| e.clone());
    let Some(exp) = exp else {
        return "the disk is full: this stage writes only journals and reports (kilobytes to a few MB); free some space, then re-run: proven work is kept".into();
    };
    let free = free_bytes(&exp.dir).map_or_else(|| "unknown".into(), human);
    if exp.bytes == 0 {
        return format!(
            "the disk holding `{}` is full ({free} free now): {} writes only journals, reports and directory entries there (kilobytes to a few MB); free some space, then re-run: proven work is kept",
            exp.dir.display(),
            exp.what
        );
    }
    format!(
        "the disk holding `{}` is full ({free} free now): {} needs {} {} there in all; free that much (or give `--work-dir` a larger disk), then re-run: proven work is kept and nothing torn is trusted",
        exp.dir.display(),
        exp.what,
        if exp.at_least { "at least" } else { "about" },
        human(exp.bytes)
    )
}

/// `bytes` for people: "1.23 GB (1234567890 B)".
pub fn human(bytes: u64) -> String {
    const UNITS: [(&str, f64); 3] = [("GB", 1e9), ("MB", 1e6), ("kB", 1e3)];
    let b = bytes as f64;
    match UNITS.iter().find(|(_, s)| b >= *s) {
        Some((u, s)) => format!("{:.2} {u} ({bytes} B)", b / s),
        None => format!("{bytes} B"),
    }
}

/// Journals, locks, chunk logs and a unit record of one unit at most: what a unit adds to a work
/// directory besides its payload (measured at most ~650 B a tensor; `docs/plan-tool.md`).
pub const LEDGER_BYTES_PER_UNIT: u64 = 64 << 10;

/// What a unit keeps in a disk-budgeted window's work directory once its bytes are reclaimed
/// (docs/publish.md §12): its journals and its unit record, whose regular files (manifest and
/// tensor map) are carried base64 — twice the release's metadata allowance, and the ledger's.
/// Measured 2026-12-07: the records of the real-size V4 case were 2,650,855 B for 3 units.
pub fn unit_kept(ru: &crate::plan::ResolvedUnit) -> u64 {
    LEDGER_BYTES_PER_UNIT + 2 * crate::repack::planned_metadata_bytes(ru)
}

/// What one unit of `upstream` holds in a work directory at its peak: `(fetched, release)` bytes
/// — its fetched ranges and headers, and its planned release files. With
/// [`LEDGER_BYTES_PER_UNIT`] this is the unit's share of a slice's peak (`minirun-plan slices`)
/// and of a disk-budgeted fetch's reservation.
pub fn unit_peak(
    ru: &crate::plan::ResolvedUnit,
    upstream: &crate::fetch::discover::Upstream,
) -> (u64, u64) {
    let fetched = crate::fetch::unit_bytes(ru, |s, f| upstream.file(s, f).map(|uf| &uf.header));
    let release = crate::repack::planned_unit_bytes(ru, |t| upstream.tensor_bytes(t));
    (fetched, release)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot write `x`")]
    struct Wrap(#[source] std::io::Error);

    #[test]
    fn a_full_disk_is_found_anywhere_in_the_chain() {
        let full = Wrap(std::io::Error::from_raw_os_error(libc::ENOSPC));
        assert!(is_full(&full));
        let quota = std::io::Error::from_raw_os_error(libc::EDQUOT);
        assert!(is_full(&quota));
        let other = Wrap(std::io::Error::from_raw_os_error(libc::EACCES));
        assert!(!is_full(&other));
    }

    #[test]
    fn allocated_counts_links_once_and_holes_not_at_all() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a"), vec![1u8; 64 << 10]).unwrap();
        std::fs::hard_link(d.path().join("a"), d.path().join("b")).unwrap();
        let sparse = std::fs::File::create(d.path().join("sparse")).unwrap();
        sparse.set_len(1 << 30).unwrap();
        let n = allocated(d.path());
        assert!((64 << 10..(64 << 10) + 16384).contains(&n), "{n}");
        assert!(free_bytes(d.path()).is_some_and(|f| f > 0));
        assert_eq!(human(1_234_567_890), "1.23 GB (1234567890 B)");
        assert_eq!(human(999), "999 B");
    }
}
