//! SmolLM2-135M Q4_1 against llama.cpp's recorded first-step logits
//! (`ci/oracles/smollm2_llamacpp.recorded.json`, re-derived by `ci/oracles/smollm2_llamacpp.sh`):
//! our GGUF tokenizer gives llama.cpp's token ids for the five prompts, the wgpu runner's
//! first-step argmax equals llama.cpp's, and max |Δlogit| over the recorded top-64 ids is within
//! `BOUND` (llama.cpp quantizes activations and keeps an f16 KV cache, so it is not exact).

#![allow(clippy::panic, clippy::unwrap_used)]

use crate::common;

use runner::llama::{Logits, Runner, WeightMode};
use runner::model::LlamaModel;
use runner::tokenizer::Tokenizer;
use serde_json::Value;

const BOUND: f64 = 1.5;

fn recorded() -> Value {
    let path = common::repo_file("ci/oracles/smollm2_llamacpp.recorded.json");
    let text = std::fs::read_to_string(&path).expect("recorded llama.cpp values are committed");
    serde_json::from_str(&text).expect("recorded json")
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn recorded_values_cover_the_fixed_prompts() {
    let doc = recorded();
    let prompts: Vec<&str> = doc["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["prompt"].as_str().unwrap())
        .collect();
    assert_eq!(prompts, common::PROMPTS);
    assert_eq!(doc["producer"]["llama_cpp_python"], "0.3.36");
    for p in doc["prompts"].as_array().unwrap() {
        assert_eq!(p["top_ids"].as_array().unwrap().len(), 64);
        assert_eq!(p["top_ids"][0], p["argmax"]);
    }
}

#[test]
fn tokenizer_matches_llama_cpp_tokenization() {
    let Some(path) = common::model_path("tokenizer_matches_llama_cpp_tokenization") else {
        return;
    };
    let model = LlamaModel::open(&path).expect("open model");
    let tok = Tokenizer::from_gguf(model.gguf.metadata()).expect("tokenizer");
    for p in recorded()["prompts"].as_array().unwrap() {
        let text = p["prompt"].as_str().unwrap();
        assert_eq!(tok.encode(text).unwrap(), ids(&p["prompt_ids"]), "`{text}`");
        assert_eq!(tok.decode(&ids(&p["prompt_ids"])).unwrap(), text);
    }
}

#[test]
fn first_step_logits_match_llama_cpp_within_bound() {
    let test = "first_step_logits_match_llama_cpp_within_bound";
    let Some(path) = common::model_path(test) else {
        return;
    };
    let Some(e) = common::engine(test) else {
        return;
    };
    let model = LlamaModel::open(&path).expect("open model");
    let mut worst = 0f64;
    for p in recorded()["prompts"].as_array().unwrap() {
        let prompt = ids(&p["prompt_ids"]);
        let mut r = Runner::new(e, &model, WeightMode::Resident, prompt.len()).expect("load");
        let logits = r.forward(&prompt, Logits::Last).expect("prefill");
        let (top, _) = common::top2(&logits);
        assert_eq!(top as u64, p["argmax"].as_u64().unwrap(), "{}", p["prompt"]);
        let delta = ids(&p["top_ids"])
            .iter()
            .zip(p["top_logits"].as_array().unwrap())
            .map(|(&id, v)| (f64::from(logits[id as usize]) - v.as_f64().unwrap()).abs())
            .fold(0f64, f64::max);
        eprintln!(
            "{}: argmax {top} equal, max |Δlogit| over top-64 {delta:.3}",
            p["prompt"]
        );
        assert!(
            delta <= BOUND,
            "{}: max |Δlogit| {delta} > {BOUND}",
            p["prompt"]
        );
        worst = worst.max(delta);
    }
    eprintln!("llama.cpp: max |Δlogit| {worst:.3} (bound {BOUND})");
}
