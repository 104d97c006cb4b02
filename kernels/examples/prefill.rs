//! The prefill matmul of every dequantize-and-multiply family, tiled and untiled (issue #16 item
//! 2: shared-memory tiling for prefill matmul; docs/kernels.md "Tiled prefill matmul").
//!
//! `cargo run --release -p kernels --example prefill -- [MIB] [ITERS] [TOKENS] [K]`: a matrix of
//! about MIB of weights (K columns, 4096 unless given) times TOKENS inputs (64 unless given) with
//! the `Lanes` mapping's tiled matmul (`matmul_tiled`: 8 rows a workgroup, the inputs staged in
//! workgroup memory), with the untiled form it replaced (one row a workgroup, the inputs read
//! from the storage buffer by every row: built here from the same body, a baseline only) and
//! with the `Rows` mapping's `matmul_row` (what a CPU adapter runs). Each figure is the median
//! of ITERS timed submits of 4 dispatches, after one warm-up submit (which also compiles),
//! reported as milliseconds a dispatch and as effective GB/s: weight bytes × tokens ÷ time, what
//! one matvec a token would have to read to keep up.

#![allow(clippy::unwrap_used)]

#[path = "support/timing.rs"]
mod timing;

use kernels::generated::{BindingKind, Generated};
use kernels::gpu::{matmul_launch, Bind, Gpu, MatvecShape};
use kernels::{grid_2d, Access, Dtype, WeightFormat, TOKEN_TILE};

const PER_SUBMIT: usize = 4;

/// The untiled `Lanes` matmul (the entry point before the tiled one), appended to a family's
/// module: one row a workgroup, lane l's partial over its chunks, lane 0 folds in lane order.
const UNTILED: &str = "
var<workgroup> untiled4: array<vec4<f32>, 64>;

@compute @workgroup_size(64)
fn matmul_untiled(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let r = wg.x + wg.y * p.groups_x;
    let t0 = wg.z * TOKEN_TILE;
    if (r >= p.rows || t0 >= p.tokens) {
        return;
    }
    untiled4[lane] = lane_partial4(r, lane, tile_bases(t0));
    workgroupBarrier();
    if (lane == 0u) {
        var out = untiled4[0];
        for (var l = 1u; l < LANES; l++) {
            out = out + untiled4[l];
        }
        for (var j = 0u; j < TOKEN_TILE; j++) {
            if (t0 + j < p.tokens) {
                store((t0 + j) * p.y_stride + p.y_offset + r, out[j]);
            }
        }
    }
}
";

#[derive(Clone, Copy, PartialEq)]
enum Form {
    Tiled,
    Untiled,
    Rows,
}

