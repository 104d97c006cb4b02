//! The negative controls of one fetched file (docs/fetch.md "What decides a negative control"):
//! for the first tensor of each (dtype, content) kind, the same tensor read without the
//! data-section base offset, and read shifted off its element or group grid into other data of
//! the same dtype. Each is checked by the content rules; one they pass is decided by the
//! whole-file digest when the unit fetched the file whole. A control whose bytes lie outside the
//! unit's ranges is read from the hub (at most 64 KiB), so every control runs.

use std::collections::BTreeMap;
use std::fs::File;
use std::ops::Range;
use std::path::Path;

use artifact::safetensors::absolute_range;
use hub::client::{FileMetadata, HubClient};
use serde::Serialize;

use super::discover::UpstreamFile;
use super::plausible::{self, Content};
use super::ranges::RangeSet;
use super::unit::read_at;
use super::FetchError;
use crate::plan::UpstreamTensor;

/// The most bytes a negative control reads.
const CONTROL_BYTES: u64 = 64 << 10;

/// One deliberately wrong read.
pub(super) struct Probe {
    /// Index of the tensor in the file's list.
    tensor: usize,
    control: &'static str,
    /// The wrong range.
    range: Range<u64>,
    /// The tensor's own first bytes, as long as the wrong read.
    tensor_range: Range<u64>,
}

impl Probe {
    /// The wrong range.
    pub(super) fn range(&self) -> &Range<u64> {
        &self.range
    }
}

/// What one control found, as recorded under `negative_controls` in the fetch journal.
#[derive(Debug, Clone, Serialize)]
pub(super) struct ControlRecord {
    /// The upstream file.
    pub file: String,
    pub tensor: String,
    /// `without-data-base-offset` or `shifted-off-grid`.
    pub control: &'static str,
    /// Whether the wrong bytes were read and checked.
    pub ran: bool,
    /// `unit` (the unit's fetched ranges) or `hub` (a separate Range request).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_from: Option<&'static str>,
    /// The wrong range, absolute in the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<[u64; 2]>,
    /// The tensor's own bytes the wrong read stands in for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor_range: Option<[u64; 2]>,
    pub rejected: bool,
    /// `content` or `whole-file-digest` when rejected.
    pub rejected_by: Option<&'static str>,
    pub reason: Option<String>,
}

impl ControlRecord {
    /// Ran and passed the content rules: still to be decided.
    fn undecided(&self) -> bool {
        self.ran && !self.rejected
    }
}

/// The controls of one file (`tensors` in the unit's order).
pub(super) fn probes(uf: &UpstreamFile, tensors: &[(&UpstreamTensor, Content)]) -> Vec<Probe> {
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for (i, (t, content)) in tensors.iter().enumerate() {
        let key = (t.dtype.clone(), format!("{content:?}"));
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let Some(ti) = uf.header.tensor(&t.name) else {
            continue;
        };
        let abs = absolute_range(uf.header.data_start, ti);
        let len = (abs.end - abs.start).min(CONTROL_BYTES);
        let rel_start = ti.data_offsets[0];
        let mut ps = vec![("without-data-base-offset", rel_start..rel_start + len)];
        if let Some(shift) = plausible::grid_shift(&t.dtype, *content, &t.shape) {
            let shift = shift as u64;
            if shift < len {
                ps.push((
                    "shifted-off-grid",
                    abs.start + shift..abs.end.min(abs.start + shift + len),
                ));
            }
        }
        for (control, range) in ps {
            if range.start < range.end && range.end <= uf.size {
                let n = range.end - range.start;
                out.push(Probe {
                    tensor: i,
                    control,
                    range,
                    tensor_range: abs.start..abs.start + n,
                });
            }
        }
    }
    out
}

/// The bytes of every control outside the unit's `needed` ranges, read from the hub with one
/// checked Range request each (the same size gate as every fetched chunk). Never written to the
/// unit's data file or chunk log: they are evidence about the offsets, not data.
pub(super) async fn outside_reads(
    client: &HubClient,
    meta: &FileMetadata,
    probes: &[Probe],
    needed: &RangeSet,
) -> Result<BTreeMap<(u64, u64), Vec<u8>>, FetchError> {
    let mut out = BTreeMap::new();
    for p in probes.iter().filter(|p| !needed.covers(&p.range)) {
        let bytes = client
            .get_range(meta, p.range.start, Some(p.range.end - 1))
            .await
            .map_err(|source| FetchError::Hub {
                what: format!(
                    "failed to read negative-control bytes {}..{} of `{}`",
                    p.range.start, p.range.end, meta.location
                ),
                source,
            })?;
        out.insert((p.range.start, p.range.end), bytes);
    }
    Ok(out)
}

