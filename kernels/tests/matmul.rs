//! GPU-vs-CPU tests of every dequantize-and-multiply family (docs/kernels.md): the CPU reference
//! within the matmul tolerance, and bit-identity of a row-split (streamed) dispatch with the whole
//! matrix (resident), of the two row mappings, of the uniform-x matvec, and of the fused residual
//! add with a host add; plus the streaming-read kernel.
//!
//! With no adapter these tests fail when `MINIRUN_REQUIRE_ADAPTER=1` (CI); otherwise each prints a
//! visible `SKIPPED` line on stderr and returns.

#![allow(clippy::panic)] // a test reports failure by panicking

use crate::support;

use kernels::gpu::{matmul_launch, Bind, Gpu, MatvecShape};
use kernels::reference::{self, WeightMatrix};
use kernels::unrolled::Layout;
use kernels::Kernel;
use support::{all_cases, assert_bits, assert_close, gpu, run_matmul, run_matmul_into, Case, Rng};

/// Matmul families: |gpu − cpu| ≤ MATMUL_REL · Σ_k |w·x| of the row (covers an adapter that does
/// not fuse `fma`; docs/kernels.md §tolerances).
const MATMUL_REL: f32 = 1e-6;

#[test]
fn matvec_and_matmul_match_the_cpu_reference() {
    let Some(g) = gpu("matvec_and_matmul_match_the_cpu_reference") else {
        return;
    };
    let mut rng = Rng(7);
    for c in all_cases() {
        let w = WeightMatrix::new(c.format, c.rows, c.k, &c.packed, &c.scales, &c.biases)
            .expect("case is well formed");
        let tokens = 5;
        let x = rng.normals(tokens * c.k, 1.0);
        let dense = w.dequantize();
        let scale_of = |t: usize, r: usize| -> f32 {
            (0..c.k)
                .map(|k| (dense[r * c.k + k] * x[t * c.k + k]).abs())
                .sum()
        };
        let want1 = reference::matvec(&w, &x[..c.k]).expect("reference");
        let got1 = run_matmul(g, &c, &x[..c.k], 1, &[0, c.rows]);
        assert_close(&format!("matvec {}", c.name), &got1, &want1, |r| {
            MATMUL_REL * scale_of(0, r)
        });
        let want = reference::matmul(&w, &x, tokens).expect("reference");
        let got = run_matmul(g, &c, &x, tokens, &[0, c.rows]);
        assert_close(&format!("matmul {}", c.name), &got, &want, |i| {
            MATMUL_REL * scale_of(i / c.rows, i % c.rows)
        });
        // per token, the prefill kernel gives the decode kernel's bits
        assert_bits(
            &format!("matmul token 0 vs matvec {}", c.name),
            &got[..c.rows],
            &got1,
        );
    }
}

#[test]
fn row_split_dispatch_is_bit_identical_to_whole_matrix() {
    let Some(g) = gpu("row_split_dispatch_is_bit_identical_to_whole_matrix") else {
        return;
    };
    let mut rng = Rng(11);
    for c in all_cases() {
        for tokens in [1, 6] {
            let x = rng.normals(tokens * c.k, 1.0);
            let whole = run_matmul(g, &c, &x, tokens, &[0, c.rows]);
            let split = run_matmul(g, &c, &x, tokens, &[0, c.split, c.rows]);
            assert_bits(
                &format!("{} tokens={tokens} split at {}", c.name, c.split),
                &split,
                &whole,
            );
        }
    }
}

/// A second device whose matmul kernels use the other row mapping than the shared one.
fn other_shape(g: &Gpu) -> Gpu {
    let other = match g.matvec_shape() {
        MatvecShape::Lanes => MatvecShape::Rows,
        MatvecShape::Rows => MatvecShape::Lanes,
    };
    Gpu::new_with_shape(Some(other)).expect("a second device on the same adapter")
}

#[test]
fn both_matvec_shapes_give_the_same_bits() {
    let Some(g) = gpu("both_matvec_shapes_give_the_same_bits") else {
        return;
    };
    let h = other_shape(g);
    let mut rng = Rng(13);
    for c in all_cases() {
        for tokens in [1, 6] {
            let x = rng.normals(tokens * c.k, 1.0);
            let a = run_matmul(g, &c, &x, tokens, &[0, c.split, c.rows]);
            let b = run_matmul(&h, &c, &x, tokens, &[0, c.rows]);
            assert_bits(
                &format!(
                    "{} tokens={tokens}: {:?} vs {:?}",
                    c.name,
                    g.matvec_shape(),
                    h.matvec_shape()
                ),
                &a,
                &b,
            );
        }
    }
}

