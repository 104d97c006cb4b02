//! The join's two steps over the workers' unit records: the release-wide files
//! (`minirun-repack --finalize --records DIR`: the fetched root files and `index.json` from the
//! records' totals, never from unit bytes) and the candidate's files (`minirun-candidate-upload
//! --records DIR`: regular files from the records' bytes, LFS files committed by oid from the
//! objects the workers uploaded).

use std::collections::BTreeMap;
use std::path::Path;

use artifact::index_json::UnitTotals;
use bytes::Bytes;

use super::{load_all, RecordsError, UnitRecord};
use crate::candidate::upload::{Item, Src};
use crate::plan::Plan;
use crate::repack::RepackError;
use crate::work::WorkDir;

/// Candidate files from the records: a regular file with the bytes its record carries, an LFS
/// file as an object already on the hub.
pub type JoinItem = (String, Item);

/// Write the release-wide files of `work` from the records in `dir` (which must cover the plan
/// exactly, every unit gated PASS). Returns the number of units joined.
pub fn finalize_from_records(
    plan: &Plan,
    work: &WorkDir,
    dir: &Path,
) -> Result<usize, RepackError> {
    let records = load_all(plan, dir)?;
    let mut units = Vec::new();
    let mut format_version = 0;
    for u in &plan.units {
        let rec = records
            .get(u.name.as_str())
            .ok_or_else(|| RepackError::Incomplete {
                units: u.name.as_str().to_owned(),
            })?;
        units.push(UnitTotals {
            name: rec.unit.clone(),
            files: rec.files_total,
            bytes: rec.bytes_total,
        });
        format_version = format_version.max(rec.format_version);
    }
    crate::repack::write_release_files(plan, work, units, format_version)?;
    Ok(records.len())
}

/// Every file of every record as a candidate item.
pub fn join_items(
    records: &BTreeMap<String, UnitRecord>,
    dir: &Path,
) -> Result<Vec<JoinItem>, RecordsError> {
    let mut out = Vec::new();
    for (unit, rec) in records {
        let path = super::record_path(dir, unit);
        for f in &rec.files {
            let src = if f.lfs {
                Src::OnHub { unit: unit.clone() }
            } else {
                Src::Bytes(Bytes::from(rec.content(f, &path)?))
            };
            out.push((
                f.path.clone(),
                Item {
                    size: f.size,
                    sha256: f.sha256.clone(),
                    lfs: Some(f.lfs),
                    src,
                },
            ));
        }
    }
    Ok(out)
}
