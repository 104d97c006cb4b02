//! Filesystem identities for verification evidence (`docs/verify.md` §3; shared by
//! `minirun-verify` and the runner's verified loads, `docs/runner.md`): every path component is
//! opened with `openat(2)` and `O_NOFOLLOW` (a symbolic link anywhere in the path is refused, not
//! followed), and the open descriptor's `fstat` gives device, inode, size and nanosecond
//! mtime/ctime. The volume UUID comes from `/dev/disk/by-uuid/*` (the link whose block device's
//! `st_rdev` equals the file's `st_dev`). The remount rule is the pure [`still_holds`].

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
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

fn c_name(s: &[u8]) -> std::io::Result<CString> {
    CString::new(s)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in path"))
}

fn component(part: &str) -> std::io::Result<CString> {
    if part.is_empty() || part == "." || part == ".." {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("path component `{part}` refused"),
        ));
    }
    c_name(part.as_bytes())
}

/// `openat(dir, name, flags, mode)` as an owned descriptor.
fn openat(dir: BorrowedFd<'_>, name: &CString, flags: i32, mode: u32) -> std::io::Result<OwnedFd> {
    // SAFETY: `dir` is an open descriptor and `name` a valid C string.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, mode) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The directory `rel_dir` (`/`-separated, `""` for `root` itself) under `root`, opened one
/// component at a time with `O_NOFOLLOW`; with `create`, missing components are made (0o755).
pub fn open_dir_nofollow(root: &Path, rel_dir: &str, create: bool) -> std::io::Result<OwnedFd> {
    let root_c = c_name(root.as_os_str().as_bytes())?;
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
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_DIRECTORY;
    for part in rel_dir.split('/').filter(|p| !p.is_empty()) {
        let name = component(part)?;
        dir = match openat(dir.as_fd(), &name, flags, 0) {
            Err(e) if create && e.kind() == std::io::ErrorKind::NotFound => {
                // SAFETY: `dir` is an open directory descriptor and `name` a valid C string.
                let r = unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o755) };
                if r < 0 {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::AlreadyExists {
                        return Err(e);
                    }
                }
                openat(dir.as_fd(), &name, flags, 0)?
            }
            other => other?,
        };
    }
    Ok(dir)
}

/// Open `rel` (a `/`-separated relative path) under `root` one component at a time with
/// `O_NOFOLLOW`; the last component must be a regular file.
pub fn open_nofollow(root: &Path, rel: &str) -> std::io::Result<File> {
    let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    let dir = open_dir_nofollow(root, dir, false)?;
    open_file_at(dir.as_fd(), name, libc::O_RDONLY, 0)
}

/// `name` in `dir` opened with `O_NOFOLLOW | flags`; anything but a regular file is refused.
fn open_file_at(dir: BorrowedFd<'_>, name: &str, flags: i32, mode: u32) -> std::io::Result<File> {
    let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let f = File::from(openat(dir, &component(name)?, flags, mode)?);
    if !f.metadata()?.file_type().is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(f)
}

/// Open `name` in the directory `dir` for reading and writing, creating it (0o644) when absent
/// and keeping what it holds; a symbolic link or anything but a regular file is refused.
pub fn open_rw_at(dir: BorrowedFd<'_>, name: &str) -> std::io::Result<File> {
    open_file_at(dir, name, libc::O_RDWR | libc::O_CREAT, 0o644)
}

/// `renameat(dir, from, dir, to)`: replace `to` by `from` within one directory.
pub fn rename_at(dir: BorrowedFd<'_>, from: &str, to: &str) -> std::io::Result<()> {
    let (f, t) = (component(from)?, component(to)?);
    // SAFETY: `dir` is an open directory descriptor; both names are valid C strings.
    let r = unsafe { libc::renameat(dir.as_raw_fd(), f.as_ptr(), dir.as_raw_fd(), t.as_ptr()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
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

    #[test]
    fn rooted_writes_create_rename_and_refuse_links() {
        use std::io::{Read, Write};
        let d = tempfile::tempdir().unwrap();
        let dir = open_dir_nofollow(d.path(), "a/b", true).unwrap();
        let mut f = open_rw_at(dir.as_fd(), "x.part").unwrap();
        f.write_all(b"hello").unwrap();
        // Re-opened, the bytes are kept (a resumable part file).
        let mut again = open_rw_at(dir.as_fd(), "x.part").unwrap();
        let mut got = String::new();
        again.read_to_string(&mut got).unwrap();
        assert_eq!(got, "hello");
        rename_at(dir.as_fd(), "x.part", "x").unwrap();
        assert_eq!(std::fs::read(d.path().join("a/b/x")).unwrap(), b"hello");
        // The descriptor still names the renamed file.
        assert_eq!(
            identity(&f).unwrap().ino,
            identity(&open_nofollow(d.path(), "a/b/x").unwrap())
                .unwrap()
                .ino
        );
        std::os::unix::fs::symlink("/etc/hostname", d.path().join("a/b/l")).unwrap();
        assert!(open_rw_at(dir.as_fd(), "l").is_err());
        std::os::unix::fs::symlink("b", d.path().join("a/lb")).unwrap();
        assert!(open_dir_nofollow(d.path(), "a/lb", true).is_err());
        assert!(open_dir_nofollow(d.path(), "a/../a", true).is_err());
    }
}
