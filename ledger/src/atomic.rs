//! Atomic replacement of a small file: write a temp file in the same directory, fsync it, rename
//! it over the target, fsync the directory (`ARCHITECTURE.md` §4; cargo's `paths::write_atomic`).
//!
//! A crash at any instant leaves either the old file or the new one at the target path, never a
//! mix: the rename is atomic within one filesystem, and the temp file is in the target's own
//! directory so the rename never crosses filesystems. A crash before the rename leaves a temp
//! file whose name carries [`TEMP_MARKER`]; nothing ever reads such a file (a temp name is never
//! reused either), so it is harmless and may be deleted at any time.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{LedgerError, Result};

/// The part of a temp file's name that marks it as an unfinished atomic write:
/// `.<target name>.minirun-tmp-<pid>-<n>`.
pub const TEMP_MARKER: &str = ".minirun-tmp-";

/// Whether `name` (a file name, no directory) is a temp file of an atomic write that has not
/// finished — a crash left it, or a writer is still at work: never a file of the tree it sits in.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(TEMP_MARKER)
}

static COUNTER: AtomicU64 = AtomicU64::new(0);
const MAX_TEMP_ATTEMPTS: u32 = 10_000;

/// Replaces `path` with `bytes` atomically and durably (see the module documentation).
///
/// The parent directory must exist. On error the target is untouched and the temp file is
/// removed when possible.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| LedgerError::BadName {
            what: "relative path",
            name: path.display().to_string(),
            reason: "it has no file name",
        })?
        .to_string_lossy()
        .into_owned();
    let (tmp_path, mut tmp) = create_temp(dir, &name)?;
    let result = (|| {
        tmp.write_all(bytes)
            .map_err(LedgerError::io("write temp file", &tmp_path))?;
        tmp.sync_all()
            .map_err(LedgerError::io("fsync temp file", &tmp_path))?;
        drop(tmp);
        fs::rename(&tmp_path, path).map_err(LedgerError::io("rename into place", path))?;
        sync_dir(dir)
    })();
    if result.is_err() {
        // Best effort: the temp file is never read, so leaving it is harmless, only untidy.
        let _ = fs::remove_file(&tmp_path);
    }
    result
}

fn create_temp(dir: &Path, name: &str) -> Result<(std::path::PathBuf, File)> {
    let pid = std::process::id();
    // Leftovers of earlier processes with the same pid are skipped; a directory holding this many
    // of them is not one to keep writing into.
    for _ in 0..MAX_TEMP_ATTEMPTS {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp_path = dir.join(format!(".{name}{TEMP_MARKER}{pid}-{n}"));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp_path)
        {
            Ok(f) => return Ok((tmp_path, f)),
            // A leftover from an earlier process with the same pid: never reuse it, take the next n.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(LedgerError::io("create temp file", tmp_path)(e)),
        }
    }
    Err(LedgerError::io(
        "create temp file",
        dir.join(format!(".{name}{TEMP_MARKER}{pid}-*")),
    )(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "every candidate temp name is taken; delete the leftover temp files",
    )))
}

/// Fsyncs a directory so a rename or a file creation inside it is durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(LedgerError::io("fsync directory", dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("j.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two, longer").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two, longer");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("j.json")]);
    }

    #[test]
    fn the_temp_files_it_makes_are_recognised_and_nothing_else_is() {
        let dir = tempfile::tempdir().unwrap();
        let (tmp, _) = create_temp(dir.path(), "LICENSE").unwrap();
        let name = tmp.file_name().unwrap().to_string_lossy().into_owned();
        assert!(is_temp_name(&name), "{name}");
        for other in [
            "LICENSE",
            ".gitattributes",
            "minirun-tmp-1-0",
            "a.minirun-tmp-1-0",
        ] {
            assert!(!is_temp_name(other), "{other}");
        }
    }

    #[test]
    fn missing_directory_is_a_named_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nope").join("j.json");
        let err = write_atomic(&p, b"x").unwrap_err().to_string();
        assert!(err.contains("create temp file"), "{err}");
        assert!(err.contains("nope"), "{err}");
    }
}
