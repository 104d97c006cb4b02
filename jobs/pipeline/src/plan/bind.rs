//! The binding of a plan to the upstream tensors, step by step, collecting every finding instead
//! of stopping at the first: the stages take the first finding as their refusal
//! ([`super::Plan::resolve`]); `minirun-plan check` reports them all ([`super::Plan::survey`]).
//! Each step keeps going past a bad tensor with the choice a later step can live with (the first
//! claiming unit, no rule, no container), so the findings after the first are what a fix of the
//! first would still leave — best effort, never a substitute for re-running.

use std::collections::HashMap;

use serde::Serialize;

use super::pattern::{glob_match, stem};
use super::resolve::{
    dtype_size, ContainerPlacement, Geometry, Omitted, Placement, Resolution, ResolvedUnit,
    UpstreamTensor, TILE_ALIGN,
};
use super::{ContainerMode, ContainerSpec, Plan, PlanError, RuleAction};

/// What kind of disagreement a finding is, so a report can group them and a caller can act on
/// the difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// A tensor of a source the plan does not declare.
    UnknownSource,
    /// A dtype safetensors does not define.
    UnknownDtype,
    /// A tensor in a file no `weights` glob names.
    FileNotInWeights,
    /// Two headers name the same tensor.
    DuplicateTensor,
    /// `expected_tensors` disagrees with the headers.
    TensorCount,
    /// `expected_weight_files` disagrees with the files.
    WeightFileCount,
    /// Two units claim one tensor.
    ClaimedTwice,
    /// A unit claims a tensor an `[[omit]]` leaves out.
    ClaimedAndOmitted,
    /// No unit claims a tensor and no `[[omit]]` leaves it out.
    Unclaimed,
    /// No rule matches a tensor.
    NoRule,
    /// A container's companion (scale, bias) is not upstream.
    MissingCompanion,
    /// A container and its companion are in different units.
    CompanionSplit,
    /// A companion is itself matched by a container rule.
    CompanionIsContainer,
    /// Two containers claim one companion.
    CompanionTwice,
    /// A companion's dtype is not the rule's `scale_dtype`.
    ScaleDtype,
    /// A container's dtype, shape or tile geometry does not fit its rule.
    Geometry,
    /// A container of a stacking rule cannot join a stack (no member index, a gap, another
    /// shape).
    Stack,
    /// A unit claims nothing.
    EmptyUnit,
}

impl FindingKind {
    /// The kebab-case name (as in JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::UnknownSource => "unknown-source",
            FindingKind::UnknownDtype => "unknown-dtype",
            FindingKind::FileNotInWeights => "file-not-in-weights",
            FindingKind::DuplicateTensor => "duplicate-tensor",
            FindingKind::TensorCount => "tensor-count",
            FindingKind::WeightFileCount => "weight-file-count",
            FindingKind::ClaimedTwice => "claimed-twice",
            FindingKind::ClaimedAndOmitted => "claimed-and-omitted",
            FindingKind::Unclaimed => "unclaimed",
            FindingKind::NoRule => "no-rule",
            FindingKind::MissingCompanion => "missing-companion",
            FindingKind::CompanionSplit => "companion-split",
            FindingKind::CompanionIsContainer => "companion-is-container",
            FindingKind::CompanionTwice => "companion-twice",
            FindingKind::ScaleDtype => "scale-dtype",
            FindingKind::Geometry => "geometry",
            FindingKind::Stack => "stack",
            FindingKind::EmptyUnit => "empty-unit",
        }
    }
}

/// One disagreement between the plan and the upstream tensors.
#[derive(Debug)]
pub struct Finding {
    /// Its kind.
    pub kind: FindingKind,
    /// The refusal a stage would print for it.
    pub error: PlanError,
}