/// The subgroup reduction of the `Lanes` kernels (docs/kernels.md "Subgroup reduction"), forced
/// on where the adapter has subgroups (lavapipe: subgroups of 8 lanes): every family within the
/// CPU reference's tolerance, a row-split (streamed) dispatch the whole matrix's bits, per token
/// the prefill kernel the decode kernel's bits; and it really is another reduction (some output's
/// bits differ from the LANES fold's). A CPU adapter keeps it off unless forced.
#[test]
fn the_subgroup_reduction_is_within_the_reference_and_streams_bit_identically() {
    let Some(base) =
        gpu("the_subgroup_reduction_is_within_the_reference_and_streams_bit_identically")
    else {
        return;
    };
    let cpu = base
        .adapter_info()
        .is_some_and(|i| i.device_type == wgpu::DeviceType::Cpu);
    let lanes = Gpu::new_with(Some(MatvecShape::Lanes), Some(false)).expect("a Lanes device");
    let g = match Gpu::new_with(Some(MatvecShape::Lanes), Some(true)) {
        Ok(g) => g,
        Err(kernels::KernelError::NoSubgroups(name)) => {
            eprintln!("SKIPPED the subgroup reduction: {name} has no subgroups");
            return;
        }
        Err(e) => panic!("a subgroup device: {e}"),
    };
    assert!(g.subgroups() && !lanes.subgroups());
    if cpu {
        let default = Gpu::new_with(Some(MatvecShape::Lanes), None).expect("a Lanes device");
        assert!(
            !default.subgroups(),
            "a CPU adapter keeps the LANES fold unless forced"
        );
    }
    let mut rng = Rng(17);
    let mut differs = 0usize;
    for c in all_cases() {
        let w = WeightMatrix::new(c.format, c.rows, c.k, &c.packed, &c.scales, &c.biases)
            .expect("case is well formed");
        let dense = w.dequantize();
        let tokens = 6;
        let x = rng.normals(tokens * c.k, 1.0);
        let scale_of = |t: usize, r: usize| -> f32 {
            (0..c.k)
                .map(|k| (dense[r * c.k + k] * x[t * c.k + k]).abs())
                .sum()
        };
        let want1 = reference::matvec(&w, &x[..c.k]).expect("reference");
        let got1 = run_matmul(&g, &c, &x[..c.k], 1, &[0, c.rows]);
        assert_close(&format!("subgroup matvec {}", c.name), &got1, &want1, |r| {
            MATMUL_REL * scale_of(0, r)
        });
        let want = reference::matmul(&w, &x, tokens).expect("reference");
        let got = run_matmul(&g, &c, &x, tokens, &[0, c.rows]);
        assert_close(&format!("subgroup matmul {}", c.name), &got, &want, |i| {
            MATMUL_REL * scale_of(i / c.rows, i % c.rows)
        });
        assert_bits(
            &format!("subgroup matmul token 0 vs matvec {}", c.name),
            &got[..c.rows],
            &got1,
        );
        for t in [1, tokens] {
            let xs = &x[..t * c.k];
            let whole = run_matmul(&g, &c, xs, t, &[0, c.rows]);
            let split = run_matmul(&g, &c, xs, t, &[0, c.split, c.rows]);
            assert_bits(
                &format!("subgroup {} tokens={t} split at {}", c.name, c.split),
                &split,
                &whole,
            );
        }
        let folded = run_matmul(&lanes, &c, &x[..c.k], 1, &[0, c.rows]);
        differs += got1
            .iter()
            .zip(&folded)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
    }
    assert!(
        differs > 0,
        "no output moved: the subgroup pipelines did not run"
    );
    eprintln!("subgroup reduction: {differs} matvec outputs differ from the LANES fold in their last bits");
}

/// The uniform-x pipeline of case `c`: binding 1 a 64 KiB uniform block.
fn uniform_window(g: &Gpu, x: &[f32]) -> wgpu::Buffer {
    let mut padded = x.to_vec();
    padded.resize(kernels::UNIFORM_X_ELEMENTS, 0.0);
    g.upload_f32("x", &padded).expect("x")
}

