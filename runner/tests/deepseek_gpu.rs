//! The DeepSeek V4 adapter on the wgpu engine (lavapipe in CI): every matrix through the fp8 /
//! mxfp4 / bf16 dequantize-and-multiply kernels, resident and streamed (routed experts read tile by
//! tile on demand into a bounded cache). Streamed logits equal resident logits bit for bit; both
//! are compared with the transformers fixture at the reference's tolerance.

use crate::deepseek_common;

use std::time::Instant;

use runner::deepseek::{Mode, V4Model};

#[test]
fn gpu_resident_and_streamed_match_transformers_and_each_other() {
    // the host placement (a reference kept for tests) and the device placement, the one the
    // binaries run (its prefill is device steps too). The long run against transformers is the
    // host placement's here; the device placement's is `artifact::deepseek::
    // minirun_run_artifact_matches_transformers_and_streams_bit_identically` (the same 380 + 16
    // tokens through `minirun-run --artifact`, held to the same two bounds), so CI runs each
    // placement's 6-minute-on-lavapipe sequence once.
    for device_residual in [false, true] {
        eprintln!("mHC residual on the device: {device_residual}");
        resident_and_streamed_match(device_residual);
    }
}

fn resident_and_streamed_match(device_residual: bool) {
    let dir = deepseek_common::release();

    let t0 = Instant::now();
    let mut resident = V4Model::open_dir(
        dir,
        Mode::Gpu {
            engine: deepseek_common::engine(),
            streamed: false,
            expert_cache_bytes: 0,
        },
    )
    .expect("opens resident");
    assert!(resident.set_device_residual(device_residual));
    let reads_open = resident.tile_reads();
    if !device_residual {
        long_run_matches_transformers(&mut resident, reads_open, t0);
    }
    streamed_matches_resident(dir, resident, reads_open, device_residual);
}

/// The prompt and the 16 greedy tokens, teacher-forced, against transformers' f32 logits (the
/// reference's tolerance) and its f64 logits (the same bound); no tile is read after open.
fn long_run_matches_transformers(resident: &mut V4Model, reads_open: u64, t0: Instant) {
    let fx = deepseek_common::fixture();
    let rows_r = resident
        .teacher_forced(&fx.prompt, &fx.greedy)
        .expect("resident run");
    let reads_after = resident.tile_reads();
    eprintln!(
        "resident: open + prefill {} + 16 decode {:?}; tile reads at open {reads_open}, during the run {}",
        fx.prompt.len(),
        t0.elapsed(),
        reads_after - reads_open
    );
    assert!(reads_open > 0);
    assert_eq!(
        reads_after, reads_open,
        "a resident run reads no tile after open"
    );
    deepseek_common::dump("gpu", &rows_r);
    let report = deepseek_common::compare(&rows_r, fx);
    let vs64 = deepseek_common::max_abs_vs_f64(&rows_r, fx);
    eprintln!("max |Δ| vs transformers f64: {vs64:e}");
    assert!(
        vs64 <= report.tolerance,
        "max |Δ| vs transformers f64 {vs64:e} > tolerance {:e}",
        report.tolerance
    );
    eprintln!("resident vs transformers: {report}");
    report.assert_within();
}

/// Streamed vs resident, bit for bit, each placement.
fn streamed_matches_resident(
    dir: &std::path::Path,
    mut resident: V4Model,
    reads_open: u64,
    device_residual: bool,
) {
    let fx = deepseek_common::fixture();
    // Streamed vs resident on a shorter sequence (bit identity does not need the long prompt):
    // 40 prompt tokens then 4 decode steps.
    let prompt = &fx.prompt[..40];
    let forced = &fx.prompt[40..44];
    let short_r = resident
        .teacher_forced(prompt, forced)
        .expect("resident short run");
    assert_eq!(
        resident.tile_reads(),
        reads_open,
        "a resident run reads no tile after open"
    );
    drop(resident);
    let t1 = Instant::now();
    let mut streamed = V4Model::open_dir(
        dir,
        Mode::Gpu {
            engine: deepseek_common::engine(),
            streamed: true,
            expert_cache_bytes: 2 << 20,
        },
    )
    .expect("opens streamed");
    assert!(streamed.set_device_residual(device_residual));
    let s_open = streamed.tile_reads();
    let short_s = streamed
        .teacher_forced(prompt, forced)
        .expect("streamed run");
    let s_run = streamed.tile_reads() - s_open;
    eprintln!(
        "streamed: open + 40 + 4 decode {:?}; tile reads at open {s_open}, during the run {s_run}",
        t1.elapsed()
    );
    // Experts were not read at open; they were read on demand during the run.
    assert!(
        s_open < reads_open,
        "streamed open read {s_open} tiles, resident {reads_open}"
    );
    assert!(s_run > 0, "no expert tile was read on demand");
    for (i, (a, b)) in short_r.iter().zip(&short_s).enumerate() {
        assert!(
            a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()),
            "row {i}: streamed logits differ from resident"
        );
    }
}

