//! Binding a plan to the upstream tensors (`plans/README.md` §"Resolution"): every tensor the
//! fetch stage read from the pinned safetensors headers is claimed by exactly one unit and
//! exactly one rule — a container (whose companion scale/bias tensors are found, checked for
//! dtype and shape, and claimed by it) or a plain stream. Anything else is refused naming the
//! tensor: a weight is never silently dropped (ARCHITECTURE.md §3).
//!
//! Geometry follows seed 000 ("Quantization modes"): fp8-e4m3-block = F8_E4M3 `[rows, cols]` with
//! a `[ceil(rows/br), ceil(cols/bc)]` e8m0 grid; mxfp4 = two e2m1 per byte `[rows, cols/2]` with
//! `[rows, cols/32]` scales; affine = u32 words `[rows, cols·bits/32]` with `[rows, cols/group]`
//! scales and biases.

use super::pattern::{glob_match, stem};
use super::{ContainerMode, ContainerSpec, Plan, PlanError, RuleAction, UnitName};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The container format's alignment of tiles and sub-regions (seed 000: 16 KiB, a constant of
/// the format, never the host page size).
pub const TILE_ALIGN: u64 = 16 * 1024;

/// One tensor of an upstream safetensors header, as the fetch stage reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamTensor {
    /// The plan source it came from ([`super::SINGLE_SOURCE_NAME`] in a `[source]` plan).
    pub source: String,
    /// Tensor name as in the header.
    pub name: String,
    /// Safetensors dtype string (`F8_E4M3`).
    pub dtype: String,
    /// Shape as stored.
    pub shape: Vec<u64>,
    /// Repository path of the safetensors file holding it.
    pub file: String,
}

impl UpstreamTensor {
    /// A tensor of the single source of a `[source]` plan.
    pub fn new(name: &str, dtype: &str, shape: &[u64], file: &str) -> UpstreamTensor {
        UpstreamTensor {
            source: super::SINGLE_SOURCE_NAME.to_owned(),
            name: name.to_owned(),
            dtype: dtype.to_owned(),
            shape: shape.to_vec(),
            file: file.to_owned(),
        }
    }

    /// The same tensor attributed to source `source` (multi-source plans).
    pub fn in_source(mut self, source: &str) -> UpstreamTensor {
        self.source = source.to_owned();
        self
    }
}

/// Bytes per element of a safetensors dtype; `None` for sub-byte and unknown dtypes.
pub fn dtype_size(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" | "F8_E8M0" => 1,
        "I16" | "U16" | "F16" | "BF16" => 2,
        "I32" | "U32" | "F32" => 4,
        "I64" | "U64" | "F64" | "C64" => 8,
        _ => return None,
    })
}

/// The checked geometry of one container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Geometry {
    /// Output rows.
    pub rows: u64,
    /// Logical input columns (elements, not bytes).
    pub cols: u64,
    /// Bytes of one row of the packed tensor.
    pub packed_row_bytes: u64,
    /// Rows of the scale tensor.
    pub scale_rows: u64,
    /// Columns of the scale tensor.
    pub scale_cols: u64,
    /// Bytes of one row of the scale (and bias) tensor.
    pub scale_row_bytes: u64,
    /// Weight rows one scale row covers (128 for a 128×128 fp8 grid, else 1).
    pub rows_per_scale: u64,
    /// Input columns one scale covers.
    pub cols_per_scale: u64,
    /// Rows per tile after the plan's `rows_per_tile` and memory budget (last tile may be shorter).
    pub tile_rows: u64,
    /// Bytes of one full tile slot (16 KiB-aligned packed + scale [+ bias] sub-regions).
    pub tile_slot_bytes: u64,
}

/// One container: the weight and the companions it consumes.
#[derive(Debug, Clone, Serialize)]
pub struct ContainerPlacement {
    /// The packed weight.
    pub weight: UpstreamTensor,
    /// Its scale tensor.
    pub scale: UpstreamTensor,
    /// Its bias tensor (affine only).
    pub bias: Option<UpstreamTensor>,
    /// Mode and templates of the rule.
    pub spec: ContainerSpec,
    /// Checked geometry.
    pub geometry: Geometry,
    /// Index of the rule in `plan.rules`.
    pub rule: usize,
}

/// What becomes of one upstream tensor (or weight + companions).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[allow(clippy::large_enum_variant)] // few per unit; boxing would only cost the stages a deref
pub enum Placement {
    /// The upstream bytes verbatim.
    Plain {
        /// The tensor.
        tensor: UpstreamTensor,
        /// Index of the rule in `plan.rules`.
        rule: usize,
    },
    /// A tile container.
    Container(ContainerPlacement),
}

