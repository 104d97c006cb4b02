//! Whole-file parity with llama.cpp's `llama-quantize --pure`: for every recorded output in
//! ci/oracles/llama-quantize.recorded.json (written by ci/oracles/llama_quantize.sh from a
//! llama.cpp build; never rebuilt in CI), `minirun-gguf quantize --pure` on the same input writes
//! a file with the same SHA-256 and byte count. The test-model inputs are regenerated here by
//! `tooling::gguf::testmodel` and must match their recorded digest first; the real SmolLM2 input
//! is used when present (a failure under `CI` when absent, as tests/gguf_real.rs). Every target
//! type must have encoded at least one tensor, or the parity would prove nothing.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};

use artifact::gguf::quant::FmaContract;
use artifact::gguf::GgmlType;
use sha2::{Digest, Sha256};
use tooling::gguf::mixture::FileType;
use tooling::gguf::ops::{run_quantize, Action, QuantizeOpts};
use tooling::gguf::testmodel::{write_test_model_arch, Arch};

fn digest(p: &Path) -> (u64, String) {
    let b = std::fs::read(p).unwrap();
    (b.len() as u64, hex::encode(Sha256::digest(&b)))
}

fn record() -> serde_json::Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../ci/oracles/llama-quantize.recorded.json");
    serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap()
}

/// The generator of a recorded test-model input, by file name.
fn test_model(name: &str) -> Option<(Arch, GgmlType)> {
    Some(match name {
        "tiny-qwen2-f32.gguf" => (Arch::Qwen2, GgmlType::F32),
        "tiny-qwen2-f16.gguf" => (Arch::Qwen2, GgmlType::F16),
        "tiny-qwen3-f32.gguf" => (Arch::Qwen3, GgmlType::F32),
        "tiny-qwen3-f16.gguf" => (Arch::Qwen3, GgmlType::F16),
        _ => return None,
    })
}

fn real_file() -> Option<PathBuf> {
    const NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
    let p = match (
        std::env::var_os("MINIRUN_SMOLLM2_GGUF"),
        std::env::var_os("CI_CACHE"),
    ) {
        (Some(p), _) => PathBuf::from(p),
        (None, Some(c)) => PathBuf::from(c).join(NAME),
        (None, None) => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../ci/.cache")
            .join(NAME),
    };
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "the real model `{}` is missing under CI",
        p.display()
    );
    eprintln!(
        "SKIP: `{}` not found; set MINIRUN_SMOLLM2_GGUF",
        p.display()
    );
    None
}

/// Quantize `input` for every recorded output of `entry`; returns the failures and, per target,
/// how many tensors were encoded at exactly that type (a cast to the source's own type encodes
/// none, so the "every target encoded something" assertion is made over all inputs together).
fn check_entry(
    entry: &serde_json::Value,
    input: &Path,
    dir: &Path,
    only: Option<&[&str]>,
) -> (Vec<String>, Vec<(String, usize)>) {
    check_outputs(entry, input, dir, only, Kind::Pure)
}

/// `--pure` (the `inputs` record) or a mixture (the `mixtures` record).
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Pure,
    Mixture,
}

fn check_outputs(
    entry: &serde_json::Value,
    input: &Path,
    dir: &Path,
    only: Option<&[&str]>,
    kind: Kind,
) -> (Vec<String>, Vec<(String, usize)>) {
    let mut failures = Vec::new();
    let mut counts = Vec::new();
    for out in entry["outputs"].as_array().unwrap() {
        let ty = out["type"].as_str().unwrap();
        if only.is_some_and(|o| !o.contains(&ty)) {
            continue;
        }
        let stem = input.file_stem().unwrap().to_string_lossy();
        let path = dir.join(format!("{stem}-{ty}.gguf"));
        let r = run_quantize(&QuantizeOpts {
            input: input.to_path_buf(),
            output: path.clone(),
            target: Some(ty.to_string()),
            split_max_size: None,
            fma: FmaContract::Off,
            pure: kind == Kind::Pure,
            mixture: kind == Kind::Mixture,
            allow_requantize: out["command"]
                .as_str()
                .is_some_and(|c| c.contains("--allow-requantize")),
        })
        .unwrap();
        let want_t = FileType::parse(ty).unwrap().default_type();
        let encoded = r
            .plan
            .iter()
            .filter(|e| e.action == Action::Encode(want_t))
            .count();
        let (n, d) = digest(&path);
        let ok = n == out["bytes"].as_u64().unwrap() && d == out["sha256"].as_str().unwrap();
        println!(
            "[llama-quantize{} parity] {stem} -> {ty}: {} ({n} bytes, sha256 {}…), {encoded} tensor(s) encoded at {want_t}",
            if kind == Kind::Pure { " --pure" } else { "" },
            if ok { "identical" } else { "DIFFERS" },
            &d[..16]
        );
        if ok {
            let _ = std::fs::remove_file(&path);
        } else {
            failures.push(format!(
                "{stem} -> {ty}: ours {n} bytes {d}, llama-quantize {} bytes {} (ours kept at `{}`)",
                out["bytes"], out["sha256"], path.display()
            ));
        }
        let recorded_at_target = out["tensor_types"][want_t.name().to_ascii_lowercase()]
            .as_u64()
            .unwrap_or(0);
        // A mixture on SmolLM2 may put nothing at its default type (Q2_K: ffn_down is q3_K and
        // every 576-wide row falls back); the test models (rows of 256) are asserted instead.
        if recorded_at_target == 0 && (kind == Kind::Pure || !stem.starts_with("SmolLM2")) {
            failures.push(format!(
                "{stem} -> {ty}: llama-quantize wrote no {want_t} tensor"
            ));
        }
        counts.push((ty.to_string(), encoded));
    }
    (failures, counts)
}

