//! Filesystem identities for verification evidence (`docs/verify.md` §3; shared by
//! `minirun-verify` and the runner's verified loads, `docs/runner.md`): every path component is
//! opened with `openat(2)` and `O_NOFOLLOW` (a symbolic link anywhere in the path is refused, not
//! followed), and the open descriptor's `fstat` gives device, inode, size and nanosecond
//! mtime/ctime. The volume UUID comes from `/dev/disk/by-uuid/*` (the link whose block device's
//! `st_rdev` equals the file's `st_dev`). The remount rule is the pure [`still_holds`].

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The identity of one verified file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// `st_size`.
    pub size: u64,
    /// mtime in ns since the epoch.
    pub mtime_ns: i128,
    /// ctime in ns since the epoch.
    pub ctime_ns: i128,
    /// UUID of the filesystem holding the file, when the system names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_uuid: Option<String>,
}

/// Whether `recorded` evidence still describes the object `found` now. Everything must match,
/// except that the device number may change (a remount, a reboot) when both name the same volume
/// UUID and inode, size and both nanosecond times are unchanged (seed 001).
pub fn still_holds(recorded: &Identity, found: &Identity) -> bool {
    let same_object = recorded.ino == found.ino
        && recorded.size == found.size
        && recorded.mtime_ns == found.mtime_ns
        && recorded.ctime_ns == found.ctime_ns;
    if !same_object {
        return false;
    }
    if recorded.dev == found.dev {
        return recorded.volume_uuid == found.volume_uuid
            || recorded.volume_uuid.is_none()
            || found.volume_uuid.is_none();
    }
    matches!((&recorded.volume_uuid, &found.volume_uuid), (Some(a), Some(b)) if a == b)
}

/// Open `rel` (a `/`-separated relative path) under `root` one component at a time with
/// `O_NOFOLLOW`; the last component must be a regular file.
pub fn open_nofollow(root: &Path, rel: &str) -> std::io::Result<File> {
    let c = |s: &[u8]| {
        CString::new(s)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in path"))
    };
    let root_c = c(root.as_os_str().as_bytes())?;
    // SAFETY: a valid C string; the returned descriptor is owned below.
    let fd = unsafe {
        libc::open(
            root_c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor we own.
    let mut dir = unsafe { OwnedFd::from_raw_fd(fd) };
    let parts: Vec<&str> = rel.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() || *part == "." || *part == ".." {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("path component `{part}` refused"),
            ));
        }
        let last = i + 1 == parts.len();
        let flags = libc::O_RDONLY
            | libc::O_NOFOLLOW
            | libc::O_CLOEXEC
            | if last { 0 } else { libc::O_DIRECTORY };
        let name = c(part.as_bytes())?;
        use std::os::fd::AsRawFd;
        // SAFETY: `dir` is an open directory descriptor and `name` a valid C string.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fresh descriptor we own.
        dir = unsafe { OwnedFd::from_raw_fd(fd) };
    }
    let f = File::from(dir);
    if !f.metadata()?.file_type().is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(f)
}

/// The identity of an open file.
pub fn identity(f: &File) -> std::io::Result<Identity> {
    let m = f.metadata()?;
    Ok(Identity {
        dev: m.dev(),
        ino: m.ino(),
        size: m.len(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
        volume_uuid: volume_uuid(m.dev()),
    })
}

/// The UUID `/dev/disk/by-uuid` gives the block device numbered `dev`, if any.
pub fn volume_uuid(dev: u64) -> Option<String> {
    let dir = std::fs::read_dir("/dev/disk/by-uuid").ok()?;
    for e in dir.flatten() {
        if let Ok(m) = std::fs::metadata(e.path()) {
            if m.rdev() == dev {
                return Some(e.file_name().to_string_lossy().into_owned());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(dev: u64, uuid: Option<&str>) -> Identity {
        Identity {
            dev,
            ino: 7,
            size: 100,
            mtime_ns: 1_000_000_001,
            ctime_ns: 2_000_000_002,
            volume_uuid: uuid.map(String::from),
        }
    }

    #[test]
    fn remount_rule() {
        let a = id(1, Some("u-1"));
        assert!(still_holds(&a, &a));
        // Device changed, same volume, same object: a remount.
        assert!(still_holds(&a, &id(9, Some("u-1"))));
        // Device changed and the volume is another one, or unknown on either side.
        assert!(!still_holds(&a, &id(9, Some("u-2"))));
        assert!(!still_holds(&a, &id(9, None)));
        assert!(!still_holds(&id(1, None), &id(9, None)));
        // Any other field moving breaks the evidence, remount or not.
        for f in 0..4 {
            let mut b = id(9, Some("u-1"));
            match f {
                0 => b.ino += 1,
                1 => b.size += 1,
                2 => b.mtime_ns += 1,
                _ => b.ctime_ns += 1,
            }
            assert!(!still_holds(&a, &b), "field {f}");
            let mut c = b.clone();
            c.dev = 1;
            assert!(!still_holds(&a, &c), "field {f} same dev");
        }
        // Same device, another volume UUID reported: not the same filesystem.
        assert!(!still_holds(&a, &id(1, Some("u-2"))));
    }

    #[test]
    fn symlink_component_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("real")).unwrap();
        std::fs::write(d.path().join("real/f"), b"x").unwrap();
        std::os::unix::fs::symlink("real", d.path().join("link")).unwrap();
        std::os::unix::fs::symlink("real/f", d.path().join("lf")).unwrap();
        assert!(open_nofollow(d.path(), "real/f").is_ok());
        assert!(open_nofollow(d.path(), "link/f").is_err());
        assert!(open_nofollow(d.path(), "lf").is_err());
        assert!(open_nofollow(d.path(), "../x").is_err());
    }
}
