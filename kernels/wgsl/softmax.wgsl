// Softmax over the last axis, in place (`Kernel::Softmax`).
//
// Layout: binding 1 `v` f32 [rows, n]. One workgroup per row (row = x + y·groups_x).
// Order: m = max (exact in any order); e_i = exp(v_i − m) stored back; lane l sums its e_i for
// i = l, l + 64, … in increasing i, the fixed tree combines the lanes; v_i = e_i / sum.

struct Params {
    n: u32,
    rows: u32,
    groups_x: u32,
    _pad0: u32,
}

const LANES: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> v: array<f32>;

var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(64)
fn softmax(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let r = wg.x + wg.y * p.groups_x;
    if (r >= p.rows) {
        return;
    }
    let base = r * p.n;
    var m = bitcast<f32>(0xff800000u);
    for (var i = lane; i < p.n; i += LANES) {
        m = max(m, v[base + i]);
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
    for (var i = lane; i < p.n; i += LANES) {
        let e = exp(v[base + i] - mx);
        v[base + i] = e;
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
    let total = partial[0];
    for (var i = lane; i < p.n; i += LANES) {
        v[base + i] = v[base + i] / total;
    }
}
