//! `minirun-inspect` on plans: a valid plan prints and exits 0, a refused plan exits 1 with its
//! `file:line: key` error, a non-plan path is refused with exit 1, a usage error exits 64.
#![allow(clippy::unwrap_used, clippy::panic)] // tests: a failed unwrap is a failed test

use std::path::PathBuf;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_minirun-inspect"))
}

fn plans() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../plans")
}

#[test]
fn valid_plan_prints_table_and_json() {
    let out = bin()
        .arg(plans().join("deepseek-v4.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("layers42") && text.contains("mtp00") && text.contains("fp8-e4m3-block"),
        "{text}"
    );
    let out = bin()
        .arg(plans().join("minimax-h3.toml"))
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"]["status"], "draft");
    // A draft says how to finish it: pin (its sources hold the null commit: `--revision`), check.
    let p = plans().join("minimax-h3.toml");
    let steps: Vec<&str> = v["to_finish"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(
        steps,
        [
            format!("minirun-plan pin {} --revision main", p.display()),
            format!("minirun-plan check {}", p.display())
        ]
    );
    let out = bin().arg(plans().join("kimi-k3.toml")).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("to finish   minirun-plan pin ") && text.contains("minirun-plan check "),
        "{text}"
    );
    // A ready plan has nothing to finish.
    let out = bin()
        .arg(plans().join("deepseek-v4.toml"))
        .arg("--json")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["to_finish"], serde_json::json!([]));
}

#[test]
fn refused_plan_exits_1_naming_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.toml");
    let text = std::fs::read_to_string(plans().join("deepseek-v4.toml")).unwrap();
    std::fs::write(
        &p,
        text.replace("DeepSeek-V4-Flash-minirun", "DeepSeek-V4-Flash"),
    )
    .unwrap();
    let out = bin().arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("p.toml`:") && err.contains("key `target.repo`") && err.contains("-minirun"),
        "{err}"
    );
}

#[test]
fn other_paths_and_usage_errors() {
    let out = bin().arg("index.json").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = bin().arg("--bogus").output().unwrap();
    assert_eq!(out.status.code(), Some(64));
}
