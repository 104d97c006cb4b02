//! `O_DIRECT` writes: bytes go from a block-aligned user buffer to the device without the
//! kernel's copy into the page cache, which is most of a buffered writer's CPU on this class of
//! machine (docs/repack.md, "Performance"). Repack writes whole in-memory containers this way
//! ([`write_whole`]); fetch writes the aligned middle of each chunk ([`write_hashed`]). Where
//! the filesystem refuses `O_DIRECT` (`EINVAL` at open or at a write: tmpfs before Linux 6.6,
//! some FUSE and network filesystems) the same bytes are written buffered. `O_DIRECT` alone does
//! not make bytes durable: callers still fsync or `syncfs` before they record a write.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

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
pub fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<WriteMode> {
    write_whole_via(path, bytes, write_direct)
}

/// [`write_whole`] with the direct write as a parameter (tests inject a refusing one).
fn write_whole_via(
    path: &Path,
    bytes: &[u8],
    direct: impl FnOnce(&Path, &[u8]) -> std::io::Result<()>,
) -> std::io::Result<WriteMode> {
    let aligned = bytes.len() >= DIRECT_MIN_BYTES
        && bytes.as_ptr().align_offset(DIRECT_ALIGN) == 0
        && bytes.len() % DIRECT_ALIGN == 0;
    if aligned {
        match direct(path, bytes) {
            Ok(()) => return Ok(WriteMode::Direct),
            Err(e) if refused(&e) => {}
            Err(e) => return Err(e),
        }
    }
    create(path, 0)?.write_all(bytes)?;
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
    write_all_direct(&create(path, libc::O_DIRECT)?, bytes, 0)
}

