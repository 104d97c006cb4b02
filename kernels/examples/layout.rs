//! The one-token kernels over weights in the row layout and in the interleaved layout
//! (`kernels::unrolled::Layout`, docs/kernels.md "Interleaved layout"), the way a decode step
//! meets them: LAYERS distinct weight buffers, one dispatch each, so nothing stays cached.
//!
//! `cargo run --release -p kernels --example layout -- [K] [FFN] [LAYERS] [ITERS]` (defaults:
//! SmolLM2's 576, 1536, 30 layers, 9 submits). For each kernel — the unrolled Q4_1 matvec over
//! 2·FFN rows and the fused norm + gate/up + SwiGLU — it prints the median time a layer over
//! ITERS submits (after one warm-up submit, which also compiles) and the GB/s of weight bytes.

#![allow(clippy::unwrap_used)]

#[allow(dead_code)] // (its median only)
#[path = "support/timing.rs"]
mod timing;

use std::time::Instant;

use kernels::generated::Generated;
use kernels::gpu::{Bind, Gpu, MatvecShape};
use kernels::unrolled::{gate_up, interleave, launch, source, InputNorm, Layout};
use kernels::WeightFormat;

/// Deterministic Q4_1 rows: f16 scale and minimum 2^-8, pseudo-random nibbles.
fn q4_1_rows(rows: usize, row_bytes: usize, seed: u32) -> Vec<u8> {
    let mut s = seed;
    (0..rows * row_bytes)
        .map(|i| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            if i % 20 < 4 {
                [0x00, 0x1c][i % 2]
            } else {
                (s >> 24) as u8
            }
        })
        .collect()
}

fn main() {
    let arg = |i: usize, d: usize| -> usize {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(d)
    };
    let (k, ffn, layers, iters) = (arg(1, 576), arg(2, 1536), arg(3, 30), arg(4, 9));
    let gpu = Gpu::new_with_shape(Some(MatvecShape::Rows)).unwrap();
    let f = WeightFormat::Q4_1;
    let kernel = f.matvec_kernel();
    let row_bytes = f.packed_len(1, k).unwrap();
    let rows = 2 * ffn;
    let mats: Vec<Vec<u8>> = (0..layers)
        .map(|l| q4_1_rows(rows, row_bytes, 7 + l as u32))
        .collect();
    let x: Vec<f32> = (0..kernels::UNIFORM_X_ELEMENTS)
        .map(|i| (i % 7) as f32 * 0.25 - 0.5)
        .collect();
    let xb = gpu.upload_f32("x", &x).unwrap();
    let window = Bind {
        buffer: &xb,
        offset: 0,
        size: Some((kernels::UNIFORM_X_ELEMENTS * 4) as u64),
    };
    let nw = gpu.upload_f32("norm", &vec![1.0f32; k]).unwrap();
    let y = gpu.zeros("y", (rows * 4) as u64).unwrap();
    let norm = Some(InputNorm { eps: 1e-5 });
    println!("| kernel | layout | K | rows | ms a layer | GB/s |");
    println!("|---|---|---:|---:|---:|---:|");
    for layout in [Layout::Rows, Layout::Interleaved] {
        let bufs: Vec<wgpu::Buffer> = mats
            .iter()
            .map(|m| match layout {
                Layout::Rows => gpu.upload("w", m).unwrap(),
                Layout::Interleaved => gpu.upload("w", &interleave(row_bytes, m)).unwrap(),
            })
            .collect();
        let kernels: [(&str, Generated, bool); 2] = [
            ("matvec", source(kernel, k, rows, layout).unwrap(), false),
            (
                "norm+gate/up+SwiGLU",
                gate_up(kernel, k, ffn, norm, layout).unwrap(),
                true,
            ),
        ];
        for (name, module, fused) in kernels {
            let n = if fused { ffn } else { rows };
            let mut params = f.params(n as u32, k as u32, 1, rows as u32, 0);
            let groups = if fused {
                let (gx, gy) = kernels::grid_2d((ffn as u32).div_ceil(64));
                params.groups_x = gx;
                (gx, gy, 1)
            } else {
                launch(kernel, k, &mut params)
            };
            let ub = gpu.uniform("params", bytemuck::bytes_of(&params));
            let compiled = gpu.compiled_generated(&module);
            let groups_v: Vec<wgpu::BindGroup> = bufs
                .iter()
                .map(|b| {
                    let mut all: Vec<Bind<'_>> = vec![(&ub).into(), window, (&y).into(), b.into()];
                    if fused {
                        all.push((&nw).into());
                    }
                    all.push(b.into());
                    gpu.bind_group_generated(&compiled, &module, &all).unwrap()
                })
                .collect();
            let mut runs = Vec::new();
            for i in 0..=iters {
                let mut enc = gpu.encoder("layout");
                {
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                    for g in &groups_v {
                        gpu.dispatch_in(&mut pass, &compiled, g, groups);
                    }
                }
                let t = Instant::now();
                gpu.submit(enc.finish());
                gpu.device()
                    .poll(wgpu::PollType::wait_indefinitely())
                    .unwrap();
                if i > 0 {
                    runs.push(t.elapsed().as_secs_f64() / layers as f64);
                }
            }
            let s = timing::median(runs);
            println!(
                "| {name} | {layout:?} | {k} | {rows} | {:.3} | {:.2} |",
                s * 1e3,
                (rows * row_bytes) as f64 / s / 1e9
            );
        }
    }
}