/// A resident decode step's device work, counted by the one wgpu wrapper (`kernels::gpu::Gpu`):
/// a layer's products go in chains (the normalised input's projections, one merged matrix a
/// format, through `q_norm` into the query LoRA's; the grouped output projection into `wo_b`;
/// the experts' gate/up products through SwiGLU on the device into their down products, gate/up
/// and SwiGLU one fused dispatch an MLP). With the mHC residual on the host that is 3 submits a
/// layer; with it on the device (the mixers, each with the expansion and the MoE's weighted sum
/// before it, recorded with the chains) 2 (the attention's inputs and the router's input come
/// back); the head one more,
/// each read back with one map; and once the experts a token routes to have run before (a second pass over the same
/// tokens), a step creates no buffer and no bind group. The second pass gives the first pass's
/// logits bit for bit.
#[test]
fn a_resident_decode_step_is_one_submit_and_creates_nothing_when_warm() {
    // the residual on the host: the mixers run there, between 3 submits a layer (130 here; 173
    // before `q_norm` was chained), each MLP's gate/up and SwiGLU one fused dispatch and the
    // attention's input projections one a format: 558 dispatches (683 before the projections
    // were merged; 941 with three dispatches an MLP)
    decode_structure(false, 3, 15);
    // on the device: the mixers, the router (gate product + `moe_route`), the picked experts by
    // index over the layer's stacks, and the attention (compressors, indexer, attention over
    // the key ring and the entries) all run there: the step is one submit, whose one read is
    // the logits (44 submits when the attention ran on the host, 87 when the router's input
    // came back too)
    decode_structure(true, 0, 21);
}

fn decode_structure(device_residual: bool, per_layer: u64, per_layer_dispatches: u64) {
    let fx = deepseek_common::fixture();
    let mut m = V4Model::open_dir(
        deepseek_common::release(),
        Mode::Gpu {
            engine: deepseek_common::engine(),
            streamed: false,
            expert_cache_bytes: 0,
        },
    )
    .expect("opens resident");
    assert!(m.set_device_residual(device_residual));
    let ids = &fx.prompt[..6];
    let first: Vec<Vec<f32>> = ids
        .iter()
        .map(|&id| m.forward(&[id]).expect("first pass"))
        .collect();
    m.reset();
    let layers = m.config.layers as u64;
    for (i, &id) in ids.iter().enumerate() {
        let before = m.gpu_stats().expect("a GPU model counts");
        let row = m.forward(&[id]).expect("second pass");
        let d = m.gpu_stats().expect("counters") - before;
        eprintln!("device residual {device_residual}, step {i}: {d:?}");
        let bits = |r: &[f32]| r.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&row), bits(&first[i]), "step {i}: the logits moved");
        assert!(d.submits <= per_layer * layers + 1, "step {i}: {d:?}");
        assert!(d.dispatches >= 3 * d.submits, "step {i}: {d:?}");
        assert!(
            d.dispatches <= per_layer_dispatches * layers + 4,
            "step {i}: {d:?}"
        );
        if per_layer == 0 {
            // the logits, nothing else
            assert_eq!(
                d.bytes_read_back,
                4 * m.config.vocab as u64,
                "step {i}: {d:?}"
            );
        }
        assert_eq!(d.maps, d.submits, "step {i}: one read-back a batch: {d:?}");
        assert_eq!(d.buffers_created, 0, "step {i}: {d:?}");
        assert_eq!(d.bind_groups_created, 0, "step {i}: {d:?}");
        assert_eq!(d.device_bytes_allocated, 0, "step {i}: {d:?}");
    }
    if per_layer > 0 {
        return;
    }
    // a prefill is device steps too: one submit a token and the last token's logits its one
    // read, the bits of feeding the tokens one at a time
    m.reset();
    let before = m.gpu_stats().expect("counters");
    let row = m.forward(ids).expect("prefill");
    let d = m.gpu_stats().expect("counters") - before;
    eprintln!("device prefill of {} tokens: {d:?}", ids.len());
    let bits = |r: &[f32]| r.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&row), bits(&first[ids.len() - 1]), "the prefill moved");
    assert_eq!(
        (d.submits, d.maps, d.bytes_read_back),
        (ids.len() as u64, 1, 4 * m.config.vocab as u64),
        "{d:?}"
    );
    assert_eq!(d.buffers_created + d.bind_groups_created, 0, "{d:?}");
    // greedy on the device: the step's one read is the chosen id (a pass to warm the argmax op)
    for warm in [true, false] {
        m.reset();
        for (i, &id) in ids.iter().enumerate() {
            let before = m.gpu_stats().expect("counters");
            let got = m.forward_argmax(&[id]).expect("argmax step");
            let d = m.gpu_stats().expect("counters") - before;
            assert_eq!(got, runner::deepseek::model::argmax(&first[i]), "step {i}");
            if !warm {
                eprintln!("greedy step {i}: {d:?}");
                assert_eq!(
                    (d.submits, d.maps, d.bytes_read_back),
                    (1, 1, 4),
                    "step {i}: {d:?}"
                );
                assert_eq!(
                    d.buffers_created + d.bind_groups_created,
                    0,
                    "step {i}: {d:?}"
                );
            }
        }
    }
}