/// `EINVAL`: the filesystem (or this request's alignment) does not take `O_DIRECT`.
fn refused(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

/// Where [`write_hashed`] sends its block-aligned pieces: a [`File`] opened by [`open_direct`]
/// (tests inject a refusing one).
pub trait DirectTarget {
    /// All of the aligned `bytes` at the aligned `offset`.
    fn write_aligned(&self, bytes: &[u8], offset: u64) -> std::io::Result<()>;
}

impl DirectTarget for File {
    fn write_aligned(&self, bytes: &[u8], offset: u64) -> std::io::Result<()> {
        write_all_direct(self, bytes, offset)
    }
}

/// All of the aligned `bytes` at the aligned `offset` of `out`, which was opened `O_DIRECT`.
fn write_all_direct(out: &File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    let mut at = 0usize;
    while at < bytes.len() {
        // A short write of an aligned request ends on a block boundary (or is an error), so the
        // rest stays aligned; cap each call so one request never exceeds what the kernel takes.
        let end = bytes.len().min(at + (64 << 20));
        let n = out.write_at(bytes.get(at..end).unwrap_or(&[]), offset + at as u64)?;
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

/// Open `path` (which exists) a second time, for `O_DIRECT` writes next to buffered ones through
/// another descriptor ([`write_hashed`]); `None` where the filesystem refuses `O_DIRECT`.
pub fn open_direct(path: &Path) -> Option<File> {
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .ok()
}

/// Bytes per buffered `pwrite` and SHA-256 update in [`write_hashed`]: each slice is hashed and
/// copied into the page cache while it is still in the CPU cache.
const BUFFERED_SLICE: usize = 256 << 10;

/// Bytes staged per `O_DIRECT` write in [`write_hashed`].
const DIRECT_PIECE: usize = 4 << 20;

/// Write `bytes` at `offset` of `file` and feed them to `sha` in order. With `direct` (the same
/// file opened by [`open_direct`]), the block-aligned middle of the range, when it is at least
/// [`DIRECT_MIN_BYTES`], is copied piece by piece into an aligned staging buffer and written with
/// `O_DIRECT`; the unaligned head and tail, and everything when `direct` is `None` or the
/// filesystem refuses a direct write, go through `file` and the page cache. Not fsynced.
pub fn write_hashed<D: DirectTarget>(
    file: &File,
    direct: Option<&D>,
    offset: u64,
    bytes: &[u8],
    sha: &mut sha2::Sha256,
) -> std::io::Result<()> {
    use sha2::Digest;
    let align = DIRECT_ALIGN as u64;
    let end = offset + bytes.len() as u64;
    let mid_start = offset.div_ceil(align) * align;
    let mid_end = (end / align) * align;
    let buffered = |part: &[u8], at: u64, sha: &mut sha2::Sha256| -> std::io::Result<()> {
        let mut at = at;
        for slice in part.chunks(BUFFERED_SLICE) {
            sha.update(slice);
            file.write_all_at(slice, at)?;
            at += slice.len() as u64;
        }
        Ok(())
    };
    let direct = direct
        .filter(|_| mid_end > mid_start && (mid_end - mid_start) as usize >= DIRECT_MIN_BYTES);
    let Some(direct) = direct else {
        return buffered(bytes, offset, sha);
    };
    let (lo, hi) = ((mid_start - offset) as usize, (mid_end - offset) as usize);
    let (head, rest) = bytes.split_at(lo);
    let (mid, tail) = rest.split_at(hi - lo);
    buffered(head, offset, sha)?;
    STAGE.with_borrow_mut(|stage| -> std::io::Result<()> {
        let mut at = mid_start;
        for piece in mid.chunks(DIRECT_PIECE) {
            let s = stage.slice_mut(piece.len());
            s.copy_from_slice(piece);
            sha.update(&*s);
            match direct.write_aligned(s, at) {
                Ok(()) => at += piece.len() as u64,
                Err(e) if refused(&e) => {
                    // Hashed already: write this piece and the rest buffered, hashing the rest.
                    file.write_all_at(piece, at)?;
                    at += piece.len() as u64;
                    let rest_mid = mid.get((at - mid_start) as usize..).unwrap_or(&[]);
                    return buffered(rest_mid, at, sha);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })?;
    buffered(tail, mid_end, sha)
}

thread_local! {
    /// [`write_hashed`]'s staging buffer, one per thread and kept: a fresh 4 MiB allocation per
    /// chunk would fault in its pages every time.
    static STAGE: std::cell::RefCell<AlignedBuf> = std::cell::RefCell::new(AlignedBuf::default());
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
    fn tmpfs_takes_what_the_kernel_allows() {
        // /dev/shm is tmpfs: it refuses O_DIRECT before Linux 6.6 and takes it since.
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

    #[test]
    fn a_refused_direct_write_leaves_the_same_bytes_buffered() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut b = AlignedBuf::default();
        let s = b.slice_mut(DIRECT_MIN_BYTES + DIRECT_ALIGN);
        for (i, x) in s.iter_mut().enumerate() {
            *x = (i % 241) as u8;
        }
        let p = dir.path().join("c.til");
        // The refusing writer leaves a partial, wrong file behind, as a failed write might.
        let mode = write_whole_via(&p, s, |path, _| {
            std::fs::write(path, b"partial")?;
            Err(std::io::Error::from_raw_os_error(libc::EINVAL))
        })
        .expect("write");
        assert_eq!(mode, WriteMode::Buffered);
        assert_eq!(std::fs::read(&p).expect("read"), &*s);
        // Any other error is reported, not papered over.
        let err = write_whole_via(&p, s, |_, _| {
            Err(std::io::Error::from_raw_os_error(libc::EIO))
        })
        .expect_err("EIO");
        assert_eq!(err.raw_os_error(), Some(libc::EIO));

        // write_hashed: the second direct piece is refused; that piece and the rest go buffered,
        // every byte is hashed exactly once, in order.
        struct RefuseAfterFirst(File, std::sync::atomic::AtomicUsize);
        impl DirectTarget for RefuseAfterFirst {
            fn write_aligned(&self, bytes: &[u8], offset: u64) -> std::io::Result<()> {
                if self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed) > 0 {
                    return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
                }
                self.0.write_all_at(bytes, offset)
            }
        }
        use sha2::{Digest, Sha256};
        let q = dir.path().join("shard");
        let want: Vec<u8> = (0..3 * DIRECT_PIECE + 777)
            .map(|i| (i % 239) as u8)
            .collect();
        let file = File::create(&q).expect("create");
        let target = RefuseAfterFirst(file.try_clone().expect("clone"), 0.into());
        let mut sha = Sha256::new();
        write_hashed(&file, Some(&target), 100, &want, &mut sha).expect("write");
        assert_eq!(sha.finalize().as_slice(), Sha256::digest(&want).as_slice());
        let got = std::fs::read(&q).expect("read");
        assert_eq!(&got[..100], &[0u8; 100]);
        assert_eq!(&got[100..], &want[..]);
        assert_eq!(
            target.1.load(std::sync::atomic::Ordering::Relaxed),
            2,
            "one ok, one refused"
        );
    }

    #[test]
    fn hashed_chunks_at_unaligned_offsets_land_byte_exact() {
        use sha2::{Digest, Sha256};
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("shard.safetensors");
        let total = 3 * DIRECT_MIN_BYTES + 12_345;
        let want: Vec<u8> = (0..total).map(|i| (i * 7 % 253) as u8).collect();
        std::fs::write(&p, b"").expect("create");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .expect("open");
        let direct = open_direct(&p);
        // Chunks written out of order, at offsets and lengths that are not block multiples, one
        // too short for a direct middle, one with a long aligned middle.
        let cuts = [0, 4_097, 4_097 + 100_000, 2 * DIRECT_MIN_BYTES + 999, total];
        let mut order: Vec<usize> = (0..cuts.len() - 1).collect();
        order.reverse();
        for i in order {
            let (a, b) = (cuts[i], cuts[i + 1]);
            let mut sha = Sha256::new();
            write_hashed(&file, direct.as_ref(), a as u64, &want[a..b], &mut sha).expect("write");
            let got: [u8; 32] = sha.finalize().into();
            let expect: [u8; 32] = Sha256::digest(&want[a..b]).into();
            assert_eq!(
                got, expect,
                "chunk {a}..{b} hashed in order, each byte once"
            );
        }
        assert_eq!(std::fs::read(&p).expect("read"), want);
    }
}
