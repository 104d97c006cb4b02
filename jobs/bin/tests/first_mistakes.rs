//! A newcomer's first mistake with each tool (docs/cli.md "First mistakes and the next step";
//! issue 51 item 4): a file given to the wrong tool, a draft plan, a non-empty output directory, a
//! directory that is not a copy. Each is refused without a panic, and the refusal names the command
//! to run instead. (The stages' mistakes are `pipeline_v4::next_step`; `minirun-hub serve` on a
//! missing root is `hub_cli::import_serve_and_refusals`.)

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

/// Runs `bin args` in `dir`; (exit code, stderr + stdout).
fn run(bin: &str, dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(bin)
        .args(args)
        .current_dir(dir)
        .env_remove("HF_ENDPOINT")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!said.contains("panicked"), "{bin} {args:?}: {said}");
    (out.status.code(), said)
}

fn files(dir: &Path) {
    std::fs::write(dir.join("m.gguf"), b"GGUF\x03\0\0\0\0\0\0\0\0\0\0\0").unwrap();
    std::fs::write(dir.join("s.mega"), b"MEGA\0\r\n\x1a\0\0\0\0\0\0\0\0").unwrap();
    let header = br#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#;
    let mut st = (header.len() as u64).to_le_bytes().to_vec();
    st.extend_from_slice(header);
    st.extend_from_slice(&[0; 4]);
    std::fs::write(dir.join("w.safetensors"), st).unwrap();
}

#[test]
fn a_file_given_to_the_wrong_tool_names_the_tool_that_reads_it() {
    let d = tempfile::tempdir().unwrap();
    files(d.path());
    let cases: [(&str, &[&str], &str); 5] = [
        (
            env!("CARGO_BIN_EXE_minirun-inspect"),
            &["m.gguf"],
            "hint: `m.gguf` is a GGUF file: read it with `minirun-gguf info m.gguf`",
        ),
        (
            env!("CARGO_BIN_EXE_minirun-gguf"),
            &["info", "s.mega"],
            "hint: `s.mega` is a MEGA shard: read it with `minirun-mega inspect s.mega`",
        ),
        (
            env!("CARGO_BIN_EXE_minirun-mega"),
            &["inspect", "w.safetensors"],
            "hint: `w.safetensors` is a safetensors file: convert it with `minirun-mega convert w.safetensors --output-dir DIR`",
        ),
        (
            env!("CARGO_BIN_EXE_minirun-mega"),
            &["inspect", "m.gguf"],
            "read it with `minirun-gguf info m.gguf`",
        ),
        (
            env!("CARGO_BIN_EXE_minirun-inspect"),
            &["w.safetensors"],
            "or publish it with a plan (`minirun-plan check PLAN`)",
        ),
    ];
    for (bin, args, want) in cases {
        let (code, said) = run(bin, d.path(), args);
        assert_eq!(code, Some(1), "{bin} {args:?}: {said}");
        assert!(said.contains(want), "{bin} {args:?}: {said}");
    }
    // a file no tool reads is still told which tools read what
    std::fs::write(d.path().join("notes.txt"), b"hello\n").unwrap();
    let (code, said) = run(
        env!("CARGO_BIN_EXE_minirun-inspect"),
        d.path(),
        &["notes.txt"],
    );
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("a GGUF file is read by `minirun-gguf info`"),
        "{said}"
    );
}

#[test]
fn a_draft_plan_a_full_directory_and_a_non_copy_name_the_next_command() {
    let d = tempfile::tempdir().unwrap();
    let plan = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plans/deepseek-v4.toml"),
    )
    .unwrap();
    let draft: String = plan
        .lines()
        .map(|l| {
            if l.starts_with("revision = ") {
                "revision = \"main\"".to_owned()
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(d.path().join("draft.toml"), draft).unwrap();
    let no_hub = ["--endpoint", "http://127.0.0.1:9"];
    for (bin, sub) in [
        (
            env!("CARGO_BIN_EXE_minirun-plan"),
            &["check", "draft.toml"][..],
        ),
        (
            env!("CARGO_BIN_EXE_minirun-fetch"),
            &["--plan", "draft.toml"][..],
        ),
    ] {
        let args: Vec<&str> = sub.iter().chain(no_hub.iter()).copied().collect();
        let (code, said) = run(bin, d.path(), &args);
        assert_eq!(code, Some(1), "{bin}: {said}");
        assert!(said.contains("with `minirun-plan pin`"), "{bin}: {said}");
    }
    let (code, said) = run(
        env!("CARGO_BIN_EXE_minirun-synth"),
        d.path(),
        &["deepseek-v4", "--out", "."],
    );
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("pass an empty or new directory"), "{said}");
    std::fs::create_dir(d.path().join("empty")).unwrap();
    let (code, said) = run(
        env!("CARGO_BIN_EXE_minirun-verify"),
        d.path(),
        &["offline", "--dir", "empty"],
    );
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("`minirun-verify pull OWNER/NAME-minirun --dir empty` makes one"),
        "{said}"
    );
}
