//! The DeepSeek V4 attention kernels of one query token (`v4_compress`, `v4_index_score`,
//! `v4_index_topk`, `v4_attend`) against their CPU references (`kernels::reference::v4_attn`),
//! step after step over a state the kernels keep (the compressor's buffer and overlap, the key
//! ring), on shapes with partial lane strides. The references are held against the runner's
//! f64 forward in `runner/src/deepseek/attention.rs` and `compress.rs`.

use kernels::gpu::Gpu;
use kernels::reference::{self, AttendKeys, CompressShape};
use kernels::{Kernel, V4AttendParams, V4CompressParams, V4IndexParams};

use crate::support::{assert_close, gpu, Rng};

// |gpu − reference| ≤ abs + rel · |reference| (exp, sqrt and the order of a few sums).
const TOL: (f32, f32) = (2e-6, 2e-5);

fn close(what: &str, got: &[f32], want: &[f32]) {
    assert_close(what, got, want, |i| TOL.0 + TOL.1 * want[i].abs());
}

fn u32s(g: &Gpu, b: &wgpu::Buffer, n: usize) -> Vec<u32> {
    let bytes = g.read_bytes(b, (n * 4) as u64).expect("read");
    bytemuck::pod_collect_to_vec(&bytes)
}

/// A RoPE row of `pairs` (cos, sin) pairs.
fn rope_row(rng: &mut Rng, pairs: usize) -> Vec<f32> {
    (0..pairs)
        .flat_map(|_| {
            let a = rng.range(-3.0, 3.0);
            [a.cos(), a.sin()]
        })
        .collect()
}

#[test]
fn v4_compress_matches_its_reference_over_windows() {
    let Some(g) = gpu("v4_compress_matches_its_reference_over_windows") else {
        return;
    };
    let mut rng = Rng(91);
    // CSA's two overlapping series (ratio 4), and one series over a longer window
    for (ratio, coff, dim, pairs) in [(4, 2, 128, 32), (6, 1, 72, 8)] {
        let sh = CompressShape { ratio, coff, dim };
        let w = coff * dim;
        let ape = rng.normals(ratio * w, 0.5);
        let norm = rng.normals(dim, 1.0);
        let windows = 3;
        let mut state = vec![0f32; sh.state_len()];
        let mut entries = vec![0f32; windows * dim];
        let sb = g.zeros("state", (state.len() * 4) as u64).expect("state");
        let eb = g
            .zeros("entries", (entries.len() * 4) as u64)
            .expect("entries");
        let (ab, nb) = (
            g.upload_f32("ape", &ape).expect("ape"),
            g.upload_f32("norm", &norm).expect("norm"),
        );
        for t in 0..windows * ratio {
            let slot = t % ratio;
            let emit = slot == ratio - 1;
            let n = t / ratio;
            // the source holds something before the kv row and between kv and gate
            let src = rng.normals(3 + 2 * w + 5, 2.0);
            let (kv, gate) = (&src[3..3 + w], &src[3 + w + 5..]);
            // a table of two rows; the entry's row is row 1
            let table: Vec<f32> = [rope_row(&mut rng, pairs), rope_row(&mut rng, pairs)].concat();
            let row = &table[2 * pairs..];
            reference::v4_compress(
                sh,
                kv,
                gate,
                &ape,
                &norm,
                &mut state,
                &mut entries,
                slot,
                emit.then_some((n, row)),
                1e-6,
            )
            .expect("reference");
            let p = V4CompressParams {
                ratio: ratio as u32,
                coff: coff as u32,
                dim: dim as u32,
                slot: slot as u32,
                emit: u32::from(emit),
                entry: n as u32,
                pairs: pairs as u32,
                table_row: 1,
                kv_at: 3,
                gate_at: (3 + w + 5) as u32,
                eps: 1e-6,
                _pad0: 0,
            };
            let srcb = g.upload_f32("src", &src).expect("src");
            let tb = g.upload_f32("table", &table).expect("table");
            let binds = [
                (&srcb).into(),
                (&ab).into(),
                (&nb).into(),
                (&tb).into(),
                (&sb).into(),
                (&eb).into(),
            ];
            g.dispatch(Kernel::V4Compress, &p, &binds, (1, 1, 1))
                .expect("dispatch");
            let what = format!("ratio {ratio} coff {coff} token {t}");
            close(
                &format!("{what}: state"),
                &g.read_f32(&sb, state.len()).expect("state"),
                &state,
            );
            close(
                &format!("{what}: entries"),
                &g.read_f32(&eb, entries.len()).expect("entries"),
                &entries,
            );
        }
        // every window emitted an entry that is not zero
        assert!(entries.chunks(dim).all(|e| e.iter().any(|v| *v != 0.0)));
    }
}

