//! What `index.json` claims, recomputed independently of the code that wrote it: the sources
//! (one `source_repo`/`source_revision` pair, or the `sources` map of a multi-source plan with
//! each entry's repository, revision, role and licence root name) must be the plan's, and the
//! totals (per unit in the unit shapes, in plan order; release-wide in `singleSourceTotals`)
//! must equal those of the unit manifests on disk — every file of the unit plus its
//! `manifest.json` (docs/index-json.md, docs/repack.md "Finalize"). The index shape itself and
//! the identities are checked by `checks::Gate::index`. See `docs/gate.md`.

use artifact::index_json::{IndexDocument, Shape, UnitTotals, INDEX_FILE_NAME};
use artifact::manifest::{Manifest, MANIFEST_FILE_NAME};

use super::{Check, Verdict};
use crate::plan::Plan;
use crate::work::WorkDir;

fn check(verdict: Verdict, central: bool, detail: String) -> Check {
    Check {
        check: "index-totals",
        unit: None,
        file: Some(INDEX_FILE_NAME.to_owned()),
        verdict,
        central,
        detail,
    }
}

/// Each plan unit's totals from its manifest, or the first unit whose manifest is unreadable.
fn unit_totals(plan: &Plan, work: &WorkDir) -> Result<Vec<UnitTotals>, String> {
    let release = work.release();
    let mut out = Vec::new();
    for u in &plan.units {
        let dir = release.join(u.name.as_str());
        let m = Manifest::read(&dir).map_err(|_| u.name.as_str().to_owned())?;
        let len = std::fs::metadata(dir.join(MANIFEST_FILE_NAME))
            .map_err(|_| u.name.as_str().to_owned())?
            .len();
        out.push(UnitTotals {
            name: u.name.as_str().to_owned(),
            files: m.files.len() as u64 + 1,
            bytes: m.total_bytes().saturating_add(len),
        });
    }
    Ok(out)
}

fn differences(plan: &Plan, shape: &Shape, expected: &[UnitTotals]) -> Vec<String> {
    let mut diff = Vec::new();
    let mut eq = |what: &str, got: String, want: String| {
        if got != want {
            diff.push(format!("{what} is {got}, expected {want}"));
        }
    };
    let total: u64 = expected.iter().map(|u| u.bytes).sum();
    let first = plan.sources.first();
    let single = |diff: &mut dyn FnMut(&str, String, String), repo: &str, rev: &str| {
        diff(
            "source_repo",
            repo.to_owned(),
            first
                .map(|s| s.repo.as_str().to_owned())
                .unwrap_or_default(),
        );
        diff(
            "source_revision",
            rev.to_owned(),
            first
                .map(|s| s.revision.as_str().to_owned())
                .unwrap_or_default(),
        );
    };
    let units = |diff: &mut dyn FnMut(&str, String, String), got: &[UnitTotals]| {
        let show = |v: &[UnitTotals]| {
            v.iter()
                .map(|u| format!("{} {} files {} B", u.name, u.files, u.bytes))
                .collect::<Vec<_>>()
        };
        let (g, w) = (show(got), show(expected));
        if g.len() != w.len() {
            diff(
                "the unit count",
                g.len().to_string(),
                format!("{} (the plan's units)", w.len()),
            );
        }
        for (g, w) in g.iter().zip(&w) {
            diff("a unit entry", format!("`{g}`"), format!("`{w}`"));
        }
    };
    match shape {
        Shape::SingleSourceTotals(s) => {
            single(&mut eq, &s.source_repo, &s.source_revision);
            let files: u64 = expected.iter().map(|u| u.files).sum();
            eq("files", s.files.to_string(), files.to_string());
            eq("bytes", s.bytes.to_string(), total.to_string());
            let counted = s.layers.unwrap_or(0) + s.globals.unwrap_or(0);
            if s.layers.is_some() || s.globals.is_some() {
                eq(
                    "layers + globals",
                    counted.to_string(),
                    expected.len().to_string(),
                );
            }
        }
        Shape::SingleSourceUnits(s) => {
            single(&mut eq, &s.source_repo, &s.source_revision);
            units(&mut eq, &s.units);
            eq("total_bytes", s.total_bytes.to_string(), total.to_string());
        }
        Shape::MultiSourceUnits(s) => {
            let got: Vec<&String> = s.sources.keys().collect();
            let mut want: Vec<&String> = plan.sources.iter().map(|x| &x.name).collect();
            want.sort();
            eq("the sources", format!("{got:?}"), format!("{want:?}"));
            for p in &plan.sources {
                if let Some(g) = s.sources.get(&p.name) {
                    let lic = p.license.as_ref().map(|l| l.file.as_str().to_owned());
                    let name = &p.name;
                    eq(
                        &format!("source `{name}` repo"),
                        g.repo.clone(),
                        p.repo.as_str().into(),
                    );
                    eq(
                        &format!("source `{name}` revision"),
                        g.revision.clone(),
                        p.revision.as_str().into(),
                    );
                    eq(
                        &format!("source `{name}` role"),
                        g.role.clone(),
                        p.role.clone().unwrap_or_default(),
                    );
                    eq(
                        &format!("source `{name}` license"),
                        g.license.clone(),
                        lic.unwrap_or_default(),
                    );
                }
            }
            units(&mut eq, &s.units);
            if let Some(t) = s.total_bytes {
                eq("total_bytes", t.to_string(), total.to_string());
            }
        }
        Shape::Unrecognized { .. } | Shape::Unreadable { .. } => {}
    }
    diff
}

/// The index-totals check; nothing when there is no readable index in the plan's shape (the
/// index check already reports that).
pub(super) fn index_totals(plan: &Plan, work: &WorkDir) -> Vec<Check> {
    let path = work.release().join(INDEX_FILE_NAME);
    if !path.exists() {
        return Vec::new();
    }
    let doc = IndexDocument::read_file(&path);
    if doc.shape.name() != plan.index_shape.as_str() {
        return Vec::new();
    }
    let expected = match unit_totals(plan, work) {
        Ok(t) => t,
        // A unit without a readable manifest is a FAIL of that unit when it is gated; when it
        // is outside the selection, its totals cannot be recomputed here: listed, not central.
        Err(unit) => {
            return vec![check(
                Verdict::Skip,
                false,
                format!("unit `{unit}` has no readable manifest: totals not recomputed"),
            )]
        }
    };
    let diff = differences(plan, &doc.shape, &expected);
    if diff.is_empty() {
        vec![check(
            Verdict::Pass,
            true,
            format!(
                "sources and totals of {} units agree with the plan and the manifests",
                expected.len()
            ),
        )]
    } else {
        vec![check(
            Verdict::Fail,
            true,
            crate::cli::join_limited(&diff, 5),
        )]
    }
}
