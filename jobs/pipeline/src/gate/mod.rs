//! The gate: proves that what landed on disk is what the checkpoint contained (seed 001, step 2;
//! ARCHITECTURE.md §9). It reads every written byte back off the drive against the digests
//! recorded when it was written, reopens the whole product through the production reader (every
//! container header, every tile with its digest, every manifest, the index and identities), and
//! proves byte preservation by reassembling each tensor from its tiles and comparing it with the
//! fetched upstream bytes — a byte comparison, not a tolerance.
//!
//! Exit contract: 0 PASS (non-empty evidence checked and agreed), 1 FAIL (contradiction,
//! malformed or missing file), 2 INCONCLUSIVE (no evidence, or coverage missing), 77 SKIP (the
//! central comparison disabled with `--no-upstream-compare`). Results aggregate
//! FAIL > INCONCLUSIVE > SKIP > PASS; a skipped non-central probe keeps 0 but is listed. A report
//! alone is never a pass: the exit code is the verdict. See `docs/gate.md`.

mod checks;
mod compare;
mod index_totals;
mod root_files;

use std::path::PathBuf;

use serde::Serialize;

use crate::cli::Exit;
use crate::plan::{Plan, PlanError};
use crate::progress::Counter;
use crate::work::WorkDir;

/// Options of one gate run.
#[derive(Debug, Clone, Default)]
pub struct GateOpts {
    /// `--work-dir`, else the plan's.
    pub work_dir: Option<PathBuf>,
    /// `--units`; `Some("")` is an empty selection (INCONCLUSIVE).
    pub units: Option<String>,
    /// `--report`, else `<work>/reports/gate.json`.
    pub report: Option<PathBuf>,
    /// `--no-upstream-compare`: skip the central byte comparison (exit 77 at best).
    pub no_upstream_compare: bool,
    /// `--dry-run`: list what would be checked.
    pub dry_run: bool,
    /// Progress on stderr: one line per gated unit (a bar on a terminal).
    pub progress: crate::progress::ProgressMode,
}

/// One check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    /// Agreed.
    Pass,
    /// Could not run here, or disabled (`central` says whether it counts).
    Skip,
    /// No evidence, or coverage missing.
    Inconclusive,
    /// Contradicted, malformed or missing.
    Fail,
}

impl std::fmt::Display for Verdict {
    /// The same word as the JSON report (`PASS`, `SKIP`, `INCONCLUSIVE`, `FAIL`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "PASS",
            Verdict::Skip => "SKIP",
            Verdict::Inconclusive => "INCONCLUSIVE",
            Verdict::Fail => "FAIL",
        })
    }
}

/// One check in the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What was checked (`read-back`, `container`, `upstream-compare`, `manifest`, `index`, ...).
    pub check: &'static str,
    /// The unit, if the check belongs to one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// The file (relative to the release root), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The verdict.
    pub verdict: Verdict,
    /// Whether a SKIP of this check sets the overall verdict (the central comparison) or is
    /// only listed (an optional probe).
    pub central: bool,
    /// What was found.
    pub detail: String,
}

/// The gate report (`reports/gate.json`).
#[derive(Debug, Clone, Serialize)]
pub struct GateReport {
    /// Schema version.
    pub v: u32,
    /// The plan.
    pub plan: String,
    /// The aggregate verdict.
    pub verdict: Verdict,
    /// The exit code that verdict maps to.
    pub exit_code: u8,
    /// Units gated.
    pub units: Vec<String>,
    /// Bytes read back off the drive.
    pub bytes_read: u64,
    /// Units listed with the verdict they had before their bytes were reclaimed (a
    /// disk-budgeted run): not re-read by this run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reclaimed: Vec<String>,
    /// Every check, in order.
    pub checks: Vec<Check>,
    /// `--dry-run`: nothing was read and no report written; the verdict is INCONCLUSIVE (exit 2),
    /// never PASS, because no evidence was checked.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// `--dry-run`: the checks a run would make, per unit and then release-wide.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub would_run: Vec<String>,
}

