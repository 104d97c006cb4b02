//! A disk-budgeted run on one machine (docs/publish.md §12, issue 52 item 2): `ci/publish/step.sh
//! PLAN window` takes the slices that fit the budget in turn — fetch with the budget reserved,
//! repack, gate, stage, upload of the slice's objects and records, reclaim — then the join in the
//! same work directory. The work directory never holds more than the budget, the publication is
//! one run's, and every stage re-run over a reclaimed unit does nothing and exits 0.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::distributed::{
    kill_after, kill_settings, next, one_run_tree, plan_slices, published_tree, run_step, step,
};
use crate::support::*;

/// `step.sh PLAN window` over `work` under `budget` bytes (`None`: no MINIRUN_DISK_BUDGET):
/// (exit code, stderr).
fn window(work: &Path, up: &str, url: &str, budget: Option<u64>) -> (Option<i32>, String) {
    let bins = Path::new(env!("CARGO_BIN_EXE_minirun-plan"))
        .parent()
        .unwrap();
    let mut c =
        Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ci/publish/step.sh"));
    c.arg(plan_path())
        .arg("window")
        .env("MINIRUN_BIN", bins)
        .env("HF_ENDPOINT", url)
        .env("MINIRUN_UPSTREAM_ENDPOINT", up)
        .env("MINIRUN_WORK_DIR", work)
        .env_remove("MINIRUN_DISK_BUDGET")
        .env_remove("MINIRUN_RECORDS")
        .env_remove("UNITS")
        .env_remove("MINIRUN_SLICE")
        .env_remove("MINIRUN_MAX_SLICES");
    if let Some(b) = budget {
        c.env("MINIRUN_DISK_BUDGET", b.to_string());
    }
    let out = c.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Sample the work directory's allocated bytes every few milliseconds until stopped: the peak.
fn sample_peak(work: &Path) -> (Arc<AtomicBool>, std::thread::JoinHandle<u64>) {
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let (s, w) = (stop.clone(), work.to_path_buf());
    let handle = std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            peak.fetch_max(pipeline::space::allocated(&w), Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        peak.load(Ordering::Relaxed)
    });
    (stop, handle)
}

/// A fetch of `units` over `work` reports every unit `reclaimed` and fetches nothing.
fn nothing_fetched(work: &Path, up: &str, units: &str) {
    let f = json("fetch", work, &["--endpoint", up, "--units", units]);
    assert_eq!(f["bytes_fetched"], 0, "{f}");
    let statuses = f["units"].as_array().unwrap();
    assert!(statuses.iter().all(|u| u["status"] == "reclaimed"), "{f}");
}

fn json(bin: &str, work: &Path, args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.push("--json");
    serde_json::from_str(&step(bin, work, &a)).unwrap()
}

