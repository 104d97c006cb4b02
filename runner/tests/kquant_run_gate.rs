//! The K-quant run gate of seed 003 §4.3 ("Tolerances"): SmolLM2 requantized by our own
//! `minirun-gguf quantize` library code to an unquantized f32 baseline, then from that baseline to
//! q4_K, q5_K and q6_K, runs on the wgpu runner; per model and prompt the first greedy token must
//! equal the baseline's (checked before measuring) and max |Δlogit| ≤ 0.30 × max |logit| of the
//! baseline, over every step whose input tokens are still the baseline's. All measurements and the
//! full greedy continuations are printed; continuations are reported, not asserted.
//!
//! SmolLM2's hidden width 576 is not a multiple of 256, so the seed's row fallback demotes every
//! 576-wide matrix (q4_K → q5_0, q5_K → q5_1, q6_K → q8_0); only `ffn_down` (K = 1536) is encoded in
//! the K-quant itself. The test asserts that each target type encoded real tensors and prints the
//! demotions. A second test proves the kernels' CPU reference decodes every new block type bit for
//! bit as `artifact::gguf::quant` does. The q4_K model also runs streamed (row tiles of whole
//! super-block rows) with prefill logits bit-identical to the resident run. q3_K and q2_K (no
//! kernel yet) run as the baseline with only their `ffn_down` matrices quantized, through the
//! f32 decode, under our own stated bounds (`BOUND_Q3`, `BOUND_Q2`).

#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::time::Instant;

use artifact::gguf::quant::{self, FmaContract};
use artifact::gguf::GgmlType;
use kernels::reference::WeightMatrix;
use kernels::WeightFormat;
use runner::llama::{Logits, Runner, WeightMode};
use runner::model::LlamaModel;
use runner::tokenizer::Tokenizer;
use tooling::gguf::ops::{run_quantize, QuantizeOpts};

/// The seed's bound: max |Δlogit| ≤ BOUND × max |logit| of the unquantized model.
const BOUND: f32 = 0.30;
/// Our stated bounds for the 3- and 2-bit K-quants (the seed states none for them), measured with
/// only SmolLM2's 30 `ffn_down` matrices at that type (docs/gguf.md "K-quant run gate"): q3_K
/// measured 27.4% / 19.9%; q2_K 87.5% / 74.2% on the prefill alone — 2.6 bits per weight in
/// ffn_down wreck a 135M model (llama-quantize's own Q2_K mixture never puts ffn_down at q2_K),
/// so its bound only says the logits keep the baseline's magnitude (a wrong block layout does
/// not); q2_K's correctness rests on byte parity with ggml's encoder and bit parity of the
/// decoder with gguf-py's (ci/oracles/gguf_parity.py).
const BOUND_Q3: f32 = 0.35;
const BOUND_Q2: f32 = 1.0;
/// Prompts (two of `common::PROMPTS`) and greedy decode steps after the prefill.
const PROMPTS: [&str; 2] = [common::PROMPTS[0], common::PROMPTS[1]];
const STEPS: usize = 4;

fn quantize(input: &Path, output: &Path, target: &str) -> Vec<(String, GgmlType)> {
    quantize_with(input, output, target, false)
}

fn quantize_with(input: &Path, output: &Path, target: &str, pure: bool) -> Vec<(String, GgmlType)> {
    let report = run_quantize(&QuantizeOpts {
        input: input.to_path_buf(),
        output: output.to_path_buf(),
        target: Some(target.to_string()),
        split_max_size: None,
        fma: FmaContract::Off,
        pure,
        mixture: false,
        allow_requantize: true,
    })
    .unwrap_or_else(|e| panic!("quantize {target}: {e}"));
    for line in &report.lines {
        // the demotion lists name every tensor; the counts line follows them
        let short: String = line.chars().take(150).collect();
        let more = if short.len() < line.len() { " …" } else { "" };
        eprintln!("  [{target}] {short}{more}");
    }
    report
        .plan
        .iter()
        .map(|e| (e.name.clone(), e.out_type()))
        .collect()
}

