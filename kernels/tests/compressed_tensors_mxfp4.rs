//! Our MXFP4 decoding against compressed-tensors 0.20.1, the reference package of the
//! `mxfp4-pack-quantized` checkpoint format: the fixture `ci/oracles/compressed_tensors_mxfp4/`
//! (re-derived by `ci/oracles/compressed_tensors_mxfp4.sh`, digests checked by
//! `ci/checks.d/57-compressed-tensors-fixture.sh`) records the package's own outputs as exact
//! bits. See docs/mxfp4-compressed-tensors.md.
//!
//! What must hold: our e2m1 decoder read low nibble first is the package's unpack for all 256
//! bytes; our e8m0 decoder is the package's scale decode bit for bit for 0..=254 (its bf16 result;
//! 2^(e−127) is exact in bf16), with the one documented difference at 255 (ours NaN, the package
//! +inf); and `WeightMatrix` (Mxfp4) reproduces the package's decompressed bf16 weight, where the
//! only rounding (bf16 product) is a no-op because e2m1 · 2^k is exact unless it overflows to inf.

#![allow(clippy::panic)] // a test reports failure by panicking

use half::bf16;
use kernels::reference::{e2m1_to_f32, e8m0_to_f32, WeightMatrix};
use kernels::WeightFormat;

const FIXTURE: &str = "../ci/oracles/compressed_tensors_mxfp4/reference.json";

/// The fixture's JSON with the few typed reads the tests need (a read that does not find what it
/// expects fails the test naming the key).
struct Json(serde_json::Value);

impl Json {
    fn get(&self, key: &str) -> Json {
        Json(
            self.0
                .get(key)
                .cloned()
                .unwrap_or_else(|| panic!("fixture: no key {key:?}")),
        )
    }

    fn str(&self) -> &str {
        self.0
            .as_str()
            .unwrap_or_else(|| panic!("fixture: expected a string, got {}", self.0))
    }

    fn usize(&self) -> usize {
        self.0
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or_else(|| panic!("fixture: expected a count, got {}", self.0))
    }

    fn list(&self) -> Vec<Json> {
        self.0
            .as_array()
            .unwrap_or_else(|| panic!("fixture: expected a list, got {}", self.0))
            .iter()
            .cloned()
            .map(Json)
            .collect()
    }

    /// A list of 8-hex-digit f32 bit patterns.
    fn bits(&self) -> Vec<u32> {
        self.list()
            .iter()
            .map(|v| u32::from_str_radix(v.str(), 16).expect("fixture: f32 bits"))
            .collect()
    }

    /// One hex string of bytes.
    fn hex(&self) -> Vec<u8> {
        hex_bytes(self.str())
    }
}

