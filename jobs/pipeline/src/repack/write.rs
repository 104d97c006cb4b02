//! How repack copies a plain stream: `copy_file_range` (reflink or an in-kernel copy) where the
//! filesystem allows, else through a buffer. Containers go through [`crate::direct`].

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::{io_err, RepackError};

/// Copy `range` of `src` to a new file `dst`, verbatim: `copy_file_range` (which can reflink or
/// copy in the kernel) where the filesystem allows, else a buffered copy. Durability comes from
/// the group commit (`syncfs`) before the journal records the file.
pub fn copy_range(src: &Path, range: &std::ops::Range<u64>, dst: &Path) -> Result<(), RepackError> {
    use std::os::fd::AsRawFd;
    let input = File::open(src).map_err(io_err("open", src))?;
    let mut out = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(dst)
        .map_err(io_err("create", dst))?;
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
