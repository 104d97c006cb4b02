//! The gate's byte comparison with upstream (`checks::upstream_compare`): a `Write` that compares
//! what is written with a range of an upstream file, the chain of them one artifact stream feeds
//! (a stacked container's members, a unit's plain streams), and the checks that `tensors.json`'s
//! `rows` and `span`s tile what they describe.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// A `Write` that compares what is written with a range of an upstream file. The comparisons of
/// one artifact file share each upstream file's descriptor (a stack of 896 experts is 1,792
/// ranges of one file: one descriptor each would pass the usual limit of 1,024), and a comparison
/// frees its read buffer once its range is done, so a stream's comparisons hold one tile's bytes
/// between them, not one each (2.2 GB of buffers at V4's real 256-expert stacks before).
pub(super) struct Compare {
    file: Arc<File>,
    pub at: u64,
    pub end: u64,
    pub mismatch: Option<u64>,
    buf: Vec<u8>,
}

impl Compare {
    /// A comparison with `[start, end)` of `file`.
    pub fn new(file: Arc<File>, start: u64, end: u64) -> Compare {
        Compare {
            file,
            at: start,
            end,
            mismatch: None,
            buf: Vec::new(),
        }
    }

    /// Bytes its read buffer holds now.
    #[cfg(test)]
    fn buffered(&self) -> usize {
        self.buf.capacity()
    }
}

impl Write for Compare {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.mismatch.is_none() {
            let n = data.len() as u64;
            if self.at + n > self.end {
                self.mismatch = Some(self.at.max(self.end));
            } else {
                self.buf.resize(data.len(), 0);
                self.file.read_exact_at(&mut self.buf, self.at)?;
                // One `memcmp` over the whole write; the byte-by-byte search for the first
                // difference (an early-exit loop the compiler does not vectorise) runs only on a
                // mismatch.
                if self.buf.as_slice() != data {
                    let i = self.buf.iter().zip(data).position(|(a, b)| a != b);
                    self.mismatch = Some(self.at + i.unwrap_or(0) as u64);
                }
            }
        }
        self.at += data.len() as u64;
        if self.at >= self.end || self.mismatch.is_some() {
            self.buf = Vec::new();
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The comparisons one container stream feeds, in container row order: a stacked container's
/// packed (scale, bias) stream is its members' streams one after the other, so each comparison
/// takes the bytes up to its own length and passes the rest on; the last one takes any excess
/// (and fails on it). No comparison: the bytes are dropped.
pub(super) struct Chain<'c> {
    pub parts: Vec<&'c mut Compare>,
}

impl Write for Chain<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let mut rest = data;
        let last = self.parts.len().saturating_sub(1);
        for (i, c) in self.parts.iter_mut().enumerate() {
            if rest.is_empty() {
                break;
            }
            let room = usize::try_from(c.end.saturating_sub(c.at)).unwrap_or(usize::MAX);
            let take = if i == last {
                rest.len()
            } else {
                room.min(rest.len())
            };
            let (now, later) = rest.split_at(take);
            c.write_all(now)?;
            rest = later;
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A stacked container's `rows` in `tensors.json` (sorted by their start) must tile the container
/// exactly: every stream's members contiguous from row 0 to its last row, each member starting on
/// a tile boundary and as tall as its upstream matrix. The byte comparison proves the order; this
/// proves the numbers a runner seeks by.
pub(super) fn stack_rows(
    cmps: &[(&crate::repack::TensorEntry, Compare)],
    spec: &artifact::container::ContainerSpec,
) -> Result<(), String> {
    if cmps.iter().all(|(t, _)| t.rows.is_none()) {
        return Ok(());
    }
    for role in ["packed", "scale", "bias"] {
        let mut next = 0u64;
        for (t, _) in cmps.iter().filter(|(t, _)| t.role == role) {
            let [a, b] = t
                .rows
                .ok_or_else(|| format!("`{}` has no `rows` in a stacked container", t.name))?;
            let tall = match role {
                "packed" => t.shape.first().copied().unwrap_or(0),
                _ => b.saturating_sub(a),
            };
            if a != next || b.saturating_sub(a) != tall || a % spec.rows_per_tile.max(1) != 0 {
                return Err(format!(
                    "`tensors.json` puts `{}` at rows [{a}, {b}) of the stack; it must start at row {next}, on a tile boundary, and span its {tall} rows",
                    t.name
                ));
            }
            next = b;
        }
        if next != 0 && next != spec.rows {
            return Err(format!(
                "the {role} members of the stack cover {next} of its {} rows",
                spec.rows
            ));
        }
    }
    Ok(())
}

/// A file of plain streams: the `span`s in `tensors.json` (sorted by their start) must tile its
/// `len` bytes exactly, each as long as its upstream range. A file without spans holds one
/// tensor (the comparison then checks its length).
pub(super) fn plain_spans(
    cmps: &[(&crate::repack::TensorEntry, Compare)],
    len: u64,
) -> Result<(), String> {
    if cmps.iter().all(|(t, _)| t.span.is_none()) && cmps.len() == 1 {
        return Ok(());
    }
    let mut next = 0u64;
    for (t, _) in cmps {
        let [a, b] = t
            .span
            .ok_or_else(|| format!("`{}` has no `span` in a file of several streams", t.name))?;
        let [ua, ub] = t.upstream_range;
        if a != next || b.checked_sub(a) != ub.checked_sub(ua) {
            return Err(format!(
                "`tensors.json` puts `{}` at bytes [{a}, {b}); it must start at byte {next} and span its {} upstream bytes",
                t.name,
                ub.saturating_sub(ua)
            ));
        }
        next = b;
    }
    if next != len {
        return Err(format!("the spans cover {next} of the file's {len} bytes"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream fed tile by tile through many comparisons of one upstream file: each comparison
    /// drops its buffer once its range is done, every one of them shares the one descriptor, and
    /// a difference is found at its byte.
    #[test]
    fn a_chain_holds_one_buffer_at_a_time_and_finds_the_first_difference() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("up.bin");
        let bytes: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = Arc::new(File::open(&path).unwrap());
        let member = 4096u64;
        let mut cmps: Vec<Compare> = (0..16)
            .map(|i| Compare::new(Arc::clone(&file), i * member, (i + 1) * member))
            .collect();
        assert_eq!(Arc::strong_count(&file), 17);
        let mut stream = bytes.clone();
        stream[5 * 4096 + 7] ^= 1;
        {
            let mut chain = Chain {
                parts: cmps.iter_mut().collect(),
            };
            for (k, tile) in stream.chunks(1024).enumerate() {
                chain.write_all(tile).unwrap();
                let held: Vec<usize> = chain
                    .parts
                    .iter()
                    .map(|c| c.buffered())
                    .filter(|n| *n > 0)
                    .collect();
                assert!(held.len() <= 1, "after tile {k}: buffers {held:?}");
            }
        }
        for (i, c) in cmps.iter().enumerate() {
            assert_eq!(c.at, c.end, "comparison {i} took its whole range");
            let want = (i == 5).then_some(5 * 4096 + 7);
            assert_eq!(c.mismatch, want, "comparison {i}");
        }
    }
}