/// Everything binding learned: every finding, what each unit and rule took, and the resolution
/// when there was no finding.
#[derive(Debug)]
pub struct Survey {
    /// The resolution; `None` when there is a finding.
    pub resolution: Option<Resolution>,
    /// Every finding, in binding order.
    pub findings: Vec<Finding>,
    /// Upstream tensors each unit claims (by `plan.units` index).
    pub unit_tensors: Vec<u64>,
    /// Tensors each rule decided, companions included under their container's rule (by
    /// `plan.rules` index).
    pub rule_tensors: Vec<u64>,
    /// Tensors left out by `[[omit]]`.
    pub omitted: u64,
}

/// A glob with its literal prefix, so most non-matches cost one `starts_with`.
struct Pat<'a> {
    glob: &'a str,
    prefix: &'a str,
}

impl<'a> Pat<'a> {
    fn new(glob: &'a str) -> Pat<'a> {
        let cut = glob.find(['*', '?']).unwrap_or(glob.len());
        Pat {
            glob,
            prefix: glob.get(..cut).unwrap_or(""),
        }
    }
    fn matches(&self, s: &str) -> bool {
        s.starts_with(self.prefix) && glob_match(self.glob, s)
    }
}

/// Where each tensor went: `Unit(i)`, left out, or nowhere (a finding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    Unit(usize),
    Omitted,
    Nowhere,
}

struct Binder<'p, 't> {
    plan: &'p Plan,
    tensors: &'t [UpstreamTensor],
    by_name: HashMap<(&'t str, &'t str), usize>,
    claim: Vec<Claim>,
    omitted: Vec<Omitted>,
    rule_of: Vec<Option<usize>>,
    consumed_by: Vec<Option<usize>>,
    containers: HashMap<usize, ContainerPlacement>,
    stacks: HashMap<usize, super::StackPlacement>,
    stacked: std::collections::HashSet<usize>,
    findings: Vec<Finding>,
}

/// Bind `plan` to `tensors`, collecting every finding.
pub(super) fn survey(plan: &Plan, tensors: &[UpstreamTensor]) -> Survey {
    let mut b = Binder {
        plan,
        tensors,
        by_name: HashMap::with_capacity(tensors.len()),
        claim: vec![Claim::Nowhere; tensors.len()],
        omitted: Vec::new(),
        rule_of: vec![None; tensors.len()],
        consumed_by: vec![None; tensors.len()],
        containers: HashMap::new(),
        stacks: HashMap::new(),
        stacked: Default::default(),
        findings: Vec::new(),
    };
    b.check_tensors();
    b.check_counts();
    b.claim_units();
    b.pick_rules();
    b.find_companions();
    b.stack_containers();
    b.assemble()
}

impl<'p, 't> Binder<'p, 't> {
    fn path(&self) -> std::path::PathBuf {
        self.plan.locator().path().to_path_buf()
    }

    fn tensor(
        &mut self,
        kind: FindingKind,
        t: &UpstreamTensor,
        at: Option<(usize, &str)>,
        reason: String,
    ) {
        let tensor = if self.plan.multi_source {
            format!("{}:{}", t.source, t.name)
        } else {
            t.name.clone()
        };
        let error = PlanError::Tensor {
            path: self.path(),
            tensor,
            line: at.map(|a| a.0),
            key: at.map_or(String::new(), |a| a.1.to_owned()),
            reason,
        };
        self.findings.push(Finding { kind, error });
    }

