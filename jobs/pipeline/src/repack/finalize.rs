//! Finalize: the release-wide files, written once every unit is repacked — the root files copied
//! verbatim from upstream (tokenizer, configuration, licences, the plan's `files`) and
//! `index.json` in the plan's shape with the tokenizer and configuration identities pointing at
//! them. A pure function of the unit manifests and the root files, so disjoint `--units` runs in
//! parallel processes followed by `--finalize` give the same bytes as one run; a file whose bytes
//! are already right is not rewritten.

use std::collections::BTreeMap;
use std::path::Path;

use artifact::identity::{ConfigurationIdentity, Parsed, RootFile, TokenizerIdentity};
use artifact::index_json::{
    IndexDocument, MultiSourceUnits, Shape, SingleSourceTotals, SingleSourceUnits, Source,
    UnitTotals, INDEX_FILE_NAME,
};
use artifact::manifest::Manifest;

use super::unit::done_reason;
use super::{io_err, RepackError};
use crate::fetch::root::root_paths;
use crate::plan::{IdentitySource, IndexShape, Plan};
use crate::work::WorkDir;

/// Root file name in the artifact → (source, upstream path).
pub(crate) fn root_files(plan: &Plan) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    for src in &plan.sources {
        for p in root_paths(plan, src) {
            let base = p.rsplit('/').next().unwrap_or(&p).to_owned();
            out.insert(base, (src.name.clone(), p));
        }
        if let Some(l) = &src.license {
            out.insert(
                l.file.as_str().to_owned(),
                (src.name.clone(), l.from.as_str().to_owned()),
            );
        }
    }
    for id in [&plan.tokenizer, &plan.config].into_iter().flatten() {
        out.insert(
            id.file.as_str().to_owned(),
            (id.source.clone(), id.from.as_str().to_owned()),
        );
    }
    out
}

fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<bool, RepackError> {
    if std::fs::read(path).ok().as_deref() == Some(bytes) {
        return Ok(false);
    }
    ledger::write_atomic(path, bytes)?;
    Ok(true)
}

fn root_identity(
    plan: &Plan,
    release: &Path,
    id: &IdentitySource,
) -> Result<RootFile, RepackError> {
    let path = release.join(id.file.as_str());
    let bytes = std::fs::read(&path).map_err(io_err("read", &path))?;
    let src = plan
        .source(&id.source)
        .ok_or_else(|| RepackError::Incomplete {
            units: format!("source `{}`", id.source),
        })?;
    Ok(RootFile {
        file: id.file.as_str().to_owned(),
        bytes: bytes.len() as u64,
        sha256: ledger::sha256_hex(&bytes).to_string(),
        source_repo: src.repo.as_str().to_owned(),
        source_revision: src.revision.as_str().to_owned(),
    })
}

/// The plan's units whose bytes were reclaimed (`distributed::reclaim`).
pub(crate) fn reclaimed_units(plan: &Plan, work: &WorkDir) -> Result<Vec<String>, RepackError> {
    let mut out = Vec::new();
    for u in &plan.units {
        if crate::distributed::reclaim::reclaimed(work, u.name.as_str())?.is_some() {
            out.push(u.name.as_str().to_owned());
        }
    }
    Ok(out)
}

/// Write the release-wide files. Returns true when the release is finalized (written or already
/// current); refuses while a unit is not repacked.
pub fn finalize(plan: &Plan, work: &WorkDir, dry_run: bool) -> Result<bool, RepackError> {
    let ledger_dir = work.ledger();
    let mut missing = Vec::new();
    for u in &plan.units {
        if done_reason(&ledger_dir, work, u.name.as_str(), false)?.is_some() {
            missing.push(u.name.as_str().to_owned());
        }
    }
    if !missing.is_empty() {
        return Err(RepackError::Incomplete {
            units: missing.join(", "),
        });
    }
    let reclaimed = reclaimed_units(plan, work)?;
    if !reclaimed.is_empty() {
        return Err(RepackError::Reclaimed {
            units: crate::cli::join_limited(&reclaimed, 8),
        });
    }
    if dry_run {
        return Ok(false);
    }
    let release = work.release();
    let mut units = Vec::new();
    let mut format_version = 0u64;
    for u in &plan.units {
        let dir = release.join(u.name.as_str());
        let m = Manifest::read(&dir).map_err(|source| RepackError::Manifest {
            unit: u.name.as_str().into(),
            source,
        })?;
        let manifest_len = std::fs::metadata(dir.join(artifact::manifest::MANIFEST_FILE_NAME))
            .map_err(io_err("stat", &dir))?
            .len();
        for e in m
            .files
            .iter()
            .filter(|e| e.kind == artifact::manifest::FileKind::Container)
        {
            let p = dir.join(&e.path);
            let r = artifact::container::ContainerReader::open(&p).map_err(|source| {
                RepackError::Container {
                    unit: u.name.as_str().into(),
                    tensor: e.path.clone(),
                    source,
                }
            })?;
            format_version = format_version.max(u64::from(r.layout().version));
        }
        units.push(UnitTotals {
            name: u.name.as_str().to_owned(),
            files: m.files.len() as u64 + 1,
            bytes: m.total_bytes() + manifest_len,
        });
    }
    write_release_files(plan, work, units, format_version)?;
    Ok(true)
}

