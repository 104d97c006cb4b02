//! Reopen the staged tree through the production reader (seed 001): the public index, every
//! unit's manifest, every container with every tile's digest, and every plain stream's size and
//! recorded SHA-256 against its manifest entry.

use artifact::container::ContainerReader;
use artifact::index_json::{IndexDocument, INDEX_FILE_NAME};
use artifact::manifest::{FileKind, Manifest, MANIFEST_FILE_NAME};
use ledger::Journal;

use super::{StageError, StageReport};
use crate::plan::Plan;
use crate::progress::{Counter, ProgressMode};
use crate::work::WorkDir;

pub(crate) fn roundtrip(
    plan: &Plan,
    work: &WorkDir,
    journal: &Journal,
    mode: ProgressMode,
    report: &mut StageReport,
) -> Result<(), StageError> {
    let progress = Counter::new("stage", "units", plan.units.len() as u64, mode);
    progress.note("round trip of the staged tree through the production reader");
    let staging = work.staging();
    let bad = |s: String| StageError::RoundTrip(s);
    let doc = IndexDocument::read_file(&staging.join(INDEX_FILE_NAME));
    if doc.shape.name() != plan.index_shape.as_str() {
        return Err(bad(format!(
            "`{INDEX_FILE_NAME}` has shape {:?}, the plan says {}",
            doc.shape,
            plan.index_shape.as_str()
        )));
    }
    let mut evidence = 0usize;
    for u in &plan.units {
        let unit = u.name.as_str();
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
