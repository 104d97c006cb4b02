//! What one dispatch costs next to the bytes it reads (docs/runner-deepseek-v4.md "Merged input
//! projections"): the unrolled `fp8-e4m3-block` matvec at the DeepSeek V4 demo's shapes and at
//! merged ones, timed as one dispatch per submit and as 8 back to back in one compute pass
//! (median of 37 submits after 3 warm-ups). On a CPU adapter (lavapipe) a dispatch has a fixed
//! cost of tens of microseconds whatever its size, which is why the runner merges products.
//!
//!   cargo run --release -p kernels --example dispatch_cost

#![allow(clippy::unwrap_used)]
use kernels::gpu::{Bind, Gpu};
use kernels::WeightFormat;
use std::time::Instant;

fn main() {
    let gpu = Gpu::new().unwrap();
    let f = WeightFormat::Fp8Block {
        block_rows: 128,
        group: 128,
    };
    for (rows, k) in [
        (128usize, 256usize),
        (256, 256),
        (1344, 256),
        (512, 128),
        (8192, 128),
        (8704, 128),
        (2048, 256),
    ] {
        let packed = gpu
            .upload("w", &vec![0x3cu8; f.packed_len(rows, k).unwrap()])
            .unwrap();
        let scales = gpu
            .upload("s", &vec![0x7fu8; f.scales_len(rows, k).unwrap().max(4)])
            .unwrap();
        let x = gpu
            .upload_f32("x", &vec![0.5f32; kernels::UNIFORM_X_ELEMENTS])
            .unwrap();
        let y = gpu.zeros("y", (rows * 4) as u64).unwrap();
        let mut params = f.params(rows as u32, k as u32, 1, rows as u32, 0);
        let module =
            kernels::unrolled::source_for(f, k, rows, kernels::unrolled::Layout::Rows).unwrap();
        let groups = kernels::unrolled::launch_for(f, k, &mut params);
        let ub = gpu.uniform("params", bytemuck::bytes_of(&params));
        let window = Bind {
            buffer: &x,
            offset: 0,
            size: Some((kernels::UNIFORM_X_ELEMENTS * 4) as u64),
        };
        let all: Vec<Bind<'_>> = vec![
            (&ub).into(),
            window,
            (&y).into(),
            (&packed).into(),
            (&scales).into(),
            (&packed).into(),
        ];
        let compiled = gpu.compiled_generated(&module);
        let group = gpu.bind_group_generated(&compiled, &module, &all).unwrap();
        for per in [1usize, 8] {
            let mut v = Vec::new();
            for i in 0..40 {
                let mut enc = gpu.encoder("b");
                {
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                    for _ in 0..per {
                        gpu.dispatch_in(&mut pass, &compiled, &group, groups);
                    }
                }
                let t = Instant::now();
                gpu.submit(enc.finish());
                gpu.device()
                    .poll(wgpu::PollType::wait_indefinitely())
                    .unwrap();
                if i > 2 {
                    v.push(t.elapsed().as_secs_f64() * 1e6);
                }
            }
            v.sort_by(f64::total_cmp);
            let b = f.packed_len(rows, k).unwrap() as f64;
            println!("{rows}x{k} groups {groups:?} per-submit {per}: {:.0} us/submit, {:.0} us/dispatch, {:.2} GB/s", v[v.len()/2], v[v.len()/2]/per as f64, b*per as f64 / v[v.len()/2] / 1e3);
        }
    }
}
