//! Kimi K3's additions to the text forward, as exact f64 references (issue 50 item 2: each
//! addition with a test of its own before the whole forward; the formulas and their sources are
//! `../shared/design/kimi-k3-forward.md` §1, the risks it names R1–R12):
//!
//! - [`attn_res`] and [`Residual`]: AttnRes, the residual stream that replaces `h += f(h)` — a
//!   softmax mix of the stored block vectors and the current partial sum (§1.2, R5);
//! - [`situ`]: the SiTU gated activation of the MLPs and experts (§1.5);
//! - [`forget_gate`]: KDA's bounded log-decay (§1.3, R1, R6);
//! - [`kda_step`]: KDA's delta-rule recurrence for one head and one token (§1.3, R6), with
//!   [`short_conv`] before it and [`gated_norm`] after it;
//! - [`nope_attention`] and [`output_gate`]: the MLA layers' attention without positions and
//!   their output gate (§1.4);
//! - [`route`] and [`LatentMoe`]: the latent mixture of experts (§1.5, R3).
//!
//! The ops take vectors, not weights: the forward that reads a checkpoint into them, and the
//! recorded oracles it is checked against, are still to come (docs/runner-kimi-k3.md).

/// `x / sqrt(Σx² + eps)` (KDA's q and k normalisation: `eps` 1e-6).
pub fn l2_normalize(x: &[f64], eps: f64) -> Vec<f64> {
    let s = (x.iter().map(|v| v * v).sum::<f64>() + eps).sqrt();
    x.iter().map(|v| v / s).collect()
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// AttnRes over `sources` (the completed block vectors, then the current partial sum): each
/// source's logit is `Σ_d norm_w[d]·proj_w[d]·v[d] / sqrt(mean(v²) + eps)` (the projection of
/// its RMSNorm), and the output is the softmax-weighted sum of the sources as they are (not
/// normalised). One source is returned as it is.
pub fn attn_res(sources: &[&[f64]], norm_w: &[f64], proj_w: &[f64], eps: f64) -> Vec<f64> {
    let dim = norm_w.len();
    if let [only] = sources {
        return only.to_vec();
    }
    let logits: Vec<f64> = sources
        .iter()
        .map(|v| {
            let ms = v.iter().map(|x| x * x).sum::<f64>() / dim as f64;
            let r = 1.0 / (ms + eps).sqrt();
            (0..dim).map(|d| norm_w[d] * proj_w[d] * v[d] * r).sum()
        })
        .collect();
    let top = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = logits.iter().map(|l| (l - top).exp()).collect();
    let total: f64 = w.iter().sum();
    let mut out = vec![0.0; dim];
    for (v, wi) in sources.iter().zip(&w) {
        for (o, x) in out.iter_mut().zip(v.iter()) {
            *o += wi / total * x;
        }
    }
    out
}

/// The AttnRes state of one token through the layers: the bank of completed block vectors
/// (slot 0 the embedding) and the partial sum of the current block's sub-layer outputs. At a
/// layer `l` with `l % block == 0` the partial sum is pushed, before that layer's attention, and
/// the next starts from the attention output (R5).
#[derive(Debug, Clone)]
pub struct Residual {
    block: usize,
    bank: Vec<Vec<f64>>,
    partial: Option<Vec<f64>>,
}

/// A mix's weights: `*_res_norm.weight` and `*_res_proj.weight`, and the norm's epsilon.
#[derive(Debug, Clone, Copy)]
pub struct Mix<'a> {
    pub norm: &'a [f64],
    pub proj: &'a [f64],
    pub eps: f64,
}

impl Residual {
    /// The stream entering layer 0: the embedding `h0`, blocks of `block` layers.
    pub fn new(h0: Vec<f64>, block: usize) -> Self {
        Self {
            block: block.max(1),
            bank: Vec::new(),
            partial: Some(h0),
        }
    }

    /// The completed block vectors so far.
    pub fn blocks(&self) -> &[Vec<f64>] {
        &self.bank
    }

    fn mix(&self, m: Mix<'_>) -> Vec<f64> {
        let mut sources: Vec<&[f64]> = self.bank.iter().map(Vec::as_slice).collect();
        sources.extend(self.partial.as_deref());
        attn_res(&sources, m.norm, m.proj, m.eps)
    }

