//! `minirun-run` end to end: usage errors exit 64, a missing model exits 1 with a message naming
//! the file, and a real SmolLM2 run prints text, reports tokens/s and dumps [steps, vocab] float32
//! logits whose rows pick the printed tokens.

#![allow(clippy::panic, clippy::unwrap_used)]

mod common;

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_minirun-run"))
}

#[test]
fn usage_and_missing_model_errors() {
    let out = bin().arg("-p").arg("x").output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    let out = bin()
        .args(["--model", "/nonexistent/m.gguf", "-p", "x"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("no wgpu adapter") {
        assert_eq!(out.status.code(), Some(1));
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("`/nonexistent/m.gguf`"), "{err}");
}

#[test]
fn dump_logits_writes_steps_by_vocab() {
    let test = "dump_logits_writes_steps_by_vocab";
    let Some(model) = common::model_path(test) else {
        return;
    };
    if common::engine(test).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("l.npy");
    let out = bin()
        .arg("--model")
        .arg(&model)
        .args([
            "-p",
            "The capital of France is",
            "-n",
            "3",
            "--greedy",
            "--ignore-eos",
        ])
        .arg("--dump-logits")
        .arg(&npy)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("tokens/s"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Paris"), "continuation: {text:?}");
    let b = std::fs::read(&npy).unwrap();
    assert_eq!(&b[..8], b"\x93NUMPY\x01\x00");
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    let header = std::str::from_utf8(&b[10..10 + hlen]).unwrap();
    assert!(
        header.contains("'descr': '<f4'") && header.contains("'shape': (3, 49152)"),
        "{header}"
    );
    assert_eq!(b.len(), 10 + hlen + 3 * 49152 * 4);
    let row0: Vec<f32> = b[10 + hlen..10 + hlen + 49152 * 4]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    // " Paris" is the argmax after the prompt
    let (top, _) = common::top2(&row0);
    let tok = runner::tokenizer::Tokenizer::from_gguf(
        runner::model::LlamaModel::open(&model)
            .unwrap()
            .gguf
            .metadata(),
    )
    .unwrap();
    assert_eq!(tok.decode(&[top as u32]).unwrap(), " Paris");
}
