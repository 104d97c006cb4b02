//! Reopen the staged tree through the production reader (seed 001): the public index, every
//! unit's manifest, every container with every tile's digest, and every plain stream's size and
//! recorded SHA-256 against its manifest entry.

use artifact::container::ContainerReader;
use artifact::index_json::{IndexDocument, INDEX_FILE_NAME};
use artifact::manifest::{FileKind, Manifest, MANIFEST_FILE_NAME};
use ledger::Journal;

use super::{Scope, StageError, StageReport};
use crate::plan::Plan;
use crate::progress::{Counter, ProgressMode};
use crate::work::WorkDir;

pub(crate) fn roundtrip(
    plan: &Plan,
    work: &WorkDir,
    journal: &Journal,
    scope: &Scope,
    mode: ProgressMode,
    report: &mut StageReport,
) -> Result<(), StageError> {
    let units: Vec<String> = match scope {
        Scope::Release(u) | Scope::Slice(u) => u.clone(),
        Scope::Join(records) => records.keys().cloned().collect(),
    };
    let progress = Counter::new("stage", "units", units.len() as u64, mode);
    progress.note("round trip of the staged tree through the production reader");
    let staging = work.staging();
    let bad = |s: String| StageError::RoundTrip(s);
    if !matches!(scope, Scope::Slice(_)) {
        let doc = IndexDocument::read_file(&staging.join(INDEX_FILE_NAME));
        if doc.shape.name() != plan.index_shape.as_str() {
            return Err(bad(format!(
                "`{INDEX_FILE_NAME}` has shape {:?}, the plan says {}",
                doc.shape,
                plan.index_shape.as_str()
            )));
        }
    }
    if let Scope::Join(records) = scope {
        let evidence = join_units(records, report, &progress)?;
        progress.finish();
        return if evidence == 0 {
            Err(StageError::ZeroEvidence)
        } else {
            Ok(())
        };
    }
    let mut evidence = 0usize;
    for unit in &units {
        let unit = unit.as_str();
        let before = (report.containers, report.tiles, report.plain);
        let dir = staging.join(unit);
        let m = Manifest::read(&dir).map_err(|e| bad(format!("manifest of unit `{unit}`: {e}")))?;
        report.manifests += 1;
        let prefix = format!("{unit}/");
        let mut listed: Vec<&str> = journal
            .outputs
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix))
            .filter(|k| *k != MANIFEST_FILE_NAME)
            .collect();
        listed.sort_unstable();
        let mut expected: Vec<&str> = m.files.iter().map(|e| e.path.as_str()).collect();
        expected.sort_unstable();
        if listed != expected {
            return Err(bad(format!(
                "unit `{unit}`: staged files {} differ from its manifest's {}",
                listed.len(),
                expected.len()
            )));
        }
        for e in &m.files {
            let rel = format!("{unit}/{}", e.path);
            let rec = journal
                .outputs
                .get(&rel)
                .ok_or_else(|| bad(format!("`{rel}` is not staged")))?;
            if rec.size != e.size || rec.sha256 != e.sha256 {
                return Err(bad(format!(
                    "`{rel}`: staged {} bytes sha256 {}, manifest says {} bytes sha256 {}",
                    rec.size, rec.sha256, e.size, e.sha256
                )));
            }
            match e.kind {
                FileKind::Container => {
                    let r = ContainerReader::open(&dir.join(&e.path))
                        .and_then(|r| r.verify().map(|()| r))
                        .map_err(|err| bad(format!("container `{rel}`: {err}")))?;
                    report.containers += 1;
                    report.tiles += r.layout().tile_count;
                }
                FileKind::Plain => report.plain += 1,
            }
            evidence += 1;
        }
        progress.done(unit, || {
            format!(
                "read back: {} containers ({} tiles), {} plain streams",
                report.containers - before.0,
                report.tiles - before.1,
                report.plain - before.2
            )
        });
    }
    progress.finish();
    if evidence == 0 {
        return Err(StageError::ZeroEvidence);
    }
    Ok(())
}

/// The join's units: each record's manifest (its carried bytes) parsed strictly through the
/// production reader, and its entries equal to the record's files (size and SHA-256), the manifest
/// itself listed. Returns the files checked (the evidence).
fn join_units(
    records: &std::collections::BTreeMap<String, crate::distributed::UnitRecord>,
    report: &mut StageReport,
    progress: &Counter,
) -> Result<usize, StageError> {
    let bad = |s: String| StageError::RoundTrip(s);
    let mut evidence = 0;
    for (unit, rec) in records {
        let path = std::path::PathBuf::from(format!("{unit}.json"));
        let man_path = format!("{unit}/{MANIFEST_FILE_NAME}");
        let man = rec
            .files
            .iter()
            .find(|f| f.path == man_path)
            .ok_or_else(|| bad(format!("the record of `{unit}` has no `{man_path}`")))?;
        let bytes = rec.content(man, &path).map_err(|e| bad(e.to_string()))?;
        let m = Manifest::parse(&bytes)
            .map_err(|e| bad(format!("manifest of unit `{unit}` (from its record): {e}")))?;
        report.manifests += 1;
        if m.files.len() + 1 != rec.files.len() {
            return Err(bad(format!(
                "unit `{unit}`: its record lists {} files, its manifest {} (+ itself)",
                rec.files.len(),
                m.files.len()
            )));
        }
        for e in &m.files {
            let rel = format!("{unit}/{}", e.path);
            let f = rec
                .files
                .iter()
                .find(|f| f.path == rel)
                .ok_or_else(|| bad(format!("`{rel}` is in the manifest, not in the record")))?;
            if f.size != e.size || f.sha256 != e.sha256 {
                return Err(bad(format!(
                    "`{rel}`: the record says {} bytes sha256 {}, the manifest {} bytes sha256 {}",
                    f.size, f.sha256, e.size, e.sha256
                )));
            }
            match e.kind {
                FileKind::Container => report.containers += 1,
                FileKind::Plain => report.plain += 1,
            }
            evidence += 1;
        }
        progress.done(unit, || {
            format!("record checked: {} files", rec.files.len())
        });
    }
    Ok(evidence)
}
