//! Experts by index (docs/kernels.md "Experts by index"): the expert-indexed one-token modules
//! (`kernels::unrolled::{source_by_index, gate_up_clamped_by_index}`) over a stack of matrices
//! in one buffer give, for each pick slot, the bits of the plain module over the picked matrix
//! alone, for the V4 expert formats; an id past the stack reads the last matrix.

use crate::support;

use kernels::generated::Generated;
use kernels::gpu::{Bind, Gpu};
use kernels::unrolled::{
    gate_up_clamped, gate_up_clamped_by_index, launch_for, source_by_index, source_for, Layout,
};
use kernels::{MatmulParams, WeightFormat};
use support::{assert_bits, case, gpu, Case, Rng};

const K: usize = 256;

/// Runs `module` over weights `packed` / `scales` with `params`, the input in a uniform window,
/// `picks` bound ahead of the weight words when given; returns `rows` outputs.
#[allow(clippy::too_many_arguments)]
fn run(
    g: &Gpu,
    module: &Generated,
    packed: &[u8],
    scales: &[u8],
    picks: Option<&wgpu::Buffer>,
    x: &[f32],
    params: &MatmulParams,
    groups: (u32, u32, u32),
    rows: usize,
) -> Vec<f32> {
    let mut xp = x.to_vec();
    xp.resize(kernels::UNIFORM_X_ELEMENTS, 0.0);
    let xb = g.upload_f32("x", &xp).expect("x");
    let yb = g.zeros("y", (rows * 4) as u64).expect("y");
    let wb = g.upload("w", packed).expect("w");
    let sb = g.upload("scales", scales).expect("scales");
    let pb = g.uniform("params", bytemuck::bytes_of(params));
    let mut binds: Vec<Bind<'_>> = vec![
        (&pb).into(),
        Bind {
            buffer: &xb,
            offset: 0,
            size: Some((kernels::UNIFORM_X_ELEMENTS * 4) as u64),
        },
        (&yb).into(),
        (&wb).into(),
        (&sb).into(),
    ];
    binds.extend(picks.map(Bind::from));
    binds.push((&wb).into());
    let compiled = g.compiled_generated(module);
    let group = g
        .bind_group_generated(&compiled, module, &binds)
        .expect("bind group");
    let mut enc = g.encoder("by index");
    {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        g.dispatch_in(&mut pass, &compiled, &group, groups);
    }
    g.submit(enc.finish());
    g.read_f32(&yb, rows).expect("read y")
}

/// `n` matrices of `rows` rows of `format` and their stack (packed, then scales, one after the
/// other).
fn stack(format: WeightFormat, rows: usize, n: usize, rng: &mut Rng) -> (Vec<Case>, [Vec<u8>; 2]) {
    let cases: Vec<Case> = (0..n).map(|_| case(format, rows, K, 1, rng)).collect();
    let packed = cases.iter().flat_map(|c| c.packed.clone()).collect();
    let scales = cases.iter().flat_map(|c| c.scales.clone()).collect();
    (cases, [packed, scales])
}

const FORMATS: [WeightFormat; 2] = [
    WeightFormat::Mxfp4,
    WeightFormat::Fp8Block {
        block_rows: 32,
        group: 64,
    },
];

#[test]
fn an_indexed_matvec_gives_the_bits_of_the_picked_matrix_alone() {
    let Some(g) = gpu("an_indexed_matvec_gives_the_bits_of_the_picked_matrix_alone") else {
        return;
    };
    let mut rng = Rng(71);
    let (n, rows) = (3, 96);
    for format in FORMATS {
        let (cases, [packed, scales]) = stack(format, rows, n, &mut rng);
        let x = rng.normals(K, 1.0);
        let module = source_by_index(format, K, rows, n).expect("an indexed module");
        let plain = source_for(format, K, rows, Layout::Rows).expect("a module");
        // picks 2 and 0, then an id past the stack (the last matrix)
        let picks = g
            .upload("picks", bytemuck::cast_slice(&[2u32, 0, 9]))
            .expect("picks");
        for (slot, want_matrix) in [(0u32, 2usize), (1, 0), (2, n - 1)] {
            let mut p = format.params(rows as u32, K as u32, 1, rows as u32, 0);
            let groups = launch_for(format, K, &mut p);
            let c = &cases[want_matrix];
            let want = run(g, &plain, &c.packed, &c.scales, None, &x, &p, groups, rows);
            p.position = slot;
            let got = run(
                g,
                &module,
                &packed,
                &scales,
                Some(&picks),
                &x,
                &p,
                groups,
                rows,
            );
            assert_bits(&format!("{} slot {slot}", c.name), &got, &want);
        }
    }
    // an empty stack has no indexed module
    assert!(source_by_index(WeightFormat::Mxfp4, K, 96, 0).is_none());
}

#[test]
fn an_indexed_gate_up_gives_the_bits_of_the_picked_mlp_alone() {
    let Some(g) = gpu("an_indexed_gate_up_gives_the_bits_of_the_picked_mlp_alone") else {
        return;
    };
    let mut rng = Rng(72);
    let (n, ffn, limit) = (4, 64, 1.5f32);
    for format in FORMATS {
        let (cases, [packed, scales]) = stack(format, 2 * ffn, n, &mut rng);
        let x = rng.normals(K, 1.0);
        let module = gate_up_clamped_by_index(format, K, ffn, limit, n).expect("a module");
        let plain = gate_up_clamped(format, K, ffn, limit).expect("a module");
        assert_ne!(module.label, plain.label);
        let picks = g
            .upload("picks", bytemuck::cast_slice(&[3u32, 1]))
            .expect("picks");
        for (slot, m) in [(0u32, 3usize), (1, 1)] {
            let mut p = format.params(ffn as u32, K as u32, 1, 0, 0);
            let groups = (ffn.div_ceil(64) as u32, 1, 1);
            let c = &cases[m];
            let want = run(g, &plain, &c.packed, &c.scales, None, &x, &p, groups, ffn);
            p.position = slot;
            let got = run(
                g,
                &module,
                &packed,
                &scales,
                Some(&picks),
                &x,
                &p,
                groups,
                ffn,
            );
            assert_bits(&format!("{} slot {slot}", c.name), &got, &want);
        }
    }
}
