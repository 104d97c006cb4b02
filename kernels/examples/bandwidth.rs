//! Read bandwidth of the adapter and of every dequantize-and-multiply kernel (issue #16 item 2;
//! ci/bench/runner.sh and ci/bench/runner_formats.sh write its table into docs/bench/).
//!
//! `cargo run --release -p kernels --example bandwidth -- [MIB] [ITERS] [K]`: a plain streaming
//! read (`Kernel::StreamRead`) over a MIB-sized buffer is the adapter's ceiling; each format's
//! matvec over a matrix of about MIB of weights (K columns, 4096 unless given; the unrolled
//! modules of 4-element blocks — `fp8-e4m3-block`, affine, bf16, f16 — exist up to K = 2048) is
//! reported as GB/s of weight
//! bytes and as a fraction of that ceiling, for both matvec shapes (`Lanes` also with the subgroup
//! reduction where the adapter has subgroups), and for the row shape with
//! its input as a uniform block, and the unrolled module where the format has one
//! (`unrolled::source_for`, what the runner uses for one-token matvecs on a CPU adapter). Each
//! figure is the median of ITERS timed submits of 8 back-to-back dispatches, after one warm-up
//! submit (which also compiles).

#![allow(clippy::unwrap_used)]

#[path = "support/timing.rs"]
mod timing;

use kernels::gpu::{matmul_launch, Bind, Gpu, MatvecShape};
use kernels::{grid_2d, Dtype, Kernel, StreamReadParams, WeightFormat};

/// Columns of the matrices (the third argument; 4096 unless given).
static K: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

fn k() -> usize {
    *K.get_or_init(|| 4096)
}
const PER_SUBMIT: usize = 8;

fn ceiling(gpu: &Gpu, bytes: usize, iters: usize) -> f64 {
    let src = gpu.upload("src", &vec![0x3cu8; bytes]).unwrap();
    let invocations = 256 * 256u32;
    let out = gpu.zeros("out", u64::from(invocations) * 4).unwrap();
    let (gx, gy) = grid_2d(invocations.div_ceil(256));
    let p = StreamReadParams {
        words: (bytes / 4) as u32,
        invocations,
        groups_x: gx,
        _pad: 0,
    };
    let s = timing::time(gpu, iters, PER_SUBMIT, |enc| {
        gpu.encode(
            enc,
            Kernel::StreamRead,
            &p,
            &[(&src).into(), (&out).into()],
            (gx, gy, 1),
        )
        .unwrap();
    });
    bytes as f64 / s / 1e9
}

/// How the matvec is run: the kernel's storage-input entry point, its uniform-input form, or the
/// unrolled module (`kernels::unrolled`, where the format has one).
#[derive(Clone, Copy, PartialEq)]
enum Form {
    Storage,
    UniformX,
    Unrolled,
}

