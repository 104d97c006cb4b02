//! The DeepSeek V4 registry entry end to end, as CI's reference comparison (issue 10): the
//! published, pulled and verified V4 artifact run by the real `minirun-run --artifact DIR
//! --prompt-ids … --dump-logits OUT.npy` on the wgpu engine (lavapipe in CI), compared with the
//! transformers fixture `ci/oracles/deepseek_v4/` at the tolerance stated in
//! docs/runner-deepseek-v4.md; a streamed run's logits equal the resident run's bit for bit.

use std::path::Path;
use std::process::Command;

use super::deepseek_common;
use super::fixture;

/// `minirun-run --artifact DIR --prompt-ids … -n N … --dump-logits OUT` (exit 0 required):
/// (stdout, stderr).
pub(super) fn run(
    dir: &Path,
    ids: &[u32],
    n: usize,
    extra: &[&str],
    out: &Path,
) -> (String, String) {
    let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
    let o = Command::new(env!("CARGO_BIN_EXE_minirun-run"))
        .arg("--artifact")
        .arg(dir)
        .args(["--prompt-ids", &ids.join(","), "-n", &n.to_string()])
        .args(extra)
        .arg("--dump-logits")
        .arg(out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}");
    (String::from_utf8_lossy(&o.stdout).into_owned(), err)
}

#[test]
fn minirun_run_artifact_matches_transformers_and_streams_bit_identically() {
    if super::engine("minirun_run_artifact_matches_transformers").is_none() {
        return;
    }
    let fx = fixture();
    let refx = deepseek_common::fixture();
    let out = fx.scratch.join("v4-resident.npy");
    // 17 rows: the logits after the prompt, then after each of 16 greedy tokens.
    let (text, err) = run(&fx.consumer, &refx.prompt, refx.logits.len(), &[], &out);
    eprintln!("{err}continuation: {text:?}");
    let rows = deepseek_common::read_npy_rows(&std::fs::read(&out).unwrap());
    let report = deepseek_common::compare(&rows, refx);
    eprintln!("minirun-run --artifact vs transformers: {report}");
    report.assert_within();
    // and against transformers' f64 logits, the same bound (the device placement's long run:
    // tests/deepseek_gpu.rs runs the host placement's)
    let vs64 = deepseek_common::max_abs_vs_f64(&rows, refx);
    assert!(
        vs64 <= report.tolerance,
        "max |Δ| vs transformers f64 {vs64:e} > tolerance {:e}",
        report.tolerance
    );
    assert!(
        err.contains(&format!("verified `{}` at {}", super::TARGET, fx.commit)),
        "{err}"
    );

    // Streamed: routed experts read on demand (each load rechecks identity and length);
    // a shorter prompt keeps it quick — bit identity does not need the long one.
    let short = &refx.prompt[..40];
    let res = fx.scratch.join("v4-short-resident.npy");
    let str_ = fx.scratch.join("v4-short-streamed.npy");
    let (_, err_r) = run(&fx.consumer, short, 3, &["--stats"], &res);
    // the V4 path's decode steps are counted too (tests/deepseek_gpu.rs holds their structure)
    assert!(
        err_r.contains("stats: per decode step (max over 2 steps)")
            && !err_r.contains(" 0 submits"),
        "{err_r}"
    );
    let (_, err_s) = run(&fx.consumer, short, 3, &["--stream"], &str_);
    let a = std::fs::read(&res).unwrap();
    let b = std::fs::read(&str_).unwrap();
    assert_eq!(a, b, "streamed logits differ from resident");
    assert!(err_s.contains("tile reads"), "{err_s}");
}

/// `minirun-run --json` reports every decode step's counters (issue 16 item 4): streamed with an
/// expert cache of 0 MiB every pick is a miss, read from the file (the same tiles for every
/// step), and counted in its step; resident, nothing is read from the file; the device memory
/// is reported and stays put once warm.
#[test]
fn json_reports_each_steps_tile_reads_expert_misses_and_device_memory() {
    if super::engine("json_reports_each_steps_tile_reads").is_none() {
        return;
    }
    let fx = fixture();
    let refx = deepseek_common::fixture();
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx.consumer.join("config.json")).unwrap()).unwrap();
    let picks = config["num_hidden_layers"].as_u64().unwrap()
        * config["num_experts_per_tok"].as_u64().unwrap();
    let ids: Vec<String> = refx.prompt[..6].iter().map(u32::to_string).collect();
    let steps = |extra: &[&str]| -> Vec<serde_json::Value> {
        let o = Command::new(env!("CARGO_BIN_EXE_minirun-run"))
            .arg("--artifact")
            .arg(&fx.consumer)
            .args([
                "--prompt-ids",
                &ids.join(","),
                "-n",
                "4",
                "--ignore-eos",
                "--json",
            ])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["per_step"]["steps"], 3, "{v}");
        // the backend runs on the front-end's device: one in the process, not one each
        assert_eq!(v["devices"], 1, "{v}");
        v["steps"].as_array().unwrap().clone()
    };
    let field =
        |s: &serde_json::Value, k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k}: {s}"));
    let streamed = steps(&["--stream", "--expert-cache-mib", "0"]);
    let tiles = field(&streamed[0], "tile_reads");
    for s in &streamed {
        assert_eq!(field(s, "expert_misses"), picks, "{s}");
        assert_eq!(field(s, "expert_hits"), 0, "{s}");
        assert_eq!(field(s, "tile_reads"), tiles, "{s}");
        assert!(tiles >= 3 * picks, "{s}");
        assert!(field(s, "device_bytes") > 0, "{s}");
    }
    let resident = steps(&["--resident"]);
    let held = field(&resident[0], "device_bytes");
    for s in &resident {
        assert_eq!(
            (field(s, "tile_reads"), field(s, "expert_misses")),
            (0, 0),
            "{s}"
        );
        assert_eq!(field(s, "device_bytes"), held, "{s}");
        assert_eq!(field(s, "buffers_created"), 0, "{s}");
    }
}