impl Placement {
    /// The tensor that names this placement (the weight of a container).
    pub fn primary(&self) -> &UpstreamTensor {
        match self {
            Placement::Plain { tensor, .. } => tensor,
            Placement::Container(c) => &c.weight,
        }
    }

    /// Every upstream tensor this placement consumes.
    pub fn tensors(&self) -> Vec<&UpstreamTensor> {
        match self {
            Placement::Plain { tensor, .. } => vec![tensor],
            Placement::Container(c) => {
                let mut v = vec![&c.weight, &c.scale];
                v.extend(c.bias.as_ref());
                v
            }
        }
    }
}

/// One unit with everything it holds, sorted by tensor name.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedUnit {
    /// Unit name.
    pub name: UnitName,
    /// Source its tensors come from.
    pub source: String,
    /// Placements sorted by primary tensor name.
    pub placements: Vec<Placement>,
}

/// An upstream tensor left out by an `[[omit]]` entry.
#[derive(Debug, Clone, Serialize)]
pub struct Omitted {
    /// The tensor.
    pub tensor: UpstreamTensor,
    /// The entry's reason.
    pub reason: String,
}

impl ResolvedUnit {
    /// Every upstream tensor the unit needs (weights, companions, plain streams): what fetch
    /// must bring in for it.
    pub fn tensors(&self) -> impl Iterator<Item = &UpstreamTensor> {
        self.placements.iter().flat_map(|p| p.tensors())
    }
}

/// The plan bound to the upstream tensors: every unit in plan order, and what was deliberately
/// left out.
#[derive(Debug, Clone, Serialize)]
pub struct Resolution {
    /// Units in plan order.
    pub units: Vec<ResolvedUnit>,
    /// Tensors left out by `[[omit]]`, sorted by name.
    pub omitted: Vec<Omitted>,
}

impl Resolution {
    /// The unit named `name`.
    pub fn unit(&self, name: &str) -> Option<&ResolvedUnit> {
        self.units.iter().find(|u| u.name.as_str() == name)
    }

