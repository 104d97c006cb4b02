//! Structured output (`runner::constrain`) over SmolLM2's own tokenizer, driven by random logits:
//! whatever the scores, the sampled text follows the grammar and ends at the end-of-sequence
//! token; the same random scores unconstrained do not.

#![allow(clippy::panic, clippy::unwrap_used)]

use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

use crate::common;
use runner::constrain::{ConstraintError, Grammar, Grammars};
use runner::model::LlamaModel;
use runner::sample::{Sampler, SamplingParams};
use runner::tokenizer::Tokenizer;

fn grammars(test: &str) -> Option<(Tokenizer, Grammars, usize)> {
    let path = common::model_path(test)?;
    let model = LlamaModel::open(&path).expect("open model");
    let tok = Tokenizer::from_gguf(model.gguf.metadata()).expect("tokenizer");
    let vocab = model.config.vocab;
    let g = tok
        .grammars(vocab)
        .expect("grammars over SmolLM2's tokenizer");
    Some((tok, g, vocab))
}

/// Samples at temperature 1 from seeded random logits until the end-of-sequence token (or
/// `limit` tokens): the output's text and whether it ended.
fn run(
    tok: &Tokenizer,
    sampler: &mut Sampler,
    vocab: usize,
    seed: u64,
    limit: usize,
) -> (String, bool) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::new();
    for _ in 0..limit {
        let logits: Vec<f32> = (0..vocab).map(|_| rng.random_range(-4.0..4.0)).collect();
        let id = sampler.sample(&logits, &out).expect("a constrained pick");
        sampler.accept(id).expect("the grammar takes its own pick");
        if Some(id) == tok.eos {
            return (tok.decode(&out).unwrap(), true);
        }
        out.push(id);
    }
    (tok.decode(&out).unwrap(), false)
}

fn sampler(seed: u64) -> Sampler {
    Sampler::new(SamplingParams {
        temperature: 1.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        seed,
        ..SamplingParams::default()
    })
}

#[test]
fn random_scores_under_a_json_schema_give_valid_json_that_ends() {
    let Some((tok, g, vocab)) =
        grammars("random_scores_under_a_json_schema_give_valid_json_that_ends")
    else {
        return;
    };
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "size": {"type": "string", "enum": ["small", "large"]},
            "tags": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
            "inner": {"type": "object", "properties": {"ok": {"type": "boolean"}},
                "required": ["ok"], "additionalProperties": false}
        },
        "required": ["name", "size", "tags", "inner"],
        "additionalProperties": false
    });
    for seed in 0..4 {
        let mut s = sampler(seed);
        s.constrain(g.constraint(&Grammar::JsonSchema(schema.clone())).unwrap());
        let (text, ended) = run(&tok, &mut s, vocab, seed, 600);
        assert!(
            ended,
            "seed {seed}: no end-of-sequence within 600 tokens: {text:?}"
        );
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("seed {seed}: not JSON ({e}): {text:?}"));
        let o = v.as_object().unwrap();
        assert_eq!(o.len(), 4, "{text}");
        assert!(o["name"].as_str().unwrap().chars().count() <= 12, "{text}");
        assert!(
            ["small", "large"].contains(&o["size"].as_str().unwrap()),
            "{text}"
        );
        let tags = o["tags"].as_array().unwrap();
        assert!(tags.len() <= 3 && tags.iter().all(Value::is_i64), "{text}");
        assert!(o["inner"]["ok"].is_boolean(), "{text}");
        // json.dumps spacing: no free whitespace to wander in
        assert!(text.starts_with("{\"name\": \""), "{text}");
    }
    // The same scores unconstrained are not JSON at all.
    let (free, _) = run(&tok, &mut sampler(0), vocab, 0, 40);
    assert!(serde_json::from_str::<Value>(&free).is_err(), "{free:?}");
}

#[test]
fn json_object_regex_and_lark_grammars_hold() {
    let Some((tok, g, vocab)) = grammars("json_object_regex_and_lark_grammars_hold") else {
        return;
    };
    let mut s = sampler(7);
    s.constrain(g.constraint(&Grammar::JsonObject).unwrap());
    assert!(s.constrained());
    let (text, ended) = run(&tok, &mut s, vocab, 7, 2000);
    if ended {
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
        assert!(v.is_object(), "{text}");
    } else {
        assert!(text.starts_with('{'), "{text:?}");
    }

    let mut s = sampler(8);
    s.constrain(
        g.constraint(&Grammar::Regex("[0-9]{3}-(yes|no)".into()))
            .unwrap(),
    );
    let (text, ended) = run(&tok, &mut s, vocab, 8, 50);
    assert!(ended, "{text:?}");
    let (digits, word) = text.split_once('-').unwrap();
    assert!(
        digits.len() == 3 && digits.bytes().all(|b| b.is_ascii_digit()),
        "{text}"
    );
    assert!(word == "yes" || word == "no", "{text}");

    let lark = "start: \"colour: \" colour\ncolour: \"red\" | \"green\" | \"blue\"";
    let mut s = sampler(9);
    s.constrain(g.constraint(&Grammar::Lark(lark.into())).unwrap());
    let (text, ended) = run(&tok, &mut s, vocab, 9, 50);
    assert!(ended, "{text:?}");
    assert!(
        ["colour: red", "colour: green", "colour: blue"].contains(&text.as_str()),
        "{text:?}"
    );
}

#[test]
fn a_wrong_grammar_is_refused_as_the_requests_fault() {
    let Some((_, g, _)) = grammars("a_wrong_grammar_is_refused_as_the_requests_fault") else {
        return;
    };
    for bad in [
        Grammar::JsonSchema(json!(["not", "an", "object"])),
        Grammar::JsonSchema(json!({"type": "no-such-type"})),
        Grammar::Lark("start: undefined_rule".into()),
        Grammar::Regex("(unclosed".into()),
    ] {
        match g.constraint(&bad) {
            Err(ConstraintError::Grammar(why)) => assert!(!why.is_empty(), "{bad:?}"),
            Err(e) => panic!("{bad:?}: the wrong kind of error: {e}"),
            Ok(_) => panic!("{bad:?} was accepted"),
        }
    }
}
