//! The engine's structure, counted by the one wrapper every wgpu call passes through
//! (`kernels::gpu::Gpu`, docs/runner.md "Engine"): on SmolLM2 a resident greedy decode step is one
//! submit, reads back at most 8 bytes and creates nothing; a streamed step reads every tile once
//! and creates nothing; the device-chosen tokens equal the host argmax of the read-back logits;
//! and no source file but the wrapper reaches wgpu's submit, map or create calls.

#![allow(clippy::panic, clippy::unwrap_used)]

use crate::common;

use kernels::gpu::MatvecShape;
use runner::engine::Engine;
use runner::llama::{Logits, Runner, WeightMode};
use runner::model::LlamaModel;
use runner::tokenizer::Tokenizer;

/// Each test owns an engine so the counters see only its own work.
fn own_engine(test: &str) -> Option<Engine> {
    common::engine(test)?;
    Some(Engine::new().expect("a second engine on the adapter"))
}

const STEPS: usize = 6;

#[test]
fn resident_greedy_decode_is_one_submit_and_four_bytes() {
    let test = "resident_greedy_decode_is_one_submit_and_four_bytes";
    let (Some(path), Some(e)) = (common::model_path(test), own_engine(test)) else {
        return;
    };
    let model = LlamaModel::open(&path).unwrap();
    let tok = Tokenizer::from_gguf(model.gguf.metadata()).unwrap();
    let prompt = tok.encode(common::PROMPTS[0]).unwrap();
    let mut r = Runner::new(&e, &model, WeightMode::Resident, prompt.len() + STEPS + 1).unwrap();
    let mut tokens = vec![r.forward_argmax(&prompt).unwrap()];
    // warm-up: the first decode step may rewrite every parameter slot (the chunk length changed)
    tokens.push(r.step_argmax().unwrap());
    let mut dispatches = None;
    for step in 0..STEPS - 1 {
        let before = r.stats();
        tokens.push(r.step_argmax().unwrap());
        let d = r.stats() - before;
        assert_eq!(d.submits, 1, "step {step}: {d:?}");
        assert!(d.bytes_read_back <= 8, "step {step}: {d:?}");
        assert_eq!(d.maps, 1, "step {step}: {d:?}");
        assert_eq!(d.buffers_created, 0, "step {step}: {d:?}");
        assert_eq!(d.bind_groups_created, 0, "step {step}: {d:?}");
        assert_eq!(d.device_bytes_allocated, 0, "step {step}: {d:?}");
        // only the position-dependent parameter slots change: at most 5 slots of 48 bytes
        assert!(d.bytes_uploaded <= 5 * 48, "step {step}: {d:?}");
        // the same recorded work every step
        assert_eq!(*dispatches.get_or_insert(d.dispatches), d.dispatches);
    }
    let per_layer = match e.gpu().matvec_shape() {
        // norm, q, k, v, rope ×2, attention, o, norm, gate, up, swiglu, down
        MatvecShape::Lanes => 13,
        // norm + qkv_rope, attention (one workgroup while the context is short), o,
        // norm + gate_up, down
        MatvecShape::Rows => 5,
    };
    assert_eq!(
        dispatches.unwrap(),
        (1 + per_layer * model.layers.len() + 3) as u64,
        "embedding, the layers, final norm + head + argmax"
    );
    // the device's choice equals the host argmax of the logits the same forward reads back
    let mut host = Runner::new(&e, &model, WeightMode::Resident, prompt.len() + STEPS + 1).unwrap();
    let mut want = Vec::new();
    let mut logits = host.forward(&prompt, Logits::Last).unwrap();
    for _ in 0..=STEPS {
        let id = common::top2(&logits).0 as u32;
        want.push(id);
        logits = host.forward(&[id], Logits::Last).unwrap();
    }
    assert_eq!(tokens, want);
}

