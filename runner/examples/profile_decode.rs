//! Per-operation profile of one greedy decode step of a GGUF model (issue 16; docs/bench/runner.md
//! "Where a decode token goes"). Prefills the prompt, decodes `WARM` tokens, then times every
//! operation of the one-token forward alone and the whole step (`Runner::profile_decode`), and
//! prints a markdown table: per operation its µs per token, share of the step, and for weight
//! operations the GB/s it reads at.
//!
//!   cargo run --release -p runner --example profile_decode -- MODEL.gguf IDS [WARM] [REPS] [ROUNDS]
//!
//! IDS is a comma-separated prompt of token ids. Release build; on a machine without a GPU the
//! adapter is Mesa lavapipe.
use std::collections::BTreeMap;

use runner::engine::Engine;
use runner::llama::{Runner, WeightMode};
use runner::model::LlamaModel;

fn arg<T: std::str::FromStr>(i: usize, default: T) -> T {
    std::env::args()
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path: String = arg(1, String::new());
    let ids: Vec<u32> = arg::<String>(2, String::new())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let (warm, reps, rounds) = (arg(3, 16usize), arg(4, 32usize), arg(5, 5usize));
    if path.is_empty() || ids.is_empty() {
        return Err("usage: profile_decode MODEL.gguf IDS [WARM] [REPS] [ROUNDS]".into());
    }
    let engine = Engine::new()?;
    let model = LlamaModel::open(std::path::Path::new(&path))?;
    let capacity = ids.len() + warm + reps + 2;
    let mut r = Runner::new(&engine, &model, WeightMode::Resident, capacity)?;
    r.forward_argmax(&ids)?;
    for _ in 0..warm {
        r.step_argmax()?;
    }
    let p = r.profile_decode(reps, rounds)?;
    let adapter = engine
        .gpu()
        .adapter_info()
        .map(|a| format!("{} ({:?})", a.name, a.device_type))
        .unwrap_or_default();
    println!(
        "adapter {adapter}; position {}; {reps} repetitions x {rounds} rounds, medians\n",
        p.position
    );
    println!("| operation | count | µs/token | share of step | weight MB | GB/s |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mut by: BTreeMap<String, (usize, f64, u64)> = BTreeMap::new();
    for op in &p.ops {
        let e = by.entry(op.label.clone()).or_default();
        e.0 += 1;
        e.1 += op.us;
        e.2 += op.weight_bytes;
    }
    let mut rows: Vec<_> = by.into_iter().collect();
    rows.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
    let sum: f64 = p.ops.iter().map(|o| o.us).sum();
    for (label, (n, us, bytes)) in &rows {
        let gbs = if *bytes > 0 {
            format!("{:.2}", *bytes as f64 / (us * 1e3))
        } else {
            "-".into()
        };
        println!(
            "| {label} | {n} | {us:.0} | {:.1} % | {:.2} | {gbs} |",
            100.0 * us / p.step_us,
            *bytes as f64 / 1e6
        );
    }
    let weights: u64 = p.ops.iter().map(|o| o.weight_bytes).sum();
    println!(
        "| **sum of operations** | {} | {sum:.0} | {:.1} % | {:.2} | {:.2} |",
        p.ops.len(),
        100.0 * sum / p.step_us,
        weights as f64 / 1e6,
        weights as f64 / (sum * 1e3)
    );
    println!(
        "| **the step's operations back to back**, one pass, no read-back | {} | {:.0} | {:.1} % | | {:.2} |",
        p.ops.len(),
        p.pass_us,
        100.0 * p.pass_us / p.step_us,
        weights as f64 / (p.pass_us * 1e3)
    );
    println!(
        "| **whole step** (`step_argmax`) | 1 submit | {:.0} | 100 % | | {:.2} |",
        p.step_us,
        weights as f64 / (p.step_us * 1e3)
    );
    println!("\n{:.1} tokens/s from the whole step", 1e6 / p.step_us);
    Ok(())
}