/// The f32 baseline with every tensor that `quantized` holds at q2_K / q3_K replaced by its f32
/// decode (the runner has no 2/3-bit kernel yet): the model with only those tensors quantized,
/// on the exact f32 path, so the measurement is the 2/3-bit encoding's alone (not the q4_0
/// fallback of the 576-wide rows, which by itself already flips SmolLM2's first token).
fn with_low_bit_tensors(base: &Path, quantized: &Path, dst: &Path) -> usize {
    use artifact::gguf::writer::{write_file, TensorSpec};
    use artifact::gguf::GgufModel;
    use std::borrow::Cow;
    let b = GgufModel::open(base).expect("open baseline");
    let q = GgufModel::open(quantized).expect("open quantized");
    let low = |name: &str| {
        q.tensor(name)
            .filter(|t| matches!(t.ggml_type, GgmlType::Q2_K | GgmlType::Q3_K))
    };
    let part = &b.parts[0];
    let specs: Vec<TensorSpec> = part.header.tensors.iter().map(TensorSpec::from).collect();
    let mut replaced = 0;
    write_file(dst, b.metadata(), &specs, part.header.alignment, |i| {
        let t = &part.header.tensors[i];
        let Some(qt) = low(&t.name) else {
            return part.tensor_bytes(t).map(Cow::Borrowed);
        };
        let mut f = Vec::new();
        quant::kquant_low::dequantize(qt.ggml_type, q.tensor_bytes(&t.name)?, &mut f);
        assert_eq!(f.len() as u64, t.n_elements(), "{}", t.name);
        replaced += 1;
        Ok(Cow::Owned(f.iter().flat_map(|v| v.to_le_bytes()).collect()))
    })
    .expect("write the partly quantized copy");
    replaced
}

/// Greedy run: the logits of the prefill's last position and of each decode step, and the tokens.
fn greedy(runner: &mut Runner, prompt: &[u32], vocab: usize) -> (Vec<Vec<f32>>, Vec<u32>) {
    runner.reset();
    let mut logits = vec![runner.forward(prompt, Logits::Last).expect("prefill")];
    let mut tokens = Vec::new();
    for step in 0..=STEPS {
        let last = logits.last().unwrap();
        assert_eq!(last.len(), vocab);
        assert!(last.iter().all(|v| v.is_finite()), "non-finite logits");
        let next = common::top2(last).0 as u32;
        tokens.push(next);
        if step < STEPS {
            logits.push(runner.forward(&[next], Logits::Last).expect("decode"));
        }
    }
    (logits, tokens)
}

