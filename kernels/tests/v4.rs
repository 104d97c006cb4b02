//! The DeepSeek V4 block kernels (`hc_mix`: the MoE's weighted sum, the expansion and the next
//! mixer; `moe_route`) against their CPU references (`kernels::reference::v4`), on shapes with
//! partial lane strides, plus the properties the references must have (Sinkhorn doubly
//! stochastic, the router's tie and hash rules, the block output's order). The references are held against the runner's f64 forward in
//! `runner/src/deepseek/hc.rs` and `moe.rs`.

use kernels::gpu::Gpu;
use kernels::reference::{self, After, HcWeights, Pick};
use kernels::{HcMixParams, Kernel, MoeRouteParams};

use crate::support::{assert_close, gpu, Rng};

// |gpu − reference| ≤ abs + rel · |reference|: exp/sqrt may differ by an ulp or two between the
// adapter and Rust's libm, and a rounding moved early moves the sums after it.
const HC: (f32, f32) = (2e-6, 2e-5);
const ROUTE: (f32, f32) = (1e-7, 2e-5);

struct HcCase {
    streams: Vec<f32>,
    wfn: Vec<f32>,
    base: Vec<f32>,
    scale: Vec<f32>,
    norm: Vec<f32>,
    /// The previous mixer's coefficients, the block output rows and weights (`k` + 1 rows).
    prev: Vec<f32>,
    ys: Vec<f32>,
    w: Vec<f32>,
}

impl HcCase {
    fn new(rng: &mut Rng, d: usize, head: bool, k: usize) -> Self {
        let hc = 4;
        let rows = if head { hc } else { (2 + hc) * hc };
        Self {
            streams: rng.normals(hc * d, 2.0),
            wfn: rng.normals(rows * hc * d, 0.05),
            base: rng.normals(rows, 0.5),
            scale: if head { vec![0.7] } else { vec![0.3, 0.6, 1.1] },
            norm: rng.normals(d, 1.0),
            prev: rng.normals((2 + hc) * hc, 0.5),
            ys: rng.normals((k + 1) * d, 1.0),
            w: rng.normals(k, 0.4),
        }
    }

    fn weights(&self) -> HcWeights<'_> {
        HcWeights {
            wfn: &self.wfn,
            base: &self.base,
            scale: &self.scale,
            norm: &self.norm,
        }
    }

    fn after(&self) -> After<'_> {
        After {
            mix: &self.prev,
            ys: &self.ys,
            w: &self.w,
        }
    }

    /// The kernel's (mix, x, streams).
    fn run(&self, g: &Gpu, head: bool, expand: bool) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let (hc, d) = (4, self.norm.len());
        let rows = if head { hc } else { (2 + hc) * hc };
        let up = |name: &str, v: &[f32]| g.upload_f32(name, v).expect("upload");
        // binding 3: base at 0, scale at 24, the norm at 28
        let mut small = vec![0f32; 28 + d];
        small[..rows].copy_from_slice(&self.base);
        small[24..24 + self.scale.len()].copy_from_slice(&self.scale);
        small[28..].copy_from_slice(&self.norm);
        // binding 4: the previous coefficients at 24, the new ones written at 0
        let mut mix = vec![0f32; 48];
        mix[24..].copy_from_slice(&self.prev);
        let w = if self.w.is_empty() {
            vec![0.0]
        } else {
            self.w.clone()
        };
        let streams = up("streams", &self.streams);
        let bufs = [up("fn", &self.wfn), up("small", &small)];
        let mixb = up("mix", &mix);
        let x = g.zeros("x", (d * 4) as u64).expect("x");
        let (ys, wb) = (up("ys", &self.ys), up("w", &w));
        let p = HcMixParams {
            hc: hc as u32,
            d: d as u32,
            iters: 20,
            head: u32::from(head),
            eps: 1e-6,
            norm_eps: 1e-6,
            expand: u32::from(expand),
            k: self.w.len() as u32,
            prev: 24,
            cur: 0,
            _pad0: 0,
            _pad1: 0,
        };
        let binds = [&streams, &bufs[0], &bufs[1], &mixb, &x, &ys, &wb].map(Into::into);
        g.dispatch(Kernel::HcMix, &p, &binds, (1, 1, 1))
            .expect("dispatch");
        (
            g.read_f32(&mixb, rows).expect("mix"),
            g.read_f32(&x, d).expect("x"),
            g.read_f32(&streams, hc * d).expect("streams"),
        )
    }
}

