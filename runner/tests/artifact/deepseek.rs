//! The DeepSeek V4 registry entry end to end, as CI's reference comparison (issue 10): the
//! published, pulled and verified V4 artifact run by the real `minirun-run --artifact DIR
//! --prompt-ids … --dump-logits OUT.npy` on the wgpu engine (lavapipe in CI), compared with the
//! transformers fixture `ci/oracles/deepseek_v4/` at the tolerance stated in
//! docs/runner-deepseek-v4.md; a streamed run's logits equal the resident run's bit for bit.

use std::path::Path;
use std::process::Command;

use super::deepseek_common;
use super::fixture;

fn run(dir: &Path, ids: &[u32], n: usize, extra: &[&str], out: &Path) -> (String, String) {
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
