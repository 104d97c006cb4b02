//! `--units SEL` (`plans/README.md` §"Unit selection"): comma-separated unit names or inclusive
//! ranges `FIRST..LAST` in plan order. Unknown names, reversed or empty ranges and empty items
//! are refused; a unit named twice is selected once. The result is in plan order, so disjoint
//! selections of N workers cover the plan exactly when their union does.

use super::{Plan, PlanError, UnitName};

pub(super) fn select(plan: &Plan, sel: Option<&str>) -> Result<Vec<UnitName>, PlanError> {
    let Some(sel) = sel else {
        return Ok(plan.units.iter().map(|u| u.name.clone()).collect());
    };
    let refuse = |reason: String| PlanError::Selection {
        path: plan.path.clone(),
        selection: sel.to_owned(),
        reason,
    };
    let index = |name: &str| -> Result<usize, PlanError> {
        plan.units
            .iter()
            .position(|u| u.name.as_str() == name)
            .ok_or_else(|| {
                let near: Vec<&str> = plan
                    .units
                    .iter()
                    .map(|u| u.name.as_str())
                    .filter(|n| n.starts_with(name.get(..name.len().min(3)).unwrap_or("")))
                    .take(3)
                    .collect();
                let also = if near.is_empty() {
                    String::new()
                } else {
                    format!(" (units include {})", near.join(", "))
                };
                refuse(format!(
                    "`{name}` is not a unit of plan `{}`{also}",
                    plan.name
                ))
            })
    };
    let mut chosen = vec![false; plan.units.len()];
    for item in sel.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(refuse(
                "an empty item; write names or ranges separated by single commas".into(),
            ));
        }
        let (a, b) = match item.split_once("..") {
            Some((a, b)) => (index(a.trim())?, index(b.trim())?),
            None => {
                let i = index(item)?;
                (i, i)
            }
        };
        if b < a {
            return Err(refuse(format!(
                "range `{item}` runs backwards in plan order; write it as `{}..{}`",
                item.split_once("..").map_or("", |p| p.1.trim()),
                item.split_once("..").map_or("", |p| p.0.trim())
            )));
        }
        for c in chosen.iter_mut().take(b + 1).skip(a) {
            *c = true;
        }
    }
    Ok(plan
        .units
        .iter()
        .zip(chosen)
        .filter(|(_, c)| *c)
        .map(|(u, _)| u.name.clone())
        .collect())
}
