//! A copied work directory (`cp -a`: same bytes, new filesystem objects): fetch accepts its units
//! by content — every file re-hashed against its journal, no hub request — and fetches again only
//! a unit whose bytes differ (issue 19 item 3).

use std::path::Path;
use std::process::Command;

use crate::pipeline_v4::common::*;

const UNITS: &str = "layers00..layers02";

fn fetch_json(fx: &Fixture, work: &Path, url: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["--json", "--units", UNITS];
    args.extend_from_slice(extra);
    let out = stage_ok("minirun-fetch", &fx.plan, work, url, &args);
    serde_json::from_str(&out).unwrap()
}

fn units(v: &serde_json::Value) -> Vec<(String, String, String)> {
    v["units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["unit"].as_str().unwrap().to_owned(),
                u["status"].as_str().unwrap().to_owned(),
                u["reason"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_copied_work_dir_is_accepted_by_content() {
    let fx = fixture();
    let hub = Hub::start(&fx.hub_root, "");
    let w = tempfile::tempdir().unwrap();
    let a = w.path().join("a");
    fetch_json(fx, &a, &hub.url, &[]);
    let copy = |name: &str| {
        let d = w.path().join(name);
        let st = Command::new("cp")
            .arg("-a")
            .arg(&a)
            .arg(&d)
            .status()
            .unwrap();
        assert!(st.success());
        d
    };

    // Dry run on a copy: says what a run would re-hash, reads and writes nothing.
    let b = copy("b");
    let before = tree_state(&b);
    let v = fetch_json(fx, &b, "http://127.0.0.1:9", &["--dry-run"]);
    for (unit, status, reason) in units(&v) {
        assert_eq!(status, "pending", "{unit}");
        assert!(reason.contains("a run re-hashes these"), "{unit}: {reason}");
    }
    assert_eq!(before, tree_state(&b), "a dry run changed the copy");

    // A run on the copy: every unit accepted by content, nothing asked of the hub.
    let n0 = hub.requests();
    let v = fetch_json(fx, &b, "http://127.0.0.1:9", &[]);
    assert_eq!(v["no_requests"], true, "{v}");
    for (unit, status, reason) in units(&v) {
        assert_eq!(status, "already-done", "{unit}");
        assert!(
            reason.starts_with("accepted by content"),
            "{unit}: {reason}"
        );
    }
    assert_eq!(hub.requests(), n0);
    // The refreshed identities hold: the next run reads nothing.
    let v = fetch_json(fx, &b, "http://127.0.0.1:9", &[]);
    for (unit, status, reason) in units(&v) {
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("already-done", ""),
            "{unit}"
        );
    }

    // A copy whose bytes differ in one unit: only that unit is fetched again.
    let c = copy("c");
    let shard = std::fs::read_dir(c.join("upstream/layers01/main"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&shard).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&shard, bytes).unwrap();
    let v = fetch_json(fx, &c, &hub.url, &[]);
    for (unit, status, reason) in units(&v) {
        if unit == "layers01" {
            assert_eq!(status, "fetched", "{reason}");
        } else {
            assert_eq!(status, "already-done", "{unit}");
            assert!(
                reason.starts_with("accepted by content"),
                "{unit}: {reason}"
            );
        }
    }
    assert_fetched_bytes_equal_upstream(fx, &c, Some(&["layers00", "layers01", "layers02"]));
}
