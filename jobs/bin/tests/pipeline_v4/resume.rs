//! Crash safety: SIGKILL fetch and repack at seeded instants and resume; run fetch against each of
//! the hub's fault modes. The long campaign is `MINIRUN_KILL_POINTS=200 cargo test -p minirun-bins
//! --test integration pipeline_v4::resume` (docs/fetch.md).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::pipeline_v4::common::*;

const UNITS: &str = "layers00..layers05";
const UNIT_NAMES: [&str; 6] = [
    "layers00", "layers01", "layers02", "layers03", "layers04", "layers05",
];

/// A tiny deterministic generator for the kill instants (no dependency on rand).
fn next(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

fn kill_points() -> usize {
    std::env::var("MINIRUN_KILL_POINTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
}

/// Start `bin` and SIGKILL it after `after`; true if it was still running.
fn run_and_kill(bin: &str, plan: &Path, work: &Path, endpoint: &str, after: Duration) -> bool {
    let mut child = cmd(bin)
        .args([
            "--plan",
            plan.to_str().unwrap(),
            "--work-dir",
            work.to_str().unwrap(),
            "--units",
            UNITS,
        ])
        .args(if bin == "minirun-fetch" {
            vec!["--endpoint", endpoint]
        } else {
            vec![]
        })
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while start.elapsed() < after {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    true
}

fn unit_chunks(out: &str) -> BTreeMap<String, (String, u64, u64)> {
    let v: serde_json::Value = serde_json::from_str(out).unwrap();
    v["units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["unit"].as_str().unwrap().to_owned(),
                (
                    u["status"].as_str().unwrap().to_owned(),
                    u["chunks_fetched"].as_u64().unwrap(),
                    u["chunks_kept"].as_u64().unwrap(),
                ),
            )
        })
        .collect()
}

#[test]
fn resume_fetch_after_sigkill_at_seeded_points() {
    let fx = fixture();
    // Every request to the slow hub waits 200 ms, so a run of six units lasts a few seconds and
    // the kill instants land in discovery, between chunks and between units.
    let slow = Hub::start(&fx.hub_root, "delay:1@200");
    let fast = Hub::start(&fx.hub_root, "");
    let plan = &fx.plan_small_chunks;
    // Reference: how many chunks each unit has.
    let r = tempfile::tempdir().unwrap();
    let total = unit_chunks(&stage_ok(
        "minirun-fetch",
        plan,
        r.path(),
        &fast.url,
        &["--units", UNITS, "--json"],
    ));
    let mut seed = 0x5eed_u64;
    let mut kept_somewhere = false;
    let mut killed = 0;
    for _ in 0..kill_points() {
        let w = tempfile::tempdir().unwrap();
        // Warm the header cache and discovery record, as an operator's earlier run would have.
        stage_ok(
            "minirun-fetch",
            plan,
            w.path(),
            &fast.url,
            &["--units", "global00"],
        );
        let after = Duration::from_millis(100 + next(&mut seed) % 3000);
        killed += usize::from(run_and_kill(
            "minirun-fetch",
            plan,
            w.path(),
            &slow.url,
            after,
        ));
        let resumed = unit_chunks(&stage_ok(
            "minirun-fetch",
            plan,
            w.path(),
            &fast.url,
            &["--units", UNITS, "--json"],
        ));
        for (unit, (status, fetched, kept)) in &resumed {
            if status == "fetched" {
                let (_, all, _) = &total[unit];
                assert_eq!(fetched + kept, *all, "{unit}: resumed run fetched {fetched} + kept {kept} of {all} chunks (after {after:?})");
                kept_somewhere |= *kept > 0;
            }
        }
        assert_fetched_bytes_equal_upstream(fx, w.path(), Some(&UNIT_NAMES));
        let again = stage_ok(
            "minirun-fetch",
            plan,
            w.path(),
            "http://127.0.0.1:9",
            &["--units", UNITS],
        );
        assert!(again.contains("no hub requests"), "{again}");
    }
    assert!(
        killed >= kill_points() / 2,
        "only {killed} runs were still running when killed"
    );
    assert!(
        kept_somewhere,
        "no resumed run kept a proven chunk: the kill points never landed mid-unit"
    );
}

#[test]
fn fetch_under_hub_faults_recovers_or_fails_clearly() {
    let fx = fixture();
    let fast = Hub::start(&fx.hub_root, "");
    for faults in [
        "5xx:0.3",
        "reset:0.3",
        "ignore-range:x4",
        "whole-206:x4",
        "truncate:0.3",
        "ratelimit:x2@1",
    ] {
        let hub = Hub::start(&fx.hub_root, faults);
        let w = tempfile::tempdir().unwrap();
        let (code, out) = stage(
            "minirun-fetch",
            &fx.plan_small_chunks,
            w.path(),
            &hub.url,
            &["--units", UNITS],
        );
        assert!(code == 0 || code == 1, "{faults}: exit {code}");
        if code == 0 {
            assert_fetched_bytes_equal_upstream(fx, w.path(), Some(&UNIT_NAMES));
        }
        // Whatever the faulty run left is either proven or discarded: a clean run completes with
        // identical bytes.
        stage_ok(
            "minirun-fetch",
            &fx.plan_small_chunks,
            w.path(),
            &fast.url,
            &["--units", UNITS],
        );
        assert_fetched_bytes_equal_upstream(fx, w.path(), Some(&UNIT_NAMES));
        let _ = out;
    }
}

#[test]
fn resume_repack_after_sigkill_at_seeded_points() {
    let fx = fixture();
    let hub = Hub::start(&fx.hub_root, "");
    let r = tempfile::tempdir().unwrap();
    stage_ok(
        "minirun-fetch",
        &fx.plan,
        r.path(),
        &hub.url,
        &["--units", UNITS],
    );
    stage_ok(
        "minirun-repack",
        &fx.plan,
        r.path(),
        &hub.url,
        &["--units", UNITS],
    );
    let reference = release_digests(r.path());
    let mut seed = 0xbeef_u64;
    for _ in 0..kill_points().min(6) {
        let w = tempfile::tempdir().unwrap();
        stage_ok(
            "minirun-fetch",
            &fx.plan,
            w.path(),
            &hub.url,
            &["--units", UNITS],
        );
        let after = Duration::from_millis(50 + next(&mut seed) % 2500);
        run_and_kill("minirun-repack", &fx.plan, w.path(), &hub.url, after);
        // Units the killed run finished must not be touched by the resume.
        let done_before: Vec<String> = UNIT_NAMES
            .iter()
            .filter(|u| {
                let j = w.path().join(format!("ledger/repack/{u}.json"));
                std::fs::read_to_string(j).is_ok_and(|t| t.contains("\"status\": \"done\""))
            })
            .map(|u| u.to_string())
            .collect();
        let states: Vec<_> = done_before
            .iter()
            .map(|u| tree_state(&w.path().join("release").join(u)))
            .collect();
        stage_ok(
            "minirun-repack",
            &fx.plan,
            w.path(),
            &hub.url,
            &["--units", UNITS],
        );
        for (u, s) in done_before.iter().zip(states) {
            assert_eq!(
                s,
                tree_state(&w.path().join("release").join(u)),
                "{u} was touched by the resume"
            );
        }
        assert_eq!(
            release_digests(w.path()),
            reference,
            "resumed repack differs (killed after {after:?})"
        );
    }
}
