// One query token's V4 attention (`Kernel::V4Attend`; docs/runner-deepseek-v4.md "Attention on
// the device"; the runner's f64 form is `runner/src/deepseek/attention.rs`), one workgroup a
// head. The token's key is its kv row RMS-normalised with `kv_norm` and rotated; workgroup 0
// writes it to slot `p.pos` mod `p.window` of the key ring. The head's query is its row of `q`
// RMS-normalised (no weight) and rotated. The keys, in this order, are the ring's positions
// `p.lo` … `p.pos` − 1, the token's own key, then (`p.mode` 1) the first `p.n` compressed
// entries or (`p.mode` 2) the `p.n` entries `list` names; values are the keys. The logits
// q·k · `p.scale` and the head's sink logit go through one softmax; the output Σ p_j k_j is
// rotated back (the conjugate rotation) and written to the head's row of `out`.
//
// Layout: binding 1 `q` f32 (heads · dim at `p.q_at`); binding 2 `kv` f32 (dim at `p.kv_at`);
// binding 3 `kv_norm` f32 [dim]; binding 4 `sinks` f32 [heads]; binding 5 `table` f32 [row,
// pairs, (cos, sin)] (row `p.table_row`); binding 6 `ring` f32 [window, dim]; binding 7
// `entries` f32 [·, dim]; binding 8 `list` u32 [n]; binding 9 `out` f32 [heads, dim]. dim ≤
// 1024 (even), keys ≤ 2048. Order (`reference::v4_attend`): a norm's Σ x² over channels l, l +
// 64, … per lane then the tree of 64 partials, inv = 1/sqrt(Σ/dim + eps), x·inv (·w); a pair
// (a, b) → (a·c − b·s, b·c + a·s) (back: (a·c + b·s, b·c − a·s)); a logit's dot over channels
// ascending from 0, times scale; m = the tree max of the logits and the sink; each
// weight exp(l − m), their sum (with exp(sink − m)) the tree of the 64 lane sums over keys l, l +
// 64, …; out[c] = Σ_j (weight_j / sum) · k_j[c] over keys ascending.

struct Params {
    heads: u32,
    dim: u32,
    window: u32,
    pos: u32,
    lo: u32,
    mode: u32,
    n: u32,
    pairs: u32,
    table_row: u32,
    q_at: u32,
    kv_at: u32,
    eps: f32,
    scale: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

const LANES: u32 = 64u;
const MAX_DIM: u32 = 1024u;
const MAX_KEYS: u32 = 2048u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kv: array<f32>;
@group(0) @binding(3) var<storage, read> kv_norm: array<f32>;
@group(0) @binding(4) var<storage, read> sinks: array<f32>;
@group(0) @binding(5) var<storage, read> table: array<f32>;
@group(0) @binding(6) var<storage, read_write> ring: array<f32>;
@group(0) @binding(7) var<storage, read> entries: array<f32>;
@group(0) @binding(8) var<storage, read> list: array<u32>;
@group(0) @binding(9) var<storage, read_write> out: array<f32>;

var<workgroup> qv: array<f32, 1024>;
var<workgroup> kcur: array<f32, 1024>;
var<workgroup> logit: array<f32, 2048>;
var<workgroup> partial: array<f32, 64>;

// Σ of the lanes' partials by the tree (every lane gets it)
fn tree_sum(lane: u32, v: f32) -> f32 {
    partial[lane] = v;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            partial[lane] = partial[lane] + partial[lane + s];
        }
        workgroupBarrier();
    }
    let r = partial[0];
    workgroupBarrier();
    return r;
}

fn tree_max(lane: u32, v: f32) -> f32 {
    partial[lane] = v;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            partial[lane] = max(partial[lane], partial[lane + s]);
        }
        workgroupBarrier();
    }
    let r = partial[0];
    workgroupBarrier();
    return r;
}

