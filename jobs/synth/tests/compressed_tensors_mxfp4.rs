//! Our MXFP4 packer (`synth::quant`, the checkpoint generator's) against compressed-tensors
//! 0.20.1, the reference package of the `mxfp4-pack-quantized` format: the fixture
//! `ci/oracles/compressed_tensors_mxfp4/reference.json` records the package's own outputs as
//! exact bits (re-derived by `ci/oracles/compressed_tensors_mxfp4.sh`). See
//! docs/mxfp4-compressed-tensors.md; the decoder side is `kernels/tests/compressed_tensors_mxfp4.rs`.
//!
//! What must hold: packing the 16 FP4 values at even and odd positions gives the package's bytes
//! (low nibble = even element); our e8m0 value is the package's scale decode for 0..=254 (255:
//! ours NaN, the package +inf); and where the package and we pick the same group scale, our packed
//! bytes are the package's. The scale choice itself differs in one documented window: a group
//! whose absolute maximum has a mantissa in (1.5, 1.75) gets 2^(E−2) from the package (its largest
//! elements then clip to ±6) and 2^(E−1) from us (ceil(log2(amax/6)): nothing clips).

#![allow(clippy::panic)] // a test reports failure by panicking

use serde_json::Value;
use synth::quant::{
    e8m0_scale_for, e8m0_value, f32_to_e2m1, floor_log2, mxfp4_quantize, E2M1, E2M1_MAX,
};

const FIXTURE: &str = "../../ci/oracles/compressed_tensors_mxfp4/reference.json";

fn fixture() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value = serde_json::from_slice(&text).expect("fixture is JSON");
    assert_eq!(v["versions"]["compressed_tensors"], "0.20.1");
    v
}

/// A list of 8-hex-digit f32 bit patterns.
fn bits(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|s| u32::from_str_radix(s.as_str().expect("a string"), 16).expect("f32 bits"))
        .collect()
}

fn floats(v: &Value) -> Vec<f32> {
    bits(v).into_iter().map(f32::from_bits).collect()
}

/// One hex string of bytes.
fn hex(v: &Value) -> Vec<u8> {
    let s = v.as_str().expect("a hex string");
    assert_eq!(s.len() % 2, 0);
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex byte"))
        .collect()
}

fn count(v: &Value) -> usize {
    usize::try_from(v.as_u64().expect("a count")).expect("fits")
}

/// The significand of a finite normal x > 0, in [1, 2).
fn mantissa(x: f32) -> f32 {
    f32::from_bits((x.to_bits() & 0x007f_ffff) | 0x3f80_0000)
}

/// The window where the package's MX scale is half ours: significand of amax in (1.5, 1.75).
fn in_window(amax: f32) -> bool {
    let m = mantissa(amax);
    m > 1.5 && m < 1.75
}

#[test]
fn every_fp4_pair_packs_to_the_package_bytes() {
    let f = fixture();
    let p = &f["pack"];
    let input = floats(&p["input_f32_bits"]);
    let want = hex(&p["packed_hex"]);
    assert_eq!((input.len(), want.len()), (512, 256));
    // each FP4 value is its code: our table and rounding agree with the package's values
    let by_code = p["fp4_values_by_code"].as_array().expect("list");
    for (c, v) in E2M1.iter().enumerate() {
        let pkg: f32 = by_code[c].as_str().expect("str").parse().expect("float");
        assert_eq!(pkg.to_bits(), v.to_bits(), "code {c}");
        assert_eq!(usize::from(f32_to_e2m1(*v)), c, "f32_to_e2m1({v})");
    }
    // every group of 32 has ±6 in it, so each scale is 2^0 (e8m0 127) and the codes are the values
    let (packed, scales) = mxfp4_quantize(&input, 1, 512);
    assert_eq!(scales, vec![127u8; 16]);
    for (i, (ours, pkg)) in packed.iter().zip(&want).enumerate() {
        assert_eq!(
            ours,
            pkg,
            "byte {i}: elements {} {}",
            input[2 * i],
            input[2 * i + 1]
        );
    }
    assert_eq!(packed.len(), want.len());
}

