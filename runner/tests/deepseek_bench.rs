//! Decode benchmark of the DeepSeek V4 adapter on the tiny artifact (not a CI step: `#[ignore]`).
//! Run: `cargo test -p runner --test integration deepseek_bench:: -- --ignored --nocapture`.
//! Prints decode tokens/s, bytes read per decode token and submits / dispatches per decode token,
//! GPU resident (the mHC residual on the host and on the device) vs streamed.

use crate::deepseek_common;

use std::time::Instant;

use runner::deepseek::{argmax, Mode, V4Model};

fn bench(mode: Mode, label: &str, device_residual: Option<bool>) {
    let fx = deepseek_common::fixture();
    let dir = deepseek_common::release();
    let t = Instant::now();
    let mut m = V4Model::open_dir(dir, mode).expect("opens");
    if let Some(on) = device_residual {
        // (a GPU mapping has no prepared one-token products: the device placement is refused)
        if !m.set_device_residual(on) {
            println!("{label}: this adapter refuses the placement, skipped");
            return;
        }
    }
    let open = t.elapsed();
    let reads0 = m.tile_reads();
    let t = Instant::now();
    let mut row = m.forward(&fx.prompt[..64]).expect("prefill");
    let prefill = t.elapsed();
    let (loads0, bytes0) = m.expert_loads();
    let stats0 = m.gpu_stats();
    let steps = 16;
    let t = Instant::now();
    for _ in 0..steps {
        row = m.forward(&[argmax(&row)]).expect("decode");
    }
    let decode = t.elapsed();
    let (loads1, bytes1) = m.expert_loads();
    let per = |n: u64| n as f64 / steps as f64;
    let device = match (stats0, m.gpu_stats()) {
        (Some(a), Some(b)) => {
            let d = b - a;
            format!(
                ", {:.0} submits and {:.0} dispatches a decode token",
                per(d.submits),
                per(d.dispatches)
            )
        }
        _ => String::new(),
    };
    eprintln!(
        "{label}: open {open:?} (tile reads {reads0}), prefill 64 {prefill:?}, decode {:.2} tok/s, \
         expert matrices loaded per decode token {:.1}, bytes per decode token {:.0}{device}",
        steps as f64 / decode.as_secs_f64(),
        per(loads1 - loads0),
        per(bytes1 - bytes0)
    );
}

#[test]
#[ignore]
fn decode_tokens_per_second_streamed_vs_resident() {
    // the mHC residual on the host (a reference kept for tests) and on the device (the only
    // placement the binaries run)
    for on in [false, true] {
        bench(
            Mode::Gpu {
                engine: deepseek_common::engine(),
                streamed: false,
                expert_cache_bytes: 0,
            },
            &format!(
                "gpu resident (mHC residual on the {})",
                if on { "device" } else { "host" }
            ),
            Some(on),
        );
    }
    // Two budgets: one that holds a fraction of a token's routed experts (they are evicted and
    // loaded again every step) and one that holds all of the generated checkpoint's experts.
    for mib in [1u64, 64] {
        bench(
            Mode::Gpu {
                engine: deepseek_common::engine(),
                streamed: true,
                expert_cache_bytes: mib << 20,
            },
            &format!("gpu streamed (expert cache {mib} MiB)"),
            None,
        );
    }
    bench(Mode::Reference { expert_cache: 64 }, "cpu reference", None);
}
