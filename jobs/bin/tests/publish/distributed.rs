//! Distributed publication that moves only metadata (docs/publish.md §9): worker processes on the
//! slices `minirun-plan slices` cuts (four at a third of the units' bytes), with disjoint work
//! directories, sharing only the hubs and a records directory, then a join in a fresh work
//! directory, publish exactly the tree one run publishes.

use std::path::Path;
use std::process::Command;

use crate::support::*;

pub(crate) fn step(bin: &str, work: &Path, args: &[&str]) -> String {
    let (ok, out, err) = run_step(bin, work, args);
    assert!(ok, "{bin} {args:?}: {out}\n{err}");
    out
}

/// A step expected to be refused: its stderr.
fn refused(bin: &str, work: &Path, args: &[&str]) -> String {
    let (ok, out, err) = run_step(bin, work, args);
    assert!(!ok, "{bin} {args:?} succeeded: {out}");
    err
}

pub(crate) fn command(bin: &str, work: &Path, args: &[&str]) -> Command {
    let exe = match bin {
        "fetch" => env!("CARGO_BIN_EXE_minirun-fetch"),
        "repack" => env!("CARGO_BIN_EXE_minirun-repack"),
        "gate" => env!("CARGO_BIN_EXE_minirun-gate"),
        "stage" => env!("CARGO_BIN_EXE_minirun-stage"),
        "candidate-upload" => env!("CARGO_BIN_EXE_minirun-candidate-upload"),
        "promote" => env!("CARGO_BIN_EXE_minirun-promote"),
        other => panic!("no step {other}"),
    };
    let mut c = Command::new(exe);
    c.arg("--plan")
        .arg(plan_path())
        .arg("--work-dir")
        .arg(work)
        .args(args);
    c
}

