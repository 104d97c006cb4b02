//! Distributed publication that moves only metadata (docs/publish.md §9): four worker processes
//! with disjoint work directories, sharing only the hubs and a records directory, then a join in a
//! fifth work directory, publish exactly the tree one run publishes.

use std::path::Path;
use std::process::Command;

use crate::support::*;

const SLICES: [&str; 4] = [
    "layers00..layers14",
    "layers15..layers29",
    "layers30..layers42",
    "mtp00,global00",
];

fn step(bin: &str, work: &Path, args: &[&str]) -> String {
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

fn command(bin: &str, work: &Path, args: &[&str]) -> Command {
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

fn run_step(bin: &str, work: &Path, args: &[&str]) -> (bool, String, String) {
    let out = command(bin, work, args).output().unwrap();
    (
        out.status.code() == Some(0),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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

#[test]
fn four_workers_and_a_join_publish_what_one_run_publishes() {
    let up = upstream_url().to_owned();
    let (_w1, h1, _r1, _p1) = published();
    let mut reference = inventory(&h1.url(), &head(&h1.url()));
    let (h, _root) = hub();
    let url = h.url();
    let base = tempfile::tempdir().unwrap();
    let records = base.path().join("records");
    let rec = records.to_str().unwrap().to_owned();
    let workers: Vec<_> = SLICES
        .iter()
        .enumerate()
        .map(|(i, units)| {
            let (up, url, rec) = (up.clone(), url.clone(), rec.clone());
            let work = base.path().join(format!("worker{i}"));
            std::thread::spawn(move || {
                let reports = run_json(&work, &worker_steps(units, &up, &url, &rec));
                let v = reports.last().unwrap();
                assert_eq!(v["schema"], "minirun.candidate-upload-worker/1", "{v}");
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

    let mut got = inventory(&url, &head(&url));
    for inv in [&mut reference, &mut got] {
        inv.remove(".gitattributes");
    }
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

/// A matrix of one: a worker whose slice is every unit. Its repack finalizes the release-wide
/// files (every unit is done), yet it stages and uploads exactly its units, and the join publishes
/// what one run publishes (found by the real-size run, docs/bench/real-size.md).
#[test]
fn one_worker_whose_slice_is_every_unit_publishes_what_one_run_publishes() {
    let up = upstream_url().to_owned();
    let (_w1, h1, _r1, _p1) = published();
    let mut reference = inventory(&h1.url(), &head(&h1.url()));
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
    let mut got = inventory(&url, &head(&url));
    for inv in [&mut reference, &mut got] {
        inv.remove(".gitattributes");
    }
    assert_eq!(
        got, reference,
        "one worker's publication differs from one run's"
    );
}

/// A tiny deterministic generator for the kill instants.
fn next(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

/// Start the step and SIGKILL it after `after`; true if it was still running.
fn kill_after(bin: &str, work: &Path, args: &[&str], after: std::time::Duration) -> bool {
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
    true
}

/// Every step of the distributed shape — two workers, then the join — SIGKILLed at seeded
/// instants (`MINIRUN_KILL_POINTS` per step, default 3; the seed is printed, `MINIRUN_KILL_SEED`
/// replays it) and then run to completion: the publication equals one run's.
#[test]
fn distributed_steps_killed_at_seeded_instants_resume_to_the_same_publication() {
    let up = upstream_url().to_owned();
    let (_w1, h1, _r1, _p1) = published();
    let mut reference = inventory(&h1.url(), &head(&h1.url()));
    let (h, _root) = hub();
    let url = h.url();
    let base = tempfile::tempdir().unwrap();
    let rec = base.path().join("records").to_str().unwrap().to_owned();
    let kills: usize = std::env::var("MINIRUN_KILL_POINTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let mut seed: u64 = std::env::var("MINIRUN_KILL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| u64::from(std::process::id()) * 7919);
    eprintln!("kill seed {seed} ({kills} kills per step)");
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
    let mut got = inventory(&url, &head(&url));
    for inv in [&mut reference, &mut got] {
        inv.remove(".gitattributes");
    }
    assert_eq!(
        got, reference,
        "killed and resumed, the publication differs (seed above)"
    );
}
