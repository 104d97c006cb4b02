//! Timing shared by the kernel examples: the median of timed submits.

use std::time::Instant;

use kernels::gpu::Gpu;

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Seconds per dispatch: the median over `iters` submits of `per_submit` dispatches recorded by
/// `record`, after one warm-up submit (which also compiles).
pub fn time(
    gpu: &Gpu,
    iters: usize,
    per_submit: usize,
    mut record: impl FnMut(&mut wgpu::CommandEncoder),
) -> f64 {
    let mut runs = Vec::new();
    for i in 0..=iters {
        let mut enc = gpu.encoder("bench");
        for _ in 0..per_submit {
            record(&mut enc);
        }
        let t = Instant::now();
        gpu.submit(enc.finish());
        gpu.device()
            .poll(wgpu::PollType::wait_indefinitely())
            .expect("the device polls");
        if i > 0 {
            runs.push(t.elapsed().as_secs_f64() / per_submit as f64);
        }
    }
    median(runs)
}