    /// 1. Tensors: known source, known dtype, declared weight file, listed once.
    fn check_tensors(&mut self) {
        let tensors = self.tensors;
        for (i, t) in tensors.iter().enumerate() {
            let Some(src) = self.plan.source(&t.source) else {
                let why = format!(
                    "comes from source `{}`, which the plan does not declare",
                    t.source
                );
                self.tensor(FindingKind::UnknownSource, t, None, why);
                continue;
            };
            if super::Dtype::new(&t.dtype).is_err() {
                let why = format!("has dtype `{}`, which is not a safetensors dtype", t.dtype);
                self.tensor(FindingKind::UnknownDtype, t, None, why);
            }
            if !src.weights.iter().any(|w| glob_match(w, &t.file)) {
                let key = format!("{}.weights", src.key);
                let why = format!("is in `{}`, which no `weights` glob of source `{}` names; add the file to `weights`", t.file, src.name);
                self.tensor(
                    FindingKind::FileNotInWeights,
                    t,
                    Some((src.line, &key)),
                    why,
                );
            }
            if let Some(prev) = self.by_name.insert((t.source.as_str(), t.name.as_str()), i) {
                let other = tensors.get(prev).map_or("", |p| p.file.as_str());
                let why = format!("appears twice (in `{other}` and `{}`); upstream headers must name each tensor once", t.file);
                self.tensor(FindingKind::DuplicateTensor, t, None, why);
            }
        }
    }

    /// `expected_tensors` and `expected_weight_files` of each source.
    fn check_counts(&mut self) {
        let tensors = self.tensors;
        for src in &self.plan.sources {
            let mine = || tensors.iter().filter(|t| t.source == src.name);
            let path = self.path();
            let invalid = |key: &str, reason: String| PlanError::Invalid {
                path: path.clone(),
                line: src.line,
                key: format!("{}.{key}", src.key),
                reason,
            };
            if let Some(n) = src.expected_tensors {
                let got = mine().count() as u64;
                if got != n {
                    let error = invalid("expected_tensors", format!("source `{}` declares {n} tensors but its headers hold {got}; the pinned revision is not the checkpoint this plan was written for", src.name));
                    self.findings.push(Finding {
                        kind: FindingKind::TensorCount,
                        error,
                    });
                }
            }
            if let Some(n) = src.expected_weight_files {
                let mut files: Vec<&str> = mine().map(|t| t.file.as_str()).collect();
                files.sort_unstable();
                files.dedup();
                if files.len() as u64 != n {
                    let error = invalid(
                        "expected_weight_files",
                        format!(
                            "source `{}` declares {n} weight files but its tensors come from {}",
                            src.name,
                            files.len()
                        ),
                    );
                    self.findings.push(Finding {
                        kind: FindingKind::WeightFileCount,
                        error,
                    });
                }
            }
        }
    }

    /// 2. Units: exactly one claims each tensor (or one `[[omit]]` leaves it out).
    fn claim_units(&mut self) {
        let plan = self.plan;
        let unit_pats: Vec<Vec<Pat<'_>>> = plan
            .units
            .iter()
            .map(|u| u.tensors.iter().map(|g| Pat::new(g)).collect())
            .collect();
        let omit_pats: Vec<Vec<Pat<'_>>> = plan
            .omit
            .iter()
            .map(|o| o.tensors.iter().map(|g| Pat::new(g)).collect())
            .collect();
        for (i, t) in self.tensors.iter().enumerate() {
            let mut found: Option<usize> = None;
            for (ui, (u, pats)) in plan.units.iter().zip(&unit_pats).enumerate() {
                if u.source != t.source || !pats.iter().any(|p| p.matches(&t.name)) {
                    continue;
                }
                match found.and_then(|f| plan.units.get(f)) {
                    Some(prev) => {
                        let why = format!("is claimed by unit `{}` (line {}) and by unit `{}`; a tensor belongs to exactly one unit — narrow one of the `tensors` patterns", prev.name, prev.line, u.name);
                        self.tensor(FindingKind::ClaimedTwice, t, Some((u.line, &u.key)), why);
                    }
                    None => found = Some(ui),
                }
            }
            let omit =
                plan.omit.iter().zip(&omit_pats).find(|(o, pats)| {
                    o.source == t.source && pats.iter().any(|p| p.matches(&t.name))
                });
            let claim = match (found, omit) {
                (Some(ui), Some((o, _))) => {
                    let u = plan.units.get(ui).map_or("", |u| u.name.as_str());
                    let why = format!(
                        "is claimed by unit `{u}` and left out by `{}`; narrow one of them",
                        o.key
                    );
                    self.tensor(
                        FindingKind::ClaimedAndOmitted,
                        t,
                        Some((o.line, &o.key)),
                        why,
                    );
                    Claim::Unit(ui)
                }
                (Some(ui), None) => Claim::Unit(ui),
                (None, Some((o, _))) => {
                    self.omitted.push(Omitted {
                        tensor: t.clone(),
                        reason: o.reason.clone(),
                    });
                    Claim::Omitted
                }
                (None, None) => {
                    let why = "is claimed by no unit; add a pattern for it to a unit's `tensors`, or leave it out explicitly with `[[omit]]` and a reason (a weight is never silently dropped)".to_owned();
                    self.tensor(
                        FindingKind::Unclaimed,
                        t,
                        Some((plan.list_lines().0, "units")),
                        why,
                    );
                    Claim::Nowhere
                }
            };
            if let Some(slot) = self.claim.get_mut(i) {
                *slot = claim;
            }
        }
    }

