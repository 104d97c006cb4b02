//! Byte-range arithmetic for the fetch stage: which bytes of an upstream file a unit needs, which
//! of them the journal already proves, and how the rest is cut into chunks.
//!
//! Ranges are half-open `[start, end)` byte offsets into one upstream file. A [`RangeSet`] keeps
//! them sorted, disjoint and coalesced, so "what is left" is a plain set difference.

use std::ops::Range;

/// A sorted, disjoint, coalesced set of byte ranges of one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: Vec<Range<u64>>,
}

impl RangeSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Build from arbitrary (possibly overlapping, unsorted, empty) ranges.
    pub fn from_ranges(ranges: impl IntoIterator<Item = Range<u64>>) -> Self {
        let mut v: Vec<Range<u64>> = ranges.into_iter().filter(|r| r.start < r.end).collect();
        v.sort_by_key(|r| (r.start, r.end));
        let mut out: Vec<Range<u64>> = Vec::with_capacity(v.len());
        for r in v {
            match out.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => out.push(r),
            }
        }
        Self { ranges: out }
    }

    /// Add one range.
    pub fn insert(&mut self, r: Range<u64>) {
        let mut all = std::mem::take(&mut self.ranges);
        all.push(r);
        *self = Self::from_ranges(all);
    }

    /// The ranges, sorted and disjoint.
    pub fn ranges(&self) -> &[Range<u64>] {
        &self.ranges
    }

    /// Total bytes covered.
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|r| r.end - r.start).sum()
    }

    /// True when nothing is covered.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// True when every byte of `r` is covered.
    pub fn covers(&self, r: &Range<u64>) -> bool {
        r.start >= r.end
            || self
                .ranges
                .iter()
                .any(|x| x.start <= r.start && r.end <= x.end)
    }

    /// The bytes of `self` not in `other`.
    pub fn subtract(&self, other: &RangeSet) -> RangeSet {
        let mut out = Vec::new();
        for r in &self.ranges {
            let mut cur = r.start;
            for o in &other.ranges {
                if o.end <= cur || o.start >= r.end {
                    continue;
                }
                if o.start > cur {
                    out.push(cur..o.start);
                }
                cur = cur.max(o.end);
                if cur >= r.end {
                    break;
                }
            }
            if cur < r.end {
                out.push(cur..r.end);
            }
        }
        RangeSet { ranges: out }
    }

    /// Cut every range into chunks of at most `chunk` bytes, aligned to multiples of `chunk`
    /// from the file start (so the same byte always falls in the same chunk, whichever run cuts
    /// it, and a resumed run re-requests exactly the unproven chunks).
    pub fn chunks(&self, chunk: u64) -> Vec<Range<u64>> {
        let chunk = chunk.max(1);
        let mut out = Vec::new();
        for r in &self.ranges {
            let mut s = r.start;
            while s < r.end {
                let boundary = (s / chunk + 1).saturating_mul(chunk);
                let e = boundary.min(r.end);
                out.push(s..e);
                s = e;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesces_overlaps_and_adjacency() {
        let s = RangeSet::from_ranges([10..20, 0..5, 5..8, 15..30, 40..40]);
        assert_eq!(s.ranges(), &[0..8, 10..30]);
        assert_eq!(s.len(), 28);
        assert!(s.covers(&(12..30)) && !s.covers(&(7..11)));
    }

    #[test]
    fn subtract_leaves_exactly_the_gaps() {
        let need = RangeSet::from_ranges([0..100, 200..300]);
        let have = RangeSet::from_ranges([10..20, 90..210, 250..260]);
        assert_eq!(
            need.subtract(&have).ranges(),
            &[0..10, 20..90, 210..250, 260..300]
        );
        assert!(need.subtract(&need).is_empty());
    }

    #[test]
    fn chunks_are_aligned_to_the_chunk_grid() {
        let s = RangeSet::from_ranges([5..25, 30..31]);
        assert_eq!(s.chunks(10), vec![5..10, 10..20, 20..25, 30..31]);
    }

    proptest::proptest! {
        #[test]
        fn subtract_then_union_restores(a in proptest::collection::vec((0u64..500, 0u64..60), 0..12),
                                        b in proptest::collection::vec((0u64..500, 0u64..60), 0..12)) {
            let a = RangeSet::from_ranges(a.into_iter().map(|(s, l)| s..s + l));
            let b = RangeSet::from_ranges(b.into_iter().map(|(s, l)| s..s + l));
            let left = a.subtract(&b);
            for r in left.ranges() {
                proptest::prop_assert!(!b.ranges().iter().any(|x| x.start < r.end && r.start < x.end));
            }
            let mut both = left.clone();
            for r in b.ranges() { both.insert(r.clone()); }
            for r in a.ranges() { proptest::prop_assert!(both.covers(r)); }
            let total: u64 = left.chunks(7).iter().map(|c| c.end - c.start).sum();
            proptest::prop_assert_eq!(total, left.len());
        }
    }
}
