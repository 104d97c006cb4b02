//! GPU-vs-CPU tests of the non-matmul kernels: each on seeded random inputs against its
//! `kernels::reference` version, within the tolerance of the table below (docs/kernels.md). The
//! matmul families are in tests/matmul.rs; the shared set-up is tests/support.
//!
//! With no adapter these tests fail when `MINIRUN_REQUIRE_ADAPTER=1` (CI); otherwise each prints a
//! visible `SKIPPED` line on stderr (not captured by the test harness) and returns.

#![allow(clippy::panic)] // a test reports failure by panicking

use crate::support;

use kernels::gpu::elementwise_groups;
use kernels::reference::{self, AttentionShape};
use kernels::{
    grid_2d, ActivationParams, ArgmaxParams, AttentionParams, EmbeddingFormat, EmbeddingParams,
    Kernel, RmsNormParams, RopeMode, RopeParams, SoftmaxParams,
};
use support::{assert_bits, assert_close, case, gpu, Rng};

// ---- tolerance table (docs/kernels.md §tolerances): |gpu − cpu| ≤ abs + rel · scale ----
/// RMSNorm: scale = |expected| (GPU sqrt/division may be a few ulp off).
const RMSNORM: (f32, f32) = (1e-7, 4e-6);
/// RoPE: scale = |expected| (table from the host; only fma fusion can differ).
const ROPE: (f32, f32) = (1e-6, 1e-6);
/// Softmax: scale = |expected| (GPU exp: Vulkan allows 3 + 2|x| ulp).
const SOFTMAX: (f32, f32) = (1e-7, 2e-5);
/// Attention: scale = max |v| (exp error, normalisation).
const ATTENTION: (f32, f32) = (1e-6, 2e-5);
/// SiLU / SwiGLU: scale = |expected|.
const ACTIVATION: (f32, f32) = (1e-7, 2e-5);
// Embedding lookup and argmax are exact (tolerance 0).

#[test]
fn rmsnorm_matches() {
    let Some(g) = gpu("rmsnorm_matches") else {
        return;
    };
    let mut rng = Rng(3);
    let (n, tokens) = (576, 3);
    let x = rng.normals(n * tokens, 3.0);
    let w = rng.normals(n, 1.0);
    let want = reference::rmsnorm(&x, &w, 1e-5).expect("reference");
    let (xb, wb) = (
        g.upload_f32("x", &x).expect("x"),
        g.upload_f32("w", &w).expect("w"),
    );
    let yb = g.zeros("y", (x.len() * 4) as u64).expect("y");
    let (gx, gy) = grid_2d(tokens as u32);
    let p = RmsNormParams {
        n: n as u32,
        tokens: tokens as u32,
        eps: 1e-5,
        groups_x: gx,
    };
    g.dispatch(
        Kernel::RmsNorm,
        &p,
        &[(&xb).into(), (&wb).into(), (&yb).into()],
        (gx, gy, 1),
    )
    .expect("dispatch");
    let got = g.read_f32(&yb, x.len()).expect("read");
    assert_close("rmsnorm", &got, &want, |i| {
        RMSNORM.0 + RMSNORM.1 * want[i].abs()
    });
}

#[test]
fn rope_matches_both_pairings() {
    let Some(g) = gpu("rope_matches_both_pairings") else {
        return;
    };
    let mut rng = Rng(5);
    let (tokens, n_heads, head_dim) = (3, 4, 64);
    for (mode, rot_dim) in [
        (RopeMode::HalfSplit, 64),
        (RopeMode::Interleaved, 64),
        (RopeMode::HalfSplit, 32),
    ] {
        let v = rng.normals(tokens * n_heads * head_dim, 2.0);
        let table = reference::rope_table(&[7, 8, 300], rot_dim, 10000.0);
        let mut want = v.clone();
        reference::rope(&mut want, &table, n_heads, head_dim, rot_dim, mode).expect("reference");
        let vb = g.upload_f32("v", &v).expect("v");
        let tb = g.upload_f32("table", &table).expect("table");
        let pairs = (tokens * n_heads * rot_dim / 2) as u32;
        let groups = elementwise_groups(pairs);
        let p = RopeParams {
            tokens: tokens as u32,
            n_heads: n_heads as u32,
            head_dim: head_dim as u32,
            rot_dim: rot_dim as u32,
            mode: mode as u32,
            groups_x: groups.0,
            table_row0: 0,
            v_offset: 0,
        };
        g.dispatch(Kernel::Rope, &p, &[(&vb).into(), (&tb).into()], groups)
            .expect("dispatch");
        let got = g.read_f32(&vb, v.len()).expect("read");
        assert_close(&format!("rope {mode:?} rot {rot_dim}"), &got, &want, |i| {
            ROPE.0 + ROPE.1 * want[i].abs()
        });
    }
}