/// Rows, and seconds a dispatch of `f`'s matmul over `tokens` inputs in `form`, and its weight
/// bytes.
fn run(
    gpu: &Gpu,
    f: WeightFormat,
    bytes: usize,
    k: usize,
    tokens: usize,
    iters: usize,
    form: Form,
) -> (usize, f64, usize) {
    let row = f.packed_len(1, k).unwrap() + f.scales_len(1, k).unwrap_or(0);
    let mut rows = (bytes / row).max(8);
    if let WeightFormat::Fp8Block { block_rows, .. } = f {
        rows = rows.div_ceil(block_rows as usize) * block_rows as usize;
    }
    let buf = |n: usize| gpu.upload("w", &vec![0x3cu8; n.max(4)]).unwrap();
    let packed = buf(f.packed_len(rows, k).unwrap());
    let scales = buf(f.scales_len(rows, k).unwrap());
    let biases = buf(f.biases_len(rows, k).unwrap());
    let x = gpu.upload_f32("x", &vec![0.5f32; tokens * k]).unwrap();
    let y = gpu.zeros("y", (tokens * rows * 4) as u64).unwrap();
    let kernel = f.matmul_kernel();
    let mut params = f.params(rows as u32, k as u32, tokens as u32, rows as u32, 0);
    let mut binds: Vec<Bind<'_>> = vec![(&x).into(), (&y).into(), (&packed).into()];
    if f.buffer_count() >= 2 {
        binds.push((&scales).into());
    }
    if f.buffer_count() >= 3 {
        binds.push((&biases).into());
    }
    let s = if form == Form::Untiled {
        let (gx, gy) = grid_2d(rows as u32);
        params.groups_x = gx;
        let groups = (gx, gy, (tokens as u32).div_ceil(TOKEN_TILE));
        let mut bindings = vec![(0, BindingKind::Uniform)];
        for (i, a) in kernel.storage().iter().enumerate() {
            let read_only = *a == Access::Read;
            bindings.push((i as u32 + 1, BindingKind::Storage { read_only }));
        }
        let module = Generated {
            label: format!("{}_untiled", kernel.name()),
            source: format!("{}{UNTILED}", kernel.source()),
            entry: "matmul_untiled",
            bindings,
        };
        let ub = gpu.uniform("params", bytemuck::bytes_of(&params));
        let mut all = vec![(&ub).into()];
        all.extend_from_slice(&binds);
        let compiled = gpu.compiled_generated(&module);
        let group = gpu.bind_group_generated(&compiled, &module, &all).unwrap();
        timing::time(gpu, iters, PER_SUBMIT, |enc| {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            gpu.dispatch_in(&mut pass, &compiled, &group, groups);
        })
    } else {
        let groups = matmul_launch(gpu.matvec_shape(), kernel, &mut params);
        timing::time(gpu, iters, PER_SUBMIT, |enc| {
            gpu.encode(enc, kernel, &params, &binds, groups).unwrap();
        })
    };
    let weight_bytes = f.packed_len(rows, k).unwrap()
        + f.scales_len(rows, k).unwrap()
        + f.biases_len(rows, k).unwrap();
    (rows, s, weight_bytes)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (mib, iters, tokens, k) = (arg(1, 8), arg(2, 5), arg(3, 64), arg(4, 4096));
    let lanes = Gpu::new_with(Some(MatvecShape::Lanes), Some(false)).expect("a wgpu adapter");
    let rows_gpu = Gpu::new_with_shape(Some(MatvecShape::Rows)).expect("a wgpu adapter");
    let info = lanes.adapter_info().cloned();
    println!(
        "adapter: {} ({:?}); {mib} MiB of weights, K = {k}, {tokens} tokens\n",
        info.as_ref().map_or("?".into(), |i| i.name.clone()),
        info.as_ref().map(|i| i.device_type),
    );
    println!("| format | rows × K | Lanes tiled ms | effective GB/s | Lanes untiled ms | effective GB/s | untiled ÷ tiled time | Rows ms | effective GB/s |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let formats = [
        WeightFormat::Q4_0,
        WeightFormat::Q4_1,
        WeightFormat::Q8_0,
        WeightFormat::Q4K,
        WeightFormat::Q6K,
        WeightFormat::Mxfp4,
        WeightFormat::Fp8Block {
            block_rows: 128,
            group: 128,
        },
        WeightFormat::Plain(Dtype::Bf16),
        WeightFormat::Plain(Dtype::F32),
    ];
    for f in formats {
        let bytes = mib << 20;
        let (rows, tiled, w) = run(&lanes, f, bytes, k, tokens, iters, Form::Tiled);
        let (_, untiled, _) = run(&lanes, f, bytes, k, tokens, iters, Form::Untiled);
        let (_, by_row, _) = run(&rows_gpu, f, bytes, k, tokens, iters, Form::Rows);
        let eff = |s: f64| (w * tokens) as f64 / s / 1e9;
        println!(
            "| {} | {rows} × {k} | {:.1} | {:.2} | {:.1} | {:.2} | {:.2}× | {:.1} | {:.2} |",
            f.name(),
            tiled * 1e3,
            eff(tiled),
            untiled * 1e3,
            eff(untiled),
            untiled / tiled,
            by_row * 1e3,
            eff(by_row),
        );
    }
}
