//! `.megakv` prompt cache on SmolLM2-135M Q4_1 (issue 17 item 6; docs/runner.md "Prompt cache"):
//! the logits after loading a saved prefix equal the logits after prefilling it, bit for bit
//! (both for a prompt that extends the cached one and for the cached prompt itself); a truncated,
//! altered (one byte) or foreign file is refused with the reason; `minirun-run --prompt-cache`
//! writes the file on the first run and feeds only the rest on the second, with the same tokens.

#![allow(clippy::panic, clippy::unwrap_used)]

use crate::common;

use std::process::Command;

use artifact::mega::kv::KvModel;
use runner::adapter::Model;
use runner::llama::{Logits, Runner, WeightMode};
use runner::model::LlamaModel;
use runner::prompt_cache::{gguf_identity, PromptCache};
use runner::tokenizer::Tokenizer;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn loaded_prefix_gives_the_prefilled_logits_and_bad_files_are_refused() {
    let test = "loaded_prefix_gives_the_prefilled_logits_and_bad_files_are_refused";
    let Some(path) = common::model_path(test) else {
        return;
    };
    let Some(e) = common::engine(test) else {
        return;
    };
    let model = LlamaModel::open(&path).unwrap();
    let tok = Tokenizer::from_gguf(model.gguf.metadata()).unwrap();
    let prompt = tok.encode(common::PROMPTS[2]).unwrap();
    let id = gguf_identity(&path).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("prefix.megakv");

    // Prefill, one decode step; save the prompt's state.
    let mut a = Runner::new(e, &model, WeightMode::Resident, 64).unwrap();
    let sa = a.begin().unwrap();
    let after_prompt = a.forward(&prompt, Logits::Last).unwrap();
    let next = common::top2(&after_prompt).0 as u32;
    let after_next = a.forward(&[next], Logits::Last).unwrap();
    let cache = PromptCache::new(&file, id.clone());
    cache.save(&a, &sa, &prompt).unwrap();

    // A longer prompt reuses every cached position and feeds only the new token.
    let mut b = Runner::new(e, &model, WeightMode::Resident, 64).unwrap();
    let sb = b.begin().unwrap();
    let longer: Vec<u32> = prompt.iter().copied().chain([next]).collect();
    let reused = cache.load(&mut b, &sb, &longer).unwrap().unwrap();
    assert_eq!(reused, prompt);
    assert_eq!(b.position(), prompt.len());
    assert_eq!(
        bits(&b.forward(&[next], Logits::Last).unwrap()),
        bits(&after_next)
    );
    // The cached prompt itself: all but its last token come from the file.
    let reused = cache.load(&mut b, &sb, &prompt).unwrap().unwrap();
    assert_eq!(reused.len(), prompt.len() - 1);
    let last = *prompt.last().unwrap();
    assert_eq!(
        bits(&b.forward(&[last], Logits::Last).unwrap()),
        bits(&after_prompt)
    );

    // Refusals: truncated, one byte altered, another model, no file at all.
    let mut c = Runner::new(e, &model, WeightMode::Resident, 64).unwrap();
    let sc = c.begin().unwrap();
    common::cache_refuses_truncated_and_altered(&file, || {
        cache.load(&mut c, &sc, &prompt).unwrap_err().to_string()
    });
    let foreign = PromptCache::new(
        &file,
        KvModel::Gguf {
            sha256: "0".repeat(64),
            bytes: 1,
        },
    );
    let err = foreign.load(&mut c, &sc, &prompt).unwrap_err().to_string();
    assert!(err.contains("made for another model"), "{err}");
    std::fs::remove_file(&file).unwrap();
    assert!(cache.load(&mut c, &sc, &prompt).unwrap().is_none());
}

#[test]
fn minirun_run_writes_the_cache_then_reuses_it() {
    let test = "minirun_run_writes_the_cache_then_reuses_it";
    let Some(path) = common::model_path(test) else {
        return;
    };
    if common::engine(test).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.megakv");
    let run = || {
        let out = Command::new(env!("CARGO_BIN_EXE_minirun-run"))
            .arg("--model")
            .arg(&path)
            .args([
                "-p",
                common::PROMPTS[0],
                "-n",
                "4",
                "--json",
                "--prompt-cache",
            ])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let first = run();
    assert_eq!(first["prompt_cache_reused"], 0);
    assert!(file.is_file());
    let second = run();
    let prompt = second["prompt_tokens"].as_u64().unwrap();
    assert_eq!(second["prompt_cache_reused"].as_u64().unwrap(), prompt - 1);
    assert_eq!(first["tokens"], second["tokens"]);
}

/// A session (`-i --prompt-cache`) whose model was given a cache of its first turn's rendering
/// feeds only the last token of that turn.
#[test]
fn a_session_reuses_a_loaded_prompt_cache() {
    let test = "a_session_reuses_a_loaded_prompt_cache";
    let Some(path) = common::model_path(test) else {
        return;
    };
    let Some(e) = common::engine(test) else {
        return;
    };
    let model = LlamaModel::open(&path).unwrap();
    let tok = Tokenizer::from_gguf(model.gguf.metadata()).unwrap();
    let question = "What is the capital of France?";
    let ids = tok
        .encode(&tok.chat_prompt(None, question).unwrap())
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("turn.megakv");
    let mut a = Runner::new(e, &model, WeightMode::Resident, 256).unwrap();
    let sa = a.begin().unwrap();
    a.forward_argmax(&ids).unwrap();
    let cache = PromptCache::new(&file, gguf_identity(&path).unwrap());
    cache.save(&a, &sa, &ids).unwrap();

    let mut b = Runner::new(e, &model, WeightMode::Resident, 256).unwrap();
    let sb = b.begin().unwrap();
    let loaded = cache.load_all(&mut b, &sb).unwrap().unwrap();
    assert_eq!(loaded, ids);
    let sampler = runner::sample::Sampler::new(runner::sample::SamplingParams {
        temperature: 0.0,
        ..Default::default()
    });
    let template = runner::chat::ChatFormat::Template(Box::new(tok.template().unwrap()));
    let mut s =
        runner::session::Session::new(&mut b, sb, &tok, template, sampler, None, 256, 2).unwrap();
    s.assume_cached(loaded);
    let t = s.turn(question, &mut |_| {}).unwrap();
    assert_eq!((t.reused, t.fed), (ids.len() - 1, 1));
}
