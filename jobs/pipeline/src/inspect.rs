//! `minirun-inspect` as library code: readable tables or JSON for the artifacts an operator points
//! it at. Plans (`.toml`) are here; containers, manifests and index.json are added beside them.
//!
//! A plan is shown validated with its unit templates expanded (every unit with its patterns,
//! every rule with its container geometry, sources, target, defaults applied) and its draft
//! status; a refused plan is the [`PlanError`]. [`render_resolution`] shows a plan bound to
//! upstream tensors (what the fetch stage read), unit by unit.

use crate::plan::{
    ContainerMode, NibbleOrder, Placement, Plan, PlanError, PlanStatus, Resolution, RuleAction,
};
use std::fmt::Write as _;
use std::path::Path;

/// Validate the plan at `path` and render it as a table, or as JSON when `json`.
pub fn inspect_plan(path: &Path, json: bool) -> Result<String, PlanError> {
    let plan = Plan::load(path)?;
    Ok(if json {
        let mut v = serde_json::to_value(&plan).unwrap_or_default();
        if let Some(m) = v.as_object_mut() {
            let steps = crate::plan_tool::finish_commands(&plan, path);
            m.insert("to_finish".into(), serde_json::json!(steps));
        }
        to_json(&v)
    } else {
        render_plan(&plan)
    })
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    // Serializing plain data structs cannot fail; an error would only come from a map with
    // non-string keys, which these types do not have.
    serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The readable table of a validated plan.
pub fn render_plan(plan: &Plan) -> String {
    let mut o = String::new();
    let status = match &plan.status {
        PlanStatus::Ready => "ready".to_owned(),
        PlanStatus::Draft { reason } => format!("DRAFT — no stage will run it: {reason}"),
    };
    let endpoint = plan
        .run
        .endpoint
        .clone()
        .unwrap_or_else(|| "(HF_ENDPOINT, else the hub default)".into());
    let _ = writeln!(o, "plan        {} (`{}`)", plan.name, plan.path.display());
    let _ = writeln!(o, "status      {status}");
    for (i, step) in crate::plan_tool::finish_commands(plan, &plan.path)
        .iter()
        .enumerate()
    {
        let head = if i == 0 { "to finish" } else { "" };
        let _ = writeln!(o, "{head:<11} {step}");
    }
    let _ = writeln!(o, "schema      {}", plan.schema);
    let _ = writeln!(o, "family      {}", plan.family.as_str());
    let _ = writeln!(o, "index       {}", plan.index_shape.as_str());
    let _ = writeln!(
        o,
        "target      {} @ {}",
        plan.target.repo, plan.target.branch
    );
    let _ = writeln!(o, "work dir    {}", plan.run.work_dir.display());
    let _ = writeln!(o, "endpoint    {endpoint}");
    let _ = writeln!(
        o,
        "run         concurrency {}, chunk {} MiB",
        plan.run.concurrency,
        plan.run.chunk_bytes >> 20
    );
    let _ = writeln!(
        o,
        "tiles       {} rows per tile, budget {} MiB per tile",
        plan.tiles.rows_per_tile,
        plan.tiles.memory_budget_bytes >> 20
    );
    let _ = writeln!(o, "\nsources ({})", plan.sources.len());
    for s in &plan.sources {
        let _ = writeln!(o, "  {:<14} {}@{}", s.name, s.repo, s.revision);
        let _ = writeln!(o, "  {:<14} weights {}", "", s.weights.join(", "));
        if let Some(l) = &s.license {
            let _ = writeln!(o, "  {:<14} licence {} -> /{}", "", l.from, l.file);
        }
        if let Some(r) = &s.role {
            let _ = writeln!(o, "  {:<14} role    {r}", "");
        }
        if !s.files.is_empty() {
            let files: Vec<&str> = s.files.iter().map(|f| f.as_str()).collect();
            let _ = writeln!(o, "  {:<14} copies  {}", "", files.join(", "));
        }
        if let Some(n) = s.expected_tensors {
            let _ = writeln!(o, "  {:<14} expects {n} tensors", "");
        }
        if let Some(n) = s.expected_weight_files {
            let _ = writeln!(o, "  {:<14} expects {n} weight files", "");
        }
    }
    let _ = writeln!(o, "\nunits ({})", plan.units.len());
    let width = plan
        .units
        .iter()
        .map(|u| u.name.as_str().len())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(o, "  {:<width$}  {:<12} TENSORS", "NAME", "SOURCE");
    for u in &plan.units {
        let _ = writeln!(
            o,
            "  {:<width$}  {:<12} {}",
            u.name,
            u.source,
            u.tensors.join(", ")
        );
    }
    let _ = writeln!(o, "\nrules ({}, first match wins)", plan.rules.len());
    let _ = writeln!(
        o,
        "  {:<3} {:<5} {:<32} {:<8} ACTION",
        "#", "LINE", "MATCH", "DTYPE"
    );
    for (i, r) in plan.rules.iter().enumerate() {
        let m = match &r.source {
            Some(s) => format!("{s}:{}", r.pattern),
            None => r.pattern.clone(),
        };
        let dt = r.when_dtype.as_ref().map_or("*", |d| d.as_str());
        let _ = writeln!(
            o,
            "  {i:<3} {:<5} {m:<32} {dt:<8} {}",
            r.line,
            action(&r.action)
        );
    }
    let _ = writeln!(o, "\nidentity");
    for (k, id) in [("tokenizer", &plan.tokenizer), ("config", &plan.config)] {
        match id {
            Some(id) => {
                let lic = id
                    .license
                    .as_ref()
                    .map(|l| format!(" (licence /{l})"))
                    .unwrap_or_default();
                let _ = writeln!(
                    o,
                    "  {k:<10} /{} <- {}:{}{lic}",
                    id.file, id.source, id.from
                );
            }
            None => {
                let _ = writeln!(o, "  {k:<10} (none)");
            }
        }
    }
    o
}

fn action(a: &RuleAction) -> String {
    match a {
        RuleAction::Plain => "plain stream".into(),
        RuleAction::Container(c) => {
            let tile = c
                .rows_per_tile
                .map(|r| format!(", {r} rows/tile"))
                .unwrap_or_default();
            let g = match &c.mode {
                ContainerMode::Fp8E4m3Block { scale, block } => {
                    format!("scale {scale}, block {}x{}", block[0], block[1])
                }
                ContainerMode::Mxfp4 {
                    scale,
                    group,
                    nibble_order,
                } => {
                    let order = match nibble_order {
                        NibbleOrder::LowFirst => "low-first",
                        NibbleOrder::HighFirst => "high-first",
                    };
                    format!("scale {scale}, group {group}, {order}")
                }
                ContainerMode::Affine {
                    scales,
                    biases,
                    group,
                    bits,
                } => {
                    format!("scales {scales}, biases {biases}, group {group}, {bits}-bit")
                }
            };
            format!(
                "{} ({g}, scale dtype {}{tile})",
                c.mode.name(),
                c.scale_dtype
            )
        }
    }
}

/// A plan bound to upstream tensors, unit by unit (table), or the whole resolution as JSON.
pub fn render_resolution(plan: &Plan, res: &Resolution, json: bool) -> String {
    if json {
        return to_json(res);
    }
    let mut o = String::new();
    let _ = writeln!(
        o,
        "plan {}: {} units, {} upstream tensors",
        plan.name,
        res.units.len(),
        res.tensor_count()
    );
    for u in &res.units {
        let _ = writeln!(o, "\n{} ({} placements)", u.name, u.placements.len());
        for p in &u.placements {
            match p {
                Placement::Plain { tensor, rule } => {
                    let _ = writeln!(
                        o,
                        "  plain  {} {} {:?} <- {} [rule {rule}]",
                        tensor.name, tensor.dtype, tensor.shape, tensor.file
                    );
                }
                Placement::Container(c) => {
                    let g = &c.geometry;
                    let bias = c
                        .bias
                        .as_ref()
                        .map(|b| format!(" + {}", b.name))
                        .unwrap_or_default();
                    let _ = writeln!(
                        o,
                        "  {:<6} {} {} {}x{} + {}{bias} {:?}, {} rows/tile ({} B slot) <- {} [rule {}]",
                        c.spec.mode.name(),
                        c.weight.name,
                        c.weight.dtype,
                        g.rows,
                        g.cols,
                        c.scale.name,
                        c.scale.shape,
                        g.tile_rows,
                        g.tile_slot_bytes,
                        c.weight.file,
                        c.rule
                    );
                }
                Placement::Stack(s) => {
                    let g = &s.geometry;
                    let (first, last) = (s.members.first(), s.members.last());
                    let _ = writeln!(
                        o,
                        "  stack  {} {} members ({} … {}) {}x{}, {} rows/tile ({} B slot) <- {} [rule {}]",
                        s.name,
                        s.members.len(),
                        first.map_or("", |m| m.weight.name.as_str()),
                        last.map_or("", |m| m.weight.name.as_str()),
                        g.rows,
                        g.cols,
                        g.tile_rows,
                        g.tile_slot_bytes,
                        s.lead.file,
                        s.rule
                    );
                }
            }
        }
    }
    o
}