/// The same greedy decode driven as every front-end drives it (`generate` over one sequence of
/// the `adapter::Model` trait): the picked id is fed from the device (`Input::Picked`), so each
/// step after the warm-up is still one submit, at most 8 bytes read, nothing created, only the
/// position parameters uploaded; the tokens are the direct runner's.
#[test]
fn greedy_decode_through_the_model_trait_is_the_same_one_submit_step() {
    use runner::adapter::Model;
    let test = "greedy_decode_through_the_model_trait_is_the_same_one_submit_step";
    let (Some(path), Some(e)) = (common::model_path(test), own_engine(test)) else {
        return;
    };
    let model = LlamaModel::open(&path).unwrap();
    let tok = Tokenizer::from_gguf(model.gguf.metadata()).unwrap();
    let prompt = tok.encode(common::PROMPTS[0]).unwrap();
    let cap = prompt.len() + STEPS + 1;
    let mut direct = Runner::new(&e, &model, WeightMode::Resident, cap).unwrap();
    let mut want = vec![direct.forward_argmax(&prompt).unwrap()];
    let mut direct_steps = Vec::new();
    for _ in 0..STEPS {
        let before = direct.stats();
        want.push(direct.step_argmax().unwrap());
        direct_steps.push(direct.stats() - before);
    }
    let mut r = Runner::new(&e, &model, WeightMode::Resident, cap).unwrap();
    let seq = r.begin().unwrap();
    let mut sampler = runner::sample::Sampler::new(runner::sample::SamplingParams::default());
    let opts = runner::generate::GenOpts {
        n: STEPS + 1,
        ignore_eos: true,
        keep_logits: false,
        logprobs: None,
    };
    let g = runner::generate::generate(
        &mut r,
        &seq,
        &prompt,
        &opts,
        &mut sampler,
        None,
        &mut |_, _| Ok(true),
    )
    .unwrap();
    assert_eq!(g.tokens, want);
    assert_eq!(g.steps.len(), STEPS);
    // the first decode step may rewrite every parameter slot (the chunk length changed)
    for (step, (d, direct)) in g.steps.iter().zip(&direct_steps).enumerate().skip(1) {
        let d = &d.gpu;
        // the picked id is not uploaded again: the same bytes as the direct step's
        assert_eq!(d.bytes_uploaded, direct.bytes_uploaded, "step {step}");
        assert_eq!(d.dispatches, direct.dispatches, "step {step}");
        assert_eq!(d.submits, 1, "step {step}: {d:?}");
        assert!(d.bytes_read_back <= 8, "step {step}: {d:?}");
        assert_eq!(d.buffers_created, 0, "step {step}: {d:?}");
        assert_eq!(d.bind_groups_created, 0, "step {step}: {d:?}");
        assert!(d.bytes_uploaded <= 5 * 48, "step {step}: {d:?}");
    }
}

/// A streamed decode step reads each tile once, allocates nothing and is one submit a ring of
/// tiles, for the default ring and a shorter one (`--ring-slots`); both give the resident tokens.
#[test]
fn streamed_decode_reads_each_tile_once_and_allocates_nothing() {
    let test = "streamed_decode_reads_each_tile_once_and_allocates_nothing";
    let (Some(path), Some(e)) = (common::model_path(test), own_engine(test)) else {
        return;
    };
    let model = LlamaModel::open(&path).unwrap();
    let tile_bytes = 256 * 1024;
    let prompt = [1u32, 2, 3, 4, 5];
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
    let mut res = Runner::new(&e, &model, WeightMode::Resident, prompt.len() + STEPS + 1).unwrap();
    let mut want = vec![res.forward_argmax(&prompt).unwrap()];
    for _ in 0..STEPS {
        want.push(res.step_argmax().unwrap());
    }
    for ring in [runner::llama::DEFAULT_RING, 3] {
        let mode = WeightMode::Streamed { tile_bytes, ring };
        let mut r = Runner::new(&e, &model, mode, prompt.len() + STEPS + 1).unwrap();
        let mut tokens = vec![r.forward_argmax(&prompt).unwrap()];
        tokens.push(r.step_argmax().unwrap());
        for step in 0..STEPS - 1 {
            let (before, reads) = (r.stats(), r.tile_reads());
            tokens.push(r.step_argmax().unwrap());
            let d = r.stats() - before;
            assert_eq!(
                r.tile_reads() - reads,
                per_forward,
                "ring {ring} step {step}"
            );
            assert!(d.bytes_read_back <= 8, "ring {ring} step {step}: {d:?}");
            assert_eq!(d.buffers_created, 0, "ring {ring} step {step}: {d:?}");
            assert_eq!(d.bind_groups_created, 0, "ring {ring} step {step}: {d:?}");
            // one submit per ring of tiles
            let want_submits = per_forward.div_ceil(ring as u64);
            assert_eq!(d.submits, want_submits, "ring {ring} step {step}: {d:?}");
        }
        // and the streamed tokens are the resident ones
        assert_eq!(tokens, want, "ring {ring}");
    }
}

