//! The per-operation decode profile (`Runner::profile_decode`, runner/examples/profile_decode.rs):
//! on SmolLM2 it times every operation of the one-token forward and the whole step, accounts for
//! the weights a token reads, and leaves the runner where it was — decoding after a profile gives
//! the tokens decoding without one gives.

#![allow(clippy::panic, clippy::unwrap_used)]

use crate::common;

use runner::llama::{Runner, WeightMode};
use runner::model::LlamaModel;
use runner::tokenizer::Tokenizer;

#[test]
fn a_decode_profile_times_every_operation_and_changes_no_token() {
    let test = "a_decode_profile_times_every_operation_and_changes_no_token";
    let (Some(path), Some(e)) = (common::model_path(test), common::engine(test)) else {
        return;
    };
    let model = LlamaModel::open(&path).unwrap();
    let tok = Tokenizer::from_gguf(model.gguf.metadata()).unwrap();
    let prompt = tok.encode(common::PROMPTS[0]).unwrap();
    let cap = prompt.len() + 16;
    let mut plain = Runner::new(e, &model, WeightMode::Resident, cap).unwrap();
    let mut want = vec![plain.forward_argmax(&prompt).unwrap()];
    for _ in 0..5 {
        want.push(plain.step_argmax().unwrap());
    }
    drop(plain);

    let mut r = Runner::new(e, &model, WeightMode::Resident, cap).unwrap();
    let mut got = vec![r.forward_argmax(&prompt).unwrap()];
    got.push(r.step_argmax().unwrap());
    got.push(r.step_argmax().unwrap());
    let at = r.position();
    let p = r.profile_decode(3, 1).unwrap();
    assert_eq!((p.position, r.position()), (at, at));
    assert!(p.step_us > 0.0 && p.ops.iter().all(|o| o.us > 0.0), "{p:?}");
    let layers = model.config.n_layers;
    assert!(
        p.ops.len() >= 3 * layers,
        "{} ops for {layers} layers",
        p.ops.len()
    );
    // Every weight a token reads is a matrix of the file (the head included), each once.
    let weights: u64 = p.ops.iter().map(|o| o.weight_bytes).sum();
    let file = std::fs::metadata(&path).unwrap().len();
    assert!(
        weights > file / 2 && weights <= file,
        "{weights} of {file} B"
    );
    // The profile leaves the cache's first `at` positions: feeding the last token again continues.
    got.push(r.forward_argmax(&got[2..3]).unwrap());
    got.push(r.step_argmax().unwrap());
    got.push(r.step_argmax().unwrap());
    assert_eq!(got, want);
}