/// The attention's input projections declared together (`Linears::declare_merged`) are one
/// matrix per format on the device, and a batch of their one-token products is one dispatch per
/// such matrix; every output, one-token or prefill, is the bits of the part's own product.
#[test]
fn merged_input_projections_are_one_dispatch_a_format_and_change_no_bit() {
    use runner::deepseek::gpu::GpuLinears;
    use runner::deepseek::linear::{Linears, Product};
    use runner::deepseek::model::merged_projections;

    let (src, c, csa) = csa_layer();
    let mut apart = GpuLinears::new(deepseek_common::engine(), src.clone(), false, 0);
    let mut merged = GpuLinears::new(deepseek_common::engine(), src.clone(), false, 0);
    for (name, parts) in merged_projections(&c, csa) {
        for (stem, rows, k) in &parts {
            apart.declare(stem, *rows, *k, false).unwrap();
        }
        merged.declare_merged(&name, &parts).unwrap();
        // an input with every sign and a wide range, one token and a three-token chunk
        let k = parts[0].2;
        let x: Vec<f32> = (0..3 * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        for tokens in [1, 3] {
            let xs = &x[..tokens * k];
            let items: Vec<Product<'_>> = parts
                .iter()
                .map(|(s, rows, _)| Product::new(s.clone(), *rows, xs, tokens))
                .collect();
            let want = apart.linear_batch(&items).unwrap();
            let d0 = merged.gpu_stats().unwrap();
            let got = merged.linear_batch(&items).unwrap();
            let d = merged.gpu_stats().unwrap() - d0;
            for ((w, g), (stem, _, _)) in want.iter().zip(&got).zip(&parts) {
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(w), bits(g), "{stem}, {tokens} token(s)");
            }
            // fp8 wq_a and wkv are one matrix, the five bf16 compressor / indexer projections
            // another; the query LoRA's two fp8 products one
            let formats = if parts.len() == 7 { 2 } else { 1 };
            if tokens == 1 {
                assert_eq!(d.submits, 1, "{name}: {d:?}");
                assert_eq!(d.dispatches, formats, "{name}: {d:?}");
            }
        }
    }
}