#[test]
fn v4_indexer_scores_and_choice_match_their_references() {
    let Some(g) = gpu("v4_indexer_scores_and_choice_match_their_references") else {
        return;
    };
    let mut rng = Rng(92);
    // the V4 shape (a lane a head), then more heads than a workgroup has lanes (a lane takes two)
    index_scores_match(g, &mut rng, 64, 128, 32, 12);
    let (want, mut p) = index_scores_match(g, &mut rng, 72, 64, 16, 77);
    let n = want.len();
    // the choice over fixed scores (with ties and a NaN), for k below and above n
    let mut scores = want.clone();
    scores[10] = scores[3];
    scores[40] = scores[3];
    scores[5] = f32::NAN;
    let sb = g.upload_f32("scores", &scores).expect("scores");
    for k in [1, 4, 16, 76, 77, 100] {
        p.k = k as u32;
        let lb = g.zeros("list", (k.min(n) * 4) as u64).expect("list");
        g.dispatch(
            Kernel::V4IndexTopk,
            &p,
            &[(&sb).into(), (&lb).into()],
            (1, 1, 1),
        )
        .expect("dispatch");
        let want = reference::v4_index_topk(&scores, k);
        assert_eq!(u32s(g, &lb, want.len()), want, "k {k}");
    }
}

/// Scores `n` random entries with `heads` random heads on the device and checks them against
/// `reference::v4_index_scores`; returns the reference's scores and the parameters.
fn index_scores_match(
    g: &Gpu,
    rng: &mut Rng,
    heads: usize,
    dim: usize,
    pairs: usize,
    n: usize,
) -> (Vec<f32>, V4IndexParams) {
    let q = rng.normals(2 + heads * dim, 1.0);
    let w: Vec<f32> = rng
        .normals(1 + heads, 1.0)
        .iter()
        .map(|v| v.abs())
        .collect();
    let entries = rng.normals(n * dim, 1.0);
    let table: Vec<f32> = [rope_row(rng, pairs), rope_row(rng, pairs)].concat();
    let want = reference::v4_index_scores(
        &q[2..],
        &w[1..],
        &entries,
        &table[2 * pairs..],
        heads,
        dim,
        n,
    )
    .expect("reference");
    assert!(want.iter().any(|s| *s > 0.0));
    let (qb, wb, eb, tb) = (
        g.upload_f32("q", &q).expect("q"),
        g.upload_f32("w", &w).expect("w"),
        g.upload_f32("entries", &entries).expect("entries"),
        g.upload_f32("table", &table).expect("table"),
    );
    let sb = g.zeros("scores", (n * 4) as u64).expect("scores");
    let (gx, gy) = kernels::grid_2d(n as u32);
    let p = V4IndexParams {
        heads: heads as u32,
        dim: dim as u32,
        n: n as u32,
        pairs: pairs as u32,
        table_row: 1,
        q_at: 2,
        w_at: 1,
        k: 0,
        groups_x: gx,
        _pad0: 0,
        _pad1: 0,
        _pad2: 0,
    };
    let binds = [
        (&qb).into(),
        (&wb).into(),
        (&eb).into(),
        (&tb).into(),
        (&sb).into(),
    ];
    g.dispatch(Kernel::V4IndexScore, &p, &binds, (gx, gy, 1))
        .expect("dispatch");
    close("scores", &g.read_f32(&sb, n).expect("scores"), &want);
    (want, p)
}