#[test]
fn e8m0_value_is_the_package_decode_except_255() {
    let f = fixture();
    let pkg = bits(&f["decompress_scale"]["scale_f32_bits"]);
    assert_eq!(pkg.len(), 256);
    for e in 0..=254u8 {
        assert_eq!(e8m0_value(e).to_bits(), pkg[usize::from(e)], "e8m0 {e}");
    }
    assert!(e8m0_value(255).is_nan());
    assert_eq!(
        pkg[255],
        f32::INFINITY.to_bits(),
        "the package reads 0xFF as 2^128 = inf"
    );
}

#[test]
fn package_scale_encoding_is_floor_log2_plus_127() {
    let f = fixture();
    let c = &f["compress_scale"];
    let s = floats(&c["scale_f32_bits"]);
    let b = hex(&c["e8m0_hex"]);
    assert_eq!(s.len(), b.len());
    let mut powers = 0;
    for (x, byte) in s.iter().zip(&b) {
        assert_eq!(i32::from(*byte), floor_log2(*x) + 127, "scale {x}");
        // the byte decodes (our reading) to the largest power of two ≤ the scale
        let v = e8m0_value(*byte);
        assert!(v <= *x && *x < 2.0 * v, "scale {x}: byte {byte} reads {v}");
        if v == *x {
            powers += 1;
        }
    }
    assert!(
        powers >= 10,
        "the fixture has powers of two (exact round trip): {powers}"
    );
}

#[test]
fn scale_choice_matches_ours_outside_the_1_5_to_1_75_window() {
    let f = fixture();
    let c = &f["scale_choice"];
    let amax = floats(&c["amax_f32_bits"]);
    let scale = floats(&c["scale_f32_bits"]);
    let bytes = hex(&c["e8m0_hex"]);
    assert_eq!((amax.len(), scale.len()), (bytes.len(), bytes.len()));
    let (mut same, mut window) = (0, 0);
    for ((a, s), b) in amax.iter().zip(&scale).zip(&bytes) {
        assert_eq!(
            e8m0_value(*b).to_bits(),
            s.to_bits(),
            "amax {a}: scale vs its byte"
        );
        let ours = e8m0_scale_for(*a, E2M1_MAX);
        if *a == 0.0 {
            assert_eq!((ours, *b), (0, 0), "an all-zero group is 2^-127 for both");
        } else if in_window(*a) {
            assert_eq!(ours, b + 1, "amax {a}: ours twice the package's scale");
            window += 1;
        } else {
            assert_eq!(ours, *b, "amax {a}");
            same += 1;
        }
    }
    assert!(same > 0 && window > 0, "same {same}, window {window}");
}

#[test]
fn packed_bytes_match_the_package_compressor_where_scales_agree() {
    let f = fixture();
    let c = &f["compress"];
    let (rows, cols) = (count(&c["rows"]), count(&c["cols"]));
    let w = floats(&c["weight_f32_bits"]);
    let pkg_packed = hex(&c["weight_packed_hex"]);
    let pkg_scales = hex(&c["weight_scale_hex"]);
    assert_eq!(w.len(), rows * cols);
    let (packed, scales) = mxfp4_quantize(&w, rows, cols);
    assert_eq!(
        (packed.len(), scales.len()),
        (pkg_packed.len(), pkg_scales.len())
    );
    let groups = cols / 32;
    let (mut same, mut window) = (0, 0);
    for r in 0..rows {
        for g in 0..groups {
            let blk = &w[r * cols + 32 * g..r * cols + 32 * g + 32];
            let amax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
            let (ours_s, pkg_s) = (scales[r * groups + g], pkg_scales[r * groups + g]);
            let bytes = (r * cols + 32 * g) / 2..(r * cols + 32 * g) / 2 + 16;
            if amax > 0.0 && in_window(amax) {
                // the package's scale is half ours and its largest elements clip to ±6 (code 7)
                assert_eq!(ours_s, pkg_s + 1, "group ({r}, {g})");
                let k = blk
                    .iter()
                    .position(|v| v.abs() == amax)
                    .expect("amax is in the block");
                let code = (pkg_packed[bytes.start + k / 2] >> (4 * (k % 2))) & 7;
                assert!(
                    amax / e8m0_value(pkg_s) > E2M1_MAX && code == 7,
                    "group ({r}, {g})"
                );
                window += 1;
            } else {
                assert_eq!(ours_s, pkg_s, "group ({r}, {g}) amax {amax}");
                assert_eq!(packed[bytes.clone()], pkg_packed[bytes], "group ({r}, {g})");
                same += 1;
            }
        }
    }
    assert!(same > 0 && window > 0, "same {same}, window {window}");
}