fn hex_bytes(s: &str) -> Vec<u8> {
    assert_eq!(s.len() % 2, 0, "fixture: odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("fixture: hex byte"))
        .collect()
}

fn fixture() -> Json {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v =
        Json(serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    let versions = v.get("versions");
    assert_eq!(versions.get("compressed_tensors").str(), "0.20.1");
    assert!(versions.get("torch").str().starts_with("2.15.0"));
    v
}

/// f32 → bf16 → f32, round to nearest even (what a bf16 tensor stores).
fn bf16_round(x: f32) -> f32 {
    bf16::from_f32(x).to_f32()
}

// ---- the tests ------------------------------------------------------------------------------

#[test]
fn unpack_is_our_e2m1_read_low_nibble_first() {
    let f = fixture();
    let u = f.get("unpack");
    assert_eq!(u.get("output_dtype").str(), "torch.bfloat16");
    let pkg = u.get("values_f32_bits").bits();
    assert_eq!(pkg.len(), 512);
    let mut order_matters = 0;
    for b in 0..=255u8 {
        let even = e2m1_to_f32(b & 0x0f);
        let odd = e2m1_to_f32(b >> 4);
        let i = 2 * usize::from(b);
        assert_eq!(
            [even.to_bits(), odd.to_bits()],
            [pkg[i], pkg[i + 1]],
            "byte {b:#04x}: ours (low nibble first) {even} {odd}, package {} {}",
            f32::from_bits(pkg[i]),
            f32::from_bits(pkg[i + 1])
        );
        // every package value is a bf16 value, so no rounding hides a difference
        assert_eq!(bf16_round(even).to_bits(), even.to_bits());
        order_matters += usize::from(even.to_bits() != odd.to_bits());
    }
    // the 240 bytes with two different nibbles are what pins the order (−0 vs +0 included)
    assert_eq!(order_matters, 240);
}

#[test]
fn package_pack_decodes_to_its_input_with_our_decoder() {
    let f = fixture();
    let p = f.get("pack");
    let input = p.get("input_f32_bits").bits();
    let packed = p.get("packed_hex").hex();
    assert_eq!((input.len(), packed.len()), (512, 256));
    // each of the 16 codes appears at even and at odd positions
    let codes = p.get("fp4_values_by_code").list();
    assert_eq!(codes.len(), 16);
    for c in 0..16u8 {
        let v = e2m1_to_f32(c);
        assert!(
            input.iter().step_by(2).any(|b| *b == v.to_bits()),
            "{v} at even"
        );
        assert!(
            input.iter().skip(1).step_by(2).any(|b| *b == v.to_bits()),
            "{v} at odd"
        );
        assert_eq!(
            codes[usize::from(c)]
                .str()
                .parse::<f32>()
                .expect("value")
                .to_bits(),
            v.to_bits()
        );
    }
    // one 1×512 matrix, one scale 1.0 (e8m0 127) per 32: WeightMatrix reads it back exactly
    let scales = vec![127u8; 512 / 32];
    let w = WeightMatrix::new(WeightFormat::Mxfp4, 1, 512, &packed, &scales, &[]).expect("shape");
    for (k, want) in input.iter().enumerate() {
        assert_eq!(w.get(0, k).to_bits(), *want, "element {k}");
    }
    // and byte by byte: low nibble = element 2p
    for (p_i, b) in packed.iter().enumerate() {
        assert_eq!(
            *b,
            (p_i / 16) as u8 | (((p_i % 16) as u8) << 4),
            "byte {p_i}"
        );
    }
}

#[test]
fn e8m0_is_decompress_mx_scale_except_255() {
    let f = fixture();
    let d = f.get("decompress_scale");
    assert_eq!(d.get("output_dtype").str(), "torch.bfloat16");
    let pkg = d.get("scale_f32_bits").bits();
    assert_eq!(pkg.len(), 256);
    for e in 0..=254u8 {
        let ours = e8m0_to_f32(e);
        // 2^(e−127) is exact in bf16 (same exponent range as f32; 2^-127 is a bf16 subnormal)
        assert_eq!(
            bf16_round(ours).to_bits(),
            ours.to_bits(),
            "e8m0 {e}: not exact in bf16"
        );
        assert_eq!(ours.to_bits(), pkg[usize::from(e)], "e8m0 {e}");
    }
    assert_eq!(
        pkg[0], 0x0040_0000,
        "package: 0 → 2^-127 (subnormal), not 0"
    );
    // the documented difference: 0xFF is NaN for us (OCP), 2^128 = +inf for the package
    assert!(e8m0_to_f32(255).is_nan());
    assert_eq!(pkg[255], f32::INFINITY.to_bits());
}

#[test]
fn weight_matrix_is_the_package_decompress() {
    let f = fixture();
    let d = f.get("decompress");
    let (rows, cols) = (d.get("rows").usize(), d.get("cols").usize());
    let packed = d.get("weight_packed_hex").hex();
    let scales = d.get("weight_scale_hex").hex();
    assert_eq!(d.get("weight_dtype").str(), "torch.bfloat16");
    let pkg = d.get("weight_f32_bits").bits();
    assert_eq!(
        (packed.len(), scales.len(), pkg.len()),
        (rows * cols / 2, rows * cols / 32, rows * cols)
    );
    assert!(!scales.contains(&255), "the fixture avoids the NaN scale");
    let w =
        WeightMatrix::new(WeightFormat::Mxfp4, rows, cols, &packed, &scales, &[]).expect("shape");
    let (mut infinite, mut subnormal) = (0, 0);
    for r in 0..rows {
        for k in 0..cols {
            let ours = w.get(r, k);
            let want = pkg[r * cols + k];
            // the package multiplies in bf16; e2m1 · 2^(e−127) needs ≤ 2 significant bits, so the
            // product is exact in f32 and in bf16 (or ±inf in both): rounding ours changes nothing
            assert_eq!(
                bf16_round(ours).to_bits(),
                ours.to_bits(),
                "({r}, {k}) {ours}"
            );
            assert_eq!(
                ours.to_bits(),
                want,
                "({r}, {k}): ours {ours}, package {}",
                f32::from_bits(want)
            );
            infinite += usize::from(ours.is_infinite());
            subnormal += usize::from(ours.is_subnormal());
        }
    }
    // the fixture reaches both ends of the range: overflow to inf (scales 253, 254) and
    // subnormal products (scales 0, 1)
    assert!(
        infinite > 0 && subnormal > 0,
        "inf {infinite}, subnormal {subnormal}"
    );
    // the package hands back its decoded scale too: our e8m0 of each byte
    let out = d.get("weight_scale_out_f32_bits").bits();
    for (s, b) in scales.iter().zip(&out) {
        assert_eq!(e8m0_to_f32(*s).to_bits(), *b, "scale byte {s}");
    }
}
