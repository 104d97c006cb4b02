//! Structured output (`runner::constrain`) over SmolLM2's own tokenizer, driven by random logits:
//! whatever the scores, the sampled text follows the grammar and ends at the end-of-sequence
//! token; the same random scores unconstrained do not.

#![allow(clippy::panic, clippy::unwrap_used)]

use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

use crate::common;
use runner::chat::{AnswerSyntax, Forced, Mode, ToolCall, ToolDef};
use runner::constrain::{Constraint, ConstraintError, Grammar, Grammars};
use runner::deepseek::tools::calls_block;
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

/// DeepSeek V4's synthetic tokenizer (`synth`: its chat markers `</think>` and `｜DSML｜` are
/// special tokens), decoding the markers its answers are read back by, with grammars over it.
fn v4() -> (Tokenizer, Grammars, usize, &'static AnswerSyntax) {
    let vocab = 512;
    let json = synth::tokenizer::train_bpe(vocab).unwrap();
    let plain = Tokenizer::from_json_bytes(json.as_bytes(), None, None).unwrap();
    let eos = plain.encode(synth::tokenizer::EOS).unwrap();
    assert_eq!(eos.len(), 1, "the end-of-sentence marker is one token");
    let mut tok = Tokenizer::from_json_bytes(json.as_bytes(), None, Some(eos[0])).unwrap();
    let syntax = runner::deepseek::chat::format(Mode::Chat)
        .answer_syntax()
        .unwrap();
    tok.show_markers(syntax);
    let g = tok.grammars(vocab).unwrap();
    (tok, g, vocab, syntax)
}

fn weather_and_clock() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "get_weather".into(),
            description: None,
            parameters: Some(json!({"type": "object",
                "properties": {
                    "city": {"type": "string", "maxLength": 24},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "days": {"type": "integer", "minimum": 1, "maximum": 14}},
                "required": ["city", "unit"]})),
        },
        ToolDef {
            name: "now".into(),
            description: None,
            parameters: Some(json!({"type": "object", "properties": {},
                "additionalProperties": false})),
        },
    ]
}

/// A call to any of `tools`, several allowed.
fn any_of(tools: &[ToolDef]) -> Forced<'_> {
    Forced {
        tools,
        only: None,
        parallel: true,
    }
}

/// Whether the Lark grammar takes every token of `text` and is complete after them.
fn takes(g: &Grammars, tok: &Tokenizer, lark: &str, text: &str) -> bool {
    let c = g.constraint(&Grammar::Lark(lark.into())).unwrap();
    constraint_takes(c, tok, text)
}

/// Whether `c` takes every token of `text` and is complete after them.
fn constraint_takes(mut c: Constraint, tok: &Tokenizer, text: &str) -> bool {
    for id in tok.encode_with(text, false).unwrap() {
        let mut cand = [(0.0f32, id)];
        if c.mask(&mut cand).is_err() || cand[0].0 == f32::NEG_INFINITY {
            return false;
        }
        c.commit(id).unwrap();
    }
    c.is_complete()
}

