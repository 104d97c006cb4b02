//! `minirun-gguf synth --like`: from a header cut at the data section, a file with the source's
//! metadata and tensor index (names, dims, types, offsets) whose payloads are generated, decode
//! to finite values, differ from the source's, and are the same bytes for the same seed.

use std::path::Path;

use artifact::gguf::quant::decode_to_f32;
use artifact::gguf::reader::{parse_header, parse_index, GgufFile};
use artifact::gguf::GgmlType;
use sha2::{Digest, Sha256};
use tooling::gguf::like::synth_like;
use tooling::gguf::ops::{run_quantize, QuantizeOpts};
use tooling::gguf::testmodel::{write_test_model_arch, Arch};

fn sha(p: &Path) -> Vec<u8> {
    Sha256::digest(std::fs::read(p).unwrap()).to_vec()
}

/// A source with block formats: the tiny Qwen2 test model re-encoded as q4_1 (its rows that
/// do not divide fall back to other types, so several types are present).
fn source(dir: &Path) -> std::path::PathBuf {
    let f32_model = dir.join("tiny-f32.gguf");
    write_test_model_arch(&f32_model, GgmlType::F32, Arch::Qwen2).unwrap();
    let out = dir.join("tiny-q4_1.gguf");
    run_quantize(&QuantizeOpts {
        input: f32_model,
        output: out.clone(),
        target: Some("q4_1".into()),
        split_max_size: None,
        fma: artifact::gguf::quant::FmaContract::Off,
        pure: true,
        mixture: false,
        allow_requantize: false,
    })
    .unwrap();
    out
}

#[test]
fn a_header_cut_at_its_data_gives_a_model_of_its_shape() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let bytes = std::fs::read(&src).unwrap();
    let h = parse_header(&bytes, &src).unwrap();
    let cut = dir.path().join("header.gguf");
    std::fs::write(&cut, &bytes[..h.data_start as usize]).unwrap();
    // the cut header is an index, not a file
    assert!(parse_header(&std::fs::read(&cut).unwrap(), &cut).is_err());
    assert_eq!(
        parse_index(&std::fs::read(&cut).unwrap(), &cut)
            .unwrap()
            .tensors,
        h.tensors
    );

    let out = dir.path().join("synth.gguf");
    let r = synth_like(&cut, &out, 7).unwrap();
    assert_eq!(r.tensors, h.tensors.len());
    assert_eq!(r.bytes, bytes.len() as u64);
    let g = GgufFile::open(&out).unwrap();
    assert_eq!(g.header.metadata, h.metadata);
    assert_eq!(g.header.tensors, h.tensors);
    let types: std::collections::BTreeSet<_> =
        h.tensors.iter().map(|t| t.ggml_type.to_string()).collect();
    assert!(types.contains("q4_1") && types.contains("f32"), "{types:?}");
    let orig = GgufFile::open(&src).unwrap();
    for t in &g.header.tensors {
        let payload = g.tensor_bytes(t).unwrap();
        let mut x = Vec::new();
        decode_to_f32(t.ggml_type, payload, &mut x).unwrap();
        assert!(x.iter().all(|v| v.is_finite()), "{}", t.name);
        if t.dims.len() > 1 {
            assert_ne!(payload, orig.tensor_bytes(t).unwrap(), "{}", t.name);
            assert!(x.iter().any(|&v| v != 0.0), "{}", t.name);
        }
    }
    // the same seed, the same bytes; another seed, others
    let again = dir.path().join("again.gguf");
    synth_like(&src, &again, 7).unwrap();
    assert_eq!(
        sha(&again),
        sha(&out),
        "the whole file as header, the same bytes"
    );
    let other = dir.path().join("other.gguf");
    synth_like(&cut, &other, 8).unwrap();
    assert_ne!(sha(&other), sha(&out));
}

#[test]
fn a_header_cut_inside_its_index_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let bytes = std::fs::read(&src).unwrap();
    let h = parse_header(&bytes, &src).unwrap();
    let cut = dir.path().join("short.gguf");
    std::fs::write(&cut, &bytes[..h.data_start as usize / 2]).unwrap();
    let out = dir.path().join("synth.gguf");
    let err = synth_like(&cut, &out, 0).unwrap_err().to_string();
    assert!(err.contains("minirun-gguf synth"), "{err}");
    assert!(err.contains("short.gguf"), "{err}");
    assert!(!out.exists());
    assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".partial")));
}
