//! The SHA-256 of a whole upstream file, computed while its chunks arrive — out of order and
//! concurrently — so verifying the file against its LFS digest needs no second read. Chunks that
//! arrive ahead of the next offset wait in memory, each still holding its transfer permit, so at
//! most `concurrency` chunks are ever buffered; ranges proven by an earlier run are read from the
//! file when the hash reaches them.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use tokio::sync::OwnedSemaphorePermit;

use super::ranges::RangeSet;

/// Feeds a file's bytes to SHA-256 in offset order.
pub struct OrderedHasher {
    inner: Mutex<Inner>,
}

struct Inner {
    next: u64,
    end: u64,
    hasher: Sha256,
    pending: BTreeMap<u64, (Vec<u8>, Option<OwnedSemaphorePermit>)>,
    file: Arc<File>,
    on_disk: RangeSet,
    broken: bool,
}

impl OrderedHasher {
    /// A hasher for a file of `size` bytes whose `on_disk` ranges are already written.
    pub fn new(file: Arc<File>, size: u64, on_disk: RangeSet) -> Self {
        let mut inner = Inner {
            next: 0,
            end: size,
            hasher: Sha256::new(),
            pending: BTreeMap::new(),
            file,
            on_disk,
            broken: false,
        };
        inner.drain();
        OrderedHasher {
            inner: Mutex::new(inner),
        }
    }

    /// Hand over the (durable) bytes of the chunk at `offset`, with the permit it was fetched
    /// under; the permit is released once the bytes are hashed.
    pub fn push(&self, offset: u64, bytes: Vec<u8>, permit: Option<OwnedSemaphorePermit>) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.pending.insert(offset, (bytes, permit));
        inner.drain();
    }

    /// The hex digest when every byte of the file was hashed, in order.
    pub fn finish(&self) -> Option<String> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.drain();
        (!inner.broken && inner.next == inner.end)
            .then(|| hex::encode(inner.hasher.clone().finalize()))
    }
}

impl Inner {
    fn drain(&mut self) {
        let mut buf = Vec::new();
        while !self.broken && self.next < self.end {
            if let Some((bytes, _permit)) = self.pending.remove(&self.next) {
                self.hasher.update(&bytes);
                self.next += bytes.len() as u64;
                continue;
            }
            let Some(r) = self
                .on_disk
                .ranges()
                .iter()
                .find(|r| r.start <= self.next && self.next < r.end)
            else {
                break;
            };
            let len = (r.end - self.next).min(8 << 20);
            buf.resize(usize::try_from(len).unwrap_or(0), 0);
            if self.file.read_exact_at(&mut buf, self.next).is_err() {
                self.broken = true;
                break;
            }
            self.hasher.update(&buf);
            self.next += len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn out_of_order_chunks_and_kept_ranges_hash_like_the_whole_file() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&data).unwrap();
        let file = Arc::new(f);
        // Bytes 0..10_000 and 50_000..60_000 are on disk from an earlier run.
        let kept = RangeSet::from_ranges([0..10_000, 50_000..60_000]);
        let h = OrderedHasher::new(file, data.len() as u64, kept);
        for r in [60_000..100_000u64, 30_000..50_000, 10_000..30_000] {
            h.push(
                r.start,
                data[r.start as usize..r.end as usize].to_vec(),
                None,
            );
        }
        assert_eq!(h.finish(), Some(hex::encode(Sha256::digest(&data))));
    }

    #[test]
    fn a_gap_gives_no_digest() {
        let file = Arc::new(tempfile::tempfile().unwrap());
        let h = OrderedHasher::new(file, 10, RangeSet::new());
        h.push(5, vec![0; 5], None);
        assert_eq!(h.finish(), None);
    }
}
