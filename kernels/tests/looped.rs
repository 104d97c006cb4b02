//! One-token modules on a GPU's mapping (docs/kernels.md "One-token modules on a GPU
//! mapping"): `kernels::looped::{gate_up_clamped, matvec_by_index}` on a `Lanes` device give
//! the bits of the looped `matvec` over the (picked) matrix, and the fused gate/up the bits of
//! the two products followed by `activation.wgsl`'s clamped SwiGLU, for the V4 expert formats,
//! a GGUF one and bf16; an id past the stack reads the last matrix.

use crate::support;

use kernels::generated::Generated;
use kernels::gpu::{elementwise_groups, matmul_launch, Bind, Gpu, MatvecShape};
use kernels::looped::{gate_up_clamped, matvec_by_index};
use kernels::{ActivationParams, Dtype, Kernel, MatmulParams, WeightFormat};
use support::{assert_bits, case, gpu, run_matmul, Case, Rng};

const K: usize = 256;

const FORMATS: [WeightFormat; 4] = [
    WeightFormat::Mxfp4,
    WeightFormat::Fp8Block {
        block_rows: 32,
        group: 64,
    },
    WeightFormat::Q4_1,
    WeightFormat::Plain(Dtype::Bf16),
];

/// A device with the GPU row mapping (`Lanes`) on the test adapter.
fn lanes(test: &str) -> Option<Gpu> {
    gpu(test)?;
    Some(Gpu::new_with_shape(Some(MatvecShape::Lanes)).expect("a Lanes device"))
}

/// Runs `module` over the weights of `c` (packed, then scales where the format has them) with
/// `params`, the input in a storage buffer, `picks` last when given; returns `rows` outputs.
fn run(
    g: &Gpu,
    module: &Generated,
    c: &Case,
    picks: Option<&wgpu::Buffer>,
    x: &[f32],
    params: &MatmulParams,
    rows: usize,
) -> Vec<f32> {
    let mut params = *params;
    let groups = matmul_launch(MatvecShape::Lanes, c.format.matvec_kernel(), &mut params);
    let xb = g.upload_f32("x", x).expect("x");
    let yb = g.zeros("y", (rows * 4) as u64).expect("y");
    let wb = g.upload("w", &c.packed).expect("w");
    let sb = g.upload("scales", &c.scales).expect("scales");
    let pb = g.uniform("params", bytemuck::bytes_of(&params));
    let mut binds: Vec<Bind<'_>> = vec![(&pb).into(), (&xb).into(), (&yb).into(), (&wb).into()];
    if c.format.matvec_kernel().storage().len() > 3 {
        binds.push((&sb).into());
    }
    binds.extend(picks.map(Bind::from));
    let compiled = g.compiled_generated(module);
    let group = g
        .bind_group_generated(&compiled, module, &binds)
        .expect("bind group");
    let mut enc = g.encoder("looped");
    {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        g.dispatch_in(&mut pass, &compiled, &group, groups);
    }
    g.submit(enc.finish());
    g.read_f32(&yb, rows).expect("read y")
}

/// `n` matrices of `rows` rows of `format` and their stack as one case.
fn stack(format: WeightFormat, rows: usize, n: usize, rng: &mut Rng) -> (Vec<Case>, Case) {
    let cases: Vec<Case> = (0..n).map(|_| case(format, rows, K, 1, rng)).collect();
    let mut all = case(format, rows * n, K, 1, rng);
    all.packed = cases.iter().flat_map(|c| c.packed.clone()).collect();
    all.scales = cases.iter().flat_map(|c| c.scales.clone()).collect();
    (cases, all)
}

