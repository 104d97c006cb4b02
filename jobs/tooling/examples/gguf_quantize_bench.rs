//! Quantize throughput of `artifact::gguf` encoders on a real GGUF's tensors (decoded to f32
//! first; decoding is not timed). Prints one JSON line per target: elements, seconds single-threaded
//! (`quant::encode`, as ggml's `quantize_row_*_ref`) and with the row-parallel `encode_tensor`.
//! Usage: cargo run --release -p tooling --example gguf_quantize_bench -- MODEL.gguf [TYPES…]
//! (ci/bench/gguf_quantize_bench.sh runs it beside ggml's C on the same input; docs/bench/).

use std::time::Instant;

use artifact::gguf::quant::{self, FmaContract};
use artifact::gguf::{GgmlType, GgufModel};
use tooling::gguf::ops::encode_tensor;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .ok_or("usage: gguf_quantize_bench MODEL.gguf [TYPES…]")?;
    let types: Vec<String> = if args.len() > 1 {
        args[1..].to_vec()
    } else {
        ["q4_0", "q8_0", "q4_K", "q6_K"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    let m = GgufModel::open(std::path::Path::new(path))?;
    for ty in types {
        let t = GgmlType::from_name(&ty).ok_or("unknown type")?;
        let mut inputs = Vec::new();
        for info in m.tensor_infos() {
            if info.n_dims() >= 2
                && info.row_len() % t.block_size() == 0
                && quant::is_decodable(info.ggml_type)
            {
                let mut f = Vec::new();
                quant::decode_to_f32(info.ggml_type, m.tensor_bytes(&info.name)?, &mut f)?;
                inputs.push((info.clone(), f));
            }
        }
        let n: usize = inputs.iter().map(|(_, f)| f.len()).sum();
        let t0 = Instant::now();
        let mut bytes = 0usize;
        for (info, f) in &inputs {
            let mut out = Vec::new();
            quant::encode(t, f, info.row_len() as usize, &mut out, FmaContract::Off)?;
            bytes += out.len();
        }
        let single = t0.elapsed().as_secs_f64();
        // Row-parallel path as `quantize` runs it (re-encodes from f32 source bytes).
        let t1 = Instant::now();
        for (info, f) in &inputs {
            let src: Vec<u8> = f.iter().flat_map(|v| v.to_le_bytes()).collect();
            let mut i2 = info.clone();
            i2.ggml_type = GgmlType::F32;
            i2.n_bytes = src.len() as u64;
            encode_tensor(&i2, &src, t, FmaContract::Off)?;
        }
        let par = t1.elapsed().as_secs_f64();
        println!(
            "{{\"impl\": \"minirun\", \"type\": \"{ty}\", \"tensors\": {}, \"elements\": {n}, \"bytes_out\": {bytes}, \"seconds_1t\": {single:.4}, \"seconds_par\": {par:.4}, \"threads\": {}}}",
            inputs.len(),
            std::thread::available_parallelism().map(|p| p.get()).unwrap_or(1)
        );
    }
    Ok(())
}
