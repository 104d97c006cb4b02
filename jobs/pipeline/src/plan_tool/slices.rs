//! `minirun-plan slices`: disjoint unit slices whose peak disk fits a budget, for the distributed
//! shape's workers (docs/publish.md §9, "Slices that fit a machine"). It reads the pinned
//! upstream's tree and safetensors headers (as `check` does, nothing fetched), binds the plan, and
//! prices every unit from the plan alone: what fetch writes for it (its files' headers and tensor
//! ranges) plus what repack writes (each container's exact length from its layout, the plain
//! streams, an allowance for the metadata files). Staging adds nothing (links, §1). A worker
//! keeps all of its slice at once, so a slice's peak is the worker's fixed bytes (every weight
//! file's header in `upstream/_headers/`, the root files fetched and in the release, the ledger)
//! plus the sum of its units.
//!
//! Slices are contiguous runs of units in plan order (`FIRST..LAST`, what `--units` takes): the
//! fewest that fit the budget, then balanced — the same number of slices with the smallest largest
//! peak — so the matrix's machines finish together.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::PlanToolError;
use crate::fetch::discover::{list_source, read_headers, Upstream};
use crate::fetch::root::root_paths;
use crate::plan::Plan;

/// Ledger, reports and progress files a worker writes besides payloads, per worker (per unit:
/// [`crate::space::LEDGER_BYTES_PER_UNIT`]).
const LEDGER_BYTES: u64 = 1 << 20;

/// Options of one slices run.
#[derive(Debug, Clone, Default)]
pub struct SlicesOpts {
    /// The most bytes one worker's work directory may hold; `None`: the plan's
    /// `[run] disk_budget`.
    pub disk_budget: Option<u64>,
    /// The most slices wanted (the matrix's width); `None`: as many as the budget needs.
    pub max_slices: Option<usize>,
    /// `--endpoint`, else the plan's, else `HF_ENDPOINT`.
    pub endpoint: Option<String>,
    /// `--window`: the slices of one machine's disk-budgeted window (docs/publish.md §12), which
    /// keeps every reclaimed unit's journals and record: their allowance joins the fixed part.
    pub window: bool,
}

/// What one unit costs a worker's disk.
#[derive(Debug, Clone, Serialize)]
pub struct UnitCost {
    /// Unit name.
    pub unit: String,
    /// Bytes fetch writes for it (headers and tensor ranges).
    pub fetched_bytes: u64,
    /// Bytes repack writes for it (containers, plain streams, metadata).
    pub release_bytes: u64,
    /// What it adds to a worker's peak: both, and its journals.
    pub peak_bytes: u64,
    /// What it keeps in a window's work directory once reclaimed (journals, unit record).
    pub kept_bytes: u64,
}

/// One worker's slice.
#[derive(Debug, Clone, Serialize)]
pub struct Slice {
    /// The `--units` selection (`FIRST..LAST`, or one name).
    pub units: String,
    /// Its units in plan order.
    pub unit_names: Vec<String>,
    /// The worker's predicted peak work-directory bytes.
    pub peak_bytes: u64,
}

/// The outcome of one slices run.
#[derive(Debug, Clone, Serialize)]
pub struct SlicesReport {
    /// The plan file.
    pub plan: PathBuf,
    /// The hub asked.
    pub endpoint: String,
    /// The budget asked for.
    pub disk_budget: u64,
    /// `--max-slices`, when given.
    pub max_slices: Option<usize>,
    /// What every worker holds whatever its slice (with `--window`, also what every unit keeps
    /// once reclaimed).
    pub fixed_bytes: u64,
    /// `--window`.
    pub window: bool,
    /// Every unit in plan order.
    pub units: Vec<UnitCost>,
    /// The slices, in plan order.
    pub slices: Vec<Slice>,
    /// The selections alone: a GitHub Actions matrix (`fromJSON`).
    pub matrix: Vec<String>,
}