#[test]
fn hc_mix_matches_its_reference_with_and_without_the_expansion() {
    let Some(g) = gpu("hc_mix_matches_its_reference_with_and_without_the_expansion") else {
        return;
    };
    let mut rng = Rng(41);
    // (d, head, expand, k): the first mixer; after `wo_b` (k = 0); after the MoE (k picks); the
    // head after the MoE; a long row
    for (d, head, expand, k) in [
        (256, false, false, 0),
        (1000, false, true, 0),
        (256, false, true, 2),
        (256, true, true, 6),
        (4096, false, true, 2),
    ] {
        let c = HcCase::new(&mut rng, d, head, k);
        let mut want_streams = c.streams.clone();
        let after = expand.then(|| c.after());
        let want = reference::hc_step(
            &mut want_streams,
            after,
            c.weights(),
            4,
            20,
            head,
            1e-6,
            1e-6,
        )
        .expect("reference");
        let (mix, x, streams) = c.run(g, head, expand);
        let what = format!("hc_mix d {d} head {head} expand {expand} k {k}");
        for (part, got, exp) in [
            ("streams", &streams, &want_streams),
            ("mix", &mix, &want.mix),
            ("x", &x, &want.x),
        ] {
            assert_close(&format!("{what} {part}"), got, exp, |i| {
                HC.0 + HC.1 * exp[i].abs()
            });
        }
        if !expand {
            assert_eq!(
                streams, c.streams,
                "{what}: the streams moved without an expansion"
            );
        }
    }
}

#[test]
fn the_reference_mixer_makes_comb_doubly_stochastic_and_post_in_0_2() {
    let mut rng = Rng(5);
    let (hc, d) = (4, 64);
    let c = HcCase::new(&mut rng, d, false, 0);
    let m =
        reference::hc_mix(&c.streams, c.weights(), hc, 20, false, 1e-6, 1e-6).expect("reference");
    let comb = &m.mix[2 * hc..];
    for k in 0..hc {
        let col: f32 = (0..hc).map(|j| comb[j * hc + k]).sum();
        let row: f32 = (0..hc).map(|j| comb[k * hc + j]).sum();
        assert!((col - 1.0).abs() < 1e-5, "column {k} sums to {col}");
        assert!((row - 1.0).abs() < 1e-3, "row {k} sums to {row}");
    }
    assert!(m.mix[hc..2 * hc].iter().all(|&p| p > 0.0 && p < 2.0));
    // one iteration is the column normalisation alone: columns sum to 1, rows need not
    let one =
        reference::hc_mix(&c.streams, c.weights(), hc, 1, false, 1e-6, 1e-6).expect("reference");
    assert_ne!(one.mix, m.mix);
}

#[test]
fn the_reference_block_output_weights_the_picks_and_adds_the_shared_row() {
    let mut rng = Rng(13);
    let (k, d) = (3, 8);
    let ys = rng.normals((k + 1) * d, 1.0);
    let w = [0.5f32, 0.25, 2.0];
    let out = reference::moe_combine(&ys, &w).expect("combine");
    for c in 0..d {
        let want = ((ys[c] * w[0] + ys[d + c] * w[1]) + ys[2 * d + c] * w[2]) + ys[3 * d + c];
        assert_eq!(out[c], want, "channel {c}");
    }
    // k = 0: the row itself
    assert_eq!(
        reference::moe_combine(&ys[..d], &[]).expect("combine"),
        ys[..d].to_vec()
    );
    assert!(reference::moe_combine(&ys[..d + 1], &[1.0]).is_err());
}

