//! Fuzz harness for the plan parser (proptest on the stable toolchain): arbitrary text and
//! mutations of the real plans never panic `Plan::parse`, and whatever parses also resolves
//! (or refuses) without panicking. CI runs a bounded number of cases; the long run is
//! `PROPTEST_CASES=200000 cargo test -p pipeline --release --test integration plan_fuzz::` (plans/README.md).
#![allow(clippy::unwrap_used, clippy::panic)] // tests: a failed unwrap is a failed test

use crate::common;

use pipeline::plan::{Plan, UpstreamTensor};
use proptest::prelude::*;
use std::path::Path;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256)
}

fn real_plans() -> Vec<String> {
    ["deepseek-v4.toml", "kimi-k3.toml", "minimax-h3.toml"]
        .iter()
        .map(|f| std::fs::read_to_string(common::plans_dir().join(f)).unwrap())
        .collect()
}

fn small_tensors() -> Vec<UpstreamTensor> {
    let f = "model-00002-of-00046.safetensors";
    vec![
        UpstreamTensor::new("layers.0.attn.wq_a.weight", "F8_E4M3", &[256, 256], f),
        UpstreamTensor::new("layers.0.attn.wq_a.scale", "F8_E8M0", &[2, 2], f),
        UpstreamTensor::new("layers.0.ffn.experts.0.w1.weight", "I8", &[64, 64], f),
        UpstreamTensor::new("layers.0.ffn.experts.0.w1.scale", "F8_E8M0", &[64, 4], f),
        UpstreamTensor::new("embed.weight", "BF16", &[8, 8], f),
    ]
}

/// One edit of a plan text: delete, duplicate or insert a fragment at a char boundary.
#[derive(Debug, Clone)]
enum Edit {
    Delete(usize, usize),
    Insert(usize, String),
    DupLine(usize),
    SwapLines(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let frag = prop_oneof![
        Just("[".to_owned()),
        Just("]]".to_owned()),
        Just("=".to_owned()),
        Just("\"".to_owned()),
        Just("{L:0".to_owned()),
        Just("}".to_owned()),
        Just("*".to_owned()),
        Just("\n[[units]]\nname = \"x{L:02}\"\nrange = { L = [0, 9000] }\ntensors = [\"*\"]\n".to_owned()),
        Just("\n[[rules]]\nmatch = \"*\"\ncontainer = { mode = \"affine\", scale_dtype = \"BF16\" }\n".to_owned()),
        Just("9999999999999999999999".to_owned()),
        Just("-1".to_owned()),
        "[ -~\n]{0,12}",
    ];
    prop_oneof![
        (any::<usize>(), 0usize..40).prop_map(|(a, n)| Edit::Delete(a, n)),
        (any::<usize>(), frag).prop_map(|(a, s)| Edit::Insert(a, s)),
        any::<usize>().prop_map(Edit::DupLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
    ]
}

fn apply(text: &str, e: &Edit) -> String {
    let boundary = |a: usize| {
        let mut i = a % (text.len() + 1);
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    match e {
        Edit::Delete(a, n) => {
            let s = boundary(*a);
            let mut t = s.saturating_add(*n).min(text.len());
            while !text.is_char_boundary(t) {
                t -= 1;
            }
            format!("{}{}", &text[..s], &text[t..])
        }
        Edit::Insert(a, s) => {
            let i = boundary(*a);
            format!("{}{s}{}", &text[..i], &text[i..])
        }
        Edit::DupLine(a) | Edit::SwapLines(a, _) => {
            let mut lines: Vec<&str> = text.lines().collect();
            if lines.is_empty() {
                return text.to_owned();
            }
            let i = a % lines.len();
            match e {
                Edit::SwapLines(_, b) => {
                    let j = b % lines.len();
                    lines.swap(i, j);
                }
                _ => lines.insert(i, lines[i]),
            }
            lines.join("\n")
        }
    }
}

fn check(text: &str) {
    if let Ok(plan) = Plan::parse(text, Path::new("fuzz.toml")) {
        let _ = plan.resolve(&small_tensors());
        let _ = plan.select_units(Some("layers00..layers02,global00"));
        let _ = plan.ensure_runnable();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in "(?s).{0,400}") {
        check(&text);
    }

    #[test]
    fn mutated_real_plans_never_panic(which in 0usize..3, edits in proptest::collection::vec(edit(), 1..6)) {
        let plans = real_plans();
        let mut text = plans[which % plans.len()].clone();
        for e in &edits {
            text = apply(&text, e);
        }
        check(&text);
    }
}
