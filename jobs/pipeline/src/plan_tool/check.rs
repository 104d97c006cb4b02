//! `minirun-plan check`: the plan against its pinned upstream, before anything is fetched. Per
//! source it confirms the pin and lists the tree (as fetch does), reads every weight file's
//! safetensors header with two Range requests, and looks for the root files the plan copies;
//! then it binds the plan to the tensors collecting every finding ([`Plan::survey`]) and reports
//! what each rule and unit takes. A plan "would run" when there is no finding and it is not a
//! draft: exit 0 only then.

use std::path::{Path, PathBuf};

use serde::Serialize;

use hub::client::HubClient;

use super::PlanToolError;
use crate::fetch::discover::{list_source, read_headers};
use crate::fetch::root::root_paths;
use crate::plan::{Plan, PlanStatus, RuleAction, UpstreamTensor};

/// How many findings of one kind the readable report lists (JSON has them all).
const SHOWN_PER_KIND: usize = 8;

/// Options of one check run.
#[derive(Debug, Clone, Default)]
pub struct CheckOpts {
    /// `--endpoint`, else the plan's, else `HF_ENDPOINT`.
    pub endpoint: Option<String>,
}

/// One source at its pin.
#[derive(Debug, Clone, Serialize)]
pub struct SourceCheck {
    /// Source name.
    pub source: String,
    /// Repository id.
    pub repo: String,
    /// The pinned commit (confirmed by the hub).
    pub revision: String,
    /// Files in the revision.
    pub files: usize,
    /// Files the `weights` globs match.
    pub weight_files: usize,
    /// `expected_weight_files`, when the plan declares it.
    pub expected_weight_files: Option<u64>,
    /// Tensors in their headers.
    pub tensors: usize,
    /// Root files the plan copies from this source, and whether the revision has each.
    pub root_files: Vec<RootFileCheck>,
}

/// One root file the plan names.
#[derive(Debug, Clone, Serialize)]
pub struct RootFileCheck {
    /// Repository path.
    pub path: String,
    /// Whether the revision holds it.
    pub present: bool,
}

/// What one rule decided.
#[derive(Debug, Clone, Serialize)]
pub struct RuleCheck {
    /// Plan key (`rules[0]`).
    pub key: String,
    /// Its `match` glob.
    pub pattern: String,
    /// Its `when_dtype`, if any.
    pub when_dtype: Option<String>,
    /// `plain` or the container mode.
    pub action: String,
    /// Tensors it decided (a container's companions count under it).
    pub tensors: u64,
}

/// What one unit claims.
#[derive(Debug, Clone, Serialize)]
pub struct UnitCheck {
    /// Unit name.
    pub unit: String,
    /// Upstream tensors it claims.
    pub tensors: u64,
}

/// One reason the plan would not run.
#[derive(Debug, Clone, Serialize)]
pub struct CheckFinding {
    /// Kebab-case kind: a binding kind (`unclaimed`, `claimed-twice`, `geometry`, …) or
    /// `no-weight-files`, `missing-file`, `unused-rule`.
    pub kind: String,
    /// The message, naming the plan line, key and tensor or file.
    pub message: String,
}

/// The outcome of one check.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// The plan file.
    pub plan: PathBuf,
    /// The hub asked.
    pub endpoint: String,
    /// Whether the plan is a draft (the stages refuse it whatever the layout).
    pub draft: bool,
    /// Each source.
    pub sources: Vec<SourceCheck>,
    /// Each rule, in plan order.
    pub rules: Vec<RuleCheck>,
    /// Each unit, in plan order.
    pub units: Vec<UnitCheck>,
    /// Tensors `[[omit]]` leaves out.
    pub omitted: u64,
    /// Every finding.
    pub findings: Vec<CheckFinding>,
    /// No finding: the layout binds to the upstream.
    pub layout_ok: bool,
    /// The layout binds and the plan is not a draft.
    pub would_run: bool,
}