/// The attention's first chain (its input projections, `q_norm` over `wq_a`'s output, the query
/// LoRA's products) runs on the device as one submit, and gives the bits of the level-by-level
/// fallback a prefill takes (`chain::on_host`, its RMSNorm the same kernel run alone).
#[test]
fn the_input_chain_is_one_submit_and_the_bits_of_the_fallback() {
    use runner::deepseek::chain::{on_host, Input, Link};
    use runner::deepseek::gpu::GpuLinears;
    use runner::deepseek::linear::Linears;
    use runner::deepseek::model::merged_projections;

    let (src, c, csa) = csa_layer();
    let mut lin = GpuLinears::new(deepseek_common::engine(), src.clone(), false, 0);
    let [(xin, inputs), (xlora, lora)] = merged_projections(&c, csa);
    lin.declare_merged(&xin, &inputs).unwrap();
    lin.declare_merged(&xlora, &lora).unwrap();
    let x: Vec<f32> = (0..c.hidden)
        .map(|i| ((i * 53 % 97) as f32 - 48.0) / 11.0)
        .collect();
    let q_norm: Vec<f32> = (0..c.q_lora).map(|i| 0.5 + (i % 7) as f32 / 8.0).collect();
    let qr = Input::RmsNorm {
        of: 0,
        weight: &q_norm,
        eps: c.eps,
    };
    let mut links: Vec<Link<'_>> = inputs
        .iter()
        .map(|(stem, rows, _)| Link::new(stem.clone(), *rows, Input::Host(&x), 1))
        .collect();
    links[0] = links[0].clone().internal();
    for (stem, rows, _) in &lora {
        links.push(Link::new(stem.clone(), *rows, qr.clone(), 1));
    }
    let want = on_host(&mut lin, &links).expect("level by level");
    let before = lin.gpu_stats().unwrap();
    let got = lin.linear_chain(&links).expect("one submit");
    let d = lin.gpu_stats().unwrap() - before;
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(bits(w), bits(g), "link {i} ({})", links[i].stem);
    }
    assert!(got[0].is_empty() && !got[8].is_empty());
    // two merged input matrices, the RMSNorm, the merged query LoRA
    assert_eq!((d.submits, d.maps, d.dispatches), (1, 1, 4), "{d:?}");
}

/// The release's weights, its configuration and its first CSA layer (seven input projections).
fn csa_layer() -> (
    std::sync::Arc<dyn runner::deepseek::WeightSource>,
    runner::deepseek::V4Config,
    usize,
) {
    use runner::deepseek::model::merged_projections;
    use runner::deepseek::{ReleaseDir, V4Config, WeightSource};
    let src: std::sync::Arc<dyn WeightSource> =
        std::sync::Arc::new(ReleaseDir::open(deepseek_common::release()).expect("release opens"));
    let bytes = src.root_file("config.json").expect("config.json");
    let c = V4Config::parse(&bytes, "config.json").expect("config parses");
    let csa = (0..c.layers)
        .find(|&i| merged_projections(&c, i)[0].1.len() == 7)
        .expect("a CSA layer (seven input projections)");
    (src, c, csa)
}