/// `activation.wgsl`'s clamped SwiGLU of `gate` and `up` on `g`.
fn swiglu(g: &Gpu, gate: &[f32], up: &[f32], limit: f32) -> Vec<f32> {
    let n = gate.len();
    let groups = elementwise_groups(n as u32);
    let p = ActivationParams::new(n as u32, groups.0).with_limit(limit);
    let (a, b) = (
        g.upload_f32("gate", gate).expect("gate"),
        g.upload_f32("up", up).expect("up"),
    );
    let y = g.zeros("act", (n * 4) as u64).expect("act");
    g.dispatch(
        Kernel::Swiglu,
        &p,
        &[(&a).into(), (&b).into(), (&y).into()],
        groups,
    )
    .expect("swiglu");
    g.read_f32(&y, n).expect("read act")
}

#[test]
fn a_lanes_gate_up_gives_the_bits_of_its_products_and_the_activation() {
    let Some(g) = lanes("a_lanes_gate_up_gives_the_bits_of_its_products_and_the_activation") else {
        return;
    };
    let mut rng = Rng(81);
    let (n, ffn, limit) = (3, 64, 0.75f32);
    for format in FORMATS {
        let (cases, all) = stack(format, 2 * ffn, n, &mut rng);
        // large enough that the clamp bites on some rows
        let x = rng.normals(K, 4.0);
        let plain = gate_up_clamped(format, ffn, limit, None).expect("a module");
        let indexed = gate_up_clamped(format, ffn, limit, Some(n)).expect("a module");
        assert_ne!(plain.label, indexed.label);
        let picks = g
            .upload("picks", bytemuck::cast_slice(&[2u32, 0, 7]))
            .expect("picks");
        for (slot, m) in [(0u32, 2usize), (1, 0), (2, n - 1)] {
            let c = &cases[m];
            let both = run_matmul(&g, c, &x, 1, &[0, 2 * ffn]);
            let want = swiglu(&g, &both[..ffn], &both[ffn..], limit);
            assert!(want.iter().any(|v| v.abs() > 0.0));
            let p = format.params(ffn as u32, K as u32, 1, 0, 0);
            assert_bits(
                &format!("{} fused", c.name),
                &run(&g, &plain, c, None, &x, &p, ffn),
                &want,
            );
            let p = MatmulParams {
                position: slot,
                ..p
            };
            let got = run(&g, &indexed, &all, Some(&picks), &x, &p, ffn);
            assert_bits(&format!("{} slot {slot}", c.name), &got, &want);
        }
    }
    // no module for a limit that is not a positive finite f32, or fp8 rows off a scale block
    assert!(gate_up_clamped(WeightFormat::Mxfp4, 64, 0.0, None).is_none());
    let fp8 = WeightFormat::Fp8Block {
        block_rows: 32,
        group: 64,
    };
    assert!(gate_up_clamped(fp8, 48, 1.0, None).is_none());
}

#[test]
fn a_lanes_indexed_matvec_gives_the_bits_of_the_picked_matrix_alone() {
    let Some(g) = lanes("a_lanes_indexed_matvec_gives_the_bits_of_the_picked_matrix_alone") else {
        return;
    };
    let mut rng = Rng(82);
    let (n, rows) = (4, 96);
    for format in FORMATS {
        let (cases, all) = stack(format, rows, n, &mut rng);
        let x = rng.normals(K, 1.0);
        let module = matvec_by_index(format, rows, n).expect("an indexed module");
        let picks = g
            .upload("picks", bytemuck::cast_slice(&[3u32, 1, 9]))
            .expect("picks");
        for (slot, m) in [(0u32, 3usize), (1, 1), (2, n - 1)] {
            let c = &cases[m];
            let want = run_matmul(&g, c, &x, 1, &[0, rows]);
            let p = format.params(rows as u32, K as u32, 1, rows as u32, 0);
            let p = MatmulParams {
                position: slot,
                ..p
            };
            let got = run(&g, &module, &all, Some(&picks), &x, &p, rows);
            assert_bits(&format!("{} slot {slot}", c.name), &got, &want);
        }
    }
    assert!(matvec_by_index(WeightFormat::Mxfp4, 96, 0).is_none());
}