/// Check the plan at `path` against its pinned upstream.
pub fn run(path: &Path, opts: &CheckOpts) -> Result<CheckReport, PlanToolError> {
    let plan = Plan::load(path)?;
    super::require_pinned(&plan, path)?;
    let (client, rt) = super::connect(&plan, opts.endpoint.as_deref())?;
    let mut findings = Vec::new();
    let mut sources = Vec::new();
    let mut tensors = Vec::new();
    for src in &plan.sources {
        let (check, mut found) = rt.block_on(check_source(&client, &plan, src, &mut tensors))?;
        sources.push(check);
        findings.append(&mut found);
    }
    let survey = plan.survey(&tensors);
    findings.extend(survey.findings.iter().map(|f| CheckFinding {
        kind: f.kind.as_str().to_owned(),
        message: f.error.to_string(),
    }));
    let rules = rule_checks(&plan, &survey.rule_tensors, &mut findings);
    let units = plan
        .units
        .iter()
        .zip(&survey.unit_tensors)
        .map(|(u, n)| UnitCheck {
            unit: u.name.to_string(),
            tensors: *n,
        })
        .collect();
    let draft = matches!(plan.status, PlanStatus::Draft { .. });
    let layout_ok = findings.is_empty();
    Ok(CheckReport {
        plan: path.to_owned(),
        endpoint: client.endpoint().to_owned(),
        draft,
        sources,
        rules,
        units,
        omitted: survey.omitted,
        findings,
        layout_ok,
        would_run: layout_ok && !draft,
    })
}

/// List one source, read its headers into `tensors`, and report missing root files.
async fn check_source(
    client: &HubClient,
    plan: &Plan,
    src: &crate::plan::Source,
    tensors: &mut Vec<UpstreamTensor>,
) -> Result<(SourceCheck, Vec<CheckFinding>), PlanToolError> {
    let listing = list_source(client, src).await?;
    let mut findings = Vec::new();
    if listing.weights.is_empty() {
        findings.push(CheckFinding {
            kind: "no-weight-files".into(),
            message: format!(
                "source `{}`: no file of `{}` at {} matches the weight globs {:?}",
                src.name,
                src.repo.as_str(),
                src.revision.as_str(),
                src.weights
            ),
        });
    }
    let root_files: Vec<RootFileCheck> = root_paths(plan, src)
        .into_iter()
        .map(|p| RootFileCheck {
            present: listing.files.contains_key(&p),
            path: p,
        })
        .collect();
    for f in root_files.iter().filter(|f| !f.present) {
        findings.push(CheckFinding {
            kind: "missing-file".into(),
            message: format!(
                "source `{}`: the plan copies `{}`, which `{}` at {} does not hold",
                src.name,
                f.path,
                src.repo.as_str(),
                src.revision.as_str()
            ),
        });
    }
    let concurrency = plan.run.concurrency as usize;
    let before = tensors.len();
    // No work directory: each header is read until two reads agree and checked against the
    // checkpoint's index, as fetch does (nothing cached, so nothing is trusted).
    for rh in read_headers(client, src, &listing, None, None, concurrency).await? {
        for t in &rh.header.tensors {
            tensors.push(
                UpstreamTensor::new(&t.name, t.dtype.as_str(), &t.shape, &rh.path)
                    .in_source(&src.name),
            );
        }
    }
    let check = SourceCheck {
        source: src.name.clone(),
        repo: src.repo.as_str().to_owned(),
        revision: src.revision.as_str().to_owned(),
        files: listing.files.len(),
        weight_files: listing.weights.len(),
        expected_weight_files: src.expected_weight_files,
        tensors: tensors.len() - before,
        root_files,
    };
    Ok((check, findings))
}

