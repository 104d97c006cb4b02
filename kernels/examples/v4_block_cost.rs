//! What the DeepSeek V4 block kernels cost a dispatch (docs/kernels.md "V4 block kernels"): the
//! mHC step alone, after `wo_b` and after the MoE (with the expansion and the weighted sum), and
//! the router, at the demo's shapes (4 streams of 256; 2 picks; 256 experts, top 6), next to
//! `rmsnorm` over 256 values; and the attention kernels of a decode step at the demo's shapes
//! (head and entry dim 128, 64 rotated pairs of which 32; window 8; 4 heads; the CSA
//! compressor's step with and without an emitted entry, the indexer's 64 heads over 100
//! and over 12 entries and its top 4, the attention over 8 + 4 keys). Each is recorded 100 times
//! into one submit with its bind group made once (as a decode step records them); the minimum
//! of 7 such submits, a dispatch.
//!
//!   cargo run --release -p kernels --example v4_block_cost

#![allow(clippy::unwrap_used)]
use std::time::{Duration, Instant};

use kernels::gpu::{Bind, Gpu};
use kernels::{
    HcMixParams, Kernel, MoeRouteParams, RmsNormParams, V4AttendParams, V4CompressParams,
    V4IndexParams,
};

fn time<P: bytemuck::Pod>(
    g: &Gpu,
    name: &str,
    kernel: Kernel,
    params: &P,
    binds: &[Bind<'_>],
    groups: (u32, u32, u32),
) {
    let compiled = g.compiled(kernel);
    let uniform = g.uniform("params", bytemuck::bytes_of(params));
    let group = g
        .bind_group(kernel, &uniform.as_entire_binding(), binds)
        .unwrap();
    let mut best = Duration::MAX;
    for _ in 0..7 {
        let t = Instant::now();
        let mut enc = g.encoder(name);
        for _ in 0..100 {
            let mut pass = enc.begin_compute_pass(&Default::default());
            g.dispatch_in(&mut pass, &compiled, &group, groups);
        }
        g.submit(enc.finish());
        let last = binds.last().unwrap().buffer;
        g.read_bytes(last, 4).unwrap();
        best = best.min(t.elapsed() / 100);
    }
    println!("{name:<24} {:>8.1} µs a dispatch", best.as_secs_f64() * 1e6);
}

fn main() {
    let g = Gpu::new().unwrap();
    let (hc, d) = (4usize, 256usize);
    let rows = (2 + hc) * hc;
    let wave = |n: usize, f: f32| (0..n).map(|i| (i as f32 * f).sin()).collect::<Vec<f32>>();
    let up = |name: &str, v: &[f32]| g.upload_f32(name, v).unwrap();
    let streams = up("streams", &wave(hc * d, 0.37));
    let wfn = up("fn", &wave(rows * hc * d, 0.011));
    let mut small = wave(28 + d, 0.5);
    small[24..27].copy_from_slice(&[0.3, 0.6, 1.1]);
    let small = up("base, scale, norm", &small);
    let mix = up("mix", &wave(48, 0.3));
    let x = g.zeros("x", (d * 4) as u64).unwrap();
    let y = g.zeros("y", (d * 4) as u64).unwrap();
    let p = RmsNormParams {
        n: d as u32,
        tokens: 1,
        eps: 1e-6,
        groups_x: 1,
    };
    let binds = [(&streams).into(), (&small).into(), (&y).into()];
    time(&g, "rmsnorm (256)", Kernel::RmsNorm, &p, &binds, (1, 1, 1));
    let k = 2usize;
    let ys = up("ys", &wave((k + 1) * d, 0.21));
    let w = up("w", &[0.5, 0.5]);
    for (name, expand, k) in [
        ("hc_mix (4 × 256)", 0, 0),
        ("hc_mix after wo_b", 1, 0),
        ("hc_mix after the MoE", 1, k),
    ] {
        let p = HcMixParams {
            hc: hc as u32,
            d: d as u32,
            iters: 20,
            head: 0,
            eps: 1e-6,
            norm_eps: 1e-6,
            expand,
            k: k as u32,
            prev: 24,
            cur: 0,
            _pad0: 0,
            _pad1: 0,
        };
        let binds = [&streams, &wfn, &small, &mix, &x, &ys, &w].map(Bind::from);
        time(&g, name, Kernel::HcMix, &p, &binds, (1, 1, 1));
    }
    let experts = 256usize;
    let logits = up("logits", &wave(experts, 0.37));
    let bias = up("bias", &vec![0.0; experts]);
    let table = g.upload_u32("table", &[0]).unwrap();
    let token = g.upload_u32("token", &[0]).unwrap();
    let ids = g.zeros("ids", 64).unwrap();
    let weights = g.zeros("weights", 64).unwrap();
    let p = MoeRouteParams {
        experts: experts as u32,
        top_k: 6,
        hash: 0,
        token_at: 0,
        scale: 1.5,
        _pad0: 0,
        _pad1: 0,
        _pad2: 0,
    };
    let binds = [&logits, &bias, &table, &token, &ids, &weights].map(Bind::from);
    time(
        &g,
        "moe_route (256, top 6)",
        Kernel::MoeRoute,
        &p,
        &binds,
        (1, 1, 1),
    );
    attention(&g);
}

/// The attention kernels of one layer of a demo decode step.
fn attention(g: &Gpu) {
    let wave = |n: usize, f: f32| (0..n).map(|i| (i as f32 * f).sin()).collect::<Vec<f32>>();
    let up = |name: &str, v: &[f32]| g.upload_f32(name, v).unwrap();
    let (dim, pairs, ratio, coff) = (128usize, 32usize, 4usize, 2usize);
    let w = coff * dim;
    let src = up("src", &wave(2 * w, 0.3));
    let ape = up("ape", &wave(ratio * w, 0.2));
    let norm = up("norm", &wave(dim, 0.1));
    let table = up("table", &wave(4 * pairs * 2, 0.7));
    let state = g
        .zeros("state", ((2 * ratio * w + 2 * ratio * dim) * 4) as u64)
        .unwrap();
    let entries = up("entries", &wave(128 * dim, 0.05));
    for (name, emit) in [("v4_compress (buffer)", 0), ("v4_compress (emit)", 1)] {
        let p = V4CompressParams {
            ratio: ratio as u32,
            coff: coff as u32,
            dim: dim as u32,
            slot: 3,
            emit,
            entry: 100,
            pairs: pairs as u32,
            table_row: 2,
            kv_at: 0,
            gate_at: w as u32,
            eps: 1e-6,
            _pad0: 0,
        };
        let binds = [&src, &ape, &norm, &table, &state, &entries].map(Bind::from);
        time(g, name, Kernel::V4Compress, &p, &binds, (1, 1, 1));
    }
    let (ih, n) = (64usize, 100usize);
    let q = up("iq", &wave(ih * dim, 0.13));
    let wts = up("weights", &wave(ih, 0.9));
    let scores = g.zeros("scores", (n * 4) as u64).unwrap();
    let list = g.zeros("list", 64).unwrap();
    let p = V4IndexParams {
        heads: ih as u32,
        dim: dim as u32,
        n: n as u32,
        pairs: pairs as u32,
        table_row: 1,
        q_at: 0,
        w_at: 0,
        k: 4,
        groups_x: n as u32,
        _pad0: 0,
        _pad1: 0,
        _pad2: 0,
    };
    let binds = [&q, &wts, &entries, &table, &scores].map(Bind::from);
    time(
        g,
        "v4_index_score (64 × 100)",
        Kernel::V4IndexScore,
        &p,
        &binds,
        (n as u32, 1, 1),
    );
    let p12 = V4IndexParams {
        n: 12,
        groups_x: 12,
        ..p
    };
    time(
        g,
        "v4_index_score (64 × 12)",
        Kernel::V4IndexScore,
        &p12,
        &binds,
        (12, 1, 1),
    );
    let binds = [&scores, &list].map(Bind::from);
    time(
        g,
        "v4_index_topk (4 of 100)",
        Kernel::V4IndexTopk,
        &p,
        &binds,
        (1, 1, 1),
    );
    let heads = 4usize;
    let qa = up("q", &wave(heads * dim, 0.17));
    let kv = up("kv", &wave(dim, 0.23));
    let sinks = up("sinks", &wave(heads, 1.1));
    let ring = up("ring", &wave(8 * dim, 0.31));
    let il = g.upload_u32("list", &[1, 5, 9, 40]).unwrap();
    let out = g.zeros("out", (heads * dim * 4) as u64).unwrap();
    let p = V4AttendParams {
        heads: heads as u32,
        dim: dim as u32,
        window: 8,
        pos: 403,
        lo: 396,
        mode: 2,
        n: 4,
        pairs: pairs as u32,
        table_row: 1,
        q_at: 0,
        kv_at: 0,
        eps: 1e-6,
        scale: 0.088,
        _pad0: 0,
        _pad1: 0,
        _pad2: 0,
    };
    let binds = [&qa, &kv, &norm, &sinks, &table, &ring, &entries, &il, &out].map(Bind::from);
    time(
        g,
        "v4_attend (4 heads, 12 keys)",
        Kernel::V4Attend,
        &p,
        &binds,
        (heads as u32, 1, 1),
    );
}