fn window(xb: &wgpu::Buffer) -> Bind<'_> {
    Bind {
        buffer: xb,
        offset: 0,
        size: Some((kernels::UNIFORM_X_ELEMENTS * 4) as u64),
    }
}

/// One matvec of case `c` through the looped kernel with a uniform input.
fn run_matvec_uniform_x(g: &Gpu, c: &Case, x: &[f32]) -> Vec<f32> {
    let kernel = c.format.matvec_kernel();
    let compiled = g.compiled_uniform_x(kernel).expect("a matmul kernel");
    let xb = uniform_window(g, x);
    let yb = g.zeros("y", (c.rows * 4) as u64).expect("y");
    let buf = |b: &[u8]| g.upload("w", b).expect("w");
    let (pb, sb, bb) = (buf(&c.packed), buf(&c.scales), buf(&c.biases));
    let mut binds = vec![window(&xb), Bind::from(&yb), Bind::from(&pb)];
    if c.format.buffer_count() >= 2 {
        binds.push(Bind::from(&sb));
    }
    if c.format.buffer_count() >= 3 {
        binds.push(Bind::from(&bb));
    }
    let mut params = c
        .format
        .params(c.rows as u32, c.k as u32, 1, c.rows as u32, 0);
    let groups = matmul_launch(g.matvec_shape(), kernel, &mut params);
    let ub = g.uniform("params", bytemuck::bytes_of(&params));
    let group = g
        .bind_group_for(&compiled, kernel, &ub.as_entire_binding(), &binds)
        .expect("bind group");
    let mut enc = g.encoder("uniform x");
    {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        g.dispatch_in(&mut pass, &compiled, &group, groups);
    }
    g.submit(enc.finish());
    g.read_f32(&yb, c.rows).expect("read y")
}

/// One matvec of case `c` through its unrolled module (kernels::unrolled), `None` without one;
/// rows `r0..r1` only when given (a streamed tile: its own buffer and y offset).
fn run_matvec_unrolled(
    g: &Gpu,
    c: &Case,
    x: &[f32],
    rows: Option<(usize, usize)>,
    layout: Layout,
) -> Option<Vec<f32>> {
    let (r0, r1) = rows.unwrap_or((0, c.rows));
    let module = kernels::unrolled::source_for(c.format, c.k, r1 - r0, layout)?;
    let [p, s, b] = c.format.row_ranges(c.k, r0, r1).expect("row ranges");
    let xb = uniform_window(g, x);
    let yb = g.zeros("y", (c.rows * 4) as u64).expect("y");
    let bytes = match layout {
        Layout::Rows => c.packed[p].to_vec(),
        Layout::Interleaved => {
            let row_bytes = c.format.packed_len(1, c.k).expect("row bytes");
            kernels::unrolled::interleave(row_bytes, &c.packed[p])
        }
    };
    let wb = g.upload("w", &bytes).expect("w");
    let mut params = c
        .format
        .params((r1 - r0) as u32, c.k as u32, 1, c.rows as u32, r0 as u32);
    let groups = kernels::unrolled::launch_for(c.format, c.k, &mut params);
    let ub = g.uniform("params", bytemuck::bytes_of(&params));
    // scales and biases where the format keeps them apart from the rows (fp8-e4m3-block)
    let extra: Vec<wgpu::Buffer> = [&c.scales[s], &c.biases[b]]
        .into_iter()
        .take(c.format.buffer_count() - 1)
        .map(|bytes| g.upload("scales", bytes).expect("scales"))
        .collect();
    let mut binds: Vec<kernels::gpu::Bind<'_>> =
        vec![(&ub).into(), window(&xb), (&yb).into(), (&wb).into()];
    binds.extend(extra.iter().map(kernels::gpu::Bind::from));
    binds.push((&wb).into());
    let compiled = g.compiled_generated(&module);
    let group = g
        .bind_group_generated(&compiled, &module, &binds)
        .expect("bind group");
    let mut enc = g.encoder("unrolled");
    {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        g.dispatch_in(&mut pass, &compiled, &group, groups);
    }
    g.submit(enc.finish());
    let y = g.read_f32(&yb, c.rows).expect("read y");
    Some(y[r0..r1].to_vec())
}

