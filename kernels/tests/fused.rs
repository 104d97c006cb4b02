//! The fused one-token kernels of kernels::unrolled against the separate kernels they replace:
//! `qkv_rope` = three matvecs + RoPE of Q and K (K and V written into the caches), and `gate_up`
//! = two matvecs + SwiGLU. Same bits, for both RoPE pairings and both GGUF formats that have an
//! unrolled form; and with the RMSNorm ahead of them fused too (`InputNorm`), the bits of the
//! norm kernel followed by the fused kernel.

#![allow(clippy::panic)] // a test reports failure by panicking

use crate::support;

use kernels::generated::Generated;
use kernels::gpu::{elementwise_groups, Bind, Gpu};
use kernels::reference;
use kernels::unrolled::{gate_up, gate_up_clamped, qkv_rope, InputNorm, Layout, QkvLayout};
use kernels::{
    ActivationParams, Kernel, MatmulParams, RmsNormParams, RopeMode, RopeParams, WeightFormat,
};
use support::{assert_bits, case, gpu, run_matmul, Case, Rng};

const K: usize = 128;

#[allow(clippy::too_many_arguments)]
/// Runs generated module `g` over `c`'s packed rows with `params`, binding x as a 64 KiB uniform
/// window and `extra` after the weights; `outs` are read back afterwards.
fn run_generated(
    gpu: &Gpu,
    g: &Generated,
    c: &Case,
    x: &[f32],
    params: &MatmulParams,
    y: &wgpu::Buffer,
    extra: &[&wgpu::Buffer],
    groups: u32,
    layout: Layout,
) {
    let mut xp = x.to_vec();
    xp.resize(kernels::UNIFORM_X_ELEMENTS, 0.0);
    let xb = gpu.upload_f32("x", &xp).expect("x");
    let bytes = match layout {
        Layout::Rows => c.packed.clone(),
        Layout::Interleaved => {
            let row_bytes = c.format.packed_len(1, c.k).expect("row bytes");
            kernels::unrolled::interleave(row_bytes, &c.packed)
        }
    };
    let wb = gpu.upload("w", &bytes).expect("w");
    let pb = gpu.uniform("params", bytemuck::bytes_of(params));
    let mut binds: Vec<Bind<'_>> = vec![
        (&pb).into(),
        Bind {
            buffer: &xb,
            offset: 0,
            size: Some((kernels::UNIFORM_X_ELEMENTS * 4) as u64),
        },
        y.into(),
        (&wb).into(),
    ];
    binds.extend(extra.iter().map(|b| Bind::from(*b)));
    binds.push((&wb).into()); // the weights again, as the words the generated code loads
    let compiled = gpu.compiled_generated(g);
    let group = gpu
        .bind_group_generated(&compiled, g, &binds)
        .expect("bind group");
    let mut enc = gpu.encoder("fused");
    {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        gpu.dispatch_in(&mut pass, &compiled, &group, (groups, 1, 1));
    }
    gpu.submit(enc.finish());
}

/// `activation.wgsl`'s SwiGLU of `gate` and `up` on the device, clamped at `limit` when given.
fn swiglu_kernel(g: &Gpu, gate: &[f32], up: &[f32], limit: Option<f32>) -> Vec<f32> {
    let n = gate.len();
    let (ab, bb) = (
        g.upload_f32("gate", gate).expect("gate"),
        g.upload_f32("up", up).expect("up"),
    );
    let out = g.zeros("swiglu", (n * 4) as u64).expect("out");
    let groups = elementwise_groups(n as u32);
    let p = ActivationParams::new(n as u32, groups.0);
    let p = limit.map_or(p, |l| p.with_limit(l));
    g.dispatch(
        Kernel::Swiglu,
        &p,
        &[(&ab).into(), (&bb).into(), (&out).into()],
        groups,
    )
    .expect("swiglu");
    g.read_f32(&out, n).expect("read")
}

#[allow(clippy::too_many_arguments)]
/// RoPE (`rope.wgsl`) of `heads` heads at `v_offset` of `v`, table row `pos`, on the device.
fn rope(
    g: &Gpu,
    v: &[f32],
    table: &wgpu::Buffer,
    heads: usize,
    hd: usize,
    mode: RopeMode,
    pos: usize,
    v_offset: usize,
) -> Vec<f32> {
    let vb = g.upload_f32("v", v).expect("v");
    let groups = elementwise_groups((heads * hd / 2) as u32);
    let p = RopeParams {
        tokens: 1,
        n_heads: heads as u32,
        head_dim: hd as u32,
        rot_dim: hd as u32,
        mode: mode as u32,
        groups_x: groups.0,
        table_row0: pos as u32,
        v_offset: v_offset as u32,
    };
    g.dispatch(Kernel::Rope, &p, &[(&vb).into(), table.into()], groups)
        .expect("rope");
    g.read_f32(&vb, v.len()).expect("read")
}

