//! `FileIdentity`: the filesystem object a journal's digest was computed over.
//!
//! The seed (`000_…txt`, "A result is bound to filesystem objects, not to paths") binds evidence to
//! device, inode, size and the nanosecond modification and status-change times. A same-size
//! replacement whose mtime was restored (`touch -r`) still gets a new inode or a new ctime, which
//! userspace cannot set, so comparing all five fields detects it without reading a byte.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{LedgerError, Result};

/// Device, inode, size and nanosecond mtime/ctime of one regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileIdentity {
    /// `st_dev`: the mounted filesystem's device number.
    pub dev: u64,
    /// `st_ino`: the inode number.
    pub ino: u64,
    /// `st_size` in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// Status-change time, nanoseconds since the Unix epoch.
    pub ctime_ns: i64,
}

fn ns(path: &Path, secs: i64, nsec: i64) -> Result<i64> {
    secs.checked_mul(1_000_000_000)
        .and_then(|s| s.checked_add(nsec))
        .ok_or_else(|| LedgerError::TimestampOutOfRange {
            path: path.to_owned(),
        })
}

impl FileIdentity {
    /// The identity described by `meta` (of the file at `path`, named in errors).
    pub fn from_metadata(path: &Path, meta: &Metadata) -> Result<Self> {
        Ok(FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: ns(path, meta.mtime(), meta.mtime_nsec())?,
            ctime_ns: ns(path, meta.ctime(), meta.ctime_nsec())?,
        })
    }

    /// Captures the identity of the file at `path` without following a final symbolic link.
    /// Returns `Ok(None)` when nothing is there.
    pub fn capture(path: &Path) -> Result<Option<Self>> {
        match std::fs::symlink_metadata(path) {
            Ok(meta) => Self::from_metadata(path, &meta).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(LedgerError::io("stat", path)(e)),
        }
    }

    /// Captures the identity of an open file (the object the descriptor holds, whatever its path
    /// now names).
    pub fn of_file(path: &Path, file: &std::fs::File) -> Result<Self> {
        let meta = file.metadata().map_err(LedgerError::io("stat", path))?;
        Self::from_metadata(path, &meta)
    }

    /// The first field that differs between `self` (recorded) and `other` (found), by name.
    pub fn first_difference(&self, other: &FileIdentity) -> Option<&'static str> {
        if self.dev != other.dev {
            Some("dev")
        } else if self.ino != other.ino {
            Some("ino")
        } else if self.size != other.size {
            Some("size")
        } else if self.mtime_ns != other.mtime_ns {
            Some("mtime_ns")
        } else if self.ctime_ns != other.ctime_ns {
            Some("ctime_ns")
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn same_file_same_identity_and_rewrite_changes_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"hello").unwrap();
        let a = FileIdentity::capture(&p).unwrap().unwrap();
        let b = FileIdentity::capture(&p).unwrap().unwrap();
        assert_eq!(a, b);
        assert_eq!(a.size, 5);
        // Same size, content rewritten in place: ctime moves even if mtime were restored.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.write_all(b"HELLO").unwrap();
        drop(f);
        let c = FileIdentity::capture(&p).unwrap().unwrap();
        assert_eq!(c.size, 5);
        assert!(matches!(
            a.first_difference(&c),
            Some("mtime_ns" | "ctime_ns")
        ));
    }

    #[test]
    fn absent_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(FileIdentity::capture(&dir.path().join("x")).unwrap(), None);
    }
}