#[test]
fn uniform_x_matvec_gives_the_same_bits() {
    let Some(g) = gpu("uniform_x_matvec_gives_the_same_bits") else {
        return;
    };
    let h = other_shape(g);
    let mut rng = Rng(23);
    for c in all_cases() {
        let x = rng.normals(c.k, 1.0);
        let want = run_matmul(g, &c, &x, 1, &[0, c.rows]);
        for dev in [g, &h] {
            let got = run_matvec_uniform_x(dev, &c, &x);
            assert_bits(
                &format!("{} uniform x ({:?})", c.name, dev.matvec_shape()),
                &got,
                &want,
            );
        }
    }
}

/// Rows long enough that every lane partial sums several chunks (the shapes where straight-line
/// code could be reassociated across chunks; kernels::unrolled guards against it).
fn long_row_cases() -> Vec<Case> {
    use kernels::{Dtype, WeightFormat};
    let mut rng = Rng(31);
    let fp8 = WeightFormat::Fp8Block {
        block_rows: 16,
        group: 32,
    };
    let affine = WeightFormat::Affine8 {
        group: 64,
        scale_dtype: Dtype::Bf16,
    };
    [
        (WeightFormat::Plain(Dtype::F32), 300),
        (WeightFormat::Plain(Dtype::Bf16), 300),
        (WeightFormat::Plain(Dtype::F16), 300),
        (fp8, 320),
        (affine, 320),
        (WeightFormat::Mxfp4, 1536),
        (WeightFormat::Q8_0, 1568),
        (WeightFormat::Q4_1, 1568),
        (WeightFormat::Q4_0, 1536),
        (WeightFormat::Q5_0, 1536),
        (WeightFormat::Q5_1, 1536),
        (WeightFormat::Q4K, 1536),
        (WeightFormat::Q5K, 1536),
        (WeightFormat::Q6K, 1536),
    ]
    .into_iter()
    .map(|(f, k)| support::case(f, 19, k, 7, &mut rng))
    .collect()
}

/// The unrolled matvec (kernels::unrolled, the one-token decode kernel on CPU adapters) performs
/// the looped kernels' order, so it gives their bits, for every format.
#[test]
fn unrolled_matvec_gives_the_same_bits() {
    let Some(g) = gpu("unrolled_matvec_gives_the_same_bits") else {
        return;
    };
    let mut rng = Rng(29);
    let mut checked = Vec::new();
    for c in all_cases().into_iter().chain(long_row_cases()) {
        let x = rng.normals(c.k, 1.0);
        let want = run_matmul(g, &c, &x, 1, &[0, c.rows]);
        for layout in [Layout::Rows, Layout::Interleaved] {
            let Some(got) = run_matvec_unrolled(g, &c, &x, None, layout) else {
                continue;
            };
            assert_bits(&format!("{} unrolled {layout:?}", c.name), &got, &want);
            // a tile of rows (odd length: the last row group is incomplete) in its own buffer,
            // where the format can start one there (fp8-e4m3-block: at a scale block's first row)
            let (r0, r1) = (c.split, (c.split + 5).min(c.rows));
            if c.format.row_ranges(c.k, r0, r1).is_err() {
                checked.push(format!("{} {layout:?}", c.name));
                continue;
            }
            let tile = run_matvec_unrolled(g, &c, &x, Some((r0, r1)), layout).expect("a module");
            let what = format!("{} unrolled tile {layout:?}", c.name);
            assert_bits(&what, &tile, &want[r0..r1]);
            checked.push(format!("{} {layout:?}", c.name));
        }
    }
    // (f16 and bf16: the long rows; the other plain cases' K = 97 is not whole 4-element blocks)
    let formats = [
        ("q4_0", 2),
        ("q5_0", 2),
        ("q5_1", 1),
        ("q4_K", 1),
        ("q5_K", 1),
        ("q6_K", 2),
        ("affine", 3),
        ("q4_1", 3),
        ("q8_0", 3),
        ("fp8", 3),
        ("mxfp4", 2),
        ("bf16", 1),
        ("f16", 1),
    ];
    for (f, cases) in formats {
        for layout in ["Rows", "Interleaved"] {
            assert!(
                checked
                    .iter()
                    .filter(|n| n.starts_with(f) && n.ends_with(layout))
                    .count()
                    >= cases,
                "{checked:?}"
            );
        }
    }
}