#[test]
fn v4_attend_matches_its_reference_for_each_key_set() {
    let Some(g) = gpu("v4_attend_matches_its_reference_for_each_key_set") else {
        return;
    };
    let mut rng = Rng(93);
    let (heads, dim, pairs, window) = (3, 128, 32, 8);
    let entries = rng.normals(20 * dim, 1.0);
    let kv_norm = rng.normals(dim, 1.0);
    let sinks = rng.normals(heads, 1.0);
    let list: Vec<u32> = vec![1, 4, 9, 17];
    let (eb, nb, kb, lb) = (
        g.upload_f32("entries", &entries).expect("entries"),
        g.upload_f32("kv_norm", &kv_norm).expect("norm"),
        g.upload_f32("sinks", &sinks).expect("sinks"),
        g.upload_u32("list", &list).expect("list"),
    );
    // a start (position 0, no earlier key), a window not yet full, one that wraps the ring
    let cases = [
        (0usize, 0usize, 0u32, 0usize),
        (5, 0, 1, 12),
        (19, 12, 2, 4),
    ];
    for (pos, lo, mode, n) in cases {
        let mut ring = rng.normals(window * dim, 1.0);
        let q = rng.normals(4 + heads * dim, 3.0);
        let kv = rng.normals(dim + 7, 3.0);
        let table: Vec<f32> = [rope_row(&mut rng, pairs), rope_row(&mut rng, pairs)].concat();
        let rb = g.upload_f32("ring", &ring).expect("ring");
        let seen = match mode {
            0 => None,
            1 => Some((n, None)),
            _ => Some((n, Some(list.as_slice()))),
        };
        let keys = AttendKeys {
            window,
            lo,
            pos,
            entries: &entries,
            seen,
        };
        let scale = 1.0 / (dim as f32).sqrt();
        let want = reference::v4_attend(
            &q[4..],
            &kv[7..],
            &kv_norm,
            &sinks,
            &table[2 * pairs..],
            &mut ring,
            keys,
            1e-6,
            scale,
        )
        .expect("reference");
        let p = V4AttendParams {
            heads: heads as u32,
            dim: dim as u32,
            window: window as u32,
            pos: pos as u32,
            lo: lo as u32,
            mode,
            n: n as u32,
            pairs: pairs as u32,
            table_row: 1,
            q_at: 4,
            kv_at: 7,
            eps: 1e-6,
            scale,
            _pad0: 0,
            _pad1: 0,
            _pad2: 0,
        };
        let (qb, kvb, tb) = (
            g.upload_f32("q", &q).expect("q"),
            g.upload_f32("kv", &kv).expect("kv"),
            g.upload_f32("table", &table).expect("table"),
        );
        let ob = g.zeros("out", (heads * dim * 4) as u64).expect("out");
        let binds = [
            (&qb).into(),
            (&kvb).into(),
            (&nb).into(),
            (&kb).into(),
            (&tb).into(),
            (&rb).into(),
            (&eb).into(),
            (&lb).into(),
            (&ob).into(),
        ];
        g.dispatch(Kernel::V4Attend, &p, &binds, (heads as u32, 1, 1))
            .expect("dispatch");
        let what = format!("pos {pos} mode {mode}");
        close(
            &format!("{what}: out"),
            &g.read_f32(&ob, heads * dim).expect("out"),
            &want,
        );
        close(
            &format!("{what}: ring"),
            &g.read_f32(&rb, window * dim).expect("ring"),
            &ring,
        );
    }
}
