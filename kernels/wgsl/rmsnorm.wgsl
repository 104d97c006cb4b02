// RMSNorm (`Kernel::RmsNorm`): y[t, i] = (x[t, i] · inv) · w[i], inv = 1 / sqrt(Σ x² / n + eps).
//
// Layout: binding 1 `x` f32 [tokens, n]; binding 2 `w` f32 [n] (norm weights are converted to f32
// on upload); binding 3 `y` f32 [tokens, n]. One workgroup per token (2-D grid, row = x + y·groups_x).
// Order: lane l sums fma(x, x, acc) for i = l, l + 64, …; then the fixed tree
// partial[l] += partial[l + s] for s = 32, …, 1 (`reference::lane_dot_tree`).

struct Params {
    n: u32,
    tokens: u32,
    eps: f32,
    groups_x: u32,
}

const LANES: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(64)
fn rmsnorm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let t = wg.x + wg.y * p.groups_x;
    if (t >= p.tokens) {
        return;
    }
    let base = t * p.n;
    var acc = 0.0;
    for (var i = lane; i < p.n; i += LANES) {
        let v = x[base + i];
        acc = fma(v, v, acc);
    }
    partial[lane] = acc;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            partial[lane] = partial[lane] + partial[lane + s];
        }
        workgroupBarrier();
    }
    let inv = 1.0 / sqrt(partial[0] / f32(p.n) + p.eps);
    for (var i = lane; i < p.n; i += LANES) {
        y[base + i] = (x[base + i] * inv) * w[i];
    }
}