#[test]
fn accumulate_adds_the_product_with_one_rounding() {
    let Some(g) = gpu("accumulate_adds_the_product_with_one_rounding") else {
        return;
    };
    let h = other_shape(g);
    let mut rng = Rng(17);
    for c in all_cases() {
        for tokens in [1, 6] {
            let x = rng.normals(tokens * c.k, 1.0);
            let y0 = rng.normals(tokens * c.rows, 3.0);
            let product = run_matmul(g, &c, &x, tokens, &[0, c.rows]);
            // the host's residual add: y0 + product, one f32 rounding per element
            let want: Vec<f32> = y0.iter().zip(&product).map(|(a, b)| a + b).collect();
            for dev in [g, &h] {
                let got = run_matmul_into(dev, &c, &x, tokens, &[0, c.split, c.rows], Some(&y0));
                assert_bits(
                    &format!(
                        "{} tokens={tokens} accumulate ({:?})",
                        c.name,
                        dev.matvec_shape()
                    ),
                    &got,
                    &want,
                );
            }
        }
    }
}

#[test]
fn stream_read_touches_every_word() {
    let Some(g) = gpu("stream_read_touches_every_word") else {
        return;
    };
    let words = 4096usize;
    let mut rng = Rng(19);
    let src: Vec<u32> = (0..words).map(|_| rng.next() as u32).collect();
    let invocations = 256u32;
    let sb = g.upload_u32("src", &src).expect("upload");
    let out = g.zeros("out", u64::from(invocations) * 4).expect("out");
    let p = kernels::StreamReadParams {
        words: words as u32,
        invocations,
        groups_x: 1,
        _pad: 0,
    };
    g.dispatch(
        Kernel::StreamRead,
        &p,
        &[(&sb).into(), (&out).into()],
        (1, 1, 1),
    )
    .expect("dispatch");
    let got = g.read_u32(&out, invocations as usize).expect("read");
    // invocation i xors the vec4 words i, i + N, …: the xor of all outputs is the xor of all words
    let all = src.iter().fold(0u32, |a, w| a ^ w);
    assert_eq!(got.iter().fold(0u32, |a, w| a ^ w), all);
    let vec4 = |i: usize| src[4 * i] ^ src[4 * i + 1] ^ src[4 * i + 2] ^ src[4 * i + 3];
    let want0 = (0..words / 4)
        .step_by(invocations as usize)
        .fold(0u32, |a, i| a ^ vec4(i));
    assert_eq!(got[0], want0);
}

/// Every FP8 E4M3 code — normals, the subnormals m·2^-9, ±0 and the NaNs — decodes as the CPU
/// reference does (`reference::e4m3_to_f32`), through the looped kernel and the unrolled module:
/// row r holds code r in column 0 and zeros elsewhere, the scale is 2^0 and x is one-hot, so
/// y[r] is the decoded code itself (the sum of one product and zeros is exact; only −0 comes
/// out as +0, which `==` accepts).
#[test]
fn fp8_decodes_every_code_as_the_reference() {
    let Some(g) = gpu("fp8_decodes_every_code_as_the_reference") else {
        return;
    };
    let (rows, k) = (256, 128);
    let mut packed = vec![0u8; rows * k];
    for r in 0..rows {
        packed[r * k] = r as u8;
    }
    let c = Case {
        name: "fp8 every code".into(),
        format: kernels::WeightFormat::Fp8Block {
            block_rows: 128,
            group: 128,
        },
        rows,
        k,
        packed,
        scales: vec![127; 2],
        biases: Vec::new(),
        split: 128,
    };
    let mut x = vec![0.0f32; k];
    x[0] = 1.0;
    let looped = run_matmul(g, &c, &x, 1, &[0, rows]);
    let unrolled = run_matvec_unrolled(g, &c, &x, None, Layout::Rows).expect("a module");
    for (what, y) in [("looped", &looped), ("unrolled", &unrolled)] {
        for (code, &got) in y.iter().enumerate() {
            let want = reference::e4m3_to_f32(code as u8);
            assert!(
                got == want || (got.is_nan() && want.is_nan()),
                "{what}: code {code:#04x} decodes as {got:e}, the reference {want:e}"
            );
        }
    }
}