const EPS: f32 = 1e-5;

/// `raw` RMS-normalised by `rmsnorm.wgsl` with weights `w` (the separate kernel a fused norm
/// replaces).
fn rmsnorm(g: &Gpu, raw: &[f32], w: &wgpu::Buffer) -> Vec<f32> {
    let xb = g.upload_f32("raw", raw).expect("raw");
    let yb = g.zeros("normed", (raw.len() * 4) as u64).expect("normed");
    let p = RmsNormParams {
        n: raw.len() as u32,
        tokens: 1,
        eps: EPS,
        groups_x: 1,
    };
    g.dispatch(
        Kernel::RmsNorm,
        &p,
        &[(&xb).into(), w.into(), (&yb).into()],
        (1, 1, 1),
    )
    .expect("rmsnorm");
    g.read_f32(&yb, raw.len()).expect("read")
}

/// The formats the fused one-token modules are checked for, each with a K it allows (a K-quant's
/// is whole 256-element super-blocks).
const FUSED_FORMATS: [(WeightFormat, usize); 7] = [
    (WeightFormat::Q4_1, K),
    (WeightFormat::Q8_0, K),
    (WeightFormat::Q4_0, K),
    (WeightFormat::Q5_0, K),
    (WeightFormat::Q4K, 256),
    (WeightFormat::Q6K, 256),
    (WeightFormat::Q6K, 512),
];

/// The input of a case: raw values, their norm weights, and the normalised input.
fn normed_input(g: &Gpu, rng: &mut Rng, k: usize) -> (Vec<f32>, wgpu::Buffer, Vec<f32>) {
    let raw = rng.normals(k, 3.0);
    let w: Vec<f32> = rng.normals(k, 1.0);
    let wb = g.upload_f32("norm weights", &w).expect("norm weights");
    let x = rmsnorm(g, &raw, &wb);
    (raw, wb, x)
}

#[test]
fn qkv_rope_gives_the_bits_of_separate_kernels() {
    let Some(g) = gpu("qkv_rope_gives_the_bits_of_separate_kernels") else {
        return;
    };
    let mut rng = Rng(43);
    let (hd, nq, nkv, capacity, pos) = (16, 64, 32, 8, 5);
    let table = reference::rope_table(&(0..capacity as u32).collect::<Vec<_>>(), hd, 10000.0);
    let tb = g.upload_f32("table", &table).expect("table");
    for (format, k) in FUSED_FORMATS {
        for mode in [RopeMode::Interleaved, RopeMode::HalfSplit] {
            let c = case(format, nq + 2 * nkv, k, 1, &mut rng);
            let (raw, nw, x) = normed_input(g, &mut rng, k);
            // separate: one matvec over the combined rows, then RoPE of Q and of K in the cache
            let y = run_matmul(g, &c, &x, 1, &[0, c.rows]);
            let q_want = rope(g, &y[..nq], &tb, nq / hd, hd, mode, pos, 0);
            let mut kc = vec![0f32; capacity * nkv];
            kc[pos * nkv..(pos + 1) * nkv].copy_from_slice(&y[nq..nq + nkv]);
            let k_want = rope(g, &kc, &tb, nkv / hd, hd, mode, pos, pos * nkv);
            let v_want = &y[nq + nkv..];
            // fused
            let l = QkvLayout {
                n_q: nq,
                n_kv: nkv,
                head_dim: hd,
                rope: mode,
            };
            let pairs = (nq + 2 * nkv) / 2;
            let mut p = format.params(pairs as u32, k as u32, 1, 0, (pos * nkv) as u32);
            p.position = pos as u32;
            let layouts = [Layout::Rows, Layout::Interleaved];
            for (norm, layout) in [None, Some(InputNorm { eps: EPS })]
                .into_iter()
                .flat_map(|n| layouts.map(|l| (n, l)))
            {
                let Some(module) = qkv_rope(format.matvec_kernel(), k, &l, norm, layout) else {
                    // (a row that ends mid-word has no `Rows` module: one 210-byte Q6_K row)
                    let row = format.packed_len(1, k).expect("row");
                    assert!(layout == Layout::Rows && row % 4 != 0);
                    continue;
                };
                let qb = g.zeros("q", (nq * 4) as u64).expect("q");
                let kb = g.zeros("k cache", (capacity * nkv * 4) as u64).expect("k");
                let vb = g.zeros("v cache", (capacity * nkv * 4) as u64).expect("v");
                let (input, extra) = match norm {
                    None => (&x, vec![&kb, &vb, &tb]),
                    Some(_) => (&raw, vec![&kb, &vb, &tb, &nw]),
                };
                let groups = pairs.div_ceil(64) as u32;
                run_generated(g, &module, &c, input, &p, &qb, &extra, groups, layout);
                let what = format!("{} {mode:?} norm {} {layout:?}", c.name, norm.is_some());
                assert_bits(
                    &format!("{what} q"),
                    &g.read_f32(&qb, nq).expect("q"),
                    &q_want,
                );
                let k_got = g.read_f32(&kb, capacity * nkv).expect("k");
                assert_bits(&format!("{what} k"), &k_got, &k_want);
                let v_got = g.read_f32(&vb, capacity * nkv).expect("v");
                assert_bits(
                    &format!("{what} v"),
                    &v_got[pos * nkv..(pos + 1) * nkv],
                    v_want,
                );
            }
        }
    }
}

