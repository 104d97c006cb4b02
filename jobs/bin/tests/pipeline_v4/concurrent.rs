//! Two runs of one stage on one work directory at once (issue 20 item 4): a run that finds a
//! unit held by the other does its other units, then waits for that one and takes the other's
//! journal for it (or does what the other left). Both exit 0, every unit is done by exactly one
//! of them, and the bytes are the upstream's (fetch) or a lone run's (repack).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Stdio};

use crate::pipeline_v4::common::*;

const UNITS: &str = "layers00..layers07";

fn spawn(bin: &str, plan: &Path, work: &Path, endpoint: &str) -> Child {
    let mut c = cmd(bin);
    c.arg("--plan")
        .arg(plan)
        .arg("--work-dir")
        .arg(work)
        .args(["--units", UNITS, "--json"]);
    if bin == "minirun-fetch" {
        c.args(["--endpoint", endpoint]);
    }
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for both runs; each must exit 0. Returns each run's unit → (status, reason).
fn both(a: Child, b: Child) -> [BTreeMap<String, (String, String)>; 2] {
    [a, b].map(|c| {
        let out = c.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "a concurrent run failed ({:?}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        v["units"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| {
                (
                    u["unit"].as_str().unwrap().to_owned(),
                    (
                        u["status"].as_str().unwrap().to_owned(),
                        u["reason"].as_str().unwrap_or("").to_owned(),
                    ),
                )
            })
            .collect()
    })
}

/// Every unit was worked (`did`) by exactly one run; the other reports it already done.
fn each_unit_once(runs: &[BTreeMap<String, (String, String)>; 2], did: &str) {
    let [a, b] = runs;
    assert_eq!(a.len(), 8, "{a:?}");
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (unit, (sa, _)) in a {
        let (sb, _) = &b[unit];
        let mut pair = [sa.as_str(), sb.as_str()];
        pair.sort();
        assert_eq!(pair, ["already-done", did], "{unit}: {a:?} / {b:?}");
    }
}

#[test]
fn two_fetches_on_one_work_dir_each_unit_once() {
    let fx = fixture();
    // every request a little slow, so the two runs overlap for certain
    let hub = Hub::start(&fx.hub_root, "delay:1@15");
    let w = tempfile::tempdir().unwrap();
    let a = spawn("minirun-fetch", &fx.plan_small_chunks, w.path(), &hub.url);
    let b = spawn("minirun-fetch", &fx.plan_small_chunks, w.path(), &hub.url);
    let runs = both(a, b);
    each_unit_once(&runs, "fetched");
    // the runs overlapped: one found units the other was fetching (or had just finished)
    let waited = runs
        .iter()
        .flat_map(|r| r.values())
        .filter(|(_, why)| why == pipeline::fetch::DONE_BY_OTHER)
        .count();
    assert!(waited > 0, "the two runs never met: {runs:?}");
    assert_fetched_bytes_equal_upstream(fx, w.path(), None);
}

#[test]
fn two_repacks_on_one_work_dir_each_unit_once() {
    let fx = fixture();
    let hub = Hub::start(&fx.hub_root, "");
    let lone = tempfile::tempdir().unwrap();
    stage_ok(
        "minirun-fetch",
        &fx.plan,
        lone.path(),
        &hub.url,
        &["--units", UNITS],
    );
    let w = tempfile::tempdir().unwrap();
    stage_ok(
        "minirun-fetch",
        &fx.plan,
        w.path(),
        &hub.url,
        &["--units", UNITS],
    );
    stage_ok(
        "minirun-repack",
        &fx.plan,
        lone.path(),
        &hub.url,
        &["--units", UNITS],
    );
    let a = spawn("minirun-repack", &fx.plan, w.path(), &hub.url);
    let b = spawn("minirun-repack", &fx.plan, w.path(), &hub.url);
    let runs = both(a, b);
    each_unit_once(&runs, "repacked");
    assert_eq!(release_digests(w.path()), release_digests(lone.path()));
}
