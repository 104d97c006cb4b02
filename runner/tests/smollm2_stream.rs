//! SmolLM2-135M Q4_1: a streamed run (row tiles read with one pread each into two reused slots)
//! and a resident run (every matrix uploaded once) give BIT-IDENTICAL logits over a prefill and
//! decode steps; the tile reads are counted to prove the paths differ. The negative control (a
//! split along K changes the bits) is `kernels::reference` test `splitting_k_changes_the_bits`.

#![allow(clippy::panic, clippy::unwrap_used)]

use crate::common;

use runner::engine::Engine;
use runner::llama::{Logits, Runner, WeightMode};
use runner::model::LlamaModel;
use runner::tokenizer::Tokenizer;

#[test]
fn streamed_and_resident_logits_are_bit_identical() {
    let Some(path) = common::model_path("streamed_and_resident_logits_are_bit_identical") else {
        return;
    };
    let Some(e) = common::engine("streamed_and_resident_logits_are_bit_identical") else {
        return;
    };
    let model = LlamaModel::open(&path).expect("open model");
    let tok = Tokenizer::from_gguf(model.gguf.metadata()).expect("tokenizer");
    let prompt = tok.encode(common::PROMPTS[0]).expect("encode");
    // 64 KiB tiles: every matrix of this model spans several tiles (attn_k 192 rows × 360 B = 2 tiles)
    let tile_bytes = 64 * 1024;
    let decode = 2;
    let run = |mode: WeightMode| {
        let mut r = Runner::new(e, &model, mode, prompt.len() + decode + 1).expect("load");
        let mut steps = vec![r.forward(&prompt, Logits::All).expect("prefill")];
        for _ in 0..decode {
            let last = steps.last().unwrap();
            let row = &last[last.len() - model.config.vocab..];
            let next = common::top2(row).0 as u32;
            steps.push(r.forward(&[next], Logits::Last).expect("decode"));
        }
        (steps, r.tile_reads())
    };
    let (resident, resident_reads) = run(WeightMode::Resident);
    let (streamed, streamed_reads) = run(WeightMode::Streamed {
        tile_bytes,
        ring: runner::llama::DEFAULT_RING,
    });
    assert_eq!(resident_reads, 0);
    // expected reads: per forward, every layer matrix and the output head, ceil(rows / tile rows)
    let tiles = |m: &runner::model::MatrixRef| {
        let row = m.format.packed_len(1, m.k).unwrap();
        m.rows.div_ceil(tile_bytes / row) as u64
    };
    let per_forward: u64 = model
        .layers
        .iter()
        .map(|l| {
            [&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down]
                .map(tiles)
                .iter()
                .sum::<u64>()
        })
        .sum::<u64>()
        + tiles(&model.output);
    assert_eq!(streamed_reads, per_forward * (1 + decode as u64));
    assert!(
        per_forward > 7 * model.layers.len() as u64,
        "tiles must split matrices"
    );
    assert_eq!(resident.len(), streamed.len());
    for (i, (a, b)) in resident.iter().zip(&streamed).enumerate() {
        assert_eq!(a.len(), b.len());
        let differing = a
            .iter()
            .zip(b)
            .filter(|(x, y)| x.to_bits() != y.to_bits())
            .count();
        assert_eq!(
            differing, 0,
            "step {i}: {differing} logits differ between streamed and resident"
        );
    }
    // the prefill row for every prompt position was computed (Logits::All) and is finite
    assert_eq!(resident[0].len(), prompt.len() * model.config.vocab);
    assert!(resident.iter().flatten().all(|v| v.is_finite()));
    eprintln!(
        "streamed == resident over {} forwards, {streamed_reads} tile reads",
        1 + decode
    );
}

/// Prefill then greedy decode steps' logits rows of `model` on `e`.
fn logits(
    e: &Engine,
    model: &LlamaModel,
    prompt: &[u32],
    mode: WeightMode,
    decode: usize,
) -> Vec<Vec<f32>> {
    let mut r = Runner::new(e, model, mode, prompt.len() + decode + 1).expect("load");
    let mut steps = vec![r.forward(prompt, Logits::Last).expect("prefill")];
    for _ in 0..decode {
        let next = common::top2(steps.last().unwrap()).0 as u32;
        steps.push(r.forward(&[next], Logits::Last).expect("decode"));
    }
    steps
}

/// With the subgroup reduction (forced on a `Lanes` device where the adapter has subgroups;
/// docs/kernels.md "Subgroup reduction"), streamed == resident still holds bit for bit, and the
/// logits stay within 1e-4 · max |logit| of the CPU adapter's default engine with the same greedy
/// tokens (another reduction order, so not its bits).
#[test]
fn with_subgroups_streamed_equals_resident_and_stays_near_the_default() {
    const TEST: &str = "with_subgroups_streamed_equals_resident_and_stays_near_the_default";
    let Some(path) = common::model_path(TEST) else {
        return;
    };
    let Some(base) = common::engine(TEST) else {
        return;
    };
    let gpu = match kernels::gpu::Gpu::new_with(Some(kernels::gpu::MatvecShape::Lanes), Some(true))
    {
        Ok(g) => g,
        Err(kernels::KernelError::NoSubgroups(name)) => {
            eprintln!("SKIPPED {TEST}: {name} has no subgroups");
            return;
        }
        Err(e) => panic!("a subgroup device: {e}"),
    };
    let e = Engine::from_gpu(gpu);
    assert!(e.gpu().subgroups());
    let model = LlamaModel::open(&path).expect("open model");
    let tok = Tokenizer::from_gguf(model.gguf.metadata()).expect("tokenizer");
    let prompt = tok.encode(common::PROMPTS[0]).expect("encode");
    let decode = 3;
    let resident = logits(&e, &model, &prompt, WeightMode::Resident, decode);
    let streamed = logits(
        &e,
        &model,
        &prompt,
        WeightMode::Streamed {
            tile_bytes: 64 * 1024,
            ring: runner::llama::DEFAULT_RING,
        },
        decode,
    );
    let default = logits(base, &model, &prompt, WeightMode::Resident, decode);
    for (i, ((r, s), d)) in resident.iter().zip(&streamed).zip(&default).enumerate() {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(r), bits(s), "step {i}: streamed moved off resident");
        let scale = d.iter().fold(0f32, |m, x| m.max(x.abs()));
        let worst = r.iter().zip(d).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        eprintln!("step {i}: subgroups vs default max |Δ| {worst:e} (max |logit| {scale})");
        assert!(worst <= 1e-4 * scale, "step {i}: {worst} > 1e-4 · {scale}");
        assert_eq!(
            common::top2(r).0,
            common::top2(d).0,
            "step {i}: greedy moved"
        );
    }
}