    /// 3. Rules: first match wins (claimed tensors only).
    fn pick_rules(&mut self) {
        let plan = self.plan;
        let rule_pats: Vec<Pat<'_>> = plan.rules.iter().map(|r| Pat::new(&r.pattern)).collect();
        for (i, t) in self.tensors.iter().enumerate() {
            if !matches!(self.claim.get(i), Some(Claim::Unit(_))) {
                continue;
            }
            let hit = plan.rules.iter().zip(&rule_pats).position(|(r, p)| {
                r.source.as_ref().is_none_or(|s| *s == t.source)
                    && r.when_dtype.as_ref().is_none_or(|d| d.as_str() == t.dtype)
                    && p.matches(&t.name)
            });
            match hit {
                Some(r) => {
                    if let Some(slot) = self.rule_of.get_mut(i) {
                        *slot = Some(r);
                    }
                }
                None => {
                    let why = format!("(dtype `{}`) matches no rule; add a rule for it (e.g. a last `match = \"*\"`, `plain = true`)", t.dtype);
                    self.tensor(
                        FindingKind::NoRule,
                        t,
                        Some((plan.list_lines().1, "rules")),
                        why,
                    );
                }
            }
        }
    }

    /// 4. Containers find and claim their companions, and their geometry is checked.
    fn find_companions(&mut self) {
        let plan = self.plan;
        for (i, t) in self.tensors.iter().enumerate() {
            let Some(ri) = self.rule_of.get(i).copied().flatten() else {
                continue;
            };
            let Some(rule) = plan.rules.get(ri) else {
                continue;
            };
            let RuleAction::Container(spec) = &rule.action else {
                continue;
            };
            let at = Some((rule.line, rule.key.as_str()));
            let Some(companions) = self.companions(i, t, spec, at) else {
                continue;
            };
            let geometry = match geometry(plan, spec, t, &companions) {
                Ok(g) => g,
                Err(why) => {
                    self.tensor(FindingKind::Geometry, t, at, why);
                    continue;
                }
            };
            let mut comp = companions.into_iter();
            if let (Some(scale), bias) = (comp.next(), comp.next()) {
                let placement = ContainerPlacement {
                    weight: t.clone(),
                    scale,
                    bias,
                    spec: spec.clone(),
                    geometry,
                    rule: ri,
                };
                self.containers.insert(i, placement);
            }
        }
    }

