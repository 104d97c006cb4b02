//! Decode every q2_K / q3_K tensor of a GGUF with `artifact::gguf::quant::kquant_low::dequantize`
//! and write it as raw little-endian f32 to `OUT_DIR/<tensor name>.f32`, for
//! ci/oracles/gguf_parity.py to compare with gguf-py's own dequantizer (the runner has no 2/3-bit
//! kernel, so this decoder is what the K-quant run gate runs those tensors through).
//!
//! Usage: gguf_decode_low_bits MODEL.gguf OUT_DIR

use std::path::PathBuf;
use std::process::ExitCode;

use artifact::gguf::quant::kquant_low;
use artifact::gguf::{GgmlType, GgufModel};

fn run(model: &str, out: &str) -> Result<usize, String> {
    let m = GgufModel::open(std::path::Path::new(model)).map_err(|e| e.to_string())?;
    let out = PathBuf::from(out);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut n = 0;
    for (_, t) in &m.tensors {
        if !matches!(t.ggml_type, GgmlType::Q2_K | GgmlType::Q3_K) {
            continue;
        }
        let mut v = Vec::new();
        let bytes = m.tensor_bytes(&t.name).map_err(|e| e.to_string())?;
        kquant_low::dequantize(t.ggml_type, bytes, &mut v);
        let raw: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let p = out.join(format!("{}.f32", t.name));
        std::fs::write(&p, raw).map_err(|e| format!("{}: {e}", p.display()))?;
        n += 1;
    }
    Ok(n)
}

fn main() -> ExitCode {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let [model, out] = a.as_slice() else {
        eprintln!("usage: gguf_decode_low_bits MODEL.gguf OUT_DIR");
        return ExitCode::from(64);
    };
    match run(model, out) {
        Ok(n) => {
            println!("decoded {n} q2_K/q3_K tensor(s) into {out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
