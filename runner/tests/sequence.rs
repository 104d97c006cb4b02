//! The sequence half of the one model trait (`adapter::Model`, docs/runner.md "Sequences") on
//! the two real families: a model holds one live sequence and refuses a second, a step over two
//! and a handle that ended; a sequence's state saved, the sequence ended, and restored into a
//! new one goes on bit for bit as the original does (SmolLM2's KV cache, a V4 artifact's
//! windows and compressor state).

#![allow(clippy::panic, clippy::unwrap_used)]

use crate::common;

use runner::adapter::Model;
use runner::error::RunError;
use runner::generate::Logits;
use runner::sequence::{Feed, Input, StateKind};

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn logits(m: &mut dyn Model, seq: &runner::sequence::Sequence, ids: &[u32]) -> Vec<f32> {
    runner::generate::logits(m, seq, Input::Ids(ids)).unwrap()
}

/// What both families must do with their sequences; `prompt` is at least 8 ids.
fn contract(m: &mut dyn Model, prompt: &[u32]) {
    assert_eq!(m.max_sequences(), 1);
    let a = m.begin().unwrap();
    let err = m.begin().unwrap_err().to_string();
    assert!(err.contains("end one first"), "{err}");
    // a step over two sequences is refused before anything is fed
    let two = [
        Feed {
            seq: &a,
            input: Input::Ids(&prompt[..1]),
        },
        Feed {
            seq: &a,
            input: Input::Ids(&prompt[..1]),
        },
    ];
    let err = m.step(&two, Logits::Last).unwrap_err().to_string();
    assert!(err.contains("one sequence at a time, not 2"), "{err}");
    assert_eq!(m.position(&a).unwrap(), 0);
    // a's state saved at the prompt, then one more token: the reference continuation
    let after_prompt = logits(m, &a, prompt);
    let n = m.savable(&a, prompt.len());
    assert_eq!(n, prompt.len());
    let saved = m.save(&a, n).unwrap();
    assert_eq!(saved.positions, prompt.len());
    let next = common::top2(&after_prompt).0 as u32;
    let want = logits(m, &a, &[next]);
    m.end(a);
    // a new sequence starts empty
    let b = m.begin().unwrap();
    assert_eq!(m.position(&b).unwrap(), 0);
    // restored from a's state, b goes on bit for bit as a did
    m.restore(&b, &saved).unwrap();
    assert_eq!(m.position(&b).unwrap(), prompt.len());
    assert_eq!(bits(&logits(m, &b, &[next])), bits(&want));
    m.end(b);
    // a handle of another model's sequence is refused
    let foreign = runner::sequence::Slots::new(1).begin().unwrap();
    assert!(matches!(m.position(&foreign), Err(RunError::Usage(_))));
    let feed = [Feed {
        seq: &foreign,
        input: Input::Picked(1),
    }];
    assert!(m.step(&feed, Logits::Last).is_err());
}

#[test]
fn smollm2_sequences_keep_their_state_apart() {
    let test = "smollm2_sequences_keep_their_state_apart";
    let (Some(path), Some(e)) = (common::model_path(test), common::engine(test)) else {
        return;
    };
    let model = runner::model::LlamaModel::open(&path).unwrap();
    let tok = runner::tokenizer::Tokenizer::from_gguf(model.gguf.metadata()).unwrap();
    let prompt = tok.encode(common::PROMPTS[1]).unwrap();
    let mut r =
        runner::llama::Runner::new(e, &model, runner::llama::WeightMode::Resident, 64).unwrap();
    assert_eq!(r.state_kind(), StateKind::Positions);
    contract(&mut r, &prompt);
}

#[test]
fn a_v4_artifact_sequence_keeps_its_state_apart() {
    let test = "a_v4_artifact_sequence_keeps_its_state_apart";
    let Some(e) = common::engine(test) else {
        return;
    };
    let a = runner::artifact::VerifiedArtifact::open(
        &crate::artifact::fixture().consumer,
        &runner::artifact::OpenOptions::default(),
    )
    .unwrap();
    let opts = runner::adapter::ModelOptions::from_flags(e, false, 64, 0);
    let mut m = runner::deepseek::entry::open_artifact(&a, &opts).unwrap();
    assert_eq!(m.state_kind(), StateKind::Snapshots);
    let prompt = &crate::deepseek_common::fixture().prompt[..12];
    contract(m.as_mut(), prompt);
}