#[test]
fn a_forced_dsml_call_is_the_block_deepseeks_encoder_writes() {
    let (tok, g, _, syntax) = v4();
    let dsml = tok.encode_with("｜DSML｜", false).unwrap();
    assert_eq!(dsml.len(), 1, "｜DSML｜ is one special token");
    assert_eq!(
        g.lark_literal("<｜DSML｜tool_calls>\n"),
        format!("\"<\" <[{}]> \"tool_calls>\\n\"", dsml[0])
    );
    // The markers are decoded as text (they are skipped, as every special token, otherwise).
    let json = synth::tokenizer::train_bpe(512).unwrap();
    let plain = Tokenizer::from_json_bytes(json.as_bytes(), None, None).unwrap();
    let open = tok
        .encode_with("x</think><｜DSML｜tool_calls>", false)
        .unwrap();
    assert_eq!(plain.decode(&open).unwrap(), "x<tool_calls>");
    assert_eq!(tok.decode(&open).unwrap(), "x</think><｜DSML｜tool_calls>");
    let force = syntax.force.expect("DeepSeek V4 can force a call");
    let tools = weather_and_clock();
    let any = any_of(&tools);
    let lark = force(&any, &|t| g.lark_literal(t));
    let call = |name: &str, args: &str| ToolCall {
        id: String::new(),
        name: name.into(),
        arguments: args.into(),
    };
    let block = |calls: &[ToolCall]| format!("\n\n{}", calls_block(calls));
    let good = [
        block(&[call(
            "get_weather",
            r#"{"city": "Paris", "unit": "celsius"}"#,
        )]),
        block(&[
            call("now", "{}"),
            call(
                "get_weather",
                r#"{"city": "Oslo", "unit": "fahrenheit", "days": 3}"#,
            ),
        ]),
    ];
    for text in &good {
        assert!(takes(&g, &tok, &lark, text), "refused: {text}");
        assert!(takes(&g, &tok, &lark, text.trim_start()), "refused: {text}");
    }
    let bad = [
        block(&[call("launch", "{}")]),
        block(&[call(
            "get_weather",
            r#"{"city": "Paris", "unit": "kelvin"}"#,
        )]),
        block(&[call("get_weather", r#"{"city": "Paris"}"#)]),
        block(&[call(
            "get_weather",
            r#"{"city": "Paris", "unit": "celsius", "days": 40}"#,
        )]),
        block(&[call("now", r#"{"x": 1}"#)]),
        format!("Sure.{}", good[0]),
    ];
    for text in &bad {
        assert!(!takes(&g, &tok, &lark, text), "accepted: {text}");
    }
    // Named: only that function.
    let named = Forced {
        only: Some("now"),
        ..any
    };
    let named = force(&named, &|t| g.lark_literal(t));
    assert!(takes(&g, &tok, &named, &block(&[call("now", "{}")])));
    assert!(!takes(&g, &tok, &named, &good[0]));
    // A function that declares no parameters and does not forbid others takes any.
    let free = [ToolDef {
        name: "free".into(),
        description: None,
        parameters: Some(json!({"type": "object"})),
    }];
    let open = force(
        &Forced {
            tools: &free,
            ..any
        },
        &|t| g.lark_literal(t),
    );
    let args = r#"{"s": "a b", "n": [1, 2], "o": {"k": null}}"#;
    assert!(takes(&g, &tok, &open, &block(&[call("free", args)])));
    assert!(takes(&g, &tok, &open, &block(&[call("free", "{}")])));
    // parallel_tool_calls false: exactly one call.
    let one = force(
        &Forced {
            parallel: false,
            ..any
        },
        &|t| g.lark_literal(t),
    );
    assert!(takes(&g, &tok, &one, &good[0]));
    assert!(!takes(&g, &tok, &one, &good[1]));
}

#[test]
fn random_scores_under_a_forced_dsml_call_give_calls_that_validate() {
    let (tok, g, vocab, syntax) = v4();
    let force = syntax.force.unwrap();
    let tools = weather_and_clock();
    let lark = force(&any_of(&tools), &|t| g.lark_literal(t));
    for seed in 0..6 {
        let mut s = sampler(seed);
        s.constrain(g.constraint(&Grammar::Lark(lark.clone())).unwrap());
        let (text, ended) = run(&tok, &mut s, vocab, seed, 3000);
        assert!(ended, "seed {seed}: no end within 3000 tokens: {text:?}");
        let (content, calls) = (syntax.parse_calls)(&text)
            .unwrap_or_else(|| panic!("seed {seed}: no block read back: {text:?}"));
        assert_eq!(content, "", "{text:?}");
        assert!(!calls.is_empty(), "{text:?}");
        for c in &calls {
            let args: Value = serde_json::from_str(&c.arguments)
                .unwrap_or_else(|e| panic!("seed {seed}: arguments not JSON ({e}): {text:?}"));
            let o = args.as_object().unwrap();
            match c.name.as_str() {
                "now" => assert!(o.is_empty(), "{text:?}"),
                "get_weather" => {
                    let city = o["city"].as_str().unwrap();
                    assert!(
                        city.chars().count() <= 24 && !city.contains('<'),
                        "{text:?}"
                    );
                    assert!(["celsius", "fahrenheit"].contains(&o["unit"].as_str().unwrap()));
                    if let Some(d) = o.get("days") {
                        assert!((1..=14).contains(&d.as_i64().unwrap()), "{text:?}");
                    }
                    assert!(o
                        .keys()
                        .all(|k| ["city", "unit", "days"].contains(&k.as_str())));
                }
                other => panic!("seed {seed}: a call to `{other}`: {text:?}"),
            }
        }
    }
}

#[test]
fn a_grammar_after_reasoning_holds_the_answer_not_the_reasoning() {
    let (tok, g, _, syntax) = v4();
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"], "additionalProperties": false});
    let after = || {
        g.constraint(&Grammar::JsonSchema(schema.clone()))
            .unwrap()
            .after(Some(syntax.reasoning_end))
            .unwrap()
    };
    let eos = tok.eos.unwrap();
    let one = |text: &str| {
        let ids = tok.encode_with(text, false).unwrap();
        assert_eq!(ids.len(), 1, "{text}");
        ids[0]
    };
    // While it reasons, any token comes but the end of the answer.
    let mut c = after();
    for id in tok.encode_with("Plain words, not JSON. ", false).unwrap() {
        let mut cand = [(0.0, id), (0.0, eos)];
        c.mask(&mut cand).unwrap();
        assert_eq!(cand[0].0, 0.0);
        assert_eq!(
            cand[1].0,
            f32::NEG_INFINITY,
            "no end before the grammar is met"
        );
        c.commit(id).unwrap();
        assert!(!c.is_complete());
    }
    // After the marker, the grammar holds.
    c.commit(one("</think>")).unwrap();
    let mut cand = [(0.0, one("{")), (0.0, one("P")), (0.0, eos)];
    c.mask(&mut cand).unwrap();
    assert_eq!(cand.map(|x| x.0 == 0.0), [true, false, false]);
    assert!(constraint_takes(
        after(),
        &tok,
        "I think so.</think>{\"ok\": true}"
    ));
    assert!(!constraint_takes(after(), &tok, "I think so.</think>yes"));
    assert!(
        !constraint_takes(after(), &tok, "{\"ok\": true}"),
        "no reasoning end yet"
    );
}