    /// The input of layer `l`'s attention (its `input_layernorm` comes after): the mix of the
    /// bank and the partial sum (the partial sum alone before the first push); then, on a
    /// block's first layer, the partial sum is pushed.
    pub fn before_attention(&mut self, l: usize, m: Mix<'_>) -> Vec<f64> {
        let x = if self.bank.is_empty() {
            self.partial.clone().unwrap_or_default()
        } else {
            self.mix(m)
        };
        if l % self.block == 0 {
            self.bank.extend(self.partial.take());
        }
        x
    }

    /// Adds a sub-layer's output (attention or MLP) to the partial sum.
    pub fn add(&mut self, out: &[f64]) {
        match &mut self.partial {
            Some(p) => p.iter_mut().zip(out).for_each(|(a, b)| *a += b),
            None => self.partial = Some(out.to_vec()),
        }
    }

    /// The input of the layer's MLP (its `post_attention_layernorm` comes after).
    pub fn before_mlp(&self, m: Mix<'_>) -> Vec<f64> {
        self.mix(m)
    }

    /// The final hidden state (`output_attn_res_*`; the model's `norm` comes after).
    pub fn output(&self, m: Mix<'_>) -> Vec<f64> {
        self.mix(m)
    }
}

/// SiTU's gate cap (`activation_situ_beta`) and up cap (`activation_situ_linear_beta`).
pub const SITU_BETA: f64 = 4.0;
pub const SITU_LINEAR_BETA: f64 = 25.0;

/// SiTU of a `[gate | up]` pair: `β·tanh(gate/β)·sigmoid(gate) · β_lin·tanh(up/β_lin)` — the
/// sigmoid takes the uncapped gate.
pub fn situ(gate: f64, up: f64) -> f64 {
    SITU_BETA
        * (gate / SITU_BETA).tanh()
        * sigmoid(gate)
        * (SITU_LINEAR_BETA * (up / SITU_LINEAR_BETA).tanh())
}

/// KDA's log-decay of one key channel: `lower_bound · sigmoid(exp(a_log) · (g_raw + dt_bias))`,
/// with `a_log` the head's entry (`A_log[h]`, of which only the first `num_heads` are the
/// heads': R1) — in `(lower_bound, 0)`.
pub fn forget_gate(g_raw: f64, dt_bias: f64, a_log: f64, lower_bound: f64) -> f64 {
    lower_bound * sigmoid(a_log.exp() * (g_raw + dt_bias))
}

/// One token of KDA's recurrence for one head: the state `s` (`[V][K]`, row-major) decays along
/// the key axis by `exp(g[k])`, takes the rank-1 delta write `β·(v − S k) ⊗ k`, and the output
/// is the updated state times `q`. `q` and `k` come normalised (and `q` scaled) by the caller.
pub fn kda_step(s: &mut [f64], q: &[f64], k: &[f64], v: &[f64], g: &[f64], beta: f64) -> Vec<f64> {
    let kd = k.len();
    for row in s.chunks_mut(kd) {
        row.iter_mut().zip(g).for_each(|(x, gk)| *x *= gk.exp());
    }
    for (row, vi) in s.chunks_mut(kd).zip(v) {
        let u: f64 = row.iter().zip(k).map(|(a, b)| a * b).sum();
        let d = beta * (vi - u);
        row.iter_mut().zip(k).for_each(|(x, kk)| *x += d * kk);
    }
    s.chunks(kd)
        .map(|row| row.iter().zip(q).map(|(a, b)| a * b).sum())
        .collect()
}

/// `x / sqrt(mean(x²) + eps) ⊙ weight`.
pub fn rms_norm(x: &[f64], weight: &[f64], eps: f64) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len().max(1) as f64;
    let r = 1.0 / (ms + eps).sqrt();
    x.iter().zip(weight).map(|(v, w)| v * r * w).collect()
}

fn silu(x: f64) -> f64 {
    x * sigmoid(x)
}

/// KDA's short causal depthwise convolution (kernel 4, no bias) with SiLU, for one token:
/// channel `c` gives `silu(Σ_j w[c][j] · x_{t-3+j})` (`w[c][3]` takes the current input);
/// `state[c]` holds the channel's previous three inputs, oldest first, and is moved on.
pub fn short_conv(state: &mut [[f64; 3]], x: &[f64], w: &[[f64; 4]]) -> Vec<f64> {
    state
        .iter_mut()
        .zip(x)
        .zip(w)
        .map(|((st, &xc), wc)| {
            let y = wc[0] * st[0] + wc[1] * st[1] + wc[2] * st[2] + wc[3] * xc;
            *st = [st[1], st[2], xc];
            silu(y)
        })
        .collect()
}