#[test]
fn k_quant_output_runs_within_the_stated_bound() {
    let test = "k_quant_output_runs_within_the_stated_bound";
    let Some(src) = common::model_path(test) else {
        return;
    };
    let Some(engine) = common::engine(test) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let t0 = Instant::now();
    let base_path = dir.path().join("smollm2-f32.gguf");
    let base_plan = quantize(&src, &base_path, "f32");
    let matrices = base_plan
        .iter()
        .filter(|(_, t)| *t == GgmlType::F32)
        .count();
    assert!(matrices > 200, "the f32 baseline holds every tensor as f32");
    let base = LlamaModel::open(&base_path).expect("open baseline");
    let vocab = base.config.vocab;
    let tok = Tokenizer::from_gguf(base.gguf.metadata()).expect("tokenizer");
    let prompts: Vec<Vec<u32>> = PROMPTS.iter().map(|p| tok.encode(p).unwrap()).collect();
    let capacity = prompts.iter().map(Vec::len).max().unwrap() + STEPS + 1;
    let mut base_runs = Vec::new();
    {
        let mut r = Runner::new(engine, &base, WeightMode::Resident, capacity).expect("load");
        for (p, ids) in PROMPTS.iter().zip(&prompts) {
            let (logits, tokens) = greedy(&mut r, ids, vocab);
            eprintln!(
                "kquant gate: f32 baseline  {p:?} → {:?} {tokens:?}",
                tok.decode(&tokens).unwrap()
            );
            base_runs.push((logits, tokens));
        }
    }
    eprintln!("kquant gate: baseline ready in {:.1?}", t0.elapsed());

    let mut lines = Vec::new();
    // q2_K / q3_K: `--pure` (as llama-quantize --pure; the Q2_K/Q3_K mixtures put nothing or
    // little at their own type on SmolLM2's 576-wide rows); only their K tensors (ffn_down) are
    // put into the baseline, through their f32 decode.
    for (target, k_type, k_format, fallback, bound) in [
        (
            "q4_K",
            GgmlType::Q4_K,
            WeightFormat::Q4K,
            GgmlType::Q5_0,
            BOUND,
        ),
        (
            "q5_K",
            GgmlType::Q5_K,
            WeightFormat::Q5K,
            GgmlType::Q5_1,
            BOUND,
        ),
        (
            "q6_K",
            GgmlType::Q6_K,
            WeightFormat::Q6K,
            GgmlType::Q8_0,
            BOUND,
        ),
        (
            "q3_K",
            GgmlType::Q3_K,
            WeightFormat::Plain(kernels::Dtype::F32),
            GgmlType::Q4_0,
            BOUND_Q3,
        ),
        (
            "q2_K",
            GgmlType::Q2_K,
            WeightFormat::Plain(kernels::Dtype::F32),
            GgmlType::Q4_0,
            BOUND_Q2,
        ),
    ] {
        let path = dir.path().join(format!("smollm2-{target}.gguf"));
        let low = matches!(k_type, GgmlType::Q2_K | GgmlType::Q3_K);
        let plan = quantize_with(&base_path, &path, target, low);
        let path = if low {
            let deq = dir.path().join(format!("smollm2-{target}-decoded.gguf"));
            let n = with_low_bit_tensors(&base_path, &path, &deq);
            eprintln!("kquant gate: {target}: {n} tensors decoded into the f32 baseline");
            deq
        } else {
            path
        };
        let encoded: Vec<&str> = plan
            .iter()
            .filter(|(_, t)| *t == k_type)
            .map(|(n, _)| n.as_str())
            .collect();
        let demoted = plan.iter().filter(|(_, t)| *t == fallback).count();
        eprintln!(
            "kquant gate: {target}: {} tensors encoded as {k_type} ({}…), {demoted} demoted to {fallback}",
            encoded.len(),
            encoded.first().copied().unwrap_or("none")
        );
        assert!(
            !encoded.is_empty(),
            "{target}: no tensor was encoded as {k_type}; the gate would prove nothing"
        );
        let model = LlamaModel::open(&path).expect("open quantized model");
        // the runner multiplies every ffn_down with the K-quant kernel family
        assert!(model.layers.iter().all(|l| l.down.format == k_format));
        let mut r = Runner::new(engine, &model, WeightMode::Resident, capacity).expect("load");
        if k_type == GgmlType::Q4_K {
            // streamed (64 KiB row tiles of whole super-block rows) == resident, to the bit
            let mut s = Runner::new(
                engine,
                &model,
                WeightMode::Streamed {
                    tile_bytes: 64 * 1024,
                    ring: runner::llama::DEFAULT_RING,
                },
                capacity,
            )
            .expect("load streamed");
            let a = r
                .forward(&prompts[0], Logits::Last)
                .expect("resident prefill");
            let b = s
                .forward(&prompts[0], Logits::Last)
                .expect("streamed prefill");
            assert!(s.tile_reads() > 0);
            assert!(
                a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
                "{target}: streamed and resident logits differ"
            );
            eprintln!(
                "kquant gate: {target} streamed == resident prefill logits ({} tile reads)",
                s.tile_reads()
            );
        }
        for ((p, ids), (base_logits, base_tokens)) in PROMPTS.iter().zip(&prompts).zip(&base_runs) {
            let (logits, tokens) = greedy(&mut r, ids, vocab);
            // first greedy token, checked before measuring (not for q2_K: 2.6 bits per weight in
            // SmolLM2-135M's ffn_down alone move the first token; its prefill logits are bounded)
            if k_type != GgmlType::Q2_K {
                assert_eq!(
                    tokens[0], base_tokens[0],
                    "{target} {p:?}: first greedy token {} differs from the baseline's {}",
                    tokens[0], base_tokens[0]
                );
            }
            // compare every step whose input tokens are still the baseline's
            let same = tokens
                .iter()
                .zip(base_tokens)
                .take_while(|(a, b)| a == b)
                .count();
            let steps = (same + 1).min(logits.len());
            let (mut max_delta, mut max_logit) = (0f32, 0f32);
            for (q, b) in logits.iter().zip(base_logits).take(steps) {
                for (x, y) in q.iter().zip(b) {
                    max_delta = max_delta.max((x - y).abs());
                    max_logit = max_logit.max(y.abs());
                }
            }
            let ratio = max_delta / max_logit;
            let line = format!(
                "kquant gate: {target} {p:?}: first token {} {} baseline {}; max |Δlogit| = {max_delta:.4}, max |logit| = {max_logit:.4}, ratio {:.1}% (bound {:.0}%) over {steps} step(s); continuation {:?} (baseline {:?})",
                tokens[0],
                if tokens[0] == base_tokens[0] { "==" } else { "≠" },
                base_tokens[0],
                100.0 * ratio,
                100.0 * bound,
                tok.decode(&tokens).unwrap(),
                tok.decode(base_tokens).unwrap()
            );
            eprintln!("{line}");
            lines.push((line, ratio, bound));
        }
    }
    eprintln!(
        "kquant gate: {} measurements in {:.1?}",
        lines.len(),
        t0.elapsed()
    );
    assert_eq!(lines.len(), 10);
    for (line, ratio, bound) in &lines {
        assert!(*ratio <= *bound, "bound exceeded: {line}");
    }
}

