// The softmax step of one-token (decode) attention (`Kernel::AttnSoftmax`), between the generated
// score and value kernels of `kernels::attention` (docs/kernels.md "Decode attention").
//
// Layout: binding 1 `scratch` f32 [n_heads, capacity]: on entry the scaled scores of positions
// 0 ..= pos0 of each head (written by `attn_scores`), on exit e_s = exp(score_s − max); binding 2
// `totals` f32 [n_heads]: Σ_s e_s. One workgroup per head. The arithmetic is that of the softmax
// part of attention.wgsl for its token 0, step for step: lane l takes positions l, l + 64, …;
// maxima are exact in any order; the sum is each lane's running sum from 0.0 then the fixed tree
// partial[l] += partial[l + s] for s = 32, …, 1. So the three decode kernels give the bits of
// attention.wgsl (asserted by tests/gpu.rs).

struct Params {
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
    tokens: u32,
    pos0: u32,
    capacity: u32,
    scale: f32,
    _pad0: u32,
}

const LANES: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> scratch: array<f32>;
@group(0) @binding(2) var<storage, read_write> totals: array<f32>;

var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(64)
fn attn_softmax(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let h = wg.x;
    if (h >= p.n_heads) {
        return;
    }
    let n_ctx = min(p.pos0 + 1u, p.capacity);
    let sb = h * p.capacity;
    var m = bitcast<f32>(0xff800000u);
    for (var s = lane; s < n_ctx; s += LANES) {
        m = max(m, scratch[sb + s]);
    }
    partial[lane] = m;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            partial[lane] = max(partial[lane], partial[lane + s]);
        }
        workgroupBarrier();
    }
    let mx = partial[0];
    workgroupBarrier();
    var acc = 0.0;
    for (var s = lane; s < n_ctx; s += LANES) {
        let e = exp(scratch[sb + s] - mx);
        scratch[sb + s] = e;
        acc = acc + e;
    }
    partial[lane] = acc;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            partial[lane] = partial[lane] + partial[lane + s];
        }
        workgroupBarrier();
    }
    if (lane == 0u) {
        totals[h] = partial[0];
    }
}