    /// 4b. The containers of a stacking rule are gathered into stacks (`plan::stack`).
    fn stack_containers(&mut self) {
        let plan = self.plan;
        let mut items = Vec::new();
        let stacking: Vec<usize> = self
            .containers
            .iter()
            .filter(|(_, c)| plan.rules.get(c.rule).is_some_and(|r| r.stack.is_some()))
            .map(|(i, _)| *i)
            .collect();
        for i in stacking {
            let (Some(c), Some(Claim::Unit(ui))) = (self.containers.remove(&i), self.claim.get(i))
            else {
                continue;
            };
            if let Some(pattern) = plan.rules.get(c.rule).and_then(|r| r.stack.as_ref()) {
                items.push((i, *ui, pattern, c));
            }
        }
        let grouped = super::stack::group(items);
        for (i, why) in grouped.refused {
            if let Some(t) = self.tensors.get(i) {
                let rule = self
                    .rule_of
                    .get(i)
                    .copied()
                    .flatten()
                    .and_then(|r| plan.rules.get(r));
                let at = rule.map(|r| (r.line, r.key.as_str()));
                self.tensor(FindingKind::Stack, t, at, why);
            }
        }
        self.stacked.extend(grouped.members);
        self.stacks.extend(grouped.stacks);
    }

    /// The companions (scale, then bias) of container weight `t`, each checked and claimed;
    /// `None` after a finding.
    fn companions(
        &mut self,
        i: usize,
        t: &UpstreamTensor,
        spec: &ContainerSpec,
        at: Option<(usize, &str)>,
    ) -> Option<Vec<UpstreamTensor>> {
        let tensors = self.tensors;
        let vars = [("name", t.name.as_str()), ("stem", stem(&t.name))];
        let (scale_t, bias_t) = match &spec.mode {
            ContainerMode::Fp8E4m3Block { scale, .. } | ContainerMode::Mxfp4 { scale, .. } => {
                (scale.as_str(), None)
            }
            ContainerMode::Affine { scales, biases, .. } => {
                (scales.as_str(), Some(biases.as_str()))
            }
        };
        let mut out = Vec::new();
        for tpl in std::iter::once(scale_t).chain(bias_t) {
            let cname = match super::Template::parse(tpl).and_then(|tp| tp.render_strs(&vars)) {
                Ok(c) => c,
                Err(e) => {
                    self.tensor(FindingKind::MissingCompanion, t, at, e);
                    return None;
                }
            };
            let Some((ci, c)) = self
                .by_name
                .get(&(t.source.as_str(), cname.as_str()))
                .and_then(|&ci| Some((ci, tensors.get(ci)?)))
            else {
                let why = format!("needs companion `{cname}` for its `{}` container, and no upstream tensor has that name; fix the template or the rule's `match`/`when_dtype`", spec.mode.name());
                self.tensor(FindingKind::MissingCompanion, t, at, why);
                return None;
            };
            if self.claim.get(ci) != self.claim.get(i) {
                let why = format!("and its companion `{cname}` are claimed by different units (or one is omitted); keep them together");
                self.tensor(FindingKind::CompanionSplit, t, at, why);
                return None;
            }
            if let Some(cr) = self
                .rule_of
                .get(ci)
                .copied()
                .flatten()
                .and_then(|r| self.plan.rules.get(r))
            {
                if matches!(cr.action, RuleAction::Container(_)) {
                    let why = format!("is a companion of `{}` but is itself matched by container rule `{}`; exclude it with `when_dtype`", t.name, cr.key);
                    self.tensor(
                        FindingKind::CompanionIsContainer,
                        c,
                        Some((cr.line, &cr.key)),
                        why,
                    );
                    return None;
                }
            }
            if let Some(Some(prev)) = self.consumed_by.get(ci) {
                let other = tensors.get(*prev).map_or("", |p| p.name.as_str());
                let why = format!(
                    "is claimed as a companion by both `{other}` and `{}`",
                    t.name
                );
                self.tensor(FindingKind::CompanionTwice, c, at, why);
                return None;
            }
            if let Some(slot) = self.consumed_by.get_mut(ci) {
                *slot = Some(i);
            }
            if c.dtype != spec.scale_dtype.as_str() {
                let why = format!(
                    "companion of `{}` has dtype `{}`, the rule's `scale_dtype` is `{}`",
                    t.name, c.dtype, spec.scale_dtype
                );
                self.tensor(FindingKind::ScaleDtype, c, at, why);
                return None;
            }
            out.push(c.clone());
        }
        Some(out)
    }

