// The mHC mixer of one token (`Kernel::HcMix`; DeepSeek V4, docs/runner-deepseek-v4.md
// "mHC on the device"; the runner's f64 form is `runner/src/deepseek/hc.rs`).
//
// Layout: binding 1 `streams` f32 [hc · d] (stream-major); binding 2 `wfn` f32 [rows, hc · d]
// (`hc_*_fn`); binding 3 `base` f32 [rows]; binding 4 `scale` f32 [3] (mixer) or [1] (head);
// binding 5 `norm` f32 [d] (the block's input norm, or the final norm for the head); binding 6
// `mix` f32: the mixer writes [pre hc | post hc | comb hc·hc] (the head only pre); binding 7 `x`
// f32 [d]: the collapsed streams Σ_i pre[i] · streams[i], RMS-normalised with `norm`.
// rows = (2 + hc) · hc for the mixer, hc for the head (`p.head` = 1); hc ≤ 4.
//
// One workgroup of 64 lanes. Order (`reference::hc_mix`):
// 1. ss: lane l sums fma(s, s, ·) over i = l, l + 64, … < hc·d; the tree fold; inv = 1/sqrt(ss/n + norm_eps).
// 2. m[r]: lane l sums fma(wfn[r, i], streams[i] · inv, ·) over the same i; the tree fold per row.
// 3. lane 0: pre[i] = sigmoid(m[i]·scale0 + base[i]) + eps; post[i] = 2·sigmoid(m[hc+i]·scale1 + base[hc+i]);
//    comb[j][k] = softmax_k(m[2hc + j·hc + k]·scale2 + base[…]) + eps, then column normalisation
//    (÷ (sum + eps)), then iters − 1 times row then column normalisation.
// 4. x[c] = Σ_i fma(pre[i], streams[i·d + c], ·) (i ascending, from 0), c = l, l + 64, …; its ss
//    summed and folded as in 1; x[c] · inv2 · norm[c], inv2 = 1/sqrt(ss/d + norm_eps).

struct Params {
    hc: u32,
    d: u32,
    iters: u32,
    head: u32,
    eps: f32,
    norm_eps: f32,
    _pad0: u32,
    _pad1: u32,
}

const LANES: u32 = 64u;
const MAX_ROWS: u32 = 24u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> streams: array<f32>;
@group(0) @binding(2) var<storage, read> wfn: array<f32>;
@group(0) @binding(3) var<storage, read> base: array<f32>;
@group(0) @binding(4) var<storage, read> scale: array<f32>;
@group(0) @binding(5) var<storage, read> norm: array<f32>;
@group(0) @binding(6) var<storage, read_write> mix: array<f32>;
@group(0) @binding(7) var<storage, read_write> x: array<f32>;

var<workgroup> partial: array<f32, 1536>;
var<workgroup> coef: array<f32, 24>;

fn fold(r: u32, lane: u32) {
    for (var s = LANES / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            partial[r * LANES + lane] = partial[r * LANES + lane] + partial[r * LANES + lane + s];
        }
        workgroupBarrier();
    }
}

fn sigmoid(v: f32) -> f32 {
    return 1.0 / (1.0 + exp(-v));
}

fn rows_of() -> u32 {
    if (p.head == 1u) {
        return p.hc;
    }
    return (2u + p.hc) * p.hc;
}

// Lane 0: pre, post and comb from the projections m (in `partial[r · LANES]`), into `coef`.
fn coefficients() {
    let hc = p.hc;
    for (var i = 0u; i < hc; i++) {
        coef[i] = sigmoid(partial[i * LANES] * scale[0] + base[i]) + p.eps;
    }
    if (p.head == 1u) {
        return;
    }
    for (var i = 0u; i < hc; i++) {
        coef[hc + i] = 2.0 * sigmoid(partial[(hc + i) * LANES] * scale[1] + base[hc + i]);
    }
    let c0 = 2u * hc;
    for (var j = 0u; j < hc; j++) {
        var mx = bitcast<f32>(0xff800000u);
        for (var k = 0u; k < hc; k++) {
            let r = c0 + j * hc + k;
            coef[r] = partial[r * LANES] * scale[2] + base[r];
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
    let hc = p.hc;
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

@compute @workgroup_size(64)
fn hc_mix(@builtin(local_invocation_index) lane: u32) {
    let n = p.hc * p.d;
    let rows = min(rows_of(), MAX_ROWS);
    var ss = 0.0;
    for (var i = lane; i < n; i += LANES) {
        let v = streams[i];
        ss = fma(v, v, ss);
    }
    partial[lane] = ss;
    workgroupBarrier();
    fold(0u, lane);
    let inv = 1.0 / sqrt(partial[0] / f32(n) + p.norm_eps);
    workgroupBarrier();
    var acc: array<f32, 24>;
    for (var i = lane; i < n; i += LANES) {
        let v = streams[i] * inv;
        for (var r = 0u; r < rows; r++) {
            acc[r] = fma(wfn[r * n + i], v, acc[r]);
        }
    }
    for (var r = 0u; r < rows; r++) {
        partial[r * LANES + lane] = acc[r];
    }
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            for (var r = 0u; r < rows; r++) {
                partial[r * LANES + lane] = partial[r * LANES + lane] + partial[r * LANES + lane + s];
            }
        }
        workgroupBarrier();
    }
    if (lane == 0u) {
        coefficients();
        for (var r = 0u; r < rows; r++) {
            mix[r] = coef[r];
        }
    }
    workgroupBarrier();
    var ss2 = 0.0;
    for (var c = lane; c < p.d; c += LANES) {
        var v = 0.0;
        for (var i = 0u; i < p.hc; i++) {
            v = fma(coef[i], streams[i * p.d + c], v);
        }
        x[c] = v;
        ss2 = fma(v, v, ss2);
    }
    partial[lane] = ss2;
    workgroupBarrier();
    fold(0u, lane);
    let inv2 = 1.0 / sqrt(partial[0] / f32(p.d) + p.norm_eps);
    for (var c = lane; c < p.d; c += LANES) {
        x[c] = (x[c] * inv2) * norm[c];
    }
}