/// The checks a gate run makes (`docs/gate.md`): per unit, then release-wide. A partial selection
/// checks `index.json` only if it exists, and not the root.
fn planned_checks(units: usize, no_upstream_compare: bool, whole_release: bool) -> Vec<String> {
    let mut v: Vec<String> = [
        "journal",
        "manifest",
        "file-set",
        "read-back",
        "container",
        "coverage",
    ]
    .iter()
    .map(|c| format!("{c} ({units} units)"))
    .collect();
    v.push(if no_upstream_compare {
        "upstream-compare: SKIP (--no-upstream-compare; exit 77 at best)".into()
    } else {
        format!("upstream-compare ({units} units, central)")
    });
    if whole_release {
        v.extend(["index", "identity", "index-totals", "root-file"].map(String::from));
    } else {
        v.push("index, identity, index-totals if `index.json` exists (partial selection; root not checked)".into());
    }
    v
}

/// Why the gate could not run at all (a refusal: exit 1, no report).
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The plan was refused.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The report could not be written.
    #[error("failed to write the gate report")]
    Report(#[from] ledger::LedgerError),
    /// The work directory was fetched for another pin of the plan's upstream (no verdict: the
    /// gate would compare this plan's release with bytes of another revision).
    #[error(transparent)]
    OtherPin(#[from] crate::fetch::discover::OtherPin),
}

impl crate::cli::Hint for GateError {
    fn hint(&self) -> Option<String> {
        match self {
            GateError::OtherPin(e) => Some(e.hint()),
            _ => None,
        }
    }
}

impl crate::cli::Report for GateReport {
    fn text(&self) -> String {
        self.render()
    }
    fn exit_code(&self) -> crate::cli::Exit {
        self.exit()
    }
}

impl GateReport {
    /// The process exit code of this report.
    pub fn exit(&self) -> Exit {
        match self.verdict {
            Verdict::Pass => Exit::Ok,
            Verdict::Fail => Exit::Failure,
            Verdict::Inconclusive => Exit::Inconclusive,
            Verdict::Skip => Exit::Skip,
        }
    }

    /// A readable summary: failures first, then the counts.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for c in self.checks.iter().filter(|c| c.verdict != Verdict::Pass) {
            s.push_str(&format!(
                "{} {} {}{}: {}\n",
                c.verdict,
                c.check,
                c.unit.as_deref().unwrap_or("-"),
                c.file
                    .as_deref()
                    .map(|f| format!(" `{f}`"))
                    .unwrap_or_default(),
                c.detail
            ));
        }
        if self.dry_run {
            for c in &self.would_run {
                s.push_str(&format!("would check {c}\n"));
            }
            s.push_str(&format!(
                "gate {} (dry run): would gate {} units; nothing read, no report written — {} (exit {}): a dry run checks no evidence, so it never passes\n",
                self.plan,
                self.units.len(),
                self.verdict,
                self.exit_code
            ));
            return s;
        }
        let pass = self
            .checks
            .iter()
            .filter(|c| c.verdict == Verdict::Pass)
            .count();
        s.push_str(&format!(
            "gate {}: {} — {} checks ({} passed), {} units, {} bytes read back\n",
            self.plan,
            self.verdict,
            self.checks.len(),
            pass,
            self.units.len(),
            self.bytes_read
        ));
        if !self.reclaimed.is_empty() {
            s.push_str(&format!(
                "{} units reclaimed, listed with the verdict they had (not re-read): {}\n",
                self.reclaimed.len(),
                crate::cli::join_limited(&self.reclaimed, 6)
            ));
        }
        s
    }
}