/// With the attention on the device its decode state lives there; the host reads it back when
/// it needs it. After a prefill (host) and decode steps (device): the saved state has the
/// layout, and values within 1e-4·(1 + |x|), of a run whose attention stayed on the host; a
/// snapshot restored and stepped again gives the same logits bit for bit (read back, pushed
/// again, unchanged); and a prefill chunk then a decode step after the device steps match the
/// host-attention run within the transformers tolerance.
#[test]
fn the_device_attentions_state_comes_back_for_the_host() {
    let fx = deepseek_common::fixture();
    let open = |attention: bool| {
        let mut m = V4Model::open_dir(
            deepseek_common::release(),
            Mode::Gpu {
                engine: deepseek_common::engine(),
                streamed: false,
                expert_cache_bytes: 0,
            },
        )
        .expect("opens resident");
        assert!(m.set_device_residual(true));
        m.set_device_attention(attention);
        m
    };
    let (mut dev, mut host) = (open(true), open(false));
    let p = &fx.prompt;
    for m in [&mut dev, &mut host] {
        m.forward(&p[..40]).expect("prefill");
        for &t in &p[40..46] {
            m.forward(&[t]).expect("decode");
        }
    }
    let before = dev.gpu_stats().expect("counters");
    dev.forward(&[p[46]]).expect("decode");
    let d = dev.gpu_stats().expect("counters") - before;
    assert_eq!(d.submits, 1, "the device attention runs: {d:?}");
    host.forward(&[p[46]]).expect("decode");
    let (ld, sd) = dev.save_state().expect("device state");
    let (lh, sh) = host.save_state().expect("host state");
    assert_eq!(ld, lh);
    let floats = |b: &[u8]| -> Vec<f32> { bytemuck::pod_collect_to_vec(b) };
    let (sd, sh) = (floats(&sd), floats(&sh));
    assert_eq!(sd.len(), sh.len());
    let worst = sd
        .iter()
        .zip(&sh)
        .map(|(a, b)| (a - b).abs() / (1.0 + b.abs()))
        .fold(0f32, f32::max);
    eprintln!("saved states: max |Δ|/(1 + |x|) = {worst:e}");
    assert!(worst <= 1e-4, "saved states differ by {worst}");
    // a snapshot round trip changes nothing
    let snap = dev.snapshot().expect("snapshot");
    let once = dev.forward(&[p[47]]).expect("decode");
    dev.restore(&snap);
    let again = dev.forward(&[p[47]]).expect("decode");
    let bits = |r: &[f32]| r.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&once), bits(&again));
    host.forward(&[p[47]]).expect("decode");
    // a prefill chunk on the host after device steps, then a device step
    let tol = deepseek_common::tolerance(fx);
    for ids in [&p[48..51], &p[51..52]] {
        let a = dev.forward(ids).expect("device run");
        let b = host.forward(ids).expect("host run");
        let worst = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        eprintln!(
            "{} ids after device steps: max |Δ| = {worst:e} (tolerance {tol:e})",
            ids.len()
        );
        assert!(worst <= tol, "{} ids: max |Δ| {worst} > {tol}", ids.len());
    }
}

/// A GPU's matvec mapping (`Lanes`, forced on lavapipe) runs the device placement:
/// its one-token products read their window as storage, and its fused and expert-indexed
/// products are `kernels::looped` modules. Its decode steps give the CPU adapter's device
/// placement bit for bit (every product has the looped `matvec`'s order on both mappings), and
/// its host placement's logits within the transformers tolerance; a greedy step is one submit
/// and 4 bytes read back, and creates nothing once warm.
#[test]
fn a_gpu_mapping_runs_the_device_placement() {
    use kernels::gpu::MatvecShape;
    use runner::deepseek::source::ReleaseDir;
    let fx = deepseek_common::fixture();
    let open = |shape| {
        let src = std::sync::Arc::new(ReleaseDir::open(deepseek_common::release()).expect("dir"));
        let mode = Mode::Gpu {
            engine: runner::engine::Engine::new_with_shape(shape).expect("adapter"),
            streamed: false,
            expert_cache_bytes: 0,
        };
        V4Model::open(src, mode).expect("opens")
    };
    let (mut gpu, mut rows, mut host) = (
        open(Some(MatvecShape::Lanes)),
        open(None),
        open(Some(MatvecShape::Lanes)),
    );
    assert!(rows.set_device_residual(true));
    assert!(host.set_device_residual(false));
    let p = &fx.prompt[..14];
    let tol = deepseek_common::tolerance(fx);
    let worst = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max)
    };
    let bits = |r: &[f32]| r.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    for m in [&mut gpu, &mut rows, &mut host] {
        m.forward(&p[..8]).expect("prefill");
    }
    for &t in &p[8..11] {
        let a = gpu.forward(&[t]).expect("step");
        assert_eq!(bits(&a), bits(&rows.forward(&[t]).expect("step")));
        let h = host.forward(&[t]).expect("step");
        eprintln!(
            "GPU mapping, device vs host placement: max |Δ| {:e}",
            worst(&a, &h)
        );
        assert!(worst(&a, &h) <= tol);
    }
    for (i, &t) in p[11..14].iter().enumerate() {
        let before = gpu.gpu_stats().expect("counters");
        let a = gpu.forward_argmax(&[t]).expect("greedy step");
        let d = gpu.gpu_stats().expect("counters") - before;
        assert_eq!(a, rows.forward_argmax(&[t]).expect("greedy step"));
        eprintln!("GPU mapping, greedy step: {d:?}");
        assert_eq!((d.submits, d.maps, d.bytes_read_back), (1, 1, 4), "{d:?}");
        if i > 0 {
            assert_eq!((d.buffers_created, d.bind_groups_created), (0, 0), "{d:?}");
        }
    }
}