pub(crate) fn run_step(bin: &str, work: &Path, args: &[&str]) -> (bool, String, String) {
    let out = command(bin, work, args).output().unwrap();
    (
        out.status.code() == Some(0),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `minirun-plan slices` of the plan against `up` under `budget` bytes (`--json`).
pub(crate) fn plan_slices(up: &str, budget: u64, max: usize) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_minirun-plan"))
        .args(["slices", "--json", "--endpoint", up, "--max-slices"])
        .arg(max.to_string())
        .arg("--disk-budget")
        .arg(budget.to_string())
        .arg(plan_path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&text).unwrap()
}

/// The slices of a budget about a third of the units' bytes (3 or 4 slices), checked against
/// `minirun-plan slices`' own accounting: `(selection, predicted peak bytes)`.
fn slices_of_a_third() -> Vec<(String, u64)> {
    let up = upstream_url();
    let whole = plan_slices(up, 1 << 50, 1);
    assert_eq!(whole["schema"], "minirun.plan-slices/1", "{whole}");
    assert_eq!(
        whole["matrix"],
        serde_json::json!(["layers00..global00"]),
        "{whole}"
    );
    let fixed = whole["fixed_bytes"].as_u64().unwrap();
    let units: u64 = whole["units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["peak_bytes"].as_u64().unwrap())
        .sum();
    let budget = fixed + units / 3 + 1;
    let v = plan_slices(up, budget, 4);
    let slices: Vec<(String, u64)> = v["slices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["units"].as_str().unwrap().to_owned(),
                s["peak_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!((3..=4).contains(&slices.len()), "{v}");
    assert!(slices.iter().all(|(_, peak)| *peak <= budget), "{v}");
    slices
}

fn tree_bytes(dir: &Path) -> u64 {
    snapshot(dir).iter().map(|(_, n, _)| n).sum()
}

/// One step of the distributed shape: the binary and its arguments (besides plan and work dir).
type Step = (&'static str, Vec<String>);

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// A worker's steps for slice `units`: fetch from `up`, repack, gate, stage, and the upload to
/// `url` that writes its records to `rec`.
fn worker_steps(units: &str, up: &str, url: &str, rec: &str) -> Vec<Step> {
    vec![
        ("fetch", strings(&["--endpoint", up, "--units", units])),
        ("repack", strings(&["--units", units])),
        ("gate", strings(&["--units", units])),
        ("stage", strings(&["--units", units])),
        (
            "candidate-upload",
            strings(&["--endpoint", url, "--units", units, "--records", rec]),
        ),
    ]
}

/// The join's steps over the records in `rec`: root files from `up`, then the publication to `url`.
fn join_steps(up: &str, url: &str, rec: &str) -> Vec<Step> {
    vec![
        ("fetch", strings(&["--endpoint", up, "--root-files-only"])),
        ("repack", strings(&["--finalize", "--records", rec])),
        ("stage", strings(&["--records", rec])),
        (
            "candidate-upload",
            strings(&["--endpoint", url, "--records", rec]),
        ),
        ("promote", strings(&["--endpoint", url])),
    ]
}

/// Run `steps` in `work`, each with `--json`: their reports, in order.
fn run_json(work: &Path, steps: &[Step]) -> Vec<serde_json::Value> {
    steps
        .iter()
        .map(|(bin, args)| {
            let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
            a.push("--json");
            serde_json::from_str(&step(bin, work, &a)).unwrap()
        })
        .collect()
}

/// One run's publication, the reference every distributed shape must equal.
pub(crate) fn one_run_tree() -> pipeline::candidate::Inventory {
    let (_work, h, _root, _report) = published();
    published_tree(&h.url())
}

/// The tree at the head of `url`'s branch, without `.gitattributes` (generated by the hub from
/// the LFS rules, not part of the release).
pub(crate) fn published_tree(url: &str) -> pipeline::candidate::Inventory {
    let mut inv = inventory(url, &head(url));
    inv.remove(".gitattributes");
    inv
}

#[test]
fn workers_on_plan_slices_and_a_join_publish_what_one_run_publishes() {
    let up = upstream_url().to_owned();
    let reference = one_run_tree();
    let (h, _root) = hub();
    let url = h.url();
    let base = tempfile::tempdir().unwrap();
    let records = base.path().join("records");
    let rec = records.to_str().unwrap().to_owned();
    // The slices come from `minirun-plan slices`; each worker's work directory, which keeps all
    // of its slice to the end (staging is links), must hold no more than the tool predicted.
    let workers: Vec<_> = slices_of_a_third()
        .into_iter()
        .enumerate()
        .map(|(i, (units, peak))| {
            let (up, url, rec) = (up.clone(), url.clone(), rec.clone());
            let work = base.path().join(format!("worker{i}"));
            std::thread::spawn(move || {
                let reports = run_json(&work, &worker_steps(&units, &up, &url, &rec));
                let v = reports.last().unwrap();
                assert_eq!(v["schema"], "minirun.candidate-upload-worker/1", "{v}");
                let held = pipeline::space::allocated(&work);
                eprintln!("worker {i} ({units}): {held} B on disk, {peak} B predicted");
                assert!(held <= peak, "worker {i} ({units}) holds {held} B, more than the {peak} B `minirun-plan slices` predicted");
                assert!(peak - held <= held / 5 + (4 << 20), "worker {i} ({units}): {peak} B predicted for {held} B held: the estimate is too loose to plan a machine by");
                (
                    v["bytes"].as_u64().unwrap(),
                    v["lfs_sent"].as_u64().unwrap(),
                )
            })
        })
        .collect();
    let mut unit_bytes = 0;
    for w in workers {
        let (bytes, sent) = w.join().unwrap();
        assert!(sent > 0);
        unit_bytes += bytes;
    }
    // Nothing is on the target's branches yet: the workers only uploaded objects.
    let refs = rt()
        .block_on(client(&url).list_refs(&repo(), false))
        .unwrap();
    assert!(refs.branches.iter().all(|b| b.name == "main"), "{refs:?}");

    let join = base.path().join("join");
    let reports = run_json(&join, &join_steps(&up, &url, &rec));
    let c = &reports[3];
    assert_eq!(c["schema"], "minirun.candidate-upload/1", "{c}");

    let got = published_tree(&url);
    assert_eq!(
        got, reference,
        "the distributed publication differs from one run's"
    );
    // No payload byte was uploaded by the join: every LFS object came from a worker.
    assert_eq!(c["lfs_sent"], 0, "{c}");
    let handed = tree_bytes(&records);
    let release: u64 = reference
        .values()
        .filter(|e| e.path != pipeline::candidate::RECORD_PATH)
        .map(|e| e.size)
        .sum();
    assert_eq!(unit_bytes + tree_bytes(&join.join("release")), release);
    let share = handed as f64 / release as f64;
    // Records carry metadata only: the regular files' bytes (base64) and one line per file. At
    // this fixture's scale (115 MB) the manifests and tensor maps alone are ~1.7 % of the
    // release; they do not grow with tensor sizes, so at V4 Flash's 167 GB the same records are
    // ~0.002 % (docs/publish.md §9).
    let regular: u64 = reference.values().filter(|e| !e.lfs).map(|e| e.size).sum();
    let files = reference.len() as u64;
    eprintln!(
        "bytes handed to the join: {handed} of {release} release bytes ({:.3}%); regular files {regular} B, {files} files",
        100.0 * share
    );
    assert!(
        handed <= regular * 4 / 3 + 400 * files,
        "records carry more than metadata: {handed} B for {regular} B of regular files and {files} files"
    );

    // The join refuses records that do not cover the plan exactly with PASS gates, and objects a
    // worker never uploaded.
    let bad = base.path().join("bad-records");
    let copy_records = || {
        let _ = std::fs::remove_dir_all(&bad);
        run_ok(Command::new("cp").arg("-a").arg(&records).arg(&bad));
    };
    let bad_s = bad.to_str().unwrap().to_owned();
    copy_records();
    std::fs::remove_file(bad.join("layers07.json")).unwrap();
    let err = refused("repack", &join, &["--finalize", "--records", &bad_s]);
    assert!(err.contains("missing units layers07"), "{err}");
    copy_records();
    let p = bad.join("mtp00.json");
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, text.replace("\"exit_code\": 0", "\"exit_code\": 2")).unwrap();
    let err = refused("stage", &join, &["--records", &bad_s]);
    assert!(err.contains("mtp00") && err.contains("exit 2"), "{err}");
    copy_records();
    std::fs::write(bad.join("stray.json"), "{}").unwrap();
    let err = refused("repack", &join, &["--finalize", "--records", &bad_s]);
    assert!(err.contains("stray.json"), "{err}");
    let (empty, _root) = hub();
    let err = refused(
        "candidate-upload",
        &join,
        &["--endpoint", &empty.url(), "--records", &rec],
    );
    assert!(
        err.contains("is not on the hub: re-run the worker of unit"),
        "{err}"
    );
}

/// `ci/publish/step.sh PLAN slices` as the workflow (JSON) and the Indexed Job (`MINIRUN_SLICE`)
/// call it, and the refusals: a budget that holds no slice, or that needs more than
/// `--max-slices`, is exit 1 naming the budget that works; a size that is not one is exit 64.
#[test]
fn slices_as_the_workflow_and_the_indexed_job_take_them() {
    let up = upstream_url();
    let bins = Path::new(env!("CARGO_BIN_EXE_minirun-plan"))
        .parent()
        .unwrap();
    let step = |slice: Option<&str>, budget: &str| {
        let mut c =
            Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ci/publish/step.sh"));
        c.arg(plan_path())
            .arg("slices")
            .env("MINIRUN_BIN", bins)
            .env("HF_ENDPOINT", up)
            .env("MINIRUN_DISK_BUDGET", budget)
            .env("MINIRUN_MAX_SLICES", "8")
            .env_remove("MINIRUN_SLICE");
        if let Some(i) = slice {
            c.env("MINIRUN_SLICE", i);
        }
        let out = c.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, json, err) = step(None, "80M");
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let matrix: Vec<String> = serde_json::from_value(v["matrix"].clone()).unwrap();
    assert!(matrix.len() >= 2, "{v}");
    for (i, m) in matrix.iter().enumerate() {
        let (code, line, err) = step(Some(&i.to_string()), "80M");
        assert_eq!((code, line.trim_end()), (Some(0), m.as_str()), "{err}");
    }
    let (code, line, _) = step(Some(&matrix.len().to_string()), "80M");
    assert_eq!(
        (code, line.as_str()),
        (Some(0), ""),
        "past the last slice: nothing"
    );
    let (code, _, err) = step(None, "1M");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("holds no slice") && err.contains("the smallest budget that works is"),
        "{err}"
    );
    let (code, _, err) = step(None, "20M");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("more than --max-slices 8")
            && err.contains("8 slices need a budget of at least"),
        "{err}"
    );
    let (code, _, err) = step(None, "lots");
    assert_eq!(code, Some(64), "{err}");
    // Without a budget the plan's `[run] disk_budget` is the budget; with neither, a usage error.
    let (code, _, err) = step(None, "");
    assert_eq!(code, Some(64), "{err}");
    assert!(err.contains("sets no `[run] disk_budget`"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let budgeted = dir.path().join("deepseek-v4.toml");
    let text = std::fs::read_to_string(plan_path()).unwrap();
    assert!(text.contains("[run]\n"));
    std::fs::write(
        &budgeted,
        text.replacen("[run]\n", "[run]\ndisk_budget = \"80M\"\n", 1),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_minirun-plan"))
        .args(["slices", "--json", "--endpoint", up])
        .arg(&budgeted)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["disk_budget"], 80 << 20, "{v}");
    assert_eq!(v["matrix"], serde_json::json!(matrix), "{v}");
}

/// A matrix of one: a worker whose slice is every unit. Its repack finalizes the release-wide
/// files (every unit is done), yet it stages and uploads exactly its units, and the join publishes
/// what one run publishes (found by the real-size run, docs/bench/real-size.md).
#[test]
fn one_worker_whose_slice_is_every_unit_publishes_what_one_run_publishes() {
    let up = upstream_url().to_owned();
    let reference = one_run_tree();
    let (h, _root) = hub();
    let url = h.url();
    let base = tempfile::tempdir().unwrap();
    let rec = base.path().join("records").to_str().unwrap().to_owned();
    let worker = base.path().join("worker");
    let reports = run_json(
        &worker,
        &worker_steps("layers00..global00", &up, &url, &rec),
    );
    assert_eq!(reports[1]["finalized"], true, "{}", reports[1]);
    assert!(!worker.join("staging/LICENSE").exists());
    assert!(worker.join("release/LICENSE").exists());
    let v = reports.last().unwrap();
    assert_eq!(v["schema"], "minirun.candidate-upload-worker/1", "{v}");
    let join = base.path().join("join");
    run_json(&join, &join_steps(&up, &url, &rec));
    let got = published_tree(&url);
    assert_eq!(
        got, reference,
        "one worker's publication differs from one run's"
    );
}

/// A kill campaign's settings: kills per step (`MINIRUN_KILL_POINTS`, default 3) and the seed
/// (`MINIRUN_KILL_SEED` replays one; else the process id times `salt`), printed.
pub(crate) fn kill_settings(salt: u64) -> (usize, u64) {
    let kills: usize = std::env::var("MINIRUN_KILL_POINTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let seed: u64 = std::env::var("MINIRUN_KILL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| u64::from(std::process::id()) * salt);
    eprintln!("kill seed {seed} ({kills} kills per step)");
    (kills, seed)
}

/// A tiny deterministic generator for the kill instants.
pub(crate) fn next(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

/// Start the step and SIGKILL it after `after`; true if it was still running (then 100 ms pass
/// before it returns).
pub(crate) fn kill_after(
    bin: &str,
    work: &Path,
    args: &[&str],
    after: std::time::Duration,
) -> bool {
    let mut child = command(bin, work, args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while start.elapsed() < after {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // A request the killed process had sent may still be served (a commit landing after its
    // client died); the next run starts once the hub has answered it, as an operator's would. A
    // run racing it is refused by the branch guard ("the head moved"), which is right, not wrong.
    std::thread::sleep(std::time::Duration::from_millis(100));
    true
}

/// Every step of the distributed shape — two workers, then the join — SIGKILLed at seeded
/// instants (`MINIRUN_KILL_POINTS` per step, default 3; the seed is printed, `MINIRUN_KILL_SEED`
/// replays it) and then run to completion: the publication equals one run's.
#[test]
fn distributed_steps_killed_at_seeded_instants_resume_to_the_same_publication() {
    let up = upstream_url().to_owned();
    let reference = one_run_tree();
    let (h, _root) = hub();
    let url = h.url();
    let base = tempfile::tempdir().unwrap();
    let rec = base.path().join("records").to_str().unwrap().to_owned();
    let (kills, mut seed) = kill_settings(7919);
    let mut steps: Vec<(&str, std::path::PathBuf, Vec<String>)> = Vec::new();
    for (i, units) in ["layers00..layers21", "layers22..layers42,mtp00,global00"]
        .iter()
        .enumerate()
    {
        let w = base.path().join(format!("worker{i}"));
        for (bin, args) in worker_steps(units, &up, &url, &rec) {
            steps.push((bin, w.clone(), args));
        }
    }
    let j = base.path().join("join");
    for (bin, args) in join_steps(&up, &url, &rec) {
        steps.push((bin, j.clone(), args));
    }
    let mut hit = 0;
    for (bin, work, args) in &steps {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // Kill instants are drawn up to 300 ms, about most steps' length here: kills land early,
        // late and (a few) after the end.
        for _ in 0..kills {
            let ms = next(&mut seed) % 300;
            hit += usize::from(kill_after(
                bin,
                work,
                &args,
                std::time::Duration::from_millis(ms),
            ));
        }
        step(bin, work, &args);
    }
    eprintln!("{hit} of {} kills hit a running step", kills * steps.len());
    assert!(
        hit * 3 >= kills * steps.len(),
        "too few kills landed: {hit}"
    );
    let got = published_tree(&url);
    assert_eq!(
        got, reference,
        "killed and resumed, the publication differs (seed above)"
    );
}