/// The release-wide files from the units' totals (in plan order) and the highest container
/// format version among them: the root files copied from the fetched upstream root files, then
/// `index.json`. A file whose bytes are already right is not rewritten. Shared by [`finalize`]
/// (totals read from the release on disk) and the distributed join (totals from the workers'
/// unit records, `docs/publish.md` §9).
pub fn write_release_files(
    plan: &Plan,
    work: &WorkDir,
    units: Vec<UnitTotals>,
    format_version: u64,
) -> Result<(), RepackError> {
    let release = work.release();
    std::fs::create_dir_all(&release).map_err(io_err("create", &release))?;
    for (name, (source, from)) in root_files(plan) {
        let src = work.root_files(&source).join(&from);
        let bytes = std::fs::read(&src).map_err(io_err("read fetched root file", &src))?;
        write_if_changed(&release.join(&name), &bytes)?;
    }
    let total: u64 = units.iter().map(|u| u.bytes).sum();
    let first = plan
        .sources
        .first()
        .ok_or_else(|| RepackError::Incomplete {
            units: "no source".into(),
        })?;
    let shape = match plan.index_shape {
        IndexShape::SingleSourceUnits => Shape::SingleSourceUnits(SingleSourceUnits {
            source_repo: first.repo.as_str().to_owned(),
            source_revision: first.revision.as_str().to_owned(),
            units,
            total_bytes: total,
        }),
        IndexShape::SingleSourceTotals => Shape::SingleSourceTotals(SingleSourceTotals {
            source_repo: first.repo.as_str().to_owned(),
            source_revision: first.revision.as_str().to_owned(),
            files: units.iter().map(|u| u.files).sum(),
            bytes: total,
            format: Some("minirun".into()),
            format_version: Some(format_version.max(1)),
            relationship: Some("byte-preserving-repack".into()),
            layers: Some(units.iter().filter(|u| u.name.starts_with("layer")).count() as u64),
            globals: Some(
                units
                    .iter()
                    .filter(|u| !u.name.starts_with("layer"))
                    .count() as u64,
            ),
        }),
        IndexShape::MultiSourceUnits => Shape::MultiSourceUnits(MultiSourceUnits {
            sources: plan
                .sources
                .iter()
                .map(|s| {
                    (
                        s.name.clone(),
                        Source {
                            repo: s.repo.as_str().to_owned(),
                            revision: s.revision.as_str().to_owned(),
                            role: s.role.clone().unwrap_or_default(),
                            license: s
                                .license
                                .as_ref()
                                .map(|l| l.file.as_str().to_owned())
                                .unwrap_or_else(|| "unknown".into()),
                        },
                    )
                })
                .collect(),
            units,
            total_bytes: Some(total),
        }),
    };
    let tokenizer = match &plan.tokenizer {
        Some(id) => Parsed::Present(TokenizerIdentity {
            root: root_identity(plan, &release, id)?,
            license: id
                .license
                .as_ref()
                .map(|l| l.as_str().to_owned())
                .unwrap_or_default(),
        }),
        None => Parsed::Absent(artifact::identity::Absent::NotPublished),
    };
    let configuration = match &plan.config {
        Some(id) => Parsed::Present(ConfigurationIdentity {
            root: root_identity(plan, &release, id)?,
        }),
        None => Parsed::Absent(artifact::identity::Absent::NotPublished),
    };
    let doc = IndexDocument {
        shape,
        tokenizer,
        configuration,
        notes: Vec::new(),
    };
    let bytes = doc.to_bytes().map_err(RepackError::Index)?;
    write_if_changed(&release.join(INDEX_FILE_NAME), &bytes)?;
    Ok(())
}
