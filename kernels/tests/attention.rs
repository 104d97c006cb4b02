//! The generated decode attention (kernels::attention: scores, softmax, values) against
//! `attention.wgsl` for one token: the same bits, at every position of a context and for several
//! head shapes; and against the CPU reference within the attention tolerance.

#![allow(clippy::panic)] // a test reports failure by panicking

use crate::support;

use kernels::attention::{scores, single, values, HeadShape};
use kernels::gpu::{Bind, Gpu};
use kernels::reference::{self, AttentionShape};
use kernels::{AttentionParams, Kernel};
use support::{assert_bits, assert_close, gpu, Rng};

/// Runs the three decode kernels for one token at `pos0`; returns out [n_heads, head_dim].
fn decode(
    g: &Gpu,
    s: &HeadShape,
    p: &AttentionParams,
    q: &[f32],
    kc: &[f32],
    vc: &[f32],
) -> Vec<f32> {
    let (sg, vg) = (scores(s).expect("scores"), values(s).expect("values"));
    let mut qpad = q.to_vec();
    qpad.resize(kernels::UNIFORM_X_ELEMENTS, 0.0);
    let qb = g.upload_f32("q", &qpad).expect("q");
    let kb = g.upload_f32("k", kc).expect("k");
    let vb = g.upload_f32("v", vc).expect("v");
    let sb = g
        .zeros("scratch", (s.n_heads * p.capacity as usize * 4) as u64)
        .expect("scratch");
    let tb = g.zeros("totals", (s.n_heads * 4) as u64).expect("totals");
    let ob = g.zeros("out", (q.len() * 4) as u64).expect("out");
    let pb = g.uniform("params", bytemuck::bytes_of(p));
    let (cs, cv) = (g.compiled_generated(&sg), g.compiled_generated(&vg));
    let q_window = Bind {
        buffer: &qb,
        offset: 0,
        size: Some((kernels::UNIFORM_X_ELEMENTS * 4) as u64),
    };
    let gs = g
        .bind_group_generated(
            &cs,
            &sg,
            &[(&pb).into(), q_window, (&kb).into(), (&sb).into()],
        )
        .expect("scores group");
    let gv = g
        .bind_group_generated(
            &cv,
            &vg,
            &[
                (&pb).into(),
                (&sb).into(),
                (&vb).into(),
                (&tb).into(),
                (&ob).into(),
            ],
        )
        .expect("values group");
    let soft = g.compiled(Kernel::AttnSoftmax);
    let gsm = g
        .bind_group(
            Kernel::AttnSoftmax,
            &pb.as_entire_binding(),
            &[(&sb).into(), (&tb).into()],
        )
        .expect("softmax group");
    let mut enc = g.encoder("decode attention");
    {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        let positions = (p.pos0 + 1) as usize;
        g.dispatch_in(&mut pass, &cs, &gs, (positions.div_ceil(64) as u32, 1, 1));
        g.dispatch_in(&mut pass, &soft, &gsm, (s.n_heads as u32, 1, 1));
        let inv = s.value_invocations();
        g.dispatch_in(&mut pass, &cv, &gv, (inv.div_ceil(64) as u32, 1, 1));
    }
    g.submit(enc.finish());
    g.read_f32(&ob, q.len()).expect("read out")
}