/// Each rule with what it decided; a rule that decides nothing is a finding (the plan was
/// written for tensors this upstream does not have — a container rule matching nothing would
/// publish its weights as plain streams).
fn rule_checks(plan: &Plan, counts: &[u64], findings: &mut Vec<CheckFinding>) -> Vec<RuleCheck> {
    let mut out = Vec::new();
    for (r, n) in plan.rules.iter().zip(counts) {
        let action = match &r.action {
            RuleAction::Container(spec) => spec.mode.name().to_owned(),
            _ => "plain".to_owned(),
        };
        if *n == 0 {
            findings.push(CheckFinding {
                kind: "unused-rule".into(),
                message: format!(
                    "`{}`:{}: key `{}`: rule `{}`{} ({action}) decides no upstream tensor; fix its `match`/`when_dtype` or remove it",
                    plan.locator().path().display(),
                    r.line,
                    r.key,
                    r.pattern,
                    r.when_dtype.as_ref().map(|d| format!(" when_dtype {d}")).unwrap_or_default()
                ),
            });
        }
        out.push(RuleCheck {
            key: r.key.clone(),
            pattern: r.pattern.clone(),
            when_dtype: r.when_dtype.as_ref().map(|d| d.as_str().to_owned()),
            action,
            tensors: *n,
        });
    }
    out
}

impl CheckReport {
    /// The readable form: sources, rules, units, findings by kind, verdict.
    pub fn render(&self) -> String {
        let mut out = format!("plan `{}` against {}\n", self.plan.display(), self.endpoint);
        for s in &self.sources {
            let expect = s
                .expected_weight_files
                .map(|n| format!(" (expected {n})"))
                .unwrap_or_default();
            out.push_str(&format!(
                "source {}: {} @ {}: {} files, {} weight files{expect}, {} tensors\n",
                s.source, s.repo, s.revision, s.files, s.weight_files, s.tensors
            ));
            for f in &s.root_files {
                let mark = if f.present { "present" } else { "MISSING" };
                out.push_str(&format!("  root file {}: {mark}\n", f.path));
            }
        }
        out.push_str("rules:\n");
        for r in &self.rules {
            let dtype = r
                .when_dtype
                .as_ref()
                .map(|d| format!(" when {d}"))
                .unwrap_or_default();
            out.push_str(&format!(
                "  {} `{}`{dtype} → {}: {} tensors\n",
                r.key, r.pattern, r.action, r.tensors
            ));
        }
        out.push_str(&format!("units ({}):\n", self.units.len()));
        for u in &self.units {
            out.push_str(&format!("  {} {}\n", u.unit, u.tensors));
        }
        if self.omitted > 0 {
            out.push_str(&format!("omitted by [[omit]]: {} tensors\n", self.omitted));
        }
        out.push_str(&self.render_findings());
        out
    }

    fn render_findings(&self) -> String {
        let mut out = String::new();
        let mut kinds: Vec<&str> = self.findings.iter().map(|f| f.kind.as_str()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        for kind in kinds {
            let of: Vec<&CheckFinding> = self.findings.iter().filter(|f| f.kind == kind).collect();
            out.push_str(&format!("finding {kind} ({}):\n", of.len()));
            for f in of.iter().take(SHOWN_PER_KIND) {
                out.push_str(&format!("  {}\n", f.message));
            }
            if of.len() > SHOWN_PER_KIND {
                out.push_str(&format!(
                    "  … and {} more (--json lists all)\n",
                    of.len() - SHOWN_PER_KIND
                ));
            }
        }
        out.push_str(&match (self.layout_ok, self.draft) {
            (true, false) => "verdict: the plan would run\n".to_owned(),
            (true, true) => format!("verdict: the layout binds to the upstream, but the plan is a draft; settle what `draft_reason` lists, then remove `status = \"draft\"` and `draft_reason` and re-run minirun-plan check {}\n", self.plan.display()),
            (false, _) => format!("verdict: the plan would not run ({} findings)\n", self.findings.len()),
        });
        out
    }
}
