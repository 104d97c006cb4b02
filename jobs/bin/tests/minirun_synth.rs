//! The `minirun-synth` binary: a fresh process reproduces the committed golden digests of the
//! default DeepSeek V4 checkpoint (so determinism holds across processes, tokenizer training
//! included), and the exit codes follow the shared table (1 failure, 64 usage).

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_minirun-synth");

#[test]
fn default_v4_output_matches_the_golden_digests() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("v4");
    let run = Command::new(BIN)
        .args(["deepseek-v4", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let golden = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../synth/tests/golden/synth-deepseek-v4.sha256"
    ))
    .unwrap();
    assert_eq!(String::from_utf8(run.stdout).unwrap(), golden);
}

#[test]
fn exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let bad_family = Command::new(BIN)
        .args(["llama", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(bad_family.status.code(), Some(64));
    let bad_scale = Command::new(BIN)
        .args(["kimi-k3", "--scale", "x", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(bad_scale.status.code(), Some(64));
    std::fs::write(dir.path().join("occupied"), b"x").unwrap();
    let not_empty = Command::new(BIN)
        .args(["kimi-k3", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(not_empty.status.code(), Some(1));
    let err = String::from_utf8(not_empty.stderr).unwrap();
    assert!(
        err.starts_with("error: output directory `") && err.contains("not empty"),
        "{err}"
    );
    let json = Command::new(BIN)
        .args(["minimax-h3", "--json", "--out"])
        .arg(dir.path().join("h3"))
        .output()
        .unwrap();
    assert!(json.status.success());
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["family"], "minimax-h3");
    assert!(v["files"].as_array().unwrap().iter().any(|f| f["path"]
        .as_str()
        .unwrap()
        .starts_with(
            "pipenetwork--MiniMax-H3-MLX-8bit/transformer/model-00001-of-00002.safetensors"
        )));
}