fn assert_every_target_encoded(counts: &[(String, usize)], failures: &mut Vec<String>) {
    let mut types: Vec<&str> = counts.iter().map(|(t, _)| t.as_str()).collect();
    types.dedup();
    for t in types {
        let n: usize = counts.iter().filter(|(u, _)| u == t).map(|(_, n)| n).sum();
        if n == 0 {
            failures.push(format!(
                "target {t}: no tensor was encoded at {t} on any input"
            ));
        }
    }
}

/// Regenerate every recorded test-model input of `section` (`inputs` for --pure, `mixtures`),
/// check it is the recorded one, and compare all its outputs; every default type must have been
/// encoded somewhere over the four models.
fn check_test_models(section: &str, kind: Kind) {
    let rec = record();
    let dir = tempfile::tempdir().unwrap();
    let keep = dir.keep();
    let mut failures = Vec::new();
    let mut counts = Vec::new();
    let mut n = 0;
    for entry in rec[section].as_array().unwrap() {
        let name = entry["input"].as_str().unwrap();
        let Some((arch, source)) = test_model(name) else {
            continue;
        };
        let input = keep.join(name);
        write_test_model_arch(&input, source, arch).unwrap();
        let (b, d) = digest(&input);
        assert_eq!(
            (b, d.as_str()),
            (
                entry["bytes"].as_u64().unwrap(),
                entry["sha256"].as_str().unwrap()
            ),
            "the regenerated input `{name}` is not the recorded one"
        );
        let (f, c) = check_outputs(entry, &input, &keep, None, kind);
        failures.extend(f);
        counts.extend(c);
        n += 1;
    }
    assert_eq!(n, 4, "the four test models are recorded");
    assert_every_target_encoded(&counts, &mut failures);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let _ = std::fs::remove_dir_all(&keep);
}

#[test]
fn quantize_pure_is_byte_identical_to_llama_quantize_on_the_test_models() {
    check_test_models("inputs", Kind::Pure);
}

#[test]
fn quantize_pure_is_byte_identical_to_llama_quantize_on_smollm2() {
    let Some(real) = real_file() else { return };
    let rec = record();
    let entry = rec["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| {
            e["input"]
                .as_str()
                .is_some_and(|s| s.starts_with("SmolLM2"))
        })
        .expect("SmolLM2 is recorded");
    let (b, d) = digest(&real);
    assert_eq!(
        (b, d.as_str()),
        (
            entry["bytes"].as_u64().unwrap(),
            entry["sha256"].as_str().unwrap()
        )
    );
    let dir = tempfile::tempdir().unwrap();
    let keep = dir.keep();
    // All ten targets unless MINIRUN_GGUF_PARITY_TYPES narrows them (CI time: debug builds).
    let only: Option<Vec<String>> = std::env::var("MINIRUN_GGUF_PARITY_TYPES")
        .ok()
        .map(|s| s.split(',').map(str::to_string).collect());
    let only_ref: Option<Vec<&str>> = only
        .as_ref()
        .map(|v| v.iter().map(String::as_str).collect());
    let (mut failures, counts) = check_entry(entry, &real, &keep, only_ref.as_deref());
    assert_every_target_encoded(&counts, &mut failures);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let _ = std::fs::remove_dir_all(&keep);
}

/// The mixtures on the four test models: regenerated inputs, whole files compared.
#[test]
fn quantize_mixtures_are_byte_identical_to_llama_quantize_on_the_test_models() {
    check_test_models("mixtures", Kind::Mixture);
}

/// The mixtures on SmolLM2 dequantized to f32 by our own `--pure f32` (whose digest must equal
/// llama-quantize's recorded f32 output first). MINIRUN_GGUF_MIXTURES=Q4_K_M,… narrows them.
#[test]
fn quantize_mixtures_are_byte_identical_to_llama_quantize_on_smollm2() {
    let Some(real) = real_file() else { return };
    let rec = record();
    let entry = rec["mixtures"]
        .as_array()
        .expect("mixtures are recorded")
        .iter()
        .find(|e| {
            e["input"]
                .as_str()
                .is_some_and(|s| s.starts_with("SmolLM2"))
        })
        .expect("SmolLM2 f32 is recorded");
    let dir = tempfile::tempdir().unwrap();
    let keep = dir.keep();
    let f32_in = keep.join(entry["input"].as_str().unwrap());
    run_quantize(&QuantizeOpts {
        input: real,
        output: f32_in.clone(),
        target: Some("f32".into()),
        split_max_size: None,
        fma: FmaContract::Off,
        pure: true,
        mixture: false,
        allow_requantize: true,
    })
    .unwrap();
    assert_eq!(
        digest(&f32_in).1,
        entry["sha256"].as_str().unwrap(),
        "our --pure f32 of SmolLM2 is not llama-quantize's"
    );
    let only: Option<Vec<String>> = std::env::var("MINIRUN_GGUF_MIXTURES")
        .ok()
        .map(|s| s.split(',').map(str::to_string).collect());
    let only_ref: Option<Vec<&str>> = only
        .as_ref()
        .map(|v| v.iter().map(String::as_str).collect());
    let (failures, _) = check_outputs(entry, &f32_in, &keep, only_ref.as_deref(), Kind::Mixture);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let _ = std::fs::remove_dir_all(&keep);
}
