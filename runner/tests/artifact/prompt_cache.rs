//! `.megakv` for DeepSeek V4 artifacts (issue 17 item 6; docs/mega.md §12.2, docs/runner.md
//! "Prompt cache"): the adapter's whole decode state (sliding windows, compressor and indexer
//! buffers, overlaps and entries) saved and loaded gives the prefilled logits bit for bit; a
//! truncated, altered, foreign or miscounted file is refused; `minirun-run --artifact
//! --prompt-cache` writes the file and reuses it; a chat session goes back to the snapshot of the
//! previous prompt instead of feeding the conversation again, with the same answers.

use std::process::Command;

use artifact::mega::kv::{read_kv, write_kv, KvModel};
use runner::adapter::ModelOptions;
use runner::artifact::prompt_cache_identity as artifact_identity;
use runner::artifact::{OpenOptions, VerifiedArtifact};
use runner::prompt_cache::PromptCache;

use super::registry::StartOnly;
use super::{deepseek_common, engine, fixture};
use crate::common::One;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn open<'a>(a: &'a VerifiedArtifact, opts: &ModelOptions<'a>) -> One<'a> {
    One::new(runner::deepseek::entry::open_artifact(a, opts).unwrap())
}

/// The demo artifact opened under its evidence (a prompt cache binds to the verified commit).
fn verified() -> VerifiedArtifact {
    VerifiedArtifact::open(&fixture().consumer, &OpenOptions::verified(None)).unwrap()
}

fn resident(engine: &runner::engine::Engine, capacity: usize) -> ModelOptions<'_> {
    ModelOptions::from_flags(engine, false, capacity, 0)
}