    /// How many upstream tensors the resolution accounts for (all of them, by construction).
    pub fn tensor_count(&self) -> usize {
        self.units
            .iter()
            .flat_map(|u| &u.placements)
            .map(|p| p.tensors().len())
            .sum::<usize>()
            + self.omitted.len()
    }
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

pub(super) fn resolve(plan: &Plan, tensors: &[UpstreamTensor]) -> Result<Resolution, PlanError> {
    let path = plan.locator().path().to_owned();
    let qual = |t: &UpstreamTensor| {
        if plan.multi_source {
            format!("{}:{}", t.source, t.name)
        } else {
            t.name.clone()
        }
    };
    let fail =
        |t: &UpstreamTensor, line: Option<usize>, key: &str, reason: String| PlanError::Tensor {
            path: path.clone(),
            tensor: qual(t),
            line,
            key: key.to_owned(),
            reason,
        };

    // 1. Tensors: known source, known dtype, declared weight file, listed once.
    let mut by_name: HashMap<(&str, &str), usize> = HashMap::with_capacity(tensors.len());
    for (i, t) in tensors.iter().enumerate() {
        let Some(src) = plan.source(&t.source) else {
            return Err(fail(
                t,
                None,
                "",
                format!(
                    "comes from source `{}`, which the plan does not declare",
                    t.source
                ),
            ));
        };
        if super::Dtype::new(&t.dtype).is_err() {
            return Err(fail(
                t,
                None,
                "",
                format!("has dtype `{}`, which is not a safetensors dtype", t.dtype),
            ));
        }
        if !src.weights.iter().any(|w| glob_match(w, &t.file)) {
            return Err(fail(t, Some(src.line), &format!("{}.weights", src.key), format!("is in `{}`, which no `weights` glob of source `{}` names; add the file to `weights`", t.file, src.name)));
        }
        if let Some(prev) = by_name.insert((t.source.as_str(), t.name.as_str()), i) {
            let other = tensors.get(prev).map_or("", |p| p.file.as_str());
            return Err(fail(t, None, "", format!("appears twice (in `{other}` and `{}`); upstream headers must name each tensor once", t.file)));
        }
    }
    for src in &plan.sources {
        let mine = || tensors.iter().filter(|t| t.source == src.name);
        if let Some(n) = src.expected_tensors {
            let got = mine().count() as u64;
            if got != n {
                return Err(PlanError::Invalid { path: path.clone(), line: src.line, key: format!("{}.expected_tensors", src.key), reason: format!("source `{}` declares {n} tensors but its headers hold {got}; the pinned revision is not the checkpoint this plan was written for", src.name) });
            }
        }
        if let Some(n) = src.expected_weight_files {
            let mut files: Vec<&str> = mine().map(|t| t.file.as_str()).collect();
            files.sort_unstable();
            files.dedup();
            if files.len() as u64 != n {
                return Err(PlanError::Invalid {
                    path: path.clone(),
                    line: src.line,
                    key: format!("{}.expected_weight_files", src.key),
                    reason: format!(
                        "source `{}` declares {n} weight files but its tensors come from {}",
                        src.name,
                        files.len()
                    ),
                });
            }
        }
    }

    // 2. Units: exactly one claims each tensor (or one `[[omit]]` leaves it out: `None`).
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
    let mut unit_of: Vec<Option<usize>> = vec![None; tensors.len()];
    let mut omitted = Vec::new();
    for (i, t) in tensors.iter().enumerate() {
        let mut found: Option<usize> = None;
        for (ui, u) in plan.units.iter().enumerate() {
            let pats = unit_pats.get(ui).map_or(&[][..], |p| p.as_slice());
            if u.source == t.source && pats.iter().any(|p| p.matches(&t.name)) {
                if let Some(prev) = found.and_then(|f| plan.units.get(f)) {
                    return Err(fail(t, Some(u.line), &u.key, format!("is claimed by unit `{}` (line {}) and by unit `{}`; a tensor belongs to exactly one unit — narrow one of the `tensors` patterns", prev.name, prev.line, u.name)));
                }
                found = Some(ui);
            }
        }
        let omit = plan
            .omit
            .iter()
            .zip(&omit_pats)
            .find(|(o, pats)| o.source == t.source && pats.iter().any(|p| p.matches(&t.name)));
        match (found, omit) {
            (Some(ui), Some((o, _))) => {
                let u = plan.units.get(ui).map_or("", |u| u.name.as_str());
                return Err(fail(t, Some(o.line), &o.key, format!("is claimed by unit `{u}` and left out by `{}`; narrow one of them", o.key)));
            }
            (Some(ui), None) => {
                if let Some(slot) = unit_of.get_mut(i) {
                    *slot = Some(ui);
                }
            }
            (None, Some((o, _))) => omitted.push(Omitted { tensor: t.clone(), reason: o.reason.clone() }),
            (None, None) => return Err(fail(t, Some(plan.list_lines().0), "units", "is claimed by no unit; add a pattern for it to a unit's `tensors`, or leave it out explicitly with `[[omit]]` and a reason (a weight is never silently dropped)".into())),
        }
    }

    // 3. Rules: first match wins.
    let rule_pats: Vec<Pat<'_>> = plan.rules.iter().map(|r| Pat::new(&r.pattern)).collect();
    let mut rule_of = vec![usize::MAX; tensors.len()];
    for (i, t) in tensors.iter().enumerate() {
        if unit_of.get(i).is_some_and(|u| u.is_none()) {
            continue; // omitted: no rule applies
        }
        let hit = plan.rules.iter().zip(&rule_pats).position(|(r, p)| {
            r.source.as_ref().is_none_or(|s| *s == t.source)
                && r.when_dtype.as_ref().is_none_or(|d| d.as_str() == t.dtype)
                && p.matches(&t.name)
        });
        match hit {
            Some(r) => {
                if let Some(slot) = rule_of.get_mut(i) {
                    *slot = r;
                }
            }
            None => return Err(fail(t, Some(plan.list_lines().1), "rules", format!("(dtype `{}`) matches no rule; add a rule for it (e.g. a last `match = \"*\"`, `plain = true`)", t.dtype))),
        }
    }

    // 4. Containers find and claim their companions.
    let mut consumed_by: Vec<Option<usize>> = vec![None; tensors.len()];
    let mut containers: HashMap<usize, ContainerPlacement> = HashMap::new();
    for (i, t) in tensors.iter().enumerate() {
        let ri = rule_of.get(i).copied().unwrap_or(usize::MAX);
        let Some(rule) = plan.rules.get(ri) else {
            continue;
        };
        let RuleAction::Container(spec) = &rule.action else {
            continue;
        };
        let vars = [("name", t.name.as_str()), ("stem", stem(&t.name))];
        let (scale_t, bias_t) = match &spec.mode {
            ContainerMode::Fp8E4m3Block { scale, .. } | ContainerMode::Mxfp4 { scale, .. } => {
                (scale.as_str(), None)
            }
            ContainerMode::Affine { scales, biases, .. } => {
                (scales.as_str(), Some(biases.as_str()))
            }
        };
        let mut companions = Vec::new();
        for tpl in std::iter::once(scale_t).chain(bias_t) {
            let cname = super::Template::parse(tpl)
                .and_then(|tp| tp.render_strs(&vars))
                .map_err(|e| fail(t, Some(rule.line), &rule.key, e))?;
            let Some(&ci) = by_name.get(&(t.source.as_str(), cname.as_str())) else {
                return Err(fail(t, Some(rule.line), &rule.key, format!("needs companion `{cname}` for its `{}` container, and no upstream tensor has that name; fix the template or the rule's `match`/`when_dtype`", spec.mode.name())));
            };
            let c = tensors
                .get(ci)
                .ok_or_else(|| fail(t, None, "", "internal index".into()))?;
            if unit_of.get(ci) != unit_of.get(i) {
                return Err(fail(t, Some(rule.line), &rule.key, format!("and its companion `{cname}` are claimed by different units (or one is omitted); keep them together")));
            }
            if let Some(cr) = rule_of.get(ci).and_then(|r| plan.rules.get(*r)) {
                if matches!(cr.action, RuleAction::Container(_)) {
                    return Err(fail(c, Some(cr.line), &cr.key, format!("is a companion of `{}` but is itself matched by container rule `{}`; exclude it with `when_dtype`", t.name, cr.key)));
                }
            }
            match consumed_by.get_mut(ci) {
                Some(Some(prev)) => {
                    let other = tensors.get(*prev).map_or("", |p| p.name.as_str());
                    return Err(fail(
                        c,
                        Some(rule.line),
                        &rule.key,
                        format!(
                            "is claimed as a companion by both `{other}` and `{}`",
                            t.name
                        ),
                    ));
                }
                Some(slot) => *slot = Some(i),
                None => {}
            }
            if c.dtype != spec.scale_dtype.as_str() {
                return Err(fail(
                    c,
                    Some(rule.line),
                    &rule.key,
                    format!(
                        "companion of `{}` has dtype `{}`, the rule's `scale_dtype` is `{}`",
                        t.name, c.dtype, spec.scale_dtype
                    ),
                ));
            }
            companions.push(c.clone());
        }
        let geometry = geometry(plan, spec, t, &companions)
            .map_err(|e| fail(t, Some(rule.line), &rule.key, e))?;
        let mut comp = companions.into_iter();
        let (Some(scale), bias) = (comp.next(), comp.next()) else {
            return Err(fail(
                t,
                Some(rule.line),
                &rule.key,
                "a container needs a scale tensor".into(),
            ));
        };
        containers.insert(
            i,
            ContainerPlacement {
                weight: t.clone(),
                scale,
                bias,
                spec: spec.clone(),
                geometry,
                rule: ri,
            },
        );
    }

    // 5. Assemble units; every tensor is a container weight, a consumed companion, or plain.
    let mut units: Vec<ResolvedUnit> = plan
        .units
        .iter()
        .map(|u| ResolvedUnit {
            name: u.name.clone(),
            source: u.source.clone(),
            placements: Vec::new(),
        })
        .collect();
    for (i, t) in tensors.iter().enumerate() {
        if consumed_by.get(i).is_some_and(|c| c.is_some())
            || unit_of.get(i).is_some_and(|u| u.is_none())
        {
            continue;
        }
        let placement = match containers.remove(&i) {
            Some(c) => Placement::Container(c),
            None => Placement::Plain {
                tensor: t.clone(),
                rule: rule_of.get(i).copied().unwrap_or(usize::MAX),
            },
        };
        if let Some(u) = unit_of
            .get(i)
            .copied()
            .flatten()
            .and_then(|ui| units.get_mut(ui))
        {
            u.placements.push(placement);
        }
    }
    for (u, pu) in units.iter_mut().zip(&plan.units) {
        if u.placements.is_empty() {
            return Err(PlanError::EmptyUnit {
                path: path.clone(),
                line: pu.line,
                key: format!("{}.tensors", pu.key),
                unit: u.name.to_string(),
            });
        }
        u.placements
            .sort_by(|a, b| a.primary().name.cmp(&b.primary().name));
    }
    omitted.sort_by(|a, b| a.tensor.name.cmp(&b.tensor.name));
    Ok(Resolution { units, omitted })
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