#[test]
fn prefill_in_chunks_gives_the_bits_of_one_chunk() {
    let test = "prefill_in_chunks_gives_the_bits_of_one_chunk";
    let (Some(path), Some(e)) = (common::model_path(test), own_engine(test)) else {
        return;
    };
    let model = LlamaModel::open(&path).unwrap();
    let n = runner::llama::PREFILL_CHUNK + 9;
    let prompt: Vec<u32> = (0..n as u32).map(|i| (i * 7919) % 4000 + 10).collect();
    let mut whole = Runner::new(&e, &model, WeightMode::Resident, n + 1).unwrap();
    let all = whole.forward(&prompt, Logits::All).unwrap();
    let vocab = model.config.vocab;
    assert_eq!(all.len(), n * vocab);
    // token by token: every position's logits are the bits of the chunked prefill's row
    let mut one = Runner::new(&e, &model, WeightMode::Resident, n + 1).unwrap();
    for (i, &id) in prompt.iter().enumerate().step_by(8) {
        if i > 0 {
            let _ = one
                .forward(&prompt[one.position()..i], Logits::Last)
                .unwrap();
        }
        let row = one.forward(&[id], Logits::Last).unwrap();
        let want = &all[i * vocab..(i + 1) * vocab];
        let same = row
            .iter()
            .zip(want)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(
            same,
            "position {i}: chunked prefill and one-token forward differ"
        );
    }
}

/// Every wgpu submit, buffer map, buffer write and resource creation goes through
/// `kernels::gpu::Gpu`, so the counters above see all of it.
#[test]
fn only_the_wrapper_calls_wgpu_submit_map_or_create() {
    let forbidden = [
        "queue().submit(",
        "queue.submit(",
        ".map_async(",
        "write_buffer(",
        "create_buffer(",
        "create_buffer_init(",
        "create_bind_group(",
        "create_shader_module",
        "create_compute_pipeline(",
    ];
    let wrapper = common::repo_file("kernels/src/gpu.rs")
        .canonicalize()
        .unwrap();
    let mut offenders = Vec::new();
    for dir in ["runner/src", "kernels/src"] {
        let mut stack = vec![common::repo_file(dir)];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let p = entry.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs")
                    && p.canonicalize().unwrap() != wrapper
                {
                    let text = std::fs::read_to_string(&p).unwrap();
                    for (n, line) in text.lines().enumerate() {
                        let code = line.split("//").next().unwrap_or_default();
                        if forbidden.iter().any(|f| code.contains(f)) {
                            offenders.push(format!("{}:{}: {}", p.display(), n + 1, line.trim()));
                        }
                    }
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "direct wgpu calls outside the wrapper:\n{}",
        offenders.join("\n")
    );
    // the patterns are the calls the wrapper itself makes (so the scan above can see them)
    let own = std::fs::read_to_string(&wrapper).unwrap();
    for f in forbidden.iter().filter(|f| !f.starts_with("queue()")) {
        assert!(
            own.contains(f),
            "the wrapper makes no `{f}` call: the pattern is stale"
        );
    }
}

/// One device per process: in the runner's sources only `open.rs` opens one (the engine's own
/// constructors aside), so no model backend can open a second beside the front-end's.
#[test]
fn only_the_open_function_opens_a_device() {
    let opens = [
        "Engine::new(",
        "Engine::new_with_shape(",
        "Engine::open(",
        "Gpu::new(",
        "Gpu::open(",
        "Gpu::new_with_shape(",
        "Gpu::new_with(",
        "request_device(",
        "request_adapter(",
    ];
    let allowed = ["runner/src/open.rs", "runner/src/engine.rs"]
        .map(|f| common::repo_file(f).canonicalize().unwrap());
    let mut offenders = Vec::new();
    let mut stack = vec![common::repo_file("runner/src")];
    let mut opener = false;
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let own = allowed.contains(&p.canonicalize().unwrap());
            let text = std::fs::read_to_string(&p).unwrap();
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                if opens.iter().any(|f| code.contains(f)) {
                    opener |= own;
                    if !own {
                        offenders.push(format!("{}:{}: {}", p.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "a device opened outside runner/src/open.rs:\n{}",
        offenders.join("\n")
    );
    assert!(opener, "open.rs opens no device: the patterns are stale");
}