fn matvec(
    gpu: &Gpu,
    f: WeightFormat,
    bytes: usize,
    iters: usize,
    form: Form,
) -> Option<(usize, f64)> {
    let row = f.packed_len(1, k()).unwrap() + f.scales_len(1, k()).unwrap_or(0);
    let mut rows = (bytes / row).max(1);
    if let WeightFormat::Fp8Block { block_rows, .. } = f {
        rows = rows.div_ceil(block_rows as usize) * block_rows as usize;
    }
    let buf = |n: usize| gpu.upload("w", &vec![0x3cu8; n.max(4)]).unwrap();
    let packed = buf(f.packed_len(rows, k()).unwrap());
    let scales = buf(f.scales_len(rows, k()).unwrap());
    let biases = buf(f.biases_len(rows, k()).unwrap());
    let x = gpu
        .upload_f32("x", &vec![0.5f32; kernels::UNIFORM_X_ELEMENTS.max(k())])
        .unwrap();
    let y = gpu.zeros("y", (rows * 4) as u64).unwrap();
    let kernel = f.matvec_kernel();
    let mut params = f.params(rows as u32, k() as u32, 1, rows as u32, 0);
    let groups = matmul_launch(gpu.matvec_shape(), kernel, &mut params);
    let mut binds: Vec<Bind<'_>> = vec![(&x).into(), (&y).into(), (&packed).into()];
    if f.buffer_count() >= 2 {
        binds.push((&scales).into());
    }
    if f.buffer_count() >= 3 {
        binds.push((&biases).into());
    }
    let window = Bind {
        buffer: &x,
        offset: 0,
        size: Some((kernels::UNIFORM_X_ELEMENTS * 4) as u64),
    };
    let s = if form == Form::Unrolled {
        let module = kernels::unrolled::source_for(
            f,
            k(),
            params.rows as usize,
            kernels::unrolled::Layout::Rows,
        )?;
        let groups = kernels::unrolled::launch_for(f, k(), &mut params);
        let ub = gpu.uniform("params", bytemuck::bytes_of(&params));
        let mut all = vec![(&ub).into(), window];
        all.extend_from_slice(&binds[1..]);
        all.push((&packed).into());
        let compiled = gpu.compiled_generated(&module);
        let group = gpu.bind_group_generated(&compiled, &module, &all).unwrap();
        timing::time(gpu, iters, PER_SUBMIT, |enc| {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            gpu.dispatch_in(&mut pass, &compiled, &group, groups);
        })
    } else if form == Form::UniformX {
        let compiled = gpu.compiled_uniform_x(kernel).unwrap();
        binds[0] = window;
        let ub = gpu.uniform("params", bytemuck::bytes_of(&params));
        let group = gpu
            .bind_group_for(&compiled, kernel, &ub.as_entire_binding(), &binds)
            .unwrap();
        timing::time(gpu, iters, PER_SUBMIT, |enc| {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            gpu.dispatch_in(&mut pass, &compiled, &group, groups);
        })
    } else {
        timing::time(gpu, iters, PER_SUBMIT, |enc| {
            gpu.encode(enc, kernel, &params, &binds, groups).unwrap();
        })
    };
    let weight_bytes = f.packed_len(rows, k()).unwrap()
        + f.scales_len(rows, k()).unwrap()
        + f.biases_len(rows, k()).unwrap();
    Some((rows, weight_bytes as f64 / s / 1e9))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mib: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(16);
    let iters: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5);
    let _ = K.set(args.get(3).and_then(|a| a.parse().ok()).unwrap_or(4096));
    let gpu = Gpu::new().expect("a wgpu adapter");
    let info = gpu.adapter_info().cloned();
    // (a size past the adapter's storage binding is cut to it: ci/device-check.sh asks for more
    // than lavapipe's 128 MiB, which a GPU may bind)
    let limit = usize::try_from(gpu.max_binding() >> 20).unwrap_or(usize::MAX);
    if mib > limit {
        println!("(asked for {mib} MiB; the adapter binds at most {limit} MiB)");
    }
    let mib = mib.min(limit);
    let bytes = mib << 20;
    let ceil = ceiling(&gpu, bytes, iters);
    println!(
        "adapter: {} ({:?}, {:?}); default shape {:?}",
        info.as_ref().map_or("?".into(), |i| i.name.clone()),
        info.as_ref().map(|i| i.backend),
        info.as_ref().map(|i| i.device_type),
        gpu.matvec_shape()
    );
    println!("stream_read over {mib} MiB: {ceil:.2} GB/s (the ceiling)\n");
    println!("| format | rows × K | Lanes GB/s | Lanes / ceiling | Lanes + subgroups GB/s | / ceiling | Rows GB/s | Rows / ceiling | Rows + uniform x GB/s | / ceiling | unrolled GB/s | / ceiling |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    // (Lanes with the LANES fold and, where the adapter has subgroups, with the subgroup reduction)
    let gpus = [
        Gpu::new_with(Some(MatvecShape::Lanes), Some(false)).expect("adapter"),
        Gpu::new_with_shape(Some(MatvecShape::Rows)).expect("adapter"),
    ];
    let subgroups = Gpu::new_with(Some(MatvecShape::Lanes), Some(true)).ok();
    let formats = [
        WeightFormat::Q4_0,
        WeightFormat::Q4_1,
        WeightFormat::Q5_0,
        WeightFormat::Q5_1,
        WeightFormat::Q8_0,
        WeightFormat::Q4K,
        WeightFormat::Q5K,
        WeightFormat::Q6K,
        WeightFormat::Mxfp4,
        WeightFormat::Fp8Block {
            block_rows: 128,
            group: 128,
        },
        WeightFormat::Affine8 {
            group: 64,
            scale_dtype: Dtype::Bf16,
        },
        WeightFormat::Plain(Dtype::Bf16),
        WeightFormat::Plain(Dtype::F16),
        WeightFormat::Plain(Dtype::F32),
    ];
    for f in formats {
        let mut cells = Vec::new();
        let mut rows = 0;
        let runs = [
            (Some(&gpus[0]), Form::Storage),
            (subgroups.as_ref(), Form::Storage),
            (Some(&gpus[1]), Form::Storage),
            (Some(&gpus[1]), Form::UniformX),
            (Some(&gpus[1]), Form::Unrolled),
        ];
        for (g, form) in runs {
            match g.and_then(|g| matvec(g, f, bytes, iters, form)) {
                Some((r, gbs)) => {
                    rows = r;
                    cells.push(format!("{gbs:.2} | {:.0} %", 100.0 * gbs / ceil));
                }
                None => cells.push("— | —".into()),
            }
        }
        println!(
            "| {} | {rows} × {} | {} |",
            f.name(),
            k(),
            cells.join(" | ")
        );
    }
}