/// Aggregate: FAIL > INCONCLUSIVE > SKIP (central only) > PASS; no evidence is INCONCLUSIVE.
pub fn aggregate(checks: &[Check]) -> Verdict {
    let evidence = checks.iter().any(|c| c.verdict == Verdict::Pass);
    let worst = checks
        .iter()
        .map(|c| {
            if c.verdict == Verdict::Skip && !c.central {
                Verdict::Pass
            } else {
                c.verdict
            }
        })
        .max()
        .unwrap_or(Verdict::Inconclusive);
    if worst == Verdict::Pass && !evidence {
        Verdict::Inconclusive
    } else {
        worst
    }
}

/// Run the gate and write its report.
pub fn run(plan: &Plan, opts: &GateOpts) -> Result<GateReport, GateError> {
    plan.ensure_runnable()?;
    let work = WorkDir::of_plan(plan, opts.work_dir.as_deref());
    crate::fetch::discover::check_pins(plan, &work)?;
    crate::space::expect(&work.reports(), 0, "gate");
    let units: Vec<String> = match opts.units.as_deref() {
        Some(s) if s.trim().is_empty() => Vec::new(),
        sel => plan
            .select_units(sel)?
            .iter()
            .map(|u| u.as_str().to_owned())
            .collect(),
    };
    let whole_release = units.len() == plan.units.len();
    let mut checks = Vec::new();
    let mut bytes_read = 0;
    if units.is_empty() {
        checks.push(Check {
            check: "selection",
            unit: None,
            file: None,
            verdict: Verdict::Inconclusive,
            central: true,
            detail: "the unit selection is empty: no evidence".into(),
        });
    } else if !opts.dry_run {
        // Units are gated on all cores (hashing dominates); the report lists them in plan order.
        let resolution = checks::Gate::resolve(plan, &work);
        let progress = Counter::new("gate", "units", units.len() as u64, opts.progress);
        let per_unit = crate::work::par_map(&units, |u| {
            let mut g = checks::Gate::new(plan, &work, opts.no_upstream_compare, &resolution);
            g.unit(u);
            progress.done(u, || {
                format!(
                    "{}: {} checks, {} B read",
                    aggregate(&g.checks),
                    g.checks.len(),
                    g.bytes_read
                )
            });
            (g.checks, g.bytes_read)
        });
        progress.note("release-wide checks (index, totals, root files)");
        for (c, b) in per_unit {
            checks.extend(c);
            bytes_read += b;
        }
        let mut g = checks::Gate::new(plan, &work, opts.no_upstream_compare, &resolution);
        g.index(whole_release);
        bytes_read += g.bytes_read;
        checks.extend(g.checks);
        checks.extend(index_totals::index_totals(plan, &work));
        let (root, root_bytes) = root_files::root_files(plan, &work, whole_release);
        checks.extend(root);
        bytes_read += root_bytes;
        progress.finish();
    }
    let verdict = if opts.dry_run {
        Verdict::Inconclusive
    } else {
        aggregate(&checks)
    };
    let would_run = if opts.dry_run && !units.is_empty() {
        planned_checks(units.len(), opts.no_upstream_compare, whole_release)
    } else {
        Vec::new()
    };
    let reclaimed = checks
        .iter()
        .filter(|c| c.check == "reclaimed")
        .filter_map(|c| c.unit.clone())
        .collect();
    let mut report = GateReport {
        v: 1,
        plan: plan.name.clone(),
        verdict,
        exit_code: 0,
        units,
        bytes_read,
        reclaimed,
        checks,
        dry_run: opts.dry_run,
        would_run,
    };
    report.exit_code = report.exit().code();
    if !opts.dry_run {
        let path = opts
            .report
            .clone()
            .unwrap_or_else(|| work.reports().join("gate.json"));
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let bytes = serde_json::to_vec_pretty(&report).unwrap_or_default();
        // An identical report is not rewritten: a finished re-run writes nothing.
        if std::fs::read(&path).ok().as_deref() != Some(bytes.as_slice()) {
            ledger::write_atomic(&path, &bytes)?;
        }
    }
    Ok(report)
}