/// KDA's output of one head: `RMSNorm(o) · weight · sigmoid(gate)` (the full-rank gate,
/// `FusedRMSNormGated` with a sigmoid).
pub fn gated_norm(o: &[f64], weight: &[f64], gate: &[f64], eps: f64) -> Vec<f64> {
    rms_norm(o, weight, eps)
        .into_iter()
        .zip(gate)
        .map(|(x, g)| x * sigmoid(*g))
        .collect()
}

/// K3's MLA attention for one query over the cached positions, with no position encoding at
/// all: per head, `softmax_s(q·k_s · dim^-0.5)` over every position given (causal: the caller
/// gives those up to the query's), then the weighted sum of the values. `q` and each `k_s` are
/// `heads × dim` (`[k_nope | k_pe]`, 128 + 64 in K3, k_pe shared by the heads and not rotated),
/// each `v_s` `heads × dv`.
pub fn nope_attention(q: &[f64], keys: &[Vec<f64>], values: &[Vec<f64>], heads: usize) -> Vec<f64> {
    let dim = q.len() / heads.max(1);
    let dv = values.first().map_or(0, |v| v.len() / heads.max(1));
    let scale = (dim as f64).powf(-0.5);
    let mut out = vec![0.0; heads * dv];
    for h in 0..heads {
        let qh = &q[h * dim..(h + 1) * dim];
        let scores: Vec<f64> = keys
            .iter()
            .map(|k| {
                qh.iter()
                    .zip(&k[h * dim..(h + 1) * dim])
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
                    * scale
            })
            .collect();
        let top = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
        let total: f64 = w.iter().sum();
        for (v, wi) in values.iter().zip(&w) {
            let vh = &v[h * dv..(h + 1) * dv];
            for (o, x) in out[h * dv..(h + 1) * dv].iter_mut().zip(vh) {
                *o += wi / total * x;
            }
        }
    }
    out
}

/// `o ⊙ sigmoid(gate)`: MLA's output gate (`g_proj` of the layer input), before `o_proj`.
pub fn output_gate(o: &[f64], gate: &[f64]) -> Vec<f64> {
    o.iter().zip(gate).map(|(x, g)| x * sigmoid(*g)).collect()
}

/// The router of the latent MoE: `s = sigmoid(logits)`; the `top_k` experts by `s + bias` (the
/// correction bias chooses, it does not weigh); their weights `s / (Σ s + 1e-20)` times
/// `scaling` (`routed_scaling_factor`: R3). (expert, weight), best first.
pub fn route(logits: &[f64], bias: &[f64], top_k: usize, scaling: f64) -> Vec<(usize, f64)> {
    let s: Vec<f64> = logits.iter().map(|&l| sigmoid(l)).collect();
    let mut order: Vec<usize> = (0..s.len()).collect();
    order.sort_by(|&a, &b| {
        (s[b] + bias[b])
            .total_cmp(&(s[a] + bias[a]))
            .then(a.cmp(&b))
    });
    order.truncate(top_k);
    let total: f64 = order.iter().map(|&e| s[e]).sum::<f64>() + 1e-20;
    order
        .into_iter()
        .map(|e| (e, s[e] / total * scaling))
        .collect()
}

/// The latent MoE's parts for one token, as closures over their weights.
pub struct LatentMoe<'a> {
    /// `routed_expert_down_proj` (hidden → latent).
    pub down: &'a dyn Fn(&[f64]) -> Vec<f64>,
    /// Expert `e` on a latent vector (`W2 · situ(W1 z, W3 z)`).
    pub expert: &'a dyn Fn(usize, &[f64]) -> Vec<f64>,
    /// `routed_expert_norm.weight` and the epsilon.
    pub norm: &'a [f64],
    pub eps: f64,
    /// `routed_expert_up_proj` (latent → hidden).
    pub up: &'a dyn Fn(&[f64]) -> Vec<f64>,
    /// The shared experts on the hidden input.
    pub shared: &'a dyn Fn(&[f64]) -> Vec<f64>,
}