/// Runs the router kernel: (ids, weights).
fn route_on(
    g: &Gpu,
    logits: &[f32],
    bias: &[f32],
    table: Option<&[u32]>,
    token: u32,
    top_k: usize,
) -> (Vec<u32>, Vec<f32>) {
    let lb = g.upload_f32("logits", logits).expect("logits");
    let bb = g.upload_f32("bias", bias).expect("bias");
    let tb = g.upload_u32("table", table.unwrap_or(&[0])).expect("table");
    // the token id sits at index 3 of its buffer (as an argmax row among others would)
    let kb = g.upload_u32("token", &[7, 7, 7, token]).expect("token");
    let ib = g.zeros("ids", (top_k * 4) as u64).expect("ids");
    let wb = g.zeros("weights", (top_k * 4) as u64).expect("weights");
    let p = MoeRouteParams {
        experts: logits.len() as u32,
        top_k: top_k as u32,
        hash: u32::from(table.is_some()),
        token_at: 3,
        scale: 1.5,
        _pad0: 0,
        _pad1: 0,
        _pad2: 0,
    };
    g.dispatch(
        Kernel::MoeRoute,
        &p,
        &[
            (&lb).into(),
            (&bb).into(),
            (&tb).into(),
            (&kb).into(),
            (&ib).into(),
            (&wb).into(),
        ],
        (1, 1, 1),
    )
    .expect("dispatch");
    let ids = g.read_bytes(&ib, (top_k * 4) as u64).expect("ids");
    let ids = ids
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    (ids, g.read_f32(&wb, top_k).expect("weights"))
}

#[test]
fn moe_route_matches_its_reference_for_learned_and_hash_layers() {
    let Some(g) = gpu("moe_route_matches_its_reference_for_learned_and_hash_layers") else {
        return;
    };
    let mut rng = Rng(77);
    for (experts, top_k) in [(4, 2), (256, 6), (300, 8)] {
        // logits across softplus's regimes: far below 0, near 0, above the threshold 20
        let mut logits = rng.normals(experts, 3.0);
        logits[0] = -30.0;
        logits[experts - 1] = 25.0;
        let bias = rng.normals(experts, 0.5);
        let want = reference::moe_route(&logits, Pick::TopK { bias: &bias }, top_k, 1.5)
            .expect("reference");
        let got = route_on(g, &logits, &bias, None, 0, top_k);
        assert_eq!(got.0, want.0, "learned router's picks, {experts} experts");
        assert_close("router weights", &got.1, &want.1, |i| {
            ROUTE.0 + ROUTE.1 * want.1[i].abs()
        });
        let vocab = 10;
        let table: Vec<u32> = (0..vocab * top_k)
            .map(|i| ((i * 7919 + 3) % experts) as u32)
            .collect();
        let zero = vec![0f32; experts];
        let want = reference::moe_route(
            &logits,
            Pick::Table {
                table: &table,
                token: 9,
            },
            top_k,
            1.5,
        )
        .expect("reference");
        let got = route_on(g, &logits, &zero, Some(&table), 9, top_k);
        assert_eq!(got.0, want.0, "hash router's picks, {experts} experts");
        assert_close("hash router weights", &got.1, &want.1, |i| {
            ROUTE.0 + ROUTE.1 * want.1[i].abs()
        });
    }
}

#[test]
fn the_reference_router_breaks_ties_to_the_lower_id_and_sorts_its_picks() {
    // experts 1 and 3 tie at the top; with k = 2 both are picked, expert 2 is not
    let logits = [0.0f32, 2.0, 1.0, 2.0];
    let (ids, w) =
        reference::moe_route(&logits, Pick::TopK { bias: &[0.0; 4] }, 2, 1.0).expect("route");
    assert_eq!(ids, [1, 3]);
    assert!((w[0] - 0.5).abs() < 1e-6 && (w[1] - 0.5).abs() < 1e-6);
    // k = 1: the lower id wins the tie
    let (ids, _) =
        reference::moe_route(&logits, Pick::TopK { bias: &[0.0; 4] }, 1, 1.0).expect("route");
    assert_eq!(ids, [1]);
    // the bias chooses, the weights come from the unbiased scores
    let (ids, w) = reference::moe_route(
        &logits,
        Pick::TopK {
            bias: &[5.0, 0.0, 0.0, 0.0],
        },
        2,
        1.0,
    )
    .expect("route");
    assert_eq!(ids, [0, 1]);
    let s0 = reference::sqrt_softplus(0.0);
    let s1 = reference::sqrt_softplus(2.0);
    assert!((w[0] - s0 / (s0 + s1)).abs() < 1e-6);
    // a token outside the table is refused
    assert!(reference::moe_route(
        &logits,
        Pick::Table {
            table: &[0, 1],
            token: 1
        },
        2,
        1.0
    )
    .is_err());
    // softplus keeps its tail (f32 log(1 + u) would give 0 here)
    let tail = reference::sqrt_softplus(-20.0);
    assert!((tail - (-20f64).exp().sqrt() as f32).abs() < 1e-9, "{tail}");
}