/// Deterministic pseudo-normal values with a few outliers (so block scales vary).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            if i % 97 == 0 {
                u * 40.0
            } else {
                u * (1.0 + (i % 7) as f32)
            }
        })
        .collect()
}

#[test]
fn kernel_reference_decodes_like_the_gguf_dequantizers() {
    let (rows, k) = (6usize, 512usize);
    for (t, format) in [
        (GgmlType::Q4_0, WeightFormat::Q4_0),
        (GgmlType::Q5_0, WeightFormat::Q5_0),
        (GgmlType::Q5_1, WeightFormat::Q5_1),
        (GgmlType::Q4_K, WeightFormat::Q4K),
        (GgmlType::Q5_K, WeightFormat::Q5K),
        (GgmlType::Q6_K, WeightFormat::Q6K),
        (GgmlType::Q8_0, WeightFormat::Q8_0),
    ] {
        let x = values(rows * k, 0x5eed ^ t as u64);
        let mut packed = Vec::new();
        quant::encode(t, &x, k, &mut packed, FmaContract::Off).expect("encode");
        let mut want = Vec::new();
        match t {
            GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => {
                quant::kquant::dequantize(t, &packed, &mut want)
            }
            _ => quant::decode_to_f32(t, &packed, &mut want).expect("decode"),
        }
        let got = WeightMatrix::new(format, rows, k, &packed, &[], &[])
            .expect("shape")
            .dequantize();
        assert_eq!(got.len(), want.len());
        let differing = got
            .iter()
            .zip(&want)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert_eq!(
            differing, 0,
            "{t}: {differing} values differ from artifact's decoder"
        );
        assert!(want.iter().any(|v| *v != 0.0));
    }
}