impl LatentMoe<'_> {
    /// The MLP output of `y` (the post-attention norm's output) for the router's `picks`:
    /// down-project, the picked experts weighted and summed, `routed_expert_norm` on the sum,
    /// up-project, plus the shared experts on `y` itself.
    pub fn forward(&self, y: &[f64], picks: &[(usize, f64)]) -> Vec<f64> {
        let z = (self.down)(y);
        let mut r = vec![0.0; z.len()];
        for &(e, w) in picks {
            for (a, b) in r.iter_mut().zip((self.expert)(e, &z)) {
                *a += w * b;
            }
        }
        let mut out = (self.up)(&rms_norm(&r, self.norm, self.eps));
        for (a, b) in out.iter_mut().zip((self.shared)(y)) {
            *a += b;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol)
    }

    #[test]
    fn attn_res_weighs_sources_by_their_normalised_projection() {
        let (a, b) = ([1.0, 0.0], [0.0, 2.0]);
        let (norm, proj) = ([1.0, 1.0], [2.0, -1.0]);
        // RMSNorm(a) = [√2, 0] → logit 2√2; RMSNorm(b) = [0, √2] → logit −√2
        let (la, lb) = (2.0 * 2f64.sqrt(), -(2f64.sqrt()));
        let wa = la.exp() / (la.exp() + lb.exp());
        let want = [wa * 1.0, (1.0 - wa) * 2.0];
        assert!(close(&attn_res(&[&a, &b], &norm, &proj, 0.0), &want, 1e-12));
        // a source's scale changes what it adds, not its weight (it is normalised for the logit)
        let b10 = [0.0, 20.0];
        let want = [wa, (1.0 - wa) * 20.0];
        assert!(close(
            &attn_res(&[&a, &b10], &norm, &proj, 0.0),
            &want,
            1e-12
        ));
        // no weights: the plain mean; one source: itself
        let zero = [0.0, 0.0];
        assert!(close(
            &attn_res(&[&a, &b], &zero, &proj, 1e-5),
            &[0.5, 1.0],
            1e-12
        ));
        assert_eq!(attn_res(&[&b], &norm, &proj, 1e-5), b.to_vec());
    }

    /// One-hot vector `i` of `n`.
    fn e(i: usize, n: usize) -> Vec<f64> {
        let mut v = vec![0.0; n];
        v[i] = 1.0;
        v
    }

    #[test]
    fn attn_res_blocks_over_thirteen_layers_of_three() {
        // R5: only a test over three or more blocks catches an off-by-one in the pushes. Layer
        // l's attention writes e(1+2l), its MLP e(2+2l); the embedding is e(0). With no mix
        // weights every mix is the mean of its sources, which the test can count.
        let (layers, block) = (13, 3);
        let n = 1 + 2 * layers;
        let zero = vec![0.0; n];
        let m = Mix {
            norm: &zero,
            proj: &zero,
            eps: 1e-6,
        };
        let mut r = Residual::new(e(0, n), block);
        let mut sources_seen = Vec::new();
        for l in 0..layers {
            let before = r.blocks().len();
            let x = r.before_attention(l, m);
            // the attention input mixes the bank and the partial sum (the embedding alone at 0)
            let want = if before == 0 { 1 } else { before + 1 };
            sources_seen.push(want);
            let mass: f64 = x.iter().sum::<f64>() * want as f64;
            assert!(
                (mass - (1 + 2 * l) as f64).abs() < 1e-9 || l == 0,
                "layer {l}: {x:?}"
            );
            r.add(&e(1 + 2 * l, n));
            let y = r.before_mlp(m);
            let seen = r.blocks().len() + 1;
            // the MLP input: the bank and the partial sum that now holds this attention output
            let partial_mass = (1 + 2 * (l % block)) as f64;
            let want_y = (r
                .blocks()
                .iter()
                .map(|b| b.iter().sum::<f64>())
                .sum::<f64>()
                + partial_mass)
                / seen as f64;
            assert!((y.iter().sum::<f64>() - want_y).abs() < 1e-9, "layer {l}");
            r.add(&e(2 + 2 * l, n));
        }
        // pushes at 0, 3, 6, 9, 12: the embedding, then four completed blocks
        assert_eq!(r.blocks().len(), 5);
        assert_eq!(r.blocks()[0], e(0, n));
        for k in 1..5 {
            let mut want = vec![0.0; n];
            for l in 3 * (k - 1)..3 * k {
                want[1 + 2 * l] = 1.0;
                want[2 + 2 * l] = 1.0;
            }
            assert_eq!(r.blocks()[k], want, "block {k}");
        }
        // the final mix sees cdiv(13, 3) + 1 = 6 sources: the bank and layer 12's partial sum
        // (every one-hot is in exactly one of them)
        let out = r.output(m);
        assert!(close(&out, &vec![1.0 / 6.0; n], 1e-12), "{out:?}");
        // a push layer's attention still mixes the block it closes, pushed after the mix
        assert_eq!(sources_seen[..5], [1, 2, 2, 2, 3]);
    }

    #[test]
    fn situ_caps_both_halves_and_gates_with_the_uncapped_sigmoid() {
        assert_eq!(situ(0.0, 3.0), 0.0);
        // small values: silu(gate) · up
        let (g, u) = (0.01, 0.02);
        let silu = g * sigmoid(g) * u;
        assert!((situ(g, u) - silu).abs() < 1e-4 * silu.abs());
        // large values: capped at β·β_lin
        assert!((situ(60.0, 1e4) - SITU_BETA * SITU_LINEAR_BETA).abs() < 1e-6);
        // a very negative gate closes it: the sigmoid sees −20, not the capped −4 (which would
        // give about −1.4 here)
        assert!(situ(-20.0, 25.0).abs() < 1e-6);
    }

    #[test]
    fn the_forget_gate_is_bounded_by_its_lower_bound() {
        let lb = -5.0;
        assert!((forget_gate(0.3, -0.3, 1.7, lb) - lb / 2.0).abs() < 1e-12);
        // bounded on both sides where −softplus would not be
        assert!((forget_gate(1e3, 0.0, 0.0, lb) - lb).abs() < 1e-12);
        assert!(forget_gate(-1e3, 0.0, 0.0, lb).abs() < 1e-12);
        // exp(A_log) scales the argument
        let (a, b) = (
            forget_gate(0.5, 0.0, 2f64.ln(), lb),
            forget_gate(1.0, 0.0, 0.0, lb),
        );
        assert!((a - b).abs() < 1e-12);
        for g in [-3.0, -0.1, 0.0, 0.2, 4.0] {
            let v = forget_gate(g, 0.1, 0.3, lb);
            assert!(v > lb && v < 0.0, "{g}: {v}");
        }
    }

    #[test]
    fn kda_writes_the_delta_and_decays_along_the_key_axis() {
        let k = l2_normalize(&[3.0, 4.0], 0.0);
        let v = [2.0, -1.0, 0.5];
        let none = [0.0, 0.0];
        // from zero, β = 1, no decay: S = v ⊗ k, so reading with q = k gives v back
        let mut s = vec![0.0; 6];
        let o = kda_step(&mut s, &k, &k, &v, &none, 1.0);
        assert!(close(&o, &v, 1e-12), "{o:?}");
        // the same pair again: S k already is v, the delta is zero, the state stays
        let before = s.clone();
        kda_step(&mut s, &k, &k, &v, &none, 1.0);
        assert!(close(&s, &before, 1e-12));
        // β = 0 writes nothing; the decay multiplies each key column by exp(g[k])
        let g = [0.5f64.ln(), 0.25f64.ln()];
        let mut d = before.clone();
        kda_step(&mut d, &k, &k, &v, &g, 0.0);
        for (row_b, row_d) in before.chunks(2).zip(d.chunks(2)) {
            assert!((row_d[0] - 0.5 * row_b[0]).abs() < 1e-12);
            assert!((row_d[1] - 0.25 * row_b[1]).abs() < 1e-12);
        }
        // half a write: the state moves halfway to storing v at k
        let mut h = vec![0.0; 6];
        let o = kda_step(&mut h, &k, &k, &v, &none, 0.5);
        assert!(close(&o, &v.map(|x| 0.5 * x), 1e-12));
    }

    #[test]
    fn the_short_convolution_takes_the_current_input_last() {
        // an impulse on one channel comes back through the taps in reverse order
        let w = [[0.1, 0.2, 0.3, 0.4]];
        let mut state = [[0.0; 3]];
        let got: Vec<f64> = [1.0, 0.0, 0.0, 0.0, 0.0]
            .iter()
            .map(|&x| short_conv(&mut state, &[x], &w)[0])
            .collect();
        let want = [silu(0.4), silu(0.3), silu(0.2), silu(0.1), 0.0];
        assert!(close(&got, &want, 1e-15), "{got:?}");
        assert_eq!(state, [[0.0; 3]]);
    }

    #[test]
    fn the_gated_norm_scales_the_normalised_output_by_the_gate() {
        let (o, w) = ([3.0, -4.0], [1.0, 2.0]);
        let n = rms_norm(&o, &w, 0.0); // rms = sqrt(12.5)
        assert!(close(
            &n,
            &[3.0 / 12.5f64.sqrt(), -8.0 / 12.5f64.sqrt()],
            1e-12
        ));
        let half = gated_norm(&o, &w, &[0.0, 0.0], 0.0);
        assert!(close(&half, &[n[0] / 2.0, n[1] / 2.0], 1e-12));
        assert!(close(&gated_norm(&o, &w, &[50.0, 50.0], 0.0), &n, 1e-12));
    }

    #[test]
    fn nope_attention_does_not_see_positions() {
        let (heads, dim) = (2, 192);
        let q: Vec<f64> = (0..heads * dim)
            .map(|i| ((i % 7) as f64 - 3.0) * 0.01)
            .collect();
        let keys: Vec<Vec<f64>> = (0..4)
            .map(|p| {
                (0..heads * dim)
                    .map(|i| ((i * (p + 2)) % 5) as f64 * 0.02)
                    .collect()
            })
            .collect();
        let values: Vec<Vec<f64>> = (0..4)
            .map(|p| (0..heads * 3).map(|i| (p * 10 + i) as f64).collect())
            .collect();
        let o = nope_attention(&q, &keys, &values, heads);
        // no position encoding: the order of the cached positions does not matter
        let (rk, rv): (Vec<_>, Vec<_>) = keys
            .iter()
            .cloned()
            .zip(values.iter().cloned())
            .rev()
            .unzip();
        assert!(close(&nope_attention(&q, &rk, &rv, heads), &o, 1e-12));
        // scale dim^-0.5: a score of ln 3 · sqrt(dim) against 0 weighs 3 : 1
        let mut q1 = vec![0.0; dim];
        q1[0] = 3f64.ln() * (dim as f64).sqrt();
        let mut k1 = vec![0.0; dim];
        k1[0] = 1.0;
        let o = nope_attention(&q1, &[k1, vec![0.0; dim]], &[vec![4.0], vec![8.0]], 1);
        assert!((o[0] - (0.75 * 4.0 + 0.25 * 8.0)).abs() < 1e-12, "{o:?}");
        assert!(close(
            &output_gate(&[2.0, 2.0], &[0.0, 100.0]),
            &[1.0, 2.0],
            1e-12
        ));
    }

    #[test]
    fn the_router_selects_with_the_bias_and_weighs_without_it() {
        let logits = [2.0, 1.0, 0.0, -1.0];
        // the bias lifts expert 3 above the others for the choice only
        let picks = route(&logits, &[0.0, 0.0, 0.0, 5.0], 2, 1.0);
        assert_eq!(picks.iter().map(|p| p.0).collect::<Vec<_>>(), [3, 0]);
        let (s3, s0) = (sigmoid(-1.0), sigmoid(2.0));
        assert!((picks[0].1 - s3 / (s3 + s0)).abs() < 1e-12);
        let scaled = route(&logits, &[0.0, 0.0, 0.0, 5.0], 2, 2.5);
        assert!((scaled[1].1 - 2.5 * picks[1].1).abs() < 1e-12);
    }

    #[test]
    fn the_latent_moe_goes_down_mixes_normalises_then_goes_up() {
        let down = |y: &[f64]| y.iter().map(|v| 2.0 * v).collect::<Vec<_>>();
        let expert = |e: usize, z: &[f64]| z.iter().map(|v| (e + 1) as f64 * v).collect();
        let up = |x: &[f64]| x.iter().map(|v| 10.0 * v).collect::<Vec<_>>();
        let shared = |y: &[f64]| y.iter().map(|v| 0.5 * v).collect::<Vec<_>>();
        let norm = [1.0, 3.0];
        let moe = LatentMoe {
            down: &down,
            expert: &expert,
            norm: &norm,
            eps: 1e-12,
            up: &up,
            shared: &shared,
        };
        let y = [1.0, -2.0];
        let picks = [(0, 0.25), (2, 0.75)];
        // r = (0.25·1 + 0.75·3) · 2y = 5y; RMSNorm(5y) = y / rms(y); ·norm; ·10; + 0.5y
        let rms = (2.5f64).sqrt();
        let want = [10.0 * 1.0 / rms + 0.5, 10.0 * 3.0 * -2.0 / rms - 1.0];
        assert!(close(&moe.forward(&y, &picks), &want, 1e-9));
        // R3: the norm all but cancels a global routing scale
        let scaled: Vec<(usize, f64)> = picks.iter().map(|&(e, w)| (e, 2.5 * w)).collect();
        assert!(close(&moe.forward(&y, &scaled), &want, 1e-9));
    }
}
