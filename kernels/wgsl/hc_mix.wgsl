// The mHC step of one token (`Kernel::HcMix`; DeepSeek V4, docs/runner-deepseek-v4.md
// "Device-resident residual"; the runner's f64 form is `runner/src/deepseek/hc.rs`): with
// `p.expand` = 1, first the expansion after a block — the block's output out[c] = (Σ_{j<k}
// ys[j]·w[j]) + ys[k] (the MoE's weighted picks plus the shared expert; k = 0: the row itself,
// `wo_b`'s output), then streams[k'] = post[k']·out + Σ_j comb[j][k']·streams[j] with the
// previous mixer's coefficients — then the next mixer (or the head's collapse).
//
// Layout: binding 1 `streams` f32 [hc · d] (stream-major, read and rewritten); binding 2 `wfn`
// f32 [rows, hc · d] (`hc_*_fn`); binding 3 `small` f32: base [rows] at 0, scale [3] (mixer) or
// [1] (head) at 24, the norm [d] (the block's input norm, or the final norm) at 28; binding 4
// `mix` f32: the previous coefficients at `p.prev`, the new ones written at `p.cur`, each
// [pre hc | post hc | comb hc·hc] (the head writes only pre); binding 5 `x` f32 [d]: the
// collapsed streams Σ_i pre[i] · streams[i], RMS-normalised with the norm; binding 6 `ys` f32
// [k + 1, d]; binding 7 `w` f32 [k] (unread when k = 0).
// rows = (2 + hc) · hc for the mixer, hc for the head (`p.head` = 1). hc is the constant HC = 4
// (V4's `hc_mult`; `p.hc` must equal it): with hc a runtime bound, llvmpipe took ~30 ms a
// dispatch for the coefficient loops (docs/kernels.md "V4 block kernels").
//
// The vectors are read as vec4 (d a multiple of 4). One workgroup of 64 lanes. Order
// (`reference::{moe_combine, hc_expand, hc_mix}` in turn), with "the lane order" meaning: lane
// l takes the 4-element chunks l, l + 64, … and the 4 elements of a chunk in order; then the
// tree fold of the 64 partials:
// 0. (expand) acc = 0, acc = acc + ys[j]·w[j] for j < k, out = acc + ys[k]; v = post[k']·out,
//    v = fma(comb[j][k'], s_j, v) for j = 0 … 3.
// 1. ss = Σ fma(s, s, ·) in the lane order over hc·d; inv = 1/sqrt(ss/(hc·d) + norm_eps).
// 2. m[r] = Σ fma(wfn[r, i], streams[i] · inv, ·) in the lane order, except that the 64 lane
//    partials are added in lane order ((p0 + p1) + p2 …, lane r summing row r: one barrier where
//    the tree took six, 140 → 106 µs a dispatch on lavapipe).
// 3. lane 0: pre[i] = sigmoid(m[i]·scale0 + base[i]) + eps; post[i] = 2·sigmoid(m[hc+i]·scale1 + base[hc+i]);
//    comb[j][k] = softmax_k(m[2hc + j·hc + k]·scale2 + base[…]) + eps, then column normalisation
//    (÷ (sum + eps)), then iters − 1 times row then column normalisation.
// 4. x[c] = Σ_i fma(pre[i], streams[i·d + c], ·) (i ascending, from 0); Σ x² in the lane order
//    over d; x[c] · inv2 · norm[c], inv2 = 1/sqrt(Σ/d + norm_eps).

struct Params {
    hc: u32,
    d: u32,
    iters: u32,
    head: u32,
    eps: f32,
    norm_eps: f32,
    expand: u32,
    k: u32,
    prev: u32,
    cur: u32,
    _pad0: u32,
    _pad1: u32,
}

const LANES: u32 = 64u;
const HC: u32 = 4u;
const MAX_ROWS: u32 = 24u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> streams: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> wfn: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> small: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> mix: array<f32>;
@group(0) @binding(5) var<storage, read_write> x: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> ys: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read> w: array<f32>;

// binding 3's parts
fn base(r: u32) -> f32 {
    return small[r >> 2u][r & 3u];
}

fn scale(i: u32) -> f32 {
    return small[6u][i];
}

fn norm(c4: u32) -> vec4<f32> {
    return small[7u + c4];
}

var<workgroup> partial: array<f32, 1536>;
var<workgroup> coef: array<f32, 24>;

// The tree fold of the 64 lane partials in `partial[0..64]` into `partial[0]`.
fn fold(lane: u32) {
    for (var s = LANES / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            partial[lane] = partial[lane] + partial[lane + s];
        }
        workgroupBarrier();
    }
}

// acc + Σ v², the components in order, each an fma.
fn sum_squares(v: vec4<f32>, acc: f32) -> f32 {
    var a = fma(v.x, v.x, acc);
    a = fma(v.y, v.y, a);
    a = fma(v.z, v.z, a);
    return fma(v.w, v.w, a);
}

fn sigmoid(v: f32) -> f32 {
    return 1.0 / (1.0 + exp(-v));
}

fn rows_of() -> u32 {
    if (p.head == 1u) {
        return HC;
    }
    return (2u + HC) * HC;
}

