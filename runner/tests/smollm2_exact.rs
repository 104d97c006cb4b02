//! SmolLM2-135M Q4_1 against the exact CPU reference (`runner::reference`, f64 on dequantized
//! weights): for five fixed prompts the reference decodes greedily; the wgpu runner, teacher-forced
//! on the reference's tokens (prefill the prompt, then decode one token at a time), must stay
//! within `BOUND` of the reference's logits at every step and pick the same argmax at every step
//! whose reference top-2 margin exceeds `BOUND`. Steps per prompt: `MINIRUN_REF_STEPS` (CI default
//! 8; the full check is `MINIRUN_REF_STEPS=32`, see docs/runner.md).

#![allow(clippy::panic, clippy::unwrap_used)]

use crate::common;

use runner::llama::{Logits, Runner, WeightMode};
use runner::model::LlamaModel;
use runner::reference::Reference;
use runner::tokenizer::Tokenizer;

/// The stated bound on max |Δlogit| between the f32 wgpu runner and the f64 reference
/// (measured maximum over 5 prompts × 32 steps is recorded in docs/runner.md).
const BOUND: f64 = 1e-3;

#[test]
fn teacher_forced_runner_matches_the_exact_reference() {
    let test = "teacher_forced_runner_matches_the_exact_reference";
    let Some(path) = common::model_path(test) else {
        return;
    };
    let Some(e) = common::engine(test) else {
        return;
    };
    let steps: usize = std::env::var("MINIRUN_REF_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let model = LlamaModel::open(&path).expect("open model");
    let tok = Tokenizer::from_gguf(model.gguf.metadata()).expect("tokenizer");
    let mut reference = Reference::new(&model).expect("reference");
    let mut worst = 0f64;
    let mut checked_argmax = 0;
    let mut total = 0;
    for prompt in common::PROMPTS {
        let ids = tok.encode(prompt).expect("encode");
        reference.reset();
        let mut runner =
            Runner::new(e, &model, WeightMode::Resident, ids.len() + steps).expect("load");
        let mut ref_logits = Vec::new();
        for &id in &ids {
            ref_logits = reference.step(id).expect("reference prefill");
        }
        let mut gpu = runner.forward(&ids, Logits::Last).expect("prefill");
        let mut prompt_worst = 0f64;
        for step in 0..steps {
            let delta = ref_logits
                .iter()
                .zip(&gpu)
                .map(|(r, g)| (r - f64::from(*g)).abs())
                .fold(0f64, f64::max);
            prompt_worst = prompt_worst.max(delta);
            let r32: Vec<f32> = ref_logits.iter().map(|v| *v as f32).collect();
            let (ref_top, margin) = common::top2(&r32);
            let (gpu_top, _) = common::top2(&gpu);
            assert!(
                delta <= BOUND,
                "`{prompt}` step {step}: max |Δlogit| {delta:.3e} exceeds the bound {BOUND}"
            );
            if f64::from(margin) > BOUND {
                checked_argmax += 1;
                assert_eq!(
                    gpu_top, ref_top,
                    "`{prompt}` step {step}: argmax differs with top-2 margin {margin}"
                );
            }
            total += 1;
            if step + 1 == steps {
                break;
            }
            let next = ref_top as u32;
            ref_logits = reference.step(next).expect("reference step");
            gpu = runner.forward(&[next], Logits::Last).expect("decode");
        }
        eprintln!("`{prompt}`: {steps} steps, max |Δlogit| {prompt_worst:.3e}");
        worst = worst.max(prompt_worst);
    }
    eprintln!(
        "exact reference: {total} steps, argmax checked at {checked_argmax}, max |Δlogit| {worst:.3e} (bound {BOUND})"
    );
    assert!(
        checked_argmax * 2 > total,
        "too few steps had a decisive margin"
    );
}
