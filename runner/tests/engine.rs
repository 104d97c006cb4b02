//! Engine tests on the default adapter (Mesa lavapipe in CI): a resident matrix, a resident matrix
//! split into parts, and the same matrix streamed through two reused 16 KiB-aligned tile slots give
//! bit-identical outputs for every weight format; the engine refuses bad inputs with typed errors.
//! Without an adapter: failure under MINIRUN_REQUIRE_ADAPTER=1, otherwise a visible skip.

#![allow(clippy::panic)] // a test reports failure by panicking

use std::io::Write;

use crate::common::engine;
use kernels::gpu::Bind;
use kernels::reference::{self, WeightMatrix};
use kernels::{Dtype, EmbeddingFormat, WeightFormat};
use runner::engine::{Engine, EngineError, RowBuffers};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn f(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A random matrix in `format`: [packed, scales, biases].
fn matrix(format: WeightFormat, rows: usize, k: usize, rng: &mut Rng) -> [Vec<u8>; 3] {
    let mut packed = rng.bytes(format.packed_len(rows, k).expect("len"));
    let mut scales = rng.bytes(format.scales_len(rows, k).expect("len"));
    let mut biases = rng.bytes(format.biases_len(rows, k).expect("len"));
    let small_f16 = |rng: &mut Rng| half::f16::from_f32(rng.f() * 0.05).to_bits().to_le_bytes();
    match format {
        WeightFormat::Plain(_) | WeightFormat::Affine8 { .. } => {
            let fill = |buf: &mut Vec<u8>, d: Dtype, rng: &mut Rng| {
                let n = buf.len() / d.size();
                *buf = (0..n)
                    .flat_map(|_| match d {
                        Dtype::F32 => (rng.f() * 0.1).to_le_bytes().to_vec(),
                        Dtype::F16 => small_f16(rng).to_vec(),
                        Dtype::Bf16 => half::bf16::from_f32(rng.f() * 0.1)
                            .to_bits()
                            .to_le_bytes()
                            .to_vec(),
                    })
                    .collect();
            };
            if let WeightFormat::Plain(d) = format {
                fill(&mut packed, d, rng);
            }
            if let WeightFormat::Affine8 { scale_dtype, .. } = format {
                fill(&mut scales, scale_dtype, rng);
                fill(&mut biases, scale_dtype, rng);
            }
        }
        WeightFormat::Fp8Block { .. } => {
            packed.iter_mut().for_each(|b| *b &= 0xbf);
            scales.iter_mut().for_each(|s| *s = 120 + *s % 8);
        }
        WeightFormat::Mxfp4 => scales.iter_mut().for_each(|s| *s = 124 + *s % 6),
        WeightFormat::Q8_0 | WeightFormat::Q4_1 => {
            let block = if format == WeightFormat::Q8_0 { 34 } else { 20 };
            for b in packed.chunks_exact_mut(block) {
                b[..2].copy_from_slice(&small_f16(rng));
                if block == 20 {
                    b[2..4].copy_from_slice(&small_f16(rng));
                }
            }
        }
        // d (and m / dmin) small; the K-quants' d at byte 0 (Q4_K, Q5_K) or 208 (Q6_K), scaled
        // down further as real checkpoints are (6-bit or i8 sub-block scales multiply it)
        WeightFormat::Q4K | WeightFormat::Q5K => {
            let block = if format == WeightFormat::Q4K {
                144
            } else {
                176
            };
            for b in packed.chunks_exact_mut(block) {
                for h in 0..2 {
                    let v = half::f16::from_f32(rng.f() * 0.002).to_bits().to_le_bytes();
                    b[2 * h..2 * h + 2].copy_from_slice(&v);
                }
            }
        }
        WeightFormat::Q4_0 | WeightFormat::Q5_0 | WeightFormat::Q5_1 => {
            let (block, halves) = match format {
                WeightFormat::Q4_0 => (18, 1),
                WeightFormat::Q5_0 => (22, 1),
                _ => (24, 2),
            };
            for b in packed.chunks_exact_mut(block) {
                for h in 0..halves {
                    b[2 * h..2 * h + 2].copy_from_slice(&small_f16(rng));
                }
            }
        }
        WeightFormat::Q6K => {
            for b in packed.chunks_exact_mut(210) {
                let d = half::f16::from_f32(rng.f() * 0.0005)
                    .to_bits()
                    .to_le_bytes();
                b[208..].copy_from_slice(&d);
            }
        }
    }
    [packed, scales, biases]
}

fn formats() -> Vec<WeightFormat> {
    vec![
        WeightFormat::Plain(Dtype::F32),
        WeightFormat::Plain(Dtype::F16),
        WeightFormat::Plain(Dtype::Bf16),
        WeightFormat::Fp8Block {
            block_rows: 16,
            group: 64,
        },
        WeightFormat::Mxfp4,
        WeightFormat::Affine8 {
            group: 64,
            scale_dtype: Dtype::Bf16,
        },
        WeightFormat::Affine8 {
            group: 32,
            scale_dtype: Dtype::F16,
        },
        WeightFormat::Q8_0,
        WeightFormat::Q4_1,
        WeightFormat::Q4_0,
        WeightFormat::Q5_0,
        WeightFormat::Q5_1,
        WeightFormat::Q4K,
        WeightFormat::Q5K,
        WeightFormat::Q6K,
    ]
}

/// Streams rows in tiles of `tile_rows` through two reused slot buffers (packed at 0, scales and
/// biases each at the next 16 KiB boundary, as a container tile), alternating slots.
#[allow(clippy::too_many_arguments)]
fn streamed(
    e: &Engine,
    format: WeightFormat,
    rows: usize,
    k: usize,
    bytes: &[Vec<u8>; 3],
    tile_rows: usize,
    x: &wgpu::Buffer,
    tokens: usize,
) -> Vec<f32> {
    const ALIGN: u64 = 16 * 1024;
    let g = e.gpu();
    let y = g.zeros("y", (tokens * rows * 4) as u64).expect("y");
    let slots = [
        g.zeros("slot a", 4 * ALIGN).expect("slot"),
        g.zeros("slot b", 4 * ALIGN).expect("slot"),
    ];
    let mut row0 = 0;
    let mut n = 0;
    while row0 < rows {
        let row1 = rows.min(row0 + tile_rows);
        let ranges = format.row_ranges(k, row0, row1).expect("ranges");
        let slot = &slots[n % 2];
        let mut offsets = [0u64; 3];
        let mut at = 0u64;
        for (i, r) in ranges.iter().enumerate() {
            offsets[i] = at;
            let mut part = bytes[i][r.clone()].to_vec();
            part.resize(part.len().div_ceil(4) * 4, 0);
            if !part.is_empty() {
                g.queue().write_buffer(slot, at, &part);
            }
            at += (part.len() as u64).div_ceil(ALIGN).max(1) * ALIGN;
        }
        let window = |i: usize| Bind {
            buffer: slot,
            offset: offsets[i],
            size: Some((ranges[i].len() as u64).div_ceil(4).max(1) * 4),
        };
        let w = RowBuffers {
            packed: window(0),
            scales: (format.buffer_count() >= 2).then(|| window(1)),
            biases: (format.buffer_count() >= 3).then(|| window(2)),
        };
        e.matmul_rows(format, k, row1 - row0, row0, rows, tokens, w, x, &y)
            .expect("tile dispatch");
        row0 = row1;
        n += 1;
    }
    assert!(n >= 3, "the streamed path must use several tiles, used {n}");
    g.read_f32(&y, tokens * rows).expect("read")
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

#[test]
fn resident_parts_and_streamed_tiles_are_bit_identical() {
    let Some(e) = engine("resident_parts_and_streamed_tiles_are_bit_identical") else {
        return;
    };
    let mut rng = Rng(0x5eed);
    for format in formats() {
        // the K-quants need K a multiple of 256
        let (rows, k) = (
            80,
            if format.check_k(192).is_ok() {
                192
            } else {
                256
            },
        );
        let bytes = matrix(format, rows, k, &mut rng);
        let refs = [
            bytes[0].as_slice(),
            bytes[1].as_slice(),
            bytes[2].as_slice(),
        ];
        let whole = e
            .upload_matrix("w", format, rows, k, refs, None)
            .expect("upload");
        assert_eq!(whole.parts.len(), 1);
        // force parts of at most 20 rows' worth of the largest buffer
        let row_bytes = format.packed_len(16, k).expect("len") as u64;
        let split = e
            .upload_matrix("w", format, rows, k, refs, Some(row_bytes))
            .expect("upload in parts");
        assert!(
            split.parts.len() >= 4,
            "{}: {} parts",
            format.name(),
            split.parts.len()
        );
        let cpu = WeightMatrix::new(format, rows, k, &bytes[0], &bytes[1], &bytes[2]).expect("cpu");
        for tokens in [1, 5] {
            let x: Vec<f32> = (0..tokens * k).map(|_| rng.f()).collect();
            let xb = e.gpu().upload_f32("x", &x).expect("x");
            let run = |m: &runner::engine::ResidentMatrix| {
                let y = e.gpu().zeros("y", (tokens * rows * 4) as u64).expect("y");
                e.matmul(m, &xb, &y, tokens).expect("matmul");
                e.gpu().read_f32(&y, tokens * rows).expect("read")
            };
            let resident = run(&whole);
            let parts = run(&split);
            let tiles = streamed(e, format, rows, k, &bytes, 16, &xb, tokens);
            let name = format.name();
            assert_eq!(
                bits(&parts),
                bits(&resident),
                "{name}: parts vs resident, tokens {tokens}"
            );
            assert_eq!(
                bits(&tiles),
                bits(&resident),
                "{name}: streamed vs resident, tokens {tokens}"
            );
            let want = reference::matmul(&cpu, &x, tokens).expect("reference");
            for (i, (g, c)) in resident.iter().zip(&want).enumerate() {
                let tol = 1e-5 * (1.0 + c.abs());
                assert!(
                    (g - c).abs() <= tol,
                    "{name}: index {i}: gpu {g}, cpu {c}, tolerance {tol}"
                );
            }
        }
    }
}

/// A stack of matrices (`Engine::upload_stack`): each view multiplies as the matrix uploaded
/// alone, bit for bit, one token and a chunk, and so does the stack's row block; a stack the
/// engine cannot make (matrices whose bytes are off the offset alignment, a format with biases)
/// is `None`, with nothing uploaded.
#[test]
fn stacked_matrices_multiply_as_their_own() {
    let Some(e) = engine("stacked_matrices_multiply_as_their_own") else {
        return;
    };
    let mut rng = Rng(0x57ac);
    let (rows, k) = (128, 256);
    let fp8 = |block_rows, group| WeightFormat::Fp8Block { block_rows, group };
    let mut stacked = 0;
    for format in [WeightFormat::Mxfp4, fp8(128, 128), fp8(1, 1)] {
        let mats: Vec<[Vec<u8>; 3]> = (0..3).map(|_| matrix(format, rows, k, &mut rng)).collect();
        let names = ["a", "b", "c"];
        let items: Vec<(&str, &[u8], &[u8])> = mats
            .iter()
            .zip(names)
            .map(|(m, n)| (n, m[0].as_slice(), m[1].as_slice()))
            .collect();
        let align = u64::from(
            e.gpu()
                .device()
                .limits()
                .min_storage_buffer_offset_alignment,
        );
        let scale_bytes = format.scales_len(rows, k).expect("len") as u64;
        let made = e
            .upload_stack("stack", format, rows, k, &items)
            .expect("upload");
        // (an fp8 matrix of 128 × 256 has 2 scale bytes: its grid cannot start a binding)
        if scale_bytes % align.max(4) != 0 {
            assert!(
                made.is_none(),
                "{}: stacked off the alignment",
                format.name()
            );
            continue;
        }
        let (stack, views) = made.expect("a stack");
        assert_eq!(
            (stack.rows, stack.parts.len(), views.len()),
            (3 * rows, 1, 3)
        );
        for tokens in [1, 3] {
            let x: Vec<f32> = (0..tokens * k).map(|_| rng.f()).collect();
            let xb = e.gpu().upload_f32("x", &x).expect("x");
            let run = |m: &runner::engine::ResidentMatrix| {
                let y = e.gpu().zeros("y", (tokens * m.rows * 4) as u64).expect("y");
                e.matmul(m, &xb, &y, tokens).expect("matmul");
                e.gpu().read_f32(&y, tokens * m.rows).expect("read")
            };
            let all = run(&stack);
            for (i, (view, m)) in views.iter().zip(&mats).enumerate() {
                let alone = e
                    .upload_matrix("alone", format, rows, k, [&m[0], &m[1], &m[2]], None)
                    .expect("upload");
                let want = run(&alone);
                assert_eq!(view.name, names[i]);
                assert_eq!(bits(&run(view)), bits(&want), "{}: view {i}", format.name());
                let block: Vec<f32> = (0..tokens)
                    .flat_map(|t| all[t * 3 * rows + i * rows..][..rows].to_vec())
                    .collect();
                assert_eq!(
                    bits(&block),
                    bits(&want),
                    "{}: stack block {i}",
                    format.name()
                );
            }
        }
        stacked += 1;
    }
    // mxfp4 (1 KiB of scales) and fp8 with a scale per weight (32 KiB) are stacked
    assert_eq!(stacked, 2);
    // 40 mxfp4 rows of K 64 are 1280 bytes: off a 256-byte alignment where the device has one
    let align = e
        .gpu()
        .device()
        .limits()
        .min_storage_buffer_offset_alignment;
    let m = matrix(WeightFormat::Mxfp4, 40, 64, &mut rng);
    let items = [("a", m[0].as_slice(), m[1].as_slice()); 2];
    let odd = e
        .upload_stack("odd", WeightFormat::Mxfp4, 40, 64, &items)
        .expect("checked");
    assert_eq!(odd.is_none(), 1280 % align != 0 || 80 % align != 0);
    let affine = WeightFormat::Affine8 {
        group: 32,
        scale_dtype: Dtype::F16,
    };
    let m = matrix(affine, 64, 64, &mut rng);
    let items = [("a", m[0].as_slice(), m[1].as_slice())];
    assert!(e
        .upload_stack("affine", affine, 64, 64, &items)
        .expect("checked")
        .is_none());
}

#[test]
fn engine_refuses_bad_inputs() {
    let Some(e) = engine("engine_refuses_bad_inputs") else {
        return;
    };
    let err = e
        .upload_matrix(
            "blk.0.attn_q.weight",
            WeightFormat::Q8_0,
            2,
            64,
            [&[0u8; 10], &[], &[]],
            None,
        )
        .err()
        .expect("short buffer is refused");
    let msg = err.to_string();
    assert!(
        msg.contains("blk.0.attn_q.weight") && msg.contains("136"),
        "{msg}"
    );
    let err = e
        .upload_matrix(
            "w",
            WeightFormat::Mxfp4,
            4,
            64,
            [&[0u8; 128], &[0u8; 8], &[]],
            Some(16),
        )
        .err()
        .expect("a 32-byte row cannot fit a 16-byte part");
    assert!(
        matches!(err, EngineError::RowTooLarge { row_bytes: 32, .. }),
        "{err:?}"
    );
    let small = e.gpu().zeros("small", 16).expect("buffer");
    let p = kernels::AttentionParams {
        n_heads: 2,
        n_kv_heads: 1,
        head_dim: 4,
        tokens: 1,
        pos0: 0,
        capacity: 8,
        scale: 0.5,
        _pad: 0,
    };
    let err = e
        .attention(&p, &small, &small, &small, &small, &small)
        .expect_err("undersized buffers are refused");
    assert!(
        matches!(
            err,
            EngineError::BufferTooSmall {
                what: "q",
                bytes: 32,
                ..
            }
        ),
        "{err:?}"
    );
    let table = e.gpu().upload("table", &[0u8; 64]).expect("table");
    let out = e.gpu().zeros("out", 64).expect("out");
    let err = e
        .embedding(EmbeddingFormat::F32, &table, 4, 4, &[1, 4], &out)
        .expect_err("id 4 is outside a vocabulary of 4");
    assert!(format!("{err:?}").contains("TokenId"), "{err:?}");
}

#[test]
fn argmax_through_the_engine() {
    let Some(e) = engine("argmax_through_the_engine") else {
        return;
    };
    let v = [0.5f32, 9.0, -1.0, 9.0, 3.0, 2.0];
    let vb = e.gpu().upload_f32("v", &v).expect("v");
    assert_eq!(e.argmax(&vb, 3, 2).expect("argmax"), vec![1, 0]);
}

#[test]
fn a_batched_sequence_equals_separate_submits() {
    let Some(e) = engine("a_batched_sequence_equals_separate_submits") else {
        return;
    };
    let mut rng = Rng(77);
    let (rows, k) = (96, 128);
    let format = WeightFormat::Q4_1;
    let bytes = matrix(format, rows, k, &mut rng);
    let refs = [
        bytes[0].as_slice(),
        bytes[1].as_slice(),
        bytes[2].as_slice(),
    ];
    let m = e
        .upload_matrix("w", format, rows, k, refs, None)
        .expect("upload");
    let x: Vec<f32> = (0..k).map(|_| rng.f()).collect();
    let norm: Vec<f32> = (0..rows).map(|_| 1.0 + rng.f()).collect();
    let g = e.gpu();
    let (xb, nb) = (
        g.upload_f32("x", &x).expect("x"),
        g.upload_f32("n", &norm).expect("n"),
    );
    // matvec → rmsnorm → argmax, each step reading the previous one's output
    let run = |batched: bool| {
        let y = g.zeros("y", (rows * 4) as u64).expect("y");
        let z = g.zeros("z", (rows * 4) as u64).expect("z");
        let steps = |e: &Engine| -> Result<Vec<u32>, EngineError> {
            e.matmul(&m, &xb, &y, 1)?;
            e.rmsnorm(&y, &nb, &z, rows, 1, 1e-6)?;
            e.argmax(&z, rows, 1)
        };
        let top = if batched { e.batched(steps) } else { steps(e) }.expect("run");
        (top, g.read_f32(&z, rows).expect("read"))
    };
    let (top_a, z_a) = run(false);
    let (top_b, z_b) = run(true);
    assert_eq!(top_a, top_b);
    assert_eq!(bits(&z_a), bits(&z_b));
    assert!(z_a.iter().any(|v| *v != 0.0), "the chain produced output");
}

/// Timing of a SmolLM2-sized decode matvec (the tied 49152 × 576 Q4_1 output matrix) and prefill
/// matmul. Not a CI step: `cargo test -p runner --release --test integration engine:: -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench_q4_1_output_matrix() {
    let Some(e) = engine("bench_q4_1_output_matrix") else {
        return;
    };
    let mut rng = Rng(99);
    let (rows, k) = (49_152, 576);
    let bytes = matrix(WeightFormat::Q4_1, rows, k, &mut rng);
    let refs = [
        bytes[0].as_slice(),
        bytes[1].as_slice(),
        bytes[2].as_slice(),
    ];
    let m = e
        .upload_matrix("output", WeightFormat::Q4_1, rows, k, refs, None)
        .expect("upload");
    for tokens in [1usize, 16] {
        let x: Vec<f32> = (0..tokens * k).map(|_| rng.f()).collect();
        let xb = e.gpu().upload_f32("x", &x).expect("x");
        let y = e.gpu().zeros("y", (tokens * rows * 4) as u64).expect("y");
        e.matmul(&m, &xb, &y, tokens).expect("warm-up");
        e.gpu().read_f32(&y, 1).expect("sync");
        let runs = 5;
        let t = std::time::Instant::now();
        for _ in 0..runs {
            e.matmul(&m, &xb, &y, tokens).expect("matmul");
        }
        e.gpu().read_f32(&y, 1).expect("sync");
        let ms = t.elapsed().as_secs_f64() * 1e3 / f64::from(runs);
        let gbs = bytes[0].len() as f64 / (ms / 1e3) / 1e9;
        let _ = writeln!(
            std::io::stderr(),
            "q4_1 {rows}x{k}, tokens {tokens}: {ms:.2} ms per dispatch ({gbs:.2} GB/s of weights)"
        );
    }
}