#[test]
fn v4_state_from_megakv_gives_the_prefilled_logits_and_bad_files_are_refused() {
    let Some(_) = engine("v4_state_from_megakv") else {
        return;
    };
    let a = verified();
    let e = runner::engine::Engine::new().unwrap();
    let opts = resident(&e, 256);
    // Long enough to close HCA-free CSA windows (ratio 4) and to slide past the window.
    let prompt: Vec<u32> = deepseek_common::fixture().prompt[..40].to_vec();
    let keep = prompt.len() - 1;
    let id = artifact_identity(&a).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("v4.megakv");
    let cache = PromptCache::new(&file, id.clone());

    // Prefill (all but the last token, a snapshot, the last), one decode step; save the state
    // of all but the last prompt token from the snapshot.
    let mut d = open(&a, &opts);
    let after_prompt = d.logits(&prompt).unwrap();
    let next = runner::deepseek::argmax(&after_prompt);
    let after_next = d.logits(&[next]).unwrap();
    cache
        .save(d.model.as_ref(), &d.seq, &prompt[..keep])
        .unwrap();
    let (header, _) = read_kv(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(header.tokens, prompt[..keep]);
    assert_eq!(header.model, id);
    // a prefix the adapter holds no state within cannot be saved (the file is kept)
    let err = cache
        .save(d.model.as_ref(), &d.seq, &prompt[..5])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no prefix of the 5 tokens can be saved"),
        "{err}"
    );
    let (header, _) = read_kv(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(header.tokens, prompt[..keep]);

    // A fresh adapter: the file's state, then the last prompt token and the next one.
    let mut b = open(&a, &opts);
    let reused = cache
        .load(b.model.as_mut(), &b.seq, &prompt)
        .unwrap()
        .unwrap();
    assert_eq!(reused, prompt[..keep]);
    assert_eq!(b.position(), keep);
    assert_eq!(
        bits(&b.logits(&prompt[keep..]).unwrap()),
        bits(&after_prompt)
    );
    assert_eq!(bits(&b.logits(&[next]).unwrap()), bits(&after_next));
    // A prompt that parts from the file's tokens inside them cannot cut V4's state: nothing is
    // reused and the adapter starts again.
    let mut other = prompt.clone();
    other[10] = other[11];
    let reused = cache
        .load(b.model.as_mut(), &b.seq, &other)
        .unwrap()
        .unwrap();
    assert!(reused.is_empty());
    assert_eq!(b.position(), 0);

    // Refusals: truncated, one byte altered, another commit, another position count.
    let good = std::fs::read(&file).unwrap();
    let mut c = open(&a, &opts);
    crate::common::cache_refuses_truncated_and_altered(&file, || {
        cache
            .load(c.model.as_mut(), &c.seq, &prompt)
            .unwrap_err()
            .to_string()
    });
    let KvModel::Artifact {
        repo,
        tokenizer_sha256,
        ..
    } = id.clone()
    else {
        panic!("an artifact identity")
    };
    let foreign = PromptCache::new(
        &file,
        KvModel::Artifact {
            repo,
            commit: "0".repeat(40),
            tokenizer_sha256,
        },
    );
    let err = foreign
        .load(c.model.as_mut(), &c.seq, &prompt)
        .unwrap_err()
        .to_string();
    assert!(err.contains("made for another model"), "{err}");
    // A well-formed file whose arrays are those of 39 positions but whose tokens say 38.
    let (mut h, payload) = read_kv(&good).unwrap();
    h.tokens.pop();
    std::fs::write(&file, write_kv(&h, payload).unwrap()).unwrap();
    let err = cache
        .load(c.model.as_mut(), &c.seq, &prompt)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not this model's after 38 positions"), "{err}");
    assert_eq!(c.position(), 0, "a refused file leaves the state alone");
}

fn run_cached(file: &std::path::Path, ids: &str) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_minirun-run"))
        .arg("--artifact")
        .arg(&fixture().consumer)
        .args(["--prompt-ids", ids, "-n", "3", "--json", "--prompt-cache"])
        .arg(file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn minirun_run_artifact_writes_the_v4_state_then_reuses_it() {
    if engine("minirun_run_artifact_writes_the_v4_state").is_none() {
        return;
    }
    let prompt = &deepseek_common::fixture().prompt[..24];
    let ids: Vec<String> = prompt.iter().map(u32::to_string).collect();
    let ids = ids.join(",");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.megakv");
    let first = run_cached(&file, &ids);
    assert_eq!(first["prompt_cache_reused"], 0);
    assert!(file.exists());
    let second = run_cached(&file, &ids);
    assert_eq!(
        second["prompt_cache_reused"].as_u64().unwrap() as usize,
        prompt.len() - 1
    );
    assert_eq!(first["tokens"], second["tokens"]);
}

#[test]
fn a_v4_chat_session_reuses_its_turns_with_the_same_answers() {
    use runner::session::{Session, TurnStats};
    if engine("a_v4_chat_session_reuses_its_turns").is_none() {
        return;
    }
    let a = verified();
    let e = runner::engine::Engine::new().unwrap();
    let opts = resident(&e, 512);
    let tok: runner::tokenizer::Tokenizer = runner::deepseek::entry::tokenizer(&a).unwrap();
    let run = |reuse: bool, effort: Option<&str>| -> (Vec<String>, Vec<TurnStats>) {
        let inner = runner::deepseek::entry::open_artifact(&a, &opts).unwrap();
        let mut d: Box<dyn runner::adapter::Model> = if reuse {
            inner
        } else {
            Box::new(StartOnly(inner))
        };
        let seq = d.begin().unwrap();
        let format = runner::deepseek::entry::chat(&a)
            .unwrap()
            .with_reasoning_effort(effort)
            .unwrap();
        let sampler = runner::sample::Sampler::new(runner::sample::SamplingParams {
            temperature: 0.0,
            ..Default::default()
        });
        let mut s = Session::new(d.as_mut(), seq, &tok, format, sampler, None, 512, 3).unwrap();
        let (mut texts, mut stats) = (Vec::new(), Vec::new());
        for q in ["hello", "again"] {
            let mut t = String::new();
            stats.push(s.turn(q, &mut |p| t.push_str(p)).unwrap());
            texts.push(t);
        }
        (texts, stats)
    };
    for effort in [None, Some("low")] {
        let (fresh, _) = run(false, effort);
        let (reused, stats) = run(true, effort);
        eprintln!("{effort:?}: {stats:?}");
        assert_eq!(
            fresh, reused,
            "reusing the state changed an answer ({effort:?})"
        );
        for w in stats.windows(2) {
            let (t1, t2) = (w[0], w[1]);
            // the previous turn's prompt at least (thinking mode drops the reasoning from the
            // history, so the rendering parts there)
            assert!(
                t2.reused + 1 >= t1.reused + t1.fed,
                "{effort:?}: {t1:?} then {t2:?}"
            );
            if effort.is_none() {
                // chat mode renders the answer as it was generated: everything fed is kept
                assert_eq!(t2.reused, t1.reused + t1.fed + t1.generated - 1);
            }
        }
    }
}

/// `minirun-serve --artifact --prompt-cache` and `minirun-run -i --artifact --prompt-cache` start
/// from a file `minirun-run --artifact --chat -n 0 --prompt-cache` made of the question.
#[test]
fn minirun_serve_and_a_session_start_from_the_v4_state_file() {
    use clap::Parser;
    if engine("minirun_serve_artifact_starts_from_the_v4_state").is_none() {
        return;
    }
    let fx = fixture();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("q.megakv");
    // The cache of the question, rendered in the family's chat format (nothing generated).
    let o = Command::new(env!("CARGO_BIN_EXE_minirun-run"))
        .arg("--artifact")
        .arg(&fx.consumer)
        .args(["--chat", "-p", "hi", "-n", "0", "--prompt-cache"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let serve = |cache: bool| {
        let mut argv = vec![
            "minirun-serve".to_owned(),
            "--artifact".into(),
            fx.consumer.display().to_string(),
            "--port".into(),
            "0".into(),
            "-c".into(),
            "64".into(),
        ];
        if cache {
            argv.extend(["--prompt-cache".into(), file.display().to_string()]);
        }
        let args = runner::serve::ServeArgs::try_parse_from(argv).unwrap();
        let server = runner::serve::start(&args, runner::registry::ENTRIES, false).unwrap();
        let chat = format!(
            r#"{{"model": "{}", "messages": [{{"role": "user", "content": "hi"}}], "max_tokens": 3}}"#,
            server.info.id
        );
        let (st, c) = super::serve::request(server.addr, "POST", "/v1/chat/completions", &chat);
        assert_eq!(st, 200, "{c}");
        let (_, health) = super::serve::request(server.addr, "GET", "/health", "");
        server.stop().unwrap();
        (c, health["reused_prompt_tokens"].as_u64().unwrap())
    };
    let held = read_kv(&std::fs::read(&file).unwrap())
        .unwrap()
        .0
        .tokens
        .len();
    let mut child = Command::new(env!("CARGO_BIN_EXE_minirun-run"))
        .arg("-i")
        .arg("--artifact")
        .arg(&fx.consumer)
        .args(["-n", "2", "--prompt-cache"])
        .arg(&file)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"hi\n").unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("[{held} tokens reused from the cache, 1 fed")),
        "{err}"
    );
    let (plain, none) = serve(false);
    let (cached, reused) = serve(true);
    assert_eq!(none, 0);
    let prompt = cached["usage"]["prompt_tokens"].as_u64().unwrap();
    assert_eq!(reused, prompt - 1, "{cached}");
    assert_eq!(
        plain["choices"][0]["message"], cached["choices"][0]["message"],
        "the loaded state changed the answer"
    );
}
