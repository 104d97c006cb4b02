//! The gate's exit contract on a finished release: PASS, FAIL naming the file for a flipped byte in
//! a tile, a manifest or a plain stream, FAIL for a deleted unit, INCONCLUSIVE for an empty
//! selection, SKIP for `--no-upstream-compare`.

use std::path::Path;

use crate::pipeline_v4::common::*;

fn flip(path: &Path, at: usize) {
    let mut b = std::fs::read(path).unwrap();
    let i = at.min(b.len() - 1);
    b[i] ^= 0x01;
    std::fs::write(path, b).unwrap();
}

fn gate(fx: &Fixture, work: &Path, extra: &[&str]) -> (i32, String) {
    stage("minirun-gate", &fx.plan, work, "", extra)
}

#[test]
fn gate_exit_contract() {
    let fx = fixture();
    let hub = Hub::start(&fx.hub_root, "");
    let w = tempfile::tempdir().unwrap();
    let work = w.path();
    let units = "layers02,layers03,global00";
    // stderr is not a terminal here: progress comes as plain lines, one per finished unit and
    // a last total line.
    let fetch = cmd("minirun-fetch")
        .arg("--plan")
        .arg(&fx.plan)
        .arg("--work-dir")
        .arg(work)
        .args(["--endpoint", &hub.url, "--units", units])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&fetch.stderr);
    assert!(fetch.status.success(), "{err}");
    for u in units.split(',') {
        assert!(err.contains(&format!("fetch: {u} done, ")), "{u}: {err}");
    }
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.starts_with("fetch: ") && last.contains("(100%)") && last.ends_with("3 units done"),
        "{err}"
    );
    // repack and gate: one line per unit, counted.
    for (bin, verb) in [("minirun-repack", "repacked: "), ("minirun-gate", "PASS: ")] {
        let out = cmd(bin)
            .arg("--plan")
            .arg(&fx.plan)
            .arg("--work-dir")
            .arg(work)
            .args(["--units", units])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{bin}: {err}");
        let label = bin.trim_start_matches("minirun-");
        for u in units.split(',') {
            assert!(err.contains(&format!("{label}: {u} {verb}")), "{u}: {err}");
        }
        assert!(err.contains("(3 of 3 units, "), "{err}");
    }
    let sel = ["--units", units];
    let (code, out) = gate(fx, work, &sel);
    assert_eq!(code, 0, "clean release must PASS");
    // the text says the same word as the JSON report
    assert!(out.contains(": PASS — "), "{out}");
    assert_eq!(
        gate(fx, work, &["--units", ""]).0,
        2,
        "empty selection is INCONCLUSIVE"
    );
    assert_eq!(
        gate(fx, work, &["--units", units, "--no-upstream-compare"]).0,
        77
    );
    // A dry run lists the checks, reads nothing, writes no report, and never passes (exit 2).
    let report = work.join("reports/gate.json");
    let before = std::fs::read(&report).unwrap();
    std::fs::remove_file(&report).unwrap();
    let (code, out) = gate(fx, work, &["--units", units, "--dry-run", "--json"]);
    assert_eq!(code, 2, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["dry_run"].as_bool(), v["bytes_read"].as_u64()),
        (Some(true), Some(0))
    );
    assert_eq!(v["verdict"], "INCONCLUSIVE");
    let would: Vec<&str> = v["would_run"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(
        would
            .iter()
            .any(|c| c.starts_with("upstream-compare (3 units")),
        "{would:?}"
    );
    let (code, out) = gate(fx, work, &["--units", units, "--dry-run"]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("would check read-back (3 units)") && out.contains("(dry run)"),
        "{out}"
    );
    assert!(!report.exists(), "a dry run wrote the report");
    std::fs::write(&report, before).unwrap();
    // The whole release was not finalized: gating everything fails (units missing, no index).
    assert_eq!(gate(fx, work, &[]).0, 1);

    let rel = work.join("release");
    let cases = [
        ("layers02/layers.2.attn.wq_a.til", 20_000usize), // a tile's packed bytes
        ("layers03/layers.3.ffn.experts.w2.til", 16_384 + 5), // a stack's first tile (expert 0)
        ("layers03/layers.3.ffn.experts.w1.til", usize::MAX), // its last byte (the last expert)
        ("layers02/manifest.json", 40),
        ("layers03/plain.bin", 3), // the unit's plain streams
        ("global00/plain.bin", 1000),
    ];
    for (file, at) in cases {
        let p = rel.join(file);
        let orig = std::fs::read(&p).unwrap();
        flip(&p, at);
        let (code, out) = gate(fx, work, &sel);
        assert_eq!(code, 1, "flipping a byte of {file} must FAIL:\n{out}");
        assert!(out.contains(file), "the FAIL must name {file}:\n{out}");
        std::fs::write(&p, &orig).unwrap();
        // Restored bytes but a new inode/ctime: the journal check still fails by identity until
        // repack re-proves the file; repack --verify re-hashes and re-journals it.
    }
    stage_ok(
        "minirun-repack",
        &fx.plan,
        work,
        &hub.url,
        &["--units", units, "--verify"],
    );
    assert_eq!(
        gate(fx, work, &sel).0,
        0,
        "restored release must PASS again"
    );

    // The artifact agrees with its own digests but not with upstream: a byte of the fetched
    // upstream copy of a plain tensor changed. The byte comparison names the first differing
    // upstream offset (one memcmp per write, then the search).
    let map: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rel.join("layers02/tensors.json")).unwrap()).unwrap();
    let t = map["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "layers.2.attn_norm.weight")
        .unwrap();
    let start = t["upstream_range"][0].as_u64().unwrap();
    let shard = work
        .join("upstream/layers02/main")
        .join(t["upstream_file"].as_str().unwrap());
    let orig = std::fs::read(&shard).unwrap();
    flip(&shard, start as usize + 7);
    let (code, _) = gate(fx, work, &sel);
    assert_eq!(
        code, 1,
        "an upstream byte that differs from the artifact must FAIL"
    );
    let report = std::fs::read_to_string(work.join("reports/gate.json")).unwrap();
    let want = format!("first differing byte at upstream offset {}", start + 7);
    assert!(report.contains(&want), "{want} not in the report");
    std::fs::write(&shard, &orig).unwrap();

    // A unit's output deleted.
    std::fs::remove_dir_all(rel.join("layers03")).unwrap();
    let (code, out) = gate(fx, work, &sel);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("layers03"), "{out}");
}