// rotates the trailing pairs of the workgroup row `which` (0: qv, 1: kcur); `back`: conjugate
fn rotate(lane: u32, which: u32, dim: u32, back: bool) {
    let start = dim - 2u * p.pairs;
    for (var i = lane; i < p.pairs; i += LANES) {
        let t = (p.table_row * p.pairs + i) * 2u;
        let c = table[t];
        var s = table[t + 1u];
        if (back) {
            s = -s;
        }
        let ia = start + 2u * i;
        if (which == 0u) {
            let a = qv[ia];
            let b = qv[ia + 1u];
            qv[ia] = a * c - b * s;
            qv[ia + 1u] = b * c + a * s;
        } else {
            let a = kcur[ia];
            let b = kcur[ia + 1u];
            kcur[ia] = a * c - b * s;
            kcur[ia + 1u] = b * c + a * s;
        }
    }
    workgroupBarrier();
}

// the key j of this query (window positions, the token's own key, the entries): element c
fn key(j: u32, c: u32, dim: u32, own: u32) -> f32 {
    if (j < own) {
        let slot = (p.lo + j) % p.window;
        return ring[slot * dim + c];
    }
    if (j == own) {
        return kcur[c];
    }
    var e = j - own - 1u;
    if (p.mode == 2u) {
        e = list[e];
    }
    return entries[e * dim + c];
}

@compute @workgroup_size(64)
fn v4_attend(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let h = wg.x;
    let dim = min(p.dim, MAX_DIM);
    // the token's key
    var ss = 0.0;
    for (var c = lane; c < dim; c += LANES) {
        let v = kv[p.kv_at + c];
        ss = fma(v, v, ss);
    }
    let kinv = 1.0 / sqrt(tree_sum(lane, ss) / f32(dim) + p.eps);
    for (var c = lane; c < dim; c += LANES) {
        kcur[c] = kv[p.kv_at + c] * kinv * kv_norm[c];
    }
    workgroupBarrier();
    rotate(lane, 1u, dim, false);
    // the head's query
    let qh = p.q_at + h * dim;
    ss = 0.0;
    for (var c = lane; c < dim; c += LANES) {
        let v = q[qh + c];
        ss = fma(v, v, ss);
    }
    let qinv = 1.0 / sqrt(tree_sum(lane, ss) / f32(dim) + p.eps);
    for (var c = lane; c < dim; c += LANES) {
        qv[c] = q[qh + c] * qinv;
    }
    workgroupBarrier();
    rotate(lane, 0u, dim, false);
    if (h == 0u) {
        let slot = p.pos % p.window;
        for (var c = lane; c < dim; c += LANES) {
            ring[slot * dim + c] = kcur[c];
        }
    }
    // logits
    let own = p.pos - p.lo;
    var n_keys = own + 1u;
    if (p.mode != 0u) {
        n_keys = n_keys + p.n;
    }
    n_keys = min(n_keys, MAX_KEYS);
    var m = -3.4028235e38;
    for (var j = lane; j < n_keys; j += LANES) {
        var dot = 0.0;
        for (var c = 0u; c < dim; c++) {
            dot = fma(qv[c], key(j, c, dim, own), dot);
        }
        let l = dot * p.scale;
        logit[j] = l;
        m = max(m, l);
    }
    let sink = sinks[h];
    m = max(tree_max(lane, m), sink);
    var s = 0.0;
    for (var j = lane; j < n_keys; j += LANES) {
        let e = exp(logit[j] - m);
        logit[j] = e;
        s = s + e;
    }
    let total = tree_sum(lane, s) + exp(sink - m);
    // (every lane reads every weight below)
    workgroupBarrier();
    for (var c = lane; c < dim; c += LANES) {
        var acc = 0.0;
        for (var j = 0u; j < n_keys; j++) {
            acc = fma(logit[j] / total, key(j, c, dim, own), acc);
        }
        qv[c] = acc;
    }
    workgroupBarrier();
    rotate(lane, 0u, dim, true);
    for (var c = lane; c < dim; c += LANES) {
        out[h * dim + c] = qv[c];
    }
}