// Lane 0: pre, post and comb from the projections m (in `partial[r · LANES]`), into `coef`.
fn coefficients() {
    let hc = HC;
    for (var i = 0u; i < hc; i++) {
        coef[i] = sigmoid(partial[i * LANES] * scale(0u) + base(i)) + p.eps;
    }
    if (p.head == 1u) {
        return;
    }
    for (var i = 0u; i < hc; i++) {
        coef[hc + i] = 2.0 * sigmoid(partial[(hc + i) * LANES] * scale(1u) + base(hc + i));
    }
    let c0 = 2u * hc;
    for (var j = 0u; j < hc; j++) {
        var mx = bitcast<f32>(0xff800000u);
        for (var k = 0u; k < hc; k++) {
            let r = c0 + j * hc + k;
            coef[r] = partial[r * LANES] * scale(2u) + base(r);
            mx = max(mx, coef[r]);
        }
        var sum = 0.0;
        for (var k = 0u; k < hc; k++) {
            let r = c0 + j * hc + k;
            coef[r] = exp(coef[r] - mx);
            sum = sum + coef[r];
        }
        for (var k = 0u; k < hc; k++) {
            let r = c0 + j * hc + k;
            coef[r] = coef[r] / sum + p.eps;
        }
    }
    normalise_columns();
    for (var t = 1u; t < p.iters; t++) {
        for (var j = 0u; j < hc; j++) {
            var sum = 0.0;
            for (var k = 0u; k < hc; k++) {
                sum = sum + coef[c0 + j * hc + k];
            }
            for (var k = 0u; k < hc; k++) {
                coef[c0 + j * hc + k] = coef[c0 + j * hc + k] / (sum + p.eps);
            }
        }
        normalise_columns();
    }
}

fn normalise_columns() {
    let hc = HC;
    let c0 = 2u * hc;
    for (var k = 0u; k < hc; k++) {
        var sum = 0.0;
        for (var j = 0u; j < hc; j++) {
            sum = sum + coef[c0 + j * hc + k];
        }
        for (var j = 0u; j < hc; j++) {
            coef[c0 + j * hc + k] = coef[c0 + j * hc + k] / (sum + p.eps);
        }
    }
}

// Step 0: the block's output, then the streams after the block, chunk by chunk.
fn expand(lane: u32, d4: u32) {
    let post = p.prev + HC;
    let comb = p.prev + 2u * HC;
    for (var c = lane; c < d4; c += LANES) {
        var acc = vec4<f32>(0.0);
        for (var j = 0u; j < p.k; j++) {
            acc = acc + ys[j * d4 + c] * w[j];
        }
        let out = acc + ys[p.k * d4 + c];
        let s0 = streams[c];
        let s1 = streams[d4 + c];
        let s2 = streams[2u * d4 + c];
        let s3 = streams[3u * d4 + c];
        for (var k = 0u; k < HC; k++) {
            var v = mix[post + k] * out;
            v = fma(vec4<f32>(mix[comb + k]), s0, v);
            v = fma(vec4<f32>(mix[comb + HC + k]), s1, v);
            v = fma(vec4<f32>(mix[comb + 2u * HC + k]), s2, v);
            v = fma(vec4<f32>(mix[comb + 3u * HC + k]), s3, v);
            streams[k * d4 + c] = v;
        }
    }
}

@compute @workgroup_size(64)
fn hc_mix(@builtin(local_invocation_index) lane: u32) {
    if (p.hc != HC) {
        return;
    }
    let n4 = HC * p.d / 4u;
    let d4 = p.d / 4u;
    let rows = rows_of();
    if (p.expand == 1u) {
        expand(lane, d4);
        storageBarrier();
        workgroupBarrier();
    }
    var ss = 0.0;
    for (var i = lane; i < n4; i += LANES) {
        ss = sum_squares(streams[i], ss);
    }
    partial[lane] = ss;
    workgroupBarrier();
    fold(lane);
    let inv = 1.0 / sqrt(partial[0] / f32(4u * n4) + p.norm_eps);
    workgroupBarrier();
    var acc: array<f32, 24>;
    for (var i = lane; i < n4; i += LANES) {
        let v = streams[i] * inv;
        for (var r = 0u; r < MAX_ROWS; r++) {
            if (r < rows) {
                let w = wfn[r * n4 + i];
                var a = acc[r];
                a = fma(w.x, v.x, a);
                a = fma(w.y, v.y, a);
                a = fma(w.z, v.z, a);
                a = fma(w.w, v.w, a);
                acc[r] = a;
            }
        }
    }
    for (var r = 0u; r < MAX_ROWS; r++) {
        partial[r * LANES + lane] = acc[r];
    }
    workgroupBarrier();
    if (lane < MAX_ROWS) {
        var t = partial[lane * LANES];
        for (var l = 1u; l < LANES; l++) {
            t = t + partial[lane * LANES + l];
        }
        partial[lane * LANES] = t;
    }
    workgroupBarrier();
    if (lane == 0u) {
        coefficients();
        for (var r = 0u; r < rows; r++) {
            mix[p.cur + r] = coef[r];
        }
    }
    workgroupBarrier();
    var ss2 = 0.0;
    for (var c = lane; c < d4; c += LANES) {
        var v = vec4<f32>(0.0);
        for (var i = 0u; i < HC; i++) {
            v = fma(vec4<f32>(coef[i]), streams[i * d4 + c], v);
        }
        x[c] = v;
        ss2 = sum_squares(v, ss2);
    }
    partial[lane] = ss2;
    workgroupBarrier();
    fold(lane);
    let inv2 = 1.0 / sqrt(partial[0] / f32(p.d) + p.norm_eps);
    for (var c = lane; c < d4; c += LANES) {
        x[c] = (x[c] * inv2) * norm(c);
    }
}
