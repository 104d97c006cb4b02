//! How repack puts bytes on the drive.
//!
//! - A container assembled in memory is written with `O_DIRECT` from a block-aligned buffer: the
//!   bytes go from that buffer to the device without the kernel's copy into the page cache, which
//!   is most of a buffered writer's CPU on this class of machine (docs/repack.md, "Performance").
//!   Where the filesystem refuses `O_DIRECT` (tmpfs, some FUSE and network filesystems: `EINVAL`
//!   at open or at the first write) the same bytes are written buffered. Either way durability
//!   comes from the unit's group commit (`syncfs`), which also flushes the device's write cache.
//! - A plain stream is copied with `copy_file_range` (reflink or an in-kernel copy) where the
//!   filesystem allows, else through a buffer.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use super::{io_err, RepackError};

/// Alignment of an `O_DIRECT` buffer, file offset and length: covers 512-byte and 4 KiB logical
/// blocks. Container sizes are multiples of the 16 KiB container alignment, so always qualify.
pub const DIRECT_ALIGN: usize = 4096;

/// Files shorter than this are written buffered. An `O_DIRECT` write that extends a new file costs
/// ext4 a fixed amount of journal work per file, about what the page-cache copy of 1 MiB costs;
/// A/B on this machine (docs/repack.md): 35k containers of ~100 KiB took 9.4–9.8 s buffered and
/// 11.3–13.5 s direct, 3.2k containers of 1.1 MiB took 4.8–5.6 s buffered and 3.4–3.7 s direct.
pub const DIRECT_MIN_BYTES: usize = 1 << 20;

/// A reusable byte buffer whose usable slice starts on a [`DIRECT_ALIGN`] boundary (safe code:
/// a slightly larger `Vec` and an offset into it).
#[derive(Default)]
pub struct AlignedBuf {
    raw: Vec<u8>,
}

impl AlignedBuf {
    /// The first `len` bytes of the aligned region, growing the buffer if needed. Bytes from an
    /// earlier use are not cleared: the caller overwrites all `len` of them.
    pub fn slice_mut(&mut self, len: usize) -> &mut [u8] {
        if self.raw.len() < len + DIRECT_ALIGN {
            self.raw = vec![0u8; len + DIRECT_ALIGN];
        }
        let off = self.raw.as_ptr().align_offset(DIRECT_ALIGN);
        // `align_offset` is < DIRECT_ALIGN for a u8 pointer, and raw has DIRECT_ALIGN spare bytes.
        self.raw.get_mut(off..off + len).unwrap_or(&mut [])
    }
}

/// How [`write_whole`] wrote a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// `O_DIRECT`, bypassing the page cache.
    Direct,
    /// Through the page cache (the filesystem refused `O_DIRECT`, or the bytes are not aligned).
    Buffered,
}

/// Create or truncate `path` and write `bytes` to it: with `O_DIRECT` when `bytes` is at least
/// [`DIRECT_MIN_BYTES`] long, starts on a [`DIRECT_ALIGN`] boundary, its length is a multiple of
/// it and the filesystem accepts it; otherwise buffered. Not fsynced (the caller's group commit does that).
pub fn write_whole(path: &Path, bytes: &[u8]) -> Result<WriteMode, RepackError> {
    let aligned = bytes.len() >= DIRECT_MIN_BYTES
        && bytes.as_ptr().align_offset(DIRECT_ALIGN) == 0
        && bytes.len().is_multiple_of(DIRECT_ALIGN);
    if aligned {
        match write_direct(path, bytes) {
            Ok(()) => return Ok(WriteMode::Direct),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => return Err(io_err("write", path)(e)),
        }
    }
    let mut out = create(path, 0).map_err(io_err("create", path))?;
    out.write_all(bytes).map_err(io_err("write", path))?;
    Ok(WriteMode::Buffered)
}

fn create(path: &Path, flags: i32) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(flags)
        .open(path)
}

fn write_direct(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let out = create(path, libc::O_DIRECT)?;
    let mut at = 0usize;
    while at < bytes.len() {
        // A short write of an aligned request ends on a block boundary (or is an error), so the
        // rest stays aligned; cap each call so one request never exceeds what the kernel takes.
        let end = bytes.len().min(at + (64 << 20));
        let n = out.write_at(bytes.get(at..end).unwrap_or(&[]), at as u64)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::WriteZero,
                "O_DIRECT write made no progress",
            ));
        }
        at += n;
    }
    Ok(())
}