/// The single-workgroup form (`attn_one`) for one token at `pos0`.
fn one_workgroup(
    g: &Gpu,
    s: &HeadShape,
    p: &AttentionParams,
    q: &[f32],
    kc: &[f32],
    vc: &[f32],
) -> Vec<f32> {
    let m = single(s).expect("single");
    let mut qpad = q.to_vec();
    qpad.resize(kernels::UNIFORM_X_ELEMENTS, 0.0);
    let qb = g.upload_f32("q", &qpad).expect("q");
    let kb = g.upload_f32("k", kc).expect("k");
    let vb = g.upload_f32("v", vc).expect("v");
    let sb = g
        .zeros("scratch", (s.n_heads * p.capacity as usize * 4) as u64)
        .expect("scratch");
    let ob = g.zeros("out", (q.len() * 4) as u64).expect("out");
    let pb = g.uniform("params", bytemuck::bytes_of(p));
    let c = g.compiled_generated(&m);
    let q_window = Bind {
        buffer: &qb,
        offset: 0,
        size: Some((kernels::UNIFORM_X_ELEMENTS * 4) as u64),
    };
    let binds = [
        (&pb).into(),
        q_window,
        (&kb).into(),
        (&vb).into(),
        (&sb).into(),
        (&ob).into(),
    ];
    let group = g.bind_group_generated(&c, &m, &binds).expect("group");
    let mut enc = g.encoder("attn_one");
    {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        g.dispatch_in(&mut pass, &c, &group, (1, 1, 1));
    }
    g.submit(enc.finish());
    g.read_f32(&ob, q.len()).expect("read out")
}

/// `attention.wgsl` for one token.
fn looped(
    g: &Gpu,
    s: &HeadShape,
    p: &AttentionParams,
    q: &[f32],
    kc: &[f32],
    vc: &[f32],
) -> Vec<f32> {
    let qb = g.upload_f32("q", q).expect("q");
    let kb = g.upload_f32("k", kc).expect("k");
    let vb = g.upload_f32("v", vc).expect("v");
    let ob = g.zeros("out", (q.len() * 4) as u64).expect("out");
    let sb = g
        .zeros("scratch", (s.n_heads * p.capacity as usize * 4) as u64)
        .expect("scratch");
    let binds = [
        (&qb).into(),
        (&kb).into(),
        (&vb).into(),
        (&ob).into(),
        (&sb).into(),
    ];
    g.dispatch(Kernel::Attention, p, &binds, (s.n_heads as u32, 1, 1))
        .expect("dispatch");
    g.read_f32(&ob, q.len()).expect("read out")
}

#[test]
fn decode_attention_gives_the_bits_of_the_looped_kernel() {
    let Some(g) = gpu("decode_attention_gives_the_bits_of_the_looped_kernel") else {
        return;
    };
    let mut rng = Rng(41);
    let shapes = [(9, 3, 64), (4, 4, 32), (8, 2, 16), (6, 1, 128)];
    for (n_heads, n_kv_heads, head_dim) in shapes {
        let s = HeadShape {
            n_heads,
            n_kv_heads,
            head_dim,
        };
        let capacity = 150;
        let kc = rng.normals(capacity * n_kv_heads * head_dim, 1.0);
        let vc = rng.normals(capacity * n_kv_heads * head_dim, 1.0);
        for pos0 in [0, 1, 63, 64, 129, 149] {
            let q = rng.normals(n_heads * head_dim, 2.0);
            let p = AttentionParams {
                n_heads: n_heads as u32,
                n_kv_heads: n_kv_heads as u32,
                head_dim: head_dim as u32,
                tokens: 1,
                pos0: pos0 as u32,
                capacity: capacity as u32,
                scale: 1.0 / (head_dim as f32).sqrt(),
                _pad: 0,
            };
            let what = format!("h{n_heads} kv{n_kv_heads} d{head_dim} pos0={pos0}");
            let got = decode(g, &s, &p, &q, &kc, &vc);
            assert_bits(&what, &got, &looped(g, &s, &p, &q, &kc, &vc));
            let one = one_workgroup(g, &s, &p, &q, &kc, &vc);
            assert_bits(&format!("{what} one workgroup"), &one, &got);
            let shape = AttentionShape {
                n_heads,
                n_kv_heads,
                head_dim,
                tokens: 1,
                pos0,
                capacity,
                scale: p.scale,
            };
            let want = reference::attention(&shape, &q, &kc, &vc).expect("reference");
            assert_close(&what, &got, &want, |_| 1e-6 + 2e-5);
        }
    }
}