#[test]
fn a_budgeted_window_publishes_what_one_run_publishes_within_its_budget() {
    let up = upstream_url().to_owned();
    let reference = one_run_tree();
    let (h, _root) = hub();
    let url = h.url();
    let (budget, units) = budget_and_units(&up);
    let base = tempfile::tempdir().unwrap();
    let work = base.path().join("work");

    let (stop, sampler) = sample_peak(&work);
    let (code, err) = window(&work, &up, &url, Some(budget));
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.join().unwrap();
    assert_eq!(code, Some(0), "{err}");
    let slices = err.matches("window: slice ").count();
    eprintln!("window of {slices} slices: peak {peak} B for a budget of {budget} B");
    assert!((3..=4).contains(&slices), "{err}");
    assert!(
        peak <= budget,
        "the work directory held {peak} B, over the {budget} B budget"
    );
    assert_eq!(
        published_tree(&url),
        reference,
        "the window's publication differs from one run's"
    );

    // Every unit reclaimed: no payload left, its journals say so, its record stands.
    for u in &units {
        assert!(!work.join("upstream").join(u).exists(), "{u}");
        assert!(!work.join("release").join(u).exists(), "{u}");
        assert!(
            work.join("records").join(format!("{u}.json")).is_file(),
            "{u}"
        );
        for stage in ["fetch", "repack"] {
            let j = ledger::Journal::load(&work.join("ledger"), stage, u)
                .unwrap()
                .unwrap();
            assert_eq!(j.status, ledger::Status::Reclaimed, "{stage} {u}");
        }
    }
    assert!(work.join("upstream/_discovery.json").is_file());
    // What the reclaimed units keep (journals, records) is within the allowance `--window` cuts by.
    let kept: u64 = window_slices(&up, budget)["units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["kept_bytes"].as_u64().unwrap())
        .sum();
    let held = pipeline::space::allocated(&work.join("records"))
        + pipeline::space::allocated(&work.join("ledger"));
    eprintln!("reclaimed units keep {held} B of records and journals; allowed {kept} B");
    assert!(
        held <= kept,
        "records and journals take {held} B, over the {kept} B allowed"
    );

    // A re-run of any stage over a reclaimed slice does no work and exits 0.
    let s = "layers03..layers05";
    nothing_fetched(&work, &up, s);
    let r = json("repack", &work, &["--units", s]);
    assert!(
        r["units"]
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u["status"] == "reclaimed"),
        "{r}"
    );
    assert_eq!(r["finalized"], false, "{r}");
    let g = json("gate", &work, &["--units", s]);
    assert_eq!(g["exit_code"], 0, "{g}");
    assert_eq!(
        g["reclaimed"],
        serde_json::json!(["layers03", "layers04", "layers05"]),
        "{g}"
    );
    let unit_checks: Vec<&serde_json::Value> = g["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c.get("unit").is_some())
        .collect();
    assert!(
        unit_checks
            .iter()
            .all(|c| c["check"] == "reclaimed" && c["verdict"] == "PASS"),
        "a reclaimed unit is listed with its verdict, never re-read: {g}"
    );
    let st = json("stage", &work, &["--units", s]);
    assert_eq!(
        st["reclaimed"],
        serde_json::json!(["layers03", "layers04", "layers05"]),
        "{st}"
    );
    assert_eq!(st["files"], 0, "{st}");
    let rec = work.join("records");
    let rec = rec.to_str().unwrap();
    let c = json(
        "candidate-upload",
        &work,
        &[
            "--endpoint",
            &url,
            "--units",
            s,
            "--records",
            rec,
            "--reclaim",
        ],
    );
    assert_eq!(c["already_reclaimed"].as_array().unwrap().len(), 3, "{c}");
    assert_eq!(c["lfs_sent"], 0, "{c}");
    // The whole release cannot be finalized or staged from disk: the join's records say it.
    let (ok, _, err) = run_step("repack", &work, &["--finalize"]);
    assert!(!ok && err.contains("were reclaimed"), "{err}");
    let (ok, _, err) = run_step("stage", &work, &[]);
    assert!(!ok && err.contains("were reclaimed"), "{err}");

    // The whole window again: nothing fetched, the same publication.
    let (code, err) = window(&work, &up, &url, Some(budget));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(published_tree(&url), reference);
    for u in &units {
        assert!(!work.join("upstream").join(u).exists(), "{u} fetched again");
    }

    // A hub that lost the objects (here: another, empty one): the join names every unit missing
    // and reopens the reclaimed ones, and the next window fetches exactly those anew.
    let (lost, _lost_root) = hub();
    let (ok, _, err) = run_step(
        "candidate-upload",
        &work,
        &["--endpoint", &lost.url(), "--records", rec],
    );
    assert!(!ok, "{err}");
    assert!(
        err.contains("is not on the hub") && err.contains("are reopened: run the window again"),
        "{err}"
    );
    let j = ledger::Journal::load(&work.join("ledger"), "fetch", "layers00")
        .unwrap()
        .unwrap();
    assert_eq!(j.status, ledger::Status::Failed, "reopened");
    let (code, err) = window(&work, &up, &lost.url(), Some(budget));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(published_tree(&lost.url()), reference);
}

/// A window with no budget (none given, none in the plan) is a usage error, before any work.
#[test]
fn a_window_without_a_budget_is_a_usage_error() {
    let base = tempfile::tempdir().unwrap();
    let work = base.path().join("work");
    let (code, err) = window(&work, upstream_url(), upstream_url(), None);
    assert_eq!(code, Some(64), "{err}");
    assert!(err.contains("set MINIRUN_DISK_BUDGET"), "{err}");
    assert!(!work.exists(), "nothing written");
}

/// The reservation: a fetch whose units' peak does not fit on top of what the work directory
/// holds is refused before it writes a byte, naming the bytes.
#[test]
fn a_fetch_over_its_disk_budget_is_refused_before_it_writes() {
    let up = upstream_url();
    let base = tempfile::tempdir().unwrap();
    let work = base.path().join("work");
    let (ok, _, err) = run_step(
        "fetch",
        &work,
        &[
            "--endpoint",
            up,
            "--units",
            "layers00..layers09",
            "--disk-budget",
            "1M",
        ],
    );
    assert!(!ok, "{err}");
    assert!(
        err.contains("the disk budget of 1048576 B cannot take units layers00")
            && err.contains("need"),
        "{err}"
    );
    let payload = std::fs::read_dir(work.join("upstream"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| !e.file_name().to_string_lossy().starts_with('_'))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(payload, 0, "no unit directory written");
}

/// `minirun-plan slices --window` of the plan against `up` under `budget` bytes (`--json`).
fn window_slices(up: &str, budget: u64) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_minirun-plan"))
        .args([
            "slices",
            "--window",
            "--json",
            "--endpoint",
            up,
            "--disk-budget",
        ])
        .arg(budget.to_string())
        .arg(plan_path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The window's budget in the tests, and the plan's units: a third of the units' peak bytes on
/// top of the window's fixed part (3 or 4 slices). The window's fixed part is a worker's plus
/// what every unit keeps once reclaimed.
fn budget_and_units(up: &str) -> (u64, Vec<String>) {
    let worker = plan_slices(up, 1 << 50, 1);
    let whole = window_slices(up, 1 << 50);
    assert_eq!(whole["window"], true, "{whole}");
    let fixed = whole["fixed_bytes"].as_u64().unwrap();
    let units = whole["units"].as_array().unwrap();
    let kept: u64 = units
        .iter()
        .map(|u| u["kept_bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(
        fixed,
        worker["fixed_bytes"].as_u64().unwrap() + kept,
        "{whole}"
    );
    let peaks: u64 = units
        .iter()
        .map(|u| u["peak_bytes"].as_u64().unwrap())
        .sum();
    let names = units
        .iter()
        .map(|u| u["unit"].as_str().unwrap().to_owned())
        .collect();
    (fixed + peaks / 3 + 1, names)
}

/// Every step of the window — each slice's fetch (budget reserved), repack, gate, stage and
/// upload with reclaim, then the join — SIGKILLed at seeded instants (`MINIRUN_KILL_POINTS` per
/// step, default 3; the seed is printed, `MINIRUN_KILL_SEED` replays it), then run to completion
/// in one work directory: the work directory never passes the budget, the publication is one
/// run's, every unit ends reclaimed with nothing left of it, and a fetch of every unit afterwards
/// fetches nothing.
#[test]
fn window_steps_killed_at_seeded_instants_resume_to_the_same_publication() {
    let up = upstream_url().to_owned();
    let reference = one_run_tree();
    let (h, _root) = hub();
    let url = h.url();
    let (budget, units) = budget_and_units(&up);
    let b = budget.to_string();
    let v = window_slices(&up, budget);
    let base = tempfile::tempdir().unwrap();
    let work = base.path().join("work");
    let rec = work.join("records").to_str().unwrap().to_owned();
    let (kills, mut seed) = kill_settings(7907);
    let mut steps: Vec<(&str, Vec<String>)> = Vec::new();
    let strings = |a: &[&str]| a.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    for s in v["matrix"].as_array().unwrap() {
        let s = s.as_str().unwrap();
        steps.push((
            "fetch",
            strings(&["--endpoint", &up, "--units", s, "--disk-budget", &b]),
        ));
        steps.push(("repack", strings(&["--units", s])));
        steps.push(("gate", strings(&["--units", s])));
        steps.push(("stage", strings(&["--units", s])));
        let upload = [
            "--endpoint",
            &url,
            "--units",
            s,
            "--records",
            &rec,
            "--reclaim",
        ];
        steps.push(("candidate-upload", strings(&upload)));
    }
    steps.push(("fetch", strings(&["--endpoint", &up, "--root-files-only"])));
    steps.push(("repack", strings(&["--finalize", "--records", &rec])));
    steps.push(("stage", strings(&["--records", &rec])));
    steps.push((
        "candidate-upload",
        strings(&["--endpoint", &url, "--records", &rec]),
    ));
    steps.push(("promote", strings(&["--endpoint", &url])));
    let (stop, sampler) = sample_peak(&work);
    let mut hit = 0;
    for (bin, args) in &steps {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // A slice's steps are short here (a quarter of a 115 MB fixture) and vary: instants are
        // drawn up to 120 ms, and the bound halves after each kill that came after the end, until
        // `kills` kills landed on the running step (at most six draws each).
        let (mut bound, mut landed, mut draws) = (120, 0, 0);
        while landed < kills && draws < 6 * kills {
            draws += 1;
            let ms = next(&mut seed) % bound;
            if kill_after(bin, &work, &args, std::time::Duration::from_millis(ms)) {
                landed += 1;
            } else {
                bound = (bound / 2).max(4);
            }
        }
        hit += landed;
        step(bin, &work, &args);
    }
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.join().unwrap();
    eprintln!(
        "{hit} kills hit a running step ({} wanted); peak {peak} B for a budget of {budget} B",
        kills * steps.len()
    );
    assert!(
        hit * 10 >= kills * steps.len() * 9,
        "too few kills landed: {hit}"
    );
    assert!(
        peak <= budget,
        "the work directory held {peak} B, over the {budget} B budget"
    );
    assert_eq!(
        published_tree(&url),
        reference,
        "killed and resumed, the publication differs (seed above)"
    );
    for u in &units {
        for dir in ["upstream", "release", "staging", "ledger/chunks"] {
            assert!(
                !work.join(dir).join(u).exists(),
                "{dir}/{u} left after its reclaim"
            );
        }
    }
    let all = format!("{}..{}", units[0], units[units.len() - 1]);
    nothing_fetched(&work, &up, &all);
}
