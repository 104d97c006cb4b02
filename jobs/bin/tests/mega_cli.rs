//! `minirun-mega` end to end: convert a safetensors checkpoint built here, inspect, verify, and
//! the exit codes (0 ok, 1 mismatch or failed inspection, 64 usage).

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};

fn mega(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_minirun-mega"))
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// A two-tensor safetensors file written byte by byte (formats.md §1.1).
fn write_source(dir: &Path) {
    let header = br#"{"a.weight":{"dtype":"BF16","shape":[4,8],"data_offsets":[0,64]},"b.bias":{"dtype":"F32","shape":[8],"data_offsets":[64,96]}}"#;
    let mut f = (header.len() as u64).to_le_bytes().to_vec();
    f.extend_from_slice(header);
    f.extend((0..96u32).map(|i| (i * 7 % 251) as u8));
    std::fs::write(dir.join("model.safetensors"), f).unwrap();
    std::fs::write(
        dir.join("config.json"),
        r#"{"model_type":"qwen3","architectures":["Qwen3ForCausalLM"]}"#,
    )
    .unwrap();
}

#[test]
fn convert_inspect_verify_and_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("Qwen3.5-0.8B");
    std::fs::create_dir(&src).unwrap();
    write_source(&src);
    let out = src.join("mega");
    let (s, o) = (src.to_str().unwrap(), out.to_str().unwrap());

    let r = mega(&[
        "convert",
        s,
        "--output-dir",
        o,
        "--alignment",
        "64",
        "--max-shard-size",
        "64",
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    assert!(out.join("model.mega.index.json").is_file());

    let r = mega(&["inspect", o]);
    let t = text(&r);
    assert_eq!(r.status.code(), Some(0), "{t}");
    for want in [
        "model size: 40 params (40)",
        "tensor type: BF16 (1), F32 (1)",
        "tensors: 2",
        "files: 2",
        "verified: ",
    ] {
        assert!(t.contains(want), "`{want}` missing from:\n{t}");
    }

    let r = mega(&["verify", o]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    assert!(text(&r).contains("hashes: ok\ntrust: unsigned"));

    // Flip the last payload byte of the last shard: hashes fail (exit 1), trust still reported.
    let last = out.join("model-00002-of-00002.mega");
    let mut b = std::fs::read(&last).unwrap();
    *b.last_mut().unwrap() ^= 1;
    std::fs::write(&last, &b).unwrap();
    let r = mega(&["verify", o]);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r));
    assert!(text(&r).contains("hashes: failed\ntrust: unsigned"));

    let r = mega(&["convert", s, "--output-dir", o, "--alignment", "3"]);
    assert_eq!(r.status.code(), Some(64), "{}", text(&r));
    let r = mega(&["inspect"]);
    assert_eq!(r.status.code(), Some(64));
    let r = mega(&["verify", tmp.path().join("missing").to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(1));
    assert!(text(&r).contains("does not exist") && text(&r).contains("\nhint: "));
}