/// Read the pinned upstream of the plan at `path`, price its units and cut the slices.
pub fn run(path: &Path, opts: &SlicesOpts) -> Result<SlicesReport, PlanToolError> {
    let plan = Plan::load(path)?;
    super::require_pinned(&plan, path)?;
    let Some(budget) = opts.disk_budget.or(plan.run.disk_budget) else {
        return Err(PlanToolError::Usage(format!(
            "`{}` sets no `[run] disk_budget`; give --disk-budget SIZE (e.g. 100G)",
            path.display()
        )));
    };
    if opts.max_slices == Some(0) {
        return Err(PlanToolError::Usage(
            "--max-slices must be at least 1".into(),
        ));
    }
    let (client, rt) = super::connect(&plan, opts.endpoint.as_deref())?;
    let (upstream, root_bytes) = rt.block_on(read_upstream(&client, &plan))?;
    let resolution = plan.resolve(&upstream.tensors)?;
    let units: Vec<UnitCost> = resolution
        .units
        .iter()
        .map(|ru| {
            let (fetched, release) = crate::space::unit_peak(ru, &upstream);
            UnitCost {
                unit: ru.name.to_string(),
                fetched_bytes: fetched,
                release_bytes: release,
                peak_bytes: fetched + release + crate::space::LEDGER_BYTES_PER_UNIT,
                kept_bytes: crate::space::unit_kept(ru),
            }
        })
        .collect();
    let headers: u64 = upstream.files.values().map(|f| f.header.data_start).sum();
    let kept: u64 = units.iter().map(|u| u.kept_bytes).sum();
    let fixed = headers + 2 * root_bytes + LEDGER_BYTES + if opts.window { kept } else { 0 };
    let runs = cut(&units, fixed, budget, opts.max_slices)?;
    let slices: Vec<Slice> = runs
        .into_iter()
        .map(|r| slice(&units[r.clone()], fixed))
        .collect();
    Ok(SlicesReport {
        plan: path.to_owned(),
        endpoint: client.endpoint().to_owned(),
        disk_budget: budget,
        max_slices: opts.max_slices,
        fixed_bytes: fixed,
        window: opts.window,
        matrix: slices.iter().map(|s| s.units.clone()).collect(),
        units,
        slices,
    })
}

/// Every weight file's header of every source, and the bytes of the root files the plan copies.
async fn read_upstream(
    client: &hub::client::HubClient,
    plan: &Plan,
) -> Result<(Upstream, u64), PlanToolError> {
    let mut up = Upstream::default();
    let mut root_bytes = 0;
    for src in &plan.sources {
        let listing = list_source(client, src).await?;
        root_bytes += root_paths(plan, src)
            .iter()
            .filter_map(|p| listing.files.get(p))
            .map(|f| f.size)
            .sum::<u64>();
        let concurrency = plan.run.concurrency as usize;
        for rh in read_headers(client, src, &listing, None, None, concurrency).await? {
            up.add(src, &listing, rh);
        }
    }
    Ok((up, root_bytes))
}

fn slice(units: &[UnitCost], fixed: u64) -> Slice {
    let names: Vec<String> = units.iter().map(|u| u.unit.clone()).collect();
    let selection = match names.as_slice() {
        [one] => one.clone(),
        [first, .., last] => format!("{first}..{last}"),
        [] => String::new(),
    };
    Slice {
        units: selection,
        peak_bytes: fixed + units.iter().map(|u| u.peak_bytes).sum::<u64>(),
        unit_names: names,
    }
}

/// The slices as index ranges of `units`: the fewest contiguous runs whose peaks fit `budget -
/// fixed`, balanced. Refused, with the budget that would do, when a unit alone does not fit or
/// more than `max_slices` runs are needed.
fn cut(
    units: &[UnitCost],
    fixed: u64,
    budget: u64,
    max_slices: Option<usize>,
) -> Result<Vec<std::ops::Range<usize>>, PlanToolError> {
    let peaks: Vec<u64> = units.iter().map(|u| u.peak_bytes).collect();
    let peaks = peaks.as_slice();
    let h = crate::space::human;
    let largest = units.iter().max_by_key(|u| u.peak_bytes);
    let need_one = fixed + largest.map_or(0, |u| u.peak_bytes);
    if budget < need_one {
        let what = largest.map_or_else(String::new, |u| {
            format!(
                "; its largest unit `{}` alone needs {} (fetched {}, release {})",
                u.unit,
                h(u.peak_bytes),
                h(u.fetched_bytes),
                h(u.release_bytes)
            )
        });
        return Err(PlanToolError::Budget(format!(
            "a disk budget of {} holds no slice: every worker keeps {} whatever its units{what}; the smallest budget that works is {} ({need_one} bytes)",
            h(budget),
            h(fixed),
            h(need_one)
        )));
    }
    let room = budget - fixed;
    let count = runs(peaks, room).len();
    if let Some(max) = max_slices.filter(|m| count > *m) {
        let at_least = fixed + smallest_room(peaks, max, room);
        return Err(PlanToolError::Budget(format!(
            "a disk budget of {} needs {count} slices, more than --max-slices {max}; {max} slices need a budget of at least {} ({at_least} bytes)",
            h(budget),
            h(at_least)
        )));
    }
    Ok(runs(peaks, smallest_room(peaks, count, room)))
}