#[test]
fn softmax_matches() {
    let Some(g) = gpu("softmax_matches") else {
        return;
    };
    let mut rng = Rng(9);
    let (n, rows) = (1000, 3);
    let v = rng.normals(n * rows, 8.0);
    let mut want = v.clone();
    reference::softmax(&mut want, n).expect("reference");
    let vb = g.upload_f32("v", &v).expect("v");
    let (gx, gy) = grid_2d(rows as u32);
    let p = SoftmaxParams {
        n: n as u32,
        rows: rows as u32,
        groups_x: gx,
        _pad: 0,
    };
    g.dispatch(Kernel::Softmax, &p, &[(&vb).into()], (gx, gy, 1))
        .expect("dispatch");
    let got = g.read_f32(&vb, v.len()).expect("read");
    assert_close("softmax", &got, &want, |i| {
        SOFTMAX.0 + SOFTMAX.1 * want[i].abs()
    });
}

#[test]
fn attention_matches_decode_and_prefill() {
    let Some(g) = gpu("attention_matches_decode_and_prefill") else {
        return;
    };
    let mut rng = Rng(13);
    let (n_heads, n_kv_heads, head_dim, capacity) = (9, 3, 64, 150);
    for (tokens, pos0) in [(1, 129), (4, 0), (3, 70)] {
        let s = AttentionShape {
            n_heads,
            n_kv_heads,
            head_dim,
            tokens,
            pos0,
            capacity,
            scale: 1.0 / (head_dim as f32).sqrt(),
        };
        let q = rng.normals(tokens * n_heads * head_dim, 2.0);
        let kc = rng.normals(capacity * n_kv_heads * head_dim, 1.0);
        let vc = rng.normals(capacity * n_kv_heads * head_dim, 1.0);
        let want = reference::attention(&s, &q, &kc, &vc).expect("reference");
        let qb = g.upload_f32("q", &q).expect("q");
        let kb = g.upload_f32("k", &kc).expect("k");
        let vb = g.upload_f32("v", &vc).expect("v");
        let ob = g.zeros("out", (q.len() * 4) as u64).expect("out");
        let sb = g
            .zeros("scratch", (tokens * n_heads * capacity * 4) as u64)
            .expect("scratch");
        let p = AttentionParams {
            n_heads: n_heads as u32,
            n_kv_heads: n_kv_heads as u32,
            head_dim: head_dim as u32,
            tokens: tokens as u32,
            pos0: pos0 as u32,
            capacity: capacity as u32,
            scale: s.scale,
            _pad: 0,
        };
        let binds = [
            (&qb).into(),
            (&kb).into(),
            (&vb).into(),
            (&ob).into(),
            (&sb).into(),
        ];
        g.dispatch(
            Kernel::Attention,
            &p,
            &binds,
            (n_heads as u32, tokens as u32, 1),
        )
        .expect("dispatch");
        let got = g.read_f32(&ob, q.len()).expect("read");
        assert_close(
            &format!("attention tokens={tokens} pos0={pos0}"),
            &got,
            &want,
            |_| ATTENTION.0 + ATTENTION.1,
        );
    }
}

#[test]
fn silu_and_swiglu_match_with_and_without_the_clamp() {
    let Some(g) = gpu("silu_and_swiglu_match_with_and_without_the_clamp") else {
        return;
    };
    let mut rng = Rng(17);
    let n = 1537;
    let a = rng.normals(n, 8.0);
    let b = rng.normals(n, 2.0);
    let (ab, bb) = (
        g.upload_f32("a", &a).expect("a"),
        g.upload_f32("b", &b).expect("b"),
    );
    let groups = elementwise_groups(n as u32);
    let p = ActivationParams::new(n as u32, groups.0);
    // DeepSeek V4's clamp at 1.5: a (within ±8) and b (within ±2) cross it both ways
    let limit = 1.5f32;
    let clamped = reference::swiglu_clamped(&a, &b, limit).expect("reference");
    assert!(a.iter().any(|&v| v > limit) && b.iter().any(|&v| v < -limit));
    assert_ne!(clamped, reference::swiglu(&a, &b).expect("reference"));
    for (kernel, p, want) in [
        (Kernel::Silu, p, reference::silu(&a)),
        (
            Kernel::Swiglu,
            p,
            reference::swiglu(&a, &b).expect("reference"),
        ),
        (Kernel::Swiglu, p.with_limit(limit), clamped),
    ] {
        let yb = g.zeros("y", (n * 4) as u64).expect("y");
        g.dispatch(
            kernel,
            &p,
            &[(&ab).into(), (&bb).into(), (&yb).into()],
            groups,
        )
        .expect("dispatch");
        let got = g.read_f32(&yb, n).expect("read");
        assert_close(kernel.name(), &got, &want, |i| {
            ACTIVATION.0 + ACTIVATION.1 * want[i].abs()
        });
    }
}

