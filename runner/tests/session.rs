//! `minirun-run -i` under a pseudo-terminal (`session_pty.py`, Python's stdlib `pty`): a second
//! turn is fed only what the KV cache lacks, `/reset` forgets, Ctrl-C stops an answer and returns
//! to the prompt, `/exit` and end of input end the session with 0, and a message past the context
//! gets a clear message instead of a run-on.

#![allow(clippy::panic, clippy::unwrap_used)]

use crate::common;

use std::process::Command;

#[test]
fn interactive_session_under_a_pty() {
    let test = "interactive_session_under_a_pty";
    let Some(model) = common::model_path(test) else {
        return;
    };
    if common::engine(test).is_none() {
        return;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/session_pty.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_minirun-run"))
        .arg("-i")
        .arg("--model")
        .arg(&model)
        .output()
        .unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{o}\n{e}");
    assert!(o.contains("context limit: ok"), "{o}");
}