/// Contiguous runs of `peaks`, each as long as fits `room` (greedy: the fewest runs).
fn runs(peaks: &[u64], room: u64) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut sum) = (0, 0u64);
    for (i, &p) in peaks.iter().enumerate() {
        if i > start && sum + p > room {
            out.push(start..i);
            (start, sum) = (i, 0);
        }
        sum += p;
    }
    if start < peaks.len() {
        out.push(start..peaks.len());
    }
    out
}

/// The smallest room in `[largest peak, hi]` that still cuts `peaks` into at most `count` runs
/// (binary search: the run count only falls as the room grows).
fn smallest_room(peaks: &[u64], count: usize, hi: u64) -> u64 {
    let total: u64 = peaks.iter().sum();
    let (mut lo, mut hi) = (peaks.iter().copied().max().unwrap_or(0), hi.max(total));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if runs(peaks, mid).len() <= count {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

impl SlicesReport {
    /// The readable form: one line per slice with its peak, then the budget.
    pub fn render(&self) -> String {
        let h = crate::space::human;
        let mut out = format!(
            "plan `{}`: {} units in {} slices under a disk budget of {} (each worker keeps {} besides its units)\n",
            self.plan.display(),
            self.units.len(),
            self.slices.len(),
            h(self.disk_budget),
            h(self.fixed_bytes)
        );
        for (i, s) in self.slices.iter().enumerate() {
            out.push_str(&format!(
                "slice {i}: --units {}  ({} units, peak {})\n",
                s.units,
                s.unit_names.len(),
                h(s.peak_bytes)
            ));
        }
        out
    }

    /// One `--units` selection per line, for a shell loop.
    pub fn lines(&self) -> String {
        self.matrix.iter().map(|m| format!("{m}\n")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(unit: &str, peak: u64) -> UnitCost {
        UnitCost {
            unit: unit.into(),
            fetched_bytes: peak / 2,
            release_bytes: peak / 2,
            peak_bytes: peak,
            kept_bytes: 0,
        }
    }

    fn cut_of(
        peaks: &[u64],
        fixed: u64,
        budget: u64,
        max: Option<usize>,
    ) -> Result<Vec<std::ops::Range<usize>>, String> {
        let units: Vec<UnitCost> = peaks
            .iter()
            .enumerate()
            .map(|(i, p)| cost(&format!("u{i}"), *p))
            .collect();
        cut(&units, fixed, budget, max).map_err(|e| e.to_string())
    }

    #[test]
    fn the_fewest_runs_that_fit_then_balanced() {
        // Greedy at room 10 cuts [5,5 | 1,1,1,1] (10 and 4); balanced keeps two runs with a
        // smaller largest one, [5 | 5,1,1,1,1] (5 and 9).
        let peaks = [5, 5, 1, 1, 1, 1];
        assert_eq!(runs(&peaks, 10), vec![0..2, 2..6]);
        let r = cut_of(&peaks, 5, 15, None).unwrap();
        assert_eq!(r, vec![0..1, 1..6]);
        // Runs are contiguous, disjoint and cover every unit in order.
        assert_eq!(r.first().map(|r| r.start), Some(0));
        assert_eq!(r.last().map(|r| r.end), Some(peaks.len()));
        assert!(r.windows(2).all(|w| w[0].end == w[1].start));
        // A budget holding everything is one slice.
        assert_eq!(cut_of(&peaks, 5, 1000, None).unwrap(), vec![0..6]);
        // Units one by one when each fills the room.
        assert_eq!(
            cut_of(&[4, 4, 4], 0, 4, None).unwrap(),
            vec![0..1, 1..2, 2..3]
        );
    }

    #[test]
    fn a_budget_too_small_names_the_unit_and_the_budget_that_works() {
        let err = cut_of(&[6, 9, 3], 5, 13, None).unwrap_err();
        assert!(err.contains("`u1` alone needs 9 B"), "{err}");
        assert!(err.contains("(14 bytes)"), "{err}");
        assert!(cut_of(&[6, 9, 3], 5, 14, None).is_ok());
    }

    #[test]
    fn more_slices_than_allowed_says_the_budget_for_that_many() {
        let peaks = [5, 5, 5, 5];
        let err = cut_of(&peaks, 0, 5, Some(2)).unwrap_err();
        assert!(
            err.contains("needs 4 slices, more than --max-slices 2"),
            "{err}"
        );
        assert!(err.contains("(10 bytes)"), "{err}");
        assert_eq!(cut_of(&peaks, 0, 10, Some(2)).unwrap(), vec![0..2, 2..4]);
    }
}