    /// Step 5, assembly: every claimed tensor is a container weight, a consumed companion, or
    /// plain; then the per-unit and per-rule counts.
    fn assemble(mut self) -> Survey {
        let plan = self.plan;
        let mut units: Vec<ResolvedUnit> = plan
            .units
            .iter()
            .map(|u| ResolvedUnit {
                name: u.name.clone(),
                source: u.source.clone(),
                placements: Vec::new(),
            })
            .collect();
        let mut unit_tensors = vec![0u64; plan.units.len()];
        let mut rule_tensors = vec![0u64; plan.rules.len()];
        for (i, t) in self.tensors.iter().enumerate() {
            let Some(&Claim::Unit(ui)) = self.claim.get(i) else {
                continue;
            };
            if let Some(n) = unit_tensors.get_mut(ui) {
                *n += 1;
            }
            let owner = self.consumed_by.get(i).copied().flatten().unwrap_or(i);
            if let Some(n) = self
                .rule_of
                .get(owner)
                .copied()
                .flatten()
                .and_then(|r| rule_tensors.get_mut(r))
            {
                *n += 1;
            }
            if self.consumed_by.get(i).is_some_and(Option::is_some) {
                continue;
            }
            let placement = match (self.stacks.remove(&i), self.containers.remove(&i)) {
                (Some(s), _) => Placement::Stack(s),
                (None, _) if self.stacked.contains(&i) => continue, // a later member of a stack
                (None, Some(c)) => Placement::Container(c),
                (None, None) => match self.rule_of.get(i).copied().flatten() {
                    Some(rule) if !self.is_container_rule(rule) => Placement::Plain {
                        tensor: t.clone(),
                        rule,
                    },
                    _ => continue, // a container with a finding, or no rule
                },
            };
            if let Some(u) = units.get_mut(ui) {
                u.placements.push(placement);
            }
        }
        for (n, pu) in unit_tensors.iter().zip(&plan.units) {
            if *n == 0 {
                let error = PlanError::EmptyUnit {
                    path: self.path(),
                    line: pu.line,
                    key: format!("{}.tensors", pu.key),
                    unit: pu.name.to_string(),
                };
                self.findings.push(Finding {
                    kind: FindingKind::EmptyUnit,
                    error,
                });
            }
        }
        for u in &mut units {
            u.placements
                .sort_by(|a, b| a.sort_name().cmp(b.sort_name()));
        }
        self.omitted
            .sort_by(|a, b| a.tensor.name.cmp(&b.tensor.name));
        let omitted = self.omitted.len() as u64;
        let resolution = self.findings.is_empty().then_some(Resolution {
            units,
            omitted: self.omitted,
        });
        Survey {
            resolution,
            findings: self.findings,
            unit_tensors,
            rule_tensors,
            omitted,
        }
    }

    fn is_container_rule(&self, rule: usize) -> bool {
        self.plan
            .rules
            .get(rule)
            .is_some_and(|r| matches!(r.action, RuleAction::Container(_)))
    }
}
fn dims2(t: &UpstreamTensor) -> Result<(u64, u64), String> {
    match t.shape.as_slice() {
        [r, c] if *r > 0 && *c > 0 => Ok((*r, *c)),
        s => Err(format!(
            "has shape {s:?}; a container holds a non-empty 2-D `[rows, cols]` tensor"
        )),
    }
}

fn align(n: u64) -> Option<u64> {
    n.checked_add(TILE_ALIGN - 1)
        .map(|x| x / TILE_ALIGN * TILE_ALIGN)
}