/// Run the controls: each wrong read's bytes (from the unit's file, or from `outside`) through
/// the content rules; the verdicts as journal records.
pub(super) fn run(
    tensors: &[(&UpstreamTensor, Content)],
    probes: &[Probe],
    outside: &BTreeMap<(u64, u64), Vec<u8>>,
    needed: &RangeSet,
    file: &File,
    path: &Path,
    rel: &str,
) -> Result<Vec<ControlRecord>, FetchError> {
    let mut out = Vec::new();
    for p in probes {
        let Some((t, content)) = tensors.get(p.tensor) else {
            continue;
        };
        let mut rec = ControlRecord {
            file: rel.to_owned(),
            tensor: t.name.clone(),
            control: p.control,
            ran: false,
            read_from: None,
            range: None,
            tensor_range: None,
            rejected: false,
            rejected_by: None,
            reason: Some("the control's bytes were not read".into()),
        };
        let (bytes, from) = if needed.covers(&p.range) {
            (read_at(file, path, p.range.clone())?, "unit")
        } else if let Some(b) = outside.get(&(p.range.start, p.range.end)) {
            (b.clone(), "hub")
        } else {
            out.push(rec);
            continue;
        };
        let verdict = plausible::check(&t.dtype, *content, &t.shape, &bytes);
        rec.ran = true;
        rec.read_from = Some(from);
        rec.range = Some([p.range.start, p.range.end]);
        rec.tensor_range = Some([p.tensor_range.start, p.tensor_range.end]);
        rec.rejected = verdict.is_err();
        rec.rejected_by = verdict.is_err().then_some("content");
        rec.reason = verdict.err().map(|e| e.reason);
        out.push(rec);
    }
    Ok(out)
}

/// Decide, by the whole-file digest, the controls the content rules passed (reads that land in
/// other real data of the same dtype and grid). The file has just matched the hub's digest, so
/// every byte of it is proven; a wrong read is caught exactly when substituting its bytes for the
/// tensor's would change the file, i.e. when they differ from the tensor's proven bytes (SHA-256
/// is collision resistant, so comparing the bytes decides what re-hashing the substituted file
/// would, without hashing the file once per control). Identical bytes (a shift inside a run of
/// zeros) are the right bytes and stay "not rejected".
pub(super) fn reject_by_digest(
    controls: &mut [ControlRecord],
    uf: &UpstreamFile,
    file: &File,
    path: &Path,
) -> Result<(), FetchError> {
    for c in controls.iter_mut().filter(|c| c.undecided()) {
        let (Some([ws, we]), Some([rs, re])) = (c.range, c.tensor_range) else {
            continue;
        };
        let n = (we - ws).min(re - rs);
        let a = read_at(file, path, ws..ws + n)?;
        let b = read_at(file, path, rs..rs + n)?;
        if a != b {
            c.rejected = true;
            c.rejected_by = Some("whole-file-digest");
            c.reason = Some(format!(
                "plausible {} data, but not this tensor's: the bytes differ from its bytes at \
                 [{rs}, {}) of `{}`, which the hub's digest proves, so storing them would change \
                 the file's digest",
                c.tensor,
                rs + n,
                uf.path
            ));
        } else {
            c.reason = Some("the wrong read returned exactly the tensor's proven bytes".into());
        }
    }
    Ok(())
}

/// Controls the content rules passed in a file the unit does not fetch whole: no hub digest
/// covers their bytes, so nothing here can tell them from the tensor's (recorded, not fatal).
pub(super) fn mark_no_digest(controls: &mut [ControlRecord]) {
    for c in controls.iter_mut().filter(|c| c.undecided()) {
        c.reason = Some(
            "plausible data of the same dtype, and the unit does not fetch the whole file, so no \
             hub digest covers these bytes"
                .into(),
        );
    }
}