#[test]
fn embedding_lookup_is_exact() {
    let Some(g) = gpu("embedding_lookup_is_exact") else {
        return;
    };
    let mut rng = Rng(19);
    let vocab = 50;
    let ids = [0u32, 49, 7, 7, 23];
    for format in [
        EmbeddingFormat::F32,
        EmbeddingFormat::F16,
        EmbeddingFormat::Bf16,
        EmbeddingFormat::Q8_0,
        EmbeddingFormat::Q4_1,
        EmbeddingFormat::Q4_0,
        EmbeddingFormat::Q5_0,
        EmbeddingFormat::Q5_1,
        EmbeddingFormat::Q4K,
        EmbeddingFormat::Q5K,
        EmbeddingFormat::Q6K,
    ] {
        let k_quant = matches!(
            format,
            EmbeddingFormat::Q4K | EmbeddingFormat::Q5K | EmbeddingFormat::Q6K
        );
        let dim = if k_quant { 512 } else { 96 };
        let c = case(format.weight_format(), vocab, dim, 0, &mut rng);
        let want = reference::embedding(format, &c.packed, vocab, dim, &ids).expect("reference");
        let idb = g.upload_u32("ids", &ids).expect("ids");
        let tb = g.upload("table", &c.packed).expect("table");
        let ob = g.zeros("out", (ids.len() * dim * 4) as u64).expect("out");
        let (gx, gy) = grid_2d(ids.len() as u32);
        let p = EmbeddingParams {
            dim: dim as u32,
            tokens: ids.len() as u32,
            vocab: vocab as u32,
            dtype: format.code(),
            groups_x: gx,
            _pad: [0; 3],
        };
        g.dispatch(
            Kernel::Embedding,
            &p,
            &[(&idb).into(), (&tb).into(), (&ob).into()],
            (gx, gy, 1),
        )
        .expect("dispatch");
        let got = g.read_f32(&ob, want.len()).expect("read");
        assert_bits(&format!("embedding {format:?}"), &got, &want);
    }
}

#[test]
fn argmax_is_exact() {
    let Some(g) = gpu("argmax_is_exact") else {
        return;
    };
    let mut rng = Rng(23);
    let n = 49_152;
    let mut v = rng.normals(3 * n, 10.0);
    // row 1: a tie between index 5 and 40_000 (first wins); row 2: NaNs and the max at the end
    v[n + 5] = 100.0;
    v[n + 40_000] = 100.0;
    v[2 * n] = f32::NAN;
    v[3 * n - 1] = 1e6;
    let want = reference::argmax(&v, n);
    assert_eq!(want[1], 5);
    assert_eq!(want[2], (n - 1) as u32);
    let vb = g.upload_f32("v", &v).expect("v");
    let ob = g.zeros("out", 12).expect("out");
    let (gx, gy) = grid_2d(3);
    let p = ArgmaxParams {
        n: n as u32,
        rows: 3,
        groups_x: gx,
        _pad: 0,
    };
    g.dispatch(
        Kernel::Argmax,
        &p,
        &[(&vb).into(), (&ob).into()],
        (gx, gy, 1),
    )
    .expect("dispatch");
    assert_eq!(g.read_u32(&ob, 3).expect("read"), want);
}

/// `Gpu::write_in` lands its bytes before what the encoder records next, submit after submit
/// (its staging chunks are reused once the submit that copied from them is done, so a chunk
/// handed out again too early would show an earlier round's bytes), including writes larger than
/// a chunk, with another recorder submitting in between.
#[test]
fn staged_writes_land_in_order_submit_after_submit() {
    let Some(g) = gpu("staged_writes_land_in_order_submit_after_submit") else {
        return;
    };
    let a = g.zeros("a", 4096).expect("buffer");
    let b = g.zeros("b", 1 << 20).expect("buffer");
    let mut staging = g.write_staging();
    for round in 0..6u32 {
        let small: Vec<u32> = (0..1024).map(|i| i * 7 + round).collect();
        let large: Vec<u32> = (0..(1 << 18)).map(|i| i ^ (round << 20)).collect();
        let before = g.stats();
        let mut enc = g.encoder("staged writes");
        g.write_in(&mut staging, &mut enc, &a, 0, bytemuck::cast_slice(&small));
        g.write_in(&mut staging, &mut enc, &b, 0, bytemuck::cast_slice(&large));
        // the second write of `a`'s first words wins (copies run in record order)
        g.write_in(
            &mut staging,
            &mut enc,
            &a,
            0,
            bytemuck::cast_slice(&[round + 1000]),
        );
        // another recorder's submit in between (tests share one device) leaves ours alone
        g.submit(g.encoder("another recorder").finish());
        g.submit_staged(&mut staging, enc.finish());
        // (at least: other tests upload through the same device at the same time)
        let uploaded = (g.stats() - before).bytes_uploaded;
        assert!(uploaded >= (4096 + (1 << 20) + 4) as u64, "round {round}");
        let got_a = g.read_f32(&a, 1024).expect("read a");
        let got_b = g.read_f32(&b, 1 << 18).expect("read b");
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        let mut want_a = small.clone();
        want_a[0] = round + 1000;
        assert_eq!(bits(&got_a), want_a, "round {round}");
        assert_eq!(bits(&got_b), large, "round {round}");
    }
}
