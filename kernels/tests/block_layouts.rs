//! Every block-quantized format is described in four places that must name the same bytes: the
//! GGUF type table (`artifact::gguf::GgmlType`: `blck_size`, `type_size`), the kernels' block table
//! (`WeightFormat::block`, which `packed_len`, the unrolled matvec and the CPU reference use),
//! the WGSL module's `BLOCK_ELEMS`/`BLOCK_BYTES` constants (its row and block strides), and the
//! decoders themselves. This holds the tables against each other (candle pins its blocks with
//! size asserts the same way) and, so that a stride written wrong anywhere shows, decodes a
//! three-row matrix quantized by `artifact::gguf::quant` with the CPU reference and with
//! artifact's own decoder, element by element.

#![allow(clippy::unwrap_used, clippy::panic)]

use artifact::gguf::quant::{decode_to_f32, encode, FmaContract};
use artifact::gguf::GgmlType;
use kernels::reference::WeightMatrix;
use kernels::WeightFormat;

const FORMATS: [(WeightFormat, &str); 8] = [
    (WeightFormat::Q8_0, "q8_0"),
    (WeightFormat::Q4_0, "q4_0"),
    (WeightFormat::Q4_1, "q4_1"),
    (WeightFormat::Q5_0, "q5_0"),
    (WeightFormat::Q5_1, "q5_1"),
    (WeightFormat::Q4K, "q4_K"),
    (WeightFormat::Q5K, "q5_K"),
    (WeightFormat::Q6K, "q6_K"),
];

/// The value of the WGSL module-scope `const NAME: u32 = Nu;` in `source`, read by naga.
fn wgsl_const(source: &str, name: &str) -> Option<u64> {
    let module = naga::front::wgsl::parse_str(source).expect("the module parses");
    let (_, c) = module
        .constants
        .iter()
        .find(|(_, c)| c.name.as_deref() == Some(name))?;
    match module.global_expressions[c.init] {
        naga::Expression::Literal(naga::Literal::U32(v)) => Some(u64::from(v)),
        naga::Expression::Literal(naga::Literal::AbstractInt(v)) => u64::try_from(v).ok(),
        ref other => panic!("{name} is not a u32 literal: {other:?}"),
    }
}

#[test]
fn block_tables_agree() {
    for (format, name) in FORMATS {
        let (elems, bytes) = format.block().expect("a block format");
        let ggml = GgmlType::from_name(name).expect("a GGUF type");
        assert_eq!(
            (ggml.block_size(), ggml.type_size()),
            (elems as u64, bytes as u64),
            "{name}: GGUF's blck_size/type_size vs WeightFormat::block"
        );
        assert_eq!(
            format.packed_len(3, 2 * elems).unwrap(),
            6 * bytes,
            "{name}"
        );
        assert_eq!(
            format.params(3, 2 * elems as u32, 1, 3, 0).group as usize,
            elems,
            "{name}: the kernels' scale group is the block"
        );
        for kernel in [format.matvec_kernel(), format.matmul_kernel()] {
            let source = kernel.source();
            assert_eq!(
                wgsl_const(source, "BLOCK_ELEMS"),
                Some(elems as u64),
                "{name}: {kernel:?}'s BLOCK_ELEMS"
            );
            assert_eq!(
                wgsl_const(source, "BLOCK_BYTES"),
                Some(bytes as u64),
                "{name}: {kernel:?}'s BLOCK_BYTES"
            );
        }
    }
}

#[test]
fn wgsl_strides_use_the_block_constants() {
    // a stride written as a number would pass the table check while disagreeing with it
    for (format, name) in FORMATS {
        let (elems, bytes) = format.block().expect("a block format");
        let source = format.matvec_kernel().source();
        for literal in [format!("p.k / {elems}u"), format!("* {bytes}u;")] {
            assert!(
                !source.contains(&literal),
                "{name}: the WGSL writes `{literal}` instead of BLOCK_ELEMS/BLOCK_BYTES"
            );
        }
        assert!(
            source.contains("(p.k / BLOCK_ELEMS)"),
            "{name}: no row stride"
        );
    }
}

#[test]
fn reference_decoder_reads_the_gguf_bytes() {
    for (format, name) in FORMATS {
        let (elems, _) = format.block().expect("a block format");
        let ggml = GgmlType::from_name(name).expect("a GGUF type");
        let (rows, k) = (3, 2 * elems);
        // rows of different magnitude, so a row read at another row's offset is far off
        let x: Vec<f32> = (0..rows * k)
            .map(|i| {
                let (r, c) = (i / k, i % k);
                (r as f32 + 1.0)
                    * 4.0
                    * ((c as f32 * 0.37 + r as f32).sin() + 0.1 * c as f32 / k as f32)
            })
            .collect();
        let mut packed = Vec::new();
        encode(ggml, &x, k, &mut packed, FmaContract::Off).expect("encodes");
        let m = WeightMatrix::new(format, rows, k, &packed, &[], &[]).expect("the layout fits");
        let mut decoded = Vec::new();
        if decode_to_f32(ggml, &packed, &mut decoded).is_ok() {
            for (i, want) in decoded.iter().enumerate() {
                let got = m.get(i / k, i % k);
                // the reference may fuse d·q + m (one rounding) where ggml rounds twice
                assert!(
                    (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                    "{name}: element {i}: reference {got}, artifact {want}"
                );
            }
        } else {
            // artifact decodes no K-quant (gguf-py checks their layout in CI): hold the reference
            // to the quantized input, within the format's step; another row's bytes are far off
            for (r, row) in x.chunks_exact(k).enumerate() {
                let max = row.iter().fold(0f32, |a, v| a.max(v.abs()));
                for (c, want) in row.iter().enumerate() {
                    let got = m.get(r, c);
                    assert!(
                        (got - want).abs() <= 0.1 * max,
                        "{name}: element ({r}, {c}): reference {got}, input {want} (row max {max})"
                    );
                }
            }
        }
    }
}