#[test]
fn gate_up_gives_the_bits_of_separate_kernels() {
    let Some(g) = gpu("gate_up_gives_the_bits_of_separate_kernels") else {
        return;
    };
    let mut rng = Rng(47);
    let ffn = 96;
    for (format, k) in FUSED_FORMATS {
        let c = case(format, 2 * ffn, k, 1, &mut rng);
        let (raw, nw, x) = normed_input(g, &mut rng, k);
        let y = run_matmul(g, &c, &x, 1, &[0, c.rows]);
        let want = swiglu_kernel(g, &y[..ffn], &y[ffn..], None);
        let p = format.params(ffn as u32, k as u32, 1, 0, 0);
        let layouts = [Layout::Rows, Layout::Interleaved];
        for (norm, layout) in [None, Some(InputNorm { eps: EPS })]
            .into_iter()
            .flat_map(|n| layouts.map(|l| (n, l)))
        {
            let Some(module) = gate_up(format.matvec_kernel(), k, ffn, norm, layout) else {
                // (a row that ends mid-word has no `Rows` module: one 210-byte Q6_K row)
                assert!(layout == Layout::Rows && format.packed_len(1, k).expect("row") % 4 != 0);
                continue;
            };
            let yb = g.zeros("act", (ffn * 4) as u64).expect("act");
            let (input, extra) = match norm {
                None => (&x, vec![]),
                Some(_) => (&raw, vec![&nw]),
            };
            run_generated(
                g,
                &module,
                &c,
                input,
                &p,
                &yb,
                &extra,
                ffn.div_ceil(64) as u32,
                layout,
            );
            let what = format!("{} norm {} {layout:?}", c.name, norm.is_some());
            assert_bits(&what, &g.read_f32(&yb, ffn).expect("act"), &want);
        }
    }
}

/// DeepSeek V4's MLP (`gate_up_clamped`): the fused module over the row-scoped formats the V4
/// experts use (the scales a grid of their own, read for row ffn + u of the combined matrix)
/// gives the bits of the two products and `activation.wgsl` with its clamp, which binds on both
/// sides (the limit is the median |output|).
#[test]
fn gate_up_clamped_gives_the_bits_of_separate_kernels_and_the_clamped_swiglu() {
    let Some(g) = gpu("gate_up_clamped_gives_the_bits_of_separate_kernels_and_the_clamped_swiglu")
    else {
        return;
    };
    let mut rng = Rng(53);
    for (format, ffn) in [
        (
            WeightFormat::Fp8Block {
                block_rows: 32,
                group: 64,
            },
            64,
        ),
        (WeightFormat::Mxfp4, 48),
    ] {
        let c = case(format, 2 * ffn, K, 1, &mut rng);
        let x = rng.normals(K, 1.0);
        let y = run_matmul(g, &c, &x, 1, &[0, c.rows]);
        let mut mags: Vec<f32> = y.iter().map(|v| v.abs()).collect();
        mags.sort_by(f32::total_cmp);
        let limit = mags[mags.len() / 2];
        assert!(y[..ffn].iter().any(|&v| v > limit) && y[ffn..].iter().any(|&v| v < -limit));
        let want = swiglu_kernel(g, &y[..ffn], &y[ffn..], Some(limit));
        let module = gate_up_clamped(format, K, ffn, limit).expect("a module");
        let sb = g.upload("scales", &c.scales).expect("scales");
        let yb = g.zeros("act", (ffn * 4) as u64).expect("act");
        let p = format.params(ffn as u32, K as u32, 1, 0, 0);
        let wg = ffn.div_ceil(64) as u32;
        run_generated(g, &module, &c, &x, &p, &yb, &[&sb], wg, Layout::Rows);
        assert_bits(&c.name, &g.read_f32(&yb, ffn).expect("act"), &want);
    }
    // an fp8 gate whose rows end inside a scale block cannot share the grid with the up rows
    let fp8 = WeightFormat::Fp8Block {
        block_rows: 32,
        group: 64,
    };
    assert!(gate_up_clamped(fp8, K, 48, 10.0).is_none());
    assert!(gate_up_clamped(WeightFormat::Mxfp4, K, 48, 0.0).is_none());
}
