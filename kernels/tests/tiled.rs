//! The shared-memory tiled matmul (docs/kernels.md "Tiled prefill matmul"), the `Lanes`
//! mapping's kernel for several tokens: K spanning several staged slices (and a last partial
//! one), rows not a multiple of the tile's 8, tokens not a multiple of 4 — per token the bits of
//! the matvec, and the bits of the `Rows` mapping's untiled matmul; with the subgroup reduction
//! forced on (where the adapter has subgroups), per token the subgroup matvec's bits.

#![allow(clippy::panic)] // a test reports failure by panicking

use crate::support;

use kernels::gpu::{Gpu, MatvecShape};
use kernels::{Dtype, WeightFormat};
use support::{assert_bits, case, gpu, run_matmul, Case, Rng};

/// One case a family, with K over several 256-element slices.
fn long_cases() -> Vec<Case> {
    let mut rng = Rng(0x7111_ed00);
    let formats = [
        WeightFormat::Plain(Dtype::F32),
        WeightFormat::Plain(Dtype::Bf16),
        WeightFormat::Fp8Block {
            block_rows: 128,
            group: 128,
        },
        WeightFormat::Mxfp4,
        WeightFormat::Affine8 {
            group: 64,
            scale_dtype: Dtype::Bf16,
        },
        WeightFormat::Q8_0,
        WeightFormat::Q4_1,
        WeightFormat::Q4_0,
        WeightFormat::Q5_0,
        WeightFormat::Q5_1,
        WeightFormat::Q4K,
        WeightFormat::Q5K,
        WeightFormat::Q6K,
    ];
    formats
        .into_iter()
        .map(|f| {
            // a plain K that leaves the last slice partial; 1280 = 5 slices for the blocks
            let k = if matches!(f, WeightFormat::Plain(_)) {
                1000
            } else {
                1280
            };
            // (an fp8 split starts on a 128-row scale block)
            let (rows, split) = match f {
                WeightFormat::Fp8Block { .. } => (203, 128),
                _ => (37, 19),
            };
            case(f, rows, k, split, &mut rng)
        })
        .collect()
}

fn device(shape: MatvecShape, subgroups: bool) -> Option<Gpu> {
    match Gpu::new_with(Some(shape), Some(subgroups)) {
        Ok(g) => Some(g),
        Err(kernels::KernelError::NoSubgroups(name)) => {
            eprintln!("SKIPPED the tiled subgroup reduction: {name} has no subgroups");
            None
        }
        Err(e) => panic!("a {shape:?} device: {e}"),
    }
}

#[test]
fn the_tiled_matmul_gives_each_token_the_bits_of_the_matvec() {
    if gpu("the_tiled_matmul_gives_each_token_the_bits_of_the_matvec").is_none() {
        return;
    }
    let rows = device(MatvecShape::Rows, false).expect("a Rows device");
    let mut rng = Rng(23);
    for sg in [false, true] {
        let Some(lanes) = device(MatvecShape::Lanes, sg) else {
            continue;
        };
        for c in long_cases() {
            let tokens = 7;
            let x = rng.normals(tokens * c.k, 1.0);
            let tiled = run_matmul(&lanes, &c, &x, tokens, &[0, c.rows]);
            for t in 0..tokens {
                let one = run_matmul(&lanes, &c, &x[t * c.k..(t + 1) * c.k], 1, &[0, c.rows]);
                assert_bits(
                    &format!("{} subgroups={sg} token {t} vs matvec", c.name),
                    &tiled[t * c.rows..(t + 1) * c.rows],
                    &one,
                );
            }
            let split = run_matmul(&lanes, &c, &x, tokens, &[0, c.split, c.rows]);
            assert_bits(&format!("{} subgroups={sg} split", c.name), &split, &tiled);
            if !sg {
                let untiled = run_matmul(&rows, &c, &x, tokens, &[0, c.rows]);
                assert_bits(&format!("{} vs the Rows matmul", c.name), &tiled, &untiled);
            }
        }
    }
}
