//! `minirun-run` end to end: usage errors exit 64, a missing model exits 1 with a message naming
//! the file, and a real SmolLM2 run prints text, reports tokens/s and dumps [steps, vocab] float32
//! logits whose rows pick the printed tokens.

#![allow(clippy::panic, clippy::unwrap_used)]

use crate::common;

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_minirun-run"))
}

#[test]
fn usage_and_missing_model_errors() {
    let out = bin().arg("-p").arg("x").output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    // a reasoning effort selects DeepSeek V4's thinking mode: an artifact's chat only
    for args in [
        &["--model", "/nonexistent/m.gguf", "--chat"][..],
        &["--artifact", "/nonexistent"][..],
    ] {
        let out = bin()
            .args(args)
            .args(["-p", "x", "--reasoning-effort", "high"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {err}");
        assert!(err.contains("--reasoning-effort needs --artifact"), "{err}");
    }
    // a ring of streamed tiles has at least one slot
    for ring in ["0", "1025", "x"] {
        let out = bin()
            .args(["--model", "/nonexistent/m.gguf", "-p", "x", "--stream"])
            .args(["--ring-slots", ring])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "--ring-slots {ring}: {err}");
        assert!(err.contains("--ring-slots"), "{err}");
    }
    let out = bin()
        .args(["--model", "/nonexistent/m.gguf", "-p", "x"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // The one rendering every binary shares (contract::render_error): `error: …`, then causes;
    // before it only the device's line (the device is opened first).
    let first = err
        .lines()
        .find(|l| !l.starts_with("device: "))
        .unwrap_or("");
    assert!(first.starts_with("error: "), "{err}");
    if err.contains("no usable wgpu adapter") {
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

/// `minirun-run --model MODEL ARGS…`: exit code, stdout, stderr.
fn run_args(model: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = bin().arg("--model").arg(model).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn run_text(model: &std::path::Path, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec!["-p", "Once upon a time, there was a"];
    args.extend_from_slice(extra);
    run_args(model, &args)
}

#[test]
fn sampling_is_reproducible_by_seed_and_settings_are_checked() {
    let test = "sampling_is_reproducible_by_seed_and_settings_are_checked";
    let Some(model) = common::model_path(test) else {
        return;
    };
    if common::engine(test).is_none() {
        return;
    }
    // Refusals are usage errors that say why, before anything runs long.
    for (args, says) in [
        (&["-n", "100000000"][..], "more than the context of 8192"),
        (&["-c", "4", "-n", "8"][..], "more than the context of 4"),
        (&["-c", "100000"][..], "the model's context is 8192"),
        (&["--temp", "-1"][..], "--temp -1"),
        (&["--top-p", "0"][..], "--top-p 0"),
    ] {
        let (code, _, err) = run_text(&model, args);
        assert_eq!(code, Some(64), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let sample = |seed: &str| {
        let (code, out, err) = run_text(
            &model,
            &[
                "--temp",
                "1.0",
                "--seed",
                seed,
                "-n",
                "24",
                "--ignore-eos",
                "--json",
            ],
        );
        assert_eq!(code, Some(0), "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["sampling"]["seed"].as_u64(), Some(seed.parse().unwrap()));
        assert_eq!(v["devices"], 1, "one device per process");
        v["tokens"].clone()
    };
    let a = sample("7");
    assert_eq!(a, sample("7"), "the same seed gives the same tokens");
    assert!(
        ["8", "9", "10"].iter().any(|s| sample(s) != a),
        "other seeds give other tokens"
    );
    // Greedy (the default) is the argmax path: equal to --temp 0 and to --greedy.
    let (_, g1, _) = run_text(&model, &["-n", "8", "--ignore-eos"]);
    let (_, g2, _) = run_text(&model, &["-n", "8", "--ignore-eos", "--temp", "0"]);
    assert_eq!(g1, g2);
    // Without --seed, the seed drawn is said on stderr.
    let (code, _, err) = run_text(&model, &["--temp", "0.8", "-n", "2"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("sampling: seed "), "{err}");
}

#[test]
fn text_is_streamed_while_the_run_goes_on() {
    use std::io::Read;
    let test = "text_is_streamed_while_the_run_goes_on";
    let Some(model) = common::model_path(test) else {
        return;
    };
    if common::engine(test).is_none() {
        return;
    }
    let mut child = bin()
        .arg("--model")
        .arg(&model)
        .args([
            "-p",
            "Once upon a time, there was a",
            "-n",
            "160",
            "--ignore-eos",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    // The first piece arrived; the run (160 tokens) is still going: nothing waits for the end.
    assert!(
        child.try_wait().unwrap().is_none(),
        "text came only at the end"
    );
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("decode 159 tokens"), "{err}");
    assert!(!String::from_utf8_lossy(&rest).contains('\u{FFFD}'));
}

/// `minirun-serve`'s CLI contract: --version, --help naming the environment, a remote address
/// refused without --allow-remote (64, before any model is opened), --dry-run saying what it
/// would serve (text and JSON), and a missing model failing with 1.
#[test]
fn serve_cli_contract() {
    let serve = || Command::new(env!("CARGO_BIN_EXE_minirun-serve"));
    let out = serve().arg("--version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("minirun-serve "));
    let out = bin().arg("--version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("minirun-run "));
    // the man page and completions come from the same clap definitions (contract::generate)
    for (name, mut cmd) in [("minirun-run", bin()), ("minirun-serve", serve())] {
        let out = cmd.arg("--man").output().unwrap();
        let page = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name} --man");
        assert!(
            page.contains(&format!(".TH {name} 1")) && page.contains("HF_HOME"),
            "{page}"
        );
    }
    let out = serve().args(["--completions", "zsh"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("#compdef minirun-serve"));
    let out = bin().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for var in [
        "Environment:",
        "WGPU_BACKEND",
        "HF_ENDPOINT",
        "HF_HOME",
        "HF_HUB_CACHE",
    ] {
        assert!(help.contains(var), "{var}: {help}");
    }
    let out = serve().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("Environment:") && help.contains("--api-key-file"),
        "{help}"
    );
    let out = serve().args(["--port", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    let model = std::env::current_exe().unwrap();
    let m = model.to_str().unwrap();
    let out = serve()
        .args(["--model", m, "--host", "0.0.0.0", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-remote"));
    let out = serve()
        .args([
            "--model",
            m,
            "--host",
            "0.0.0.0",
            "--allow-remote",
            "--port",
            "9",
            "--dry-run",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("would load the gguf") && said.contains("http://0.0.0.0:9"),
        "{said}"
    );
    let out = serve()
        .args(["--model", m, "--dry-run", "--json", "--queue", "3"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "minirun-serve/1");
    assert_eq!(v["would_listen"], "http://127.0.0.1:8080");
    assert_eq!(v["queue"], 3);
    let out = serve()
        .args(["--model", "/nonexistent/m.gguf", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`/nonexistent/m.gguf`"));
}

/// A GGUF file whose `general.architecture` has no registry row is refused by name, with the
/// registered ones, before any device is opened (exit 1); one without the key names the key.
#[test]
fn an_unregistered_gguf_architecture_is_refused_by_the_registry() {
    use artifact::gguf::writer::write_file;
    use artifact::gguf::{Metadata, Value};
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, arch: Option<&str>| {
        let mut meta = Metadata::default();
        if let Some(a) = arch {
            meta.set("general.architecture", Value::String(a.as_bytes().to_vec()));
        }
        meta.set("general.name", Value::String(b"toy".to_vec()));
        let path = dir.path().join(name);
        write_file(&path, &meta, &[], 32, |_| unreachable!("no tensors")).unwrap();
        path
    };
    let run = |path: &std::path::Path| {
        let out = bin()
            .arg("--model")
            .arg(path)
            .args(["-p", "x"])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&write("gpt2.gguf", Some("gpt2")));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("architecture `gpt2` has no runner (registered: llama, qwen2, qwen3)"),
        "{err}"
    );
    let (code, err) = run(&write("none.gguf", None));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("general.architecture"), "{err}");
    // the rows the registry holds
    let archs: Vec<_> = runner::registry::GGUF_ENTRIES
        .iter()
        .map(|e| (e.architecture, e.family))
        .collect();
    assert_eq!(
        archs,
        [("llama", "llama"), ("qwen2", "llama"), ("qwen3", "llama")]
    );
}

#[test]
fn json_schema_and_grammar_file_constrain_the_answer() {
    let test = "json_schema_and_grammar_file_constrain_the_answer";
    let Some(model) = common::model_path(test) else {
        return;
    };
    if common::engine(test).is_none() {
        return;
    }
    let ask = |extra: &[&str]| {
        let mut args = vec![
            "--chat",
            "-p",
            "What is the capital of France? Answer in JSON.",
        ];
        args.extend_from_slice(extra);
        run_args(&model, &args)
    };
    let schema = r#"{"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}, "country": {"type": "string", "enum": ["France", "Spain"]}}, "required": ["city", "country"], "additionalProperties": false}"#;
    let (code, out, err) = ask(&[
        "--json-schema",
        schema,
        "-n",
        "80",
        "--temp",
        "0.8",
        "--seed",
        "3",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"));
    assert!(v["city"].as_str().unwrap().chars().count() <= 20, "{out}");
    assert!(["France", "Spain"].contains(&v["country"].as_str().unwrap()));
    assert_eq!(v.as_object().unwrap().len(), 2, "{out}");

    let dir = tempfile::tempdir().unwrap();
    let lark = dir.path().join("answer.lark");
    std::fs::write(&lark, "start: \"answer: \" (\"yes\" | \"no\")\n").unwrap();
    let (code, out, err) = ask(&["--grammar-file", lark.to_str().unwrap(), "-n", "20"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        ["answer: yes", "answer: no"].contains(&out.trim()),
        "{out:?}"
    );

    // Refusals: a schema that is not JSON or not a schema, a missing file, and flags that cannot
    // go together, each with the reason.
    let missing = dir.path().join("missing.lark");
    for (args, code_want, says) in [
        (vec!["--json-schema", "{"], 64, "--json-schema is not JSON"),
        (
            vec!["--json-schema", r#"{"type": "no-such-type"}"#],
            1,
            "no-such-type",
        ),
        (
            vec!["--grammar-file", missing.to_str().unwrap()],
            1,
            "missing.lark",
        ),
        (
            vec!["--json-schema", "{}", "--ignore-eos"],
            64,
            "--ignore-eos",
        ),
        (vec!["--json-schema", "{}", "-i"], 64, "--interactive"),
    ] {
        let (code, _, err) = ask(&args);
        assert_eq!(code, Some(code_want), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