/// Copy `range` of `src` to a new file `dst`, verbatim: `copy_file_range` (which can reflink or
/// copy in the kernel) where the filesystem allows, else a buffered copy. Durability comes from
/// the group commit (`syncfs`) before the journal records the file.
pub fn copy_range(src: &Path, range: &std::ops::Range<u64>, dst: &Path) -> Result<(), RepackError> {
    use std::os::fd::AsRawFd;
    let input = File::open(src).map_err(io_err("open", src))?;
    let mut out = create(dst, 0).map_err(io_err("create", dst))?;
    let mut off_in = i64::try_from(range.start)
        .map_err(|_| io_err("seek", src)(std::io::Error::other("offset too large")))?;
    let mut left = range.end - range.start;
    let mut kernel_ok = true;
    while left > 0 && kernel_ok {
        let want = usize::try_from(left.min(1 << 30)).unwrap_or(1 << 30);
        // SAFETY: both descriptors are open for the duration of the call; `off_in` is a valid
        // pointer to an i64 and the output offset is the file position (null).
        let n = unsafe {
            libc::copy_file_range(
                input.as_raw_fd(),
                &mut off_in,
                out.as_raw_fd(),
                std::ptr::null_mut(),
                want,
                0,
            )
        };
        match n {
            n if n > 0 => left -= n as u64,
            0 => {
                return Err(io_err("copy", src)(std::io::Error::other(
                    "source ended before the tensor's range",
                )))
            }
            _ => kernel_ok = false,
        }
    }
    if left > 0 {
        // Fall back to a buffered copy of what is left (EXDEV, ENOSYS, EINVAL on some filesystems).
        let mut at = range.end - left;
        let mut buf = vec![0u8; 8 << 20];
        while at < range.end {
            let n = usize::try_from((range.end - at).min(buf.len() as u64)).unwrap_or(buf.len());
            let chunk = buf.get_mut(..n).unwrap_or(&mut []);
            input
                .read_exact_at(chunk, at)
                .map_err(io_err("read", src))?;
            out.write_all(chunk).map_err(io_err("write", dst))?;
            at += n as u64;
        }
    }
    out.flush().map_err(io_err("write", dst))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffer_is_aligned_and_reused() {
        let mut b = AlignedBuf::default();
        let s = b.slice_mut(3 * DIRECT_ALIGN);
        assert_eq!(s.as_ptr().align_offset(DIRECT_ALIGN), 0);
        assert_eq!(s.len(), 3 * DIRECT_ALIGN);
        s.fill(7);
        let p = s.as_ptr();
        let s = b.slice_mut(DIRECT_ALIGN);
        assert_eq!(s.as_ptr(), p, "a smaller request reuses the allocation");
        assert_eq!(s.first(), Some(&7), "not cleared: the caller overwrites it");
    }

    #[test]
    fn whole_file_written_direct_or_buffered_with_identical_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut b = AlignedBuf::default();
        let s = b.slice_mut(DIRECT_MIN_BYTES + 5 * DIRECT_ALIGN);
        for (i, x) in s.iter_mut().enumerate() {
            *x = (i % 251) as u8;
        }
        let want = s.to_vec();
        let p = dir.path().join("c.til");
        // Pre-existing longer content must be truncated away.
        std::fs::write(&p, vec![9u8; DIRECT_MIN_BYTES + 9 * DIRECT_ALIGN]).expect("seed");
        let mode = write_whole(&p, s).expect("write");
        assert_eq!(std::fs::read(&p).expect("read"), want, "{mode:?}");
        let direct_ok = write_direct(&dir.path().join("probe"), s).is_ok();
        assert_eq!(
            mode == WriteMode::Direct,
            direct_ok,
            "direct whenever the filesystem takes it"
        );
        // Unaligned length: always buffered, same bytes.
        let odd = dir.path().join("odd.bin");
        let mode = write_whole(&odd, &want[..1000]).expect("write");
        assert_eq!(mode, WriteMode::Buffered);
        assert_eq!(std::fs::read(&odd).expect("read"), &want[..1000]);
        // Unaligned start: buffered too.
        let shifted = &want[1..DIRECT_MIN_BYTES + 1];
        assert_eq!(
            write_whole(&odd, shifted).expect("write"),
            WriteMode::Buffered
        );
        assert_eq!(std::fs::read(&odd).expect("read"), shifted);
        // Aligned but short: buffered (ext4's fixed cost per direct write outweighs the copy).
        let short = s.get(..4 * DIRECT_ALIGN).expect("short");
        assert_eq!(
            write_whole(&odd, short).expect("write"),
            WriteMode::Buffered
        );
        assert_eq!(std::fs::read(&odd).expect("read"), short);
    }

    #[test]
    fn tmpfs_refusal_falls_back_to_buffered() {
        // /dev/shm is tmpfs on Linux, which refuses O_DIRECT at open with EINVAL.
        let Ok(dir) = tempfile::tempdir_in("/dev/shm") else {
            return;
        };
        let mut b = AlignedBuf::default();
        let s = b.slice_mut(DIRECT_MIN_BYTES);
        s.fill(3);
        let p = dir.path().join("c.til");
        let mode = write_whole(&p, s).expect("write");
        assert_eq!(
            std::fs::read(&p).expect("read"),
            vec![3u8; DIRECT_MIN_BYTES]
        );
        let direct_ok = write_direct(&dir.path().join("probe"), s).is_ok();
        assert_eq!(mode == WriteMode::Direct, direct_ok);
    }
}