fn geometry(
    plan: &Plan,
    spec: &ContainerSpec,
    w: &UpstreamTensor,
    comps: &[UpstreamTensor],
) -> Result<Geometry, String> {
    let mname = spec.mode.name();
    let (rows, wcols) = dims2(w)?;
    let scale = comps.first().ok_or("no scale tensor")?;
    let (srows, scols) = dims2(scale).map_err(|e| format!("its scale `{}` {e}", scale.name))?;
    let ssize = dtype_size(&scale.dtype).ok_or("scale dtype has no byte size")?;
    let want_dtype = |ok: &[&str]| -> Result<(), String> {
        if ok.contains(&w.dtype.as_str()) {
            Ok(())
        } else {
            Err(format!("has dtype `{}` but the rule makes it an `{mname}` container, which holds {}; narrow the rule with `when_dtype`", w.dtype, ok.join(" or ")))
        }
    };
    let (cols, packed_row_bytes, rps, cps, want) = match &spec.mode {
        ContainerMode::Fp8E4m3Block { block, .. } => {
            want_dtype(&["F8_E4M3"])?;
            let (br, bc) = (u64::from(block[0]), u64::from(block[1]));
            (
                wcols,
                wcols,
                br,
                bc,
                [rows.div_ceil(br), wcols.div_ceil(bc)],
            )
        }
        ContainerMode::Mxfp4 { group, .. } => {
            want_dtype(&["I8", "U8"])?;
            let cols = wcols.checked_mul(2).ok_or("too wide")?;
            let g = u64::from(*group);
            if cols % g != 0 {
                return Err(format!(
                    "has {cols} inputs, not a multiple of the mxfp4 group {g}"
                ));
            }
            (cols, wcols, 1, g, [rows, cols / g])
        }
        ContainerMode::Affine { group, bits, .. } => {
            want_dtype(&["U32"])?;
            let bitsum = wcols.checked_mul(32).ok_or("too wide")?;
            let b = u64::from(*bits);
            if bitsum % b != 0 {
                return Err(format!("has {wcols} u32 words per row, which do not hold a whole number of {b}-bit codes"));
            }
            let cols = bitsum / b;
            let g = u64::from(*group);
            if cols % g != 0 {
                return Err(format!(
                    "has {cols} inputs, not a multiple of the affine group {g}"
                ));
            }
            let bytes = wcols.checked_mul(4).ok_or("too wide")?;
            (cols, bytes, 1, g, [rows, cols / g])
        }
    };
    for c in comps {
        if c.shape != want {
            return Err(format!("needs companion `{}` of shape {want:?} for a {rows}×{cols} `{mname}` weight, but it has {:?}", c.name, c.shape));
        }
    }
    let scale_row_bytes = scols.checked_mul(ssize).ok_or("scale too wide")?;
    let n_sub = comps.len() as u64; // scale (+ bias) sub-regions
    let slot = |r: u64| -> Option<u64> {
        let p = align(r.checked_mul(packed_row_bytes)?)?;
        let s = align(r.div_ceil(rps).checked_mul(scale_row_bytes)?)?;
        p.checked_add(s.checked_mul(n_sub)?)
    };
    let want_rows = u64::from(spec.rows_per_tile.unwrap_or(plan.tiles.rows_per_tile)).min(rows);
    let budget = plan.tiles.memory_budget_bytes;
    let mut tile_rows = want_rows;
    if slot(tile_rows).is_none_or(|s| s > budget) {
        // Largest multiple of the scale-block rows whose slot fits the budget.
        let (mut lo, mut hi) = (0u64, want_rows / rps);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if slot(mid * rps).is_some_and(|s| s <= budget) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        if lo == 0 {
            return Err(format!("needs {} bytes for one tile of {rps} rows, more than `tiles.memory_budget_mib` allows; raise the budget", slot(rps).unwrap_or(u64::MAX)));
        }
        tile_rows = lo * rps;
    }
    Ok(Geometry {
        rows,
        cols,
        packed_row_bytes,
        scale_rows: srows,
        scale_cols: scols,
        scale_row_bytes,
        rows_per_scale: rps,
        cols_per_scale: cps,
        tile_rows,
        tile_slot_bytes: slot(tile_rows).unwrap_or(u64::MAX),
    })
}
