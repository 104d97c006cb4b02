// Argmax over the last axis (`Kernel::Argmax`), for greedy decoding.
//
// Layout: binding 1 `v` f32 [rows, n]; binding 2 `out` u32 [rows]. One workgroup per row.
// The first maximum wins (lowest index among equal values); NaN is never chosen; a row with no
// comparable value (n = 0 or all NaN) yields NONE = 0xffffffff (`kernels::ARGMAX_NONE`).
// Exact: the result does not depend on the lane split.

struct Params {
    n: u32,
    rows: u32,
    groups_x: u32,
    _pad0: u32,
}

const LANES: u32 = 64u;
const NONE: u32 = 0xffffffffu;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> v: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

var<workgroup> best_v: array<f32, 64>;
var<workgroup> best_i: array<u32, 64>;

@compute @workgroup_size(64)
fn argmax(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let r = wg.x + wg.y * p.groups_x;
    if (r >= p.rows) {
        return;
    }
    let base = r * p.n;
    var bv = bitcast<f32>(0xff800000u);
    var bi = NONE;
    for (var i = lane; i < p.n; i += LANES) {
        let x = v[base + i];
        if (x > bv || (bi == NONE && x == bv)) {
            bv = x;
            bi = i;
        }
    }
    best_v[lane] = bv;
    best_i[lane] = bi;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            let ov = best_v[lane + s];
            let oi = best_i[lane + s];
            let mi = best_i[lane];
            if (oi != NONE && (mi == NONE || ov > best_v[lane] || (ov == best_v[lane] && oi < mi))) {
                best_v[lane] = ov;
                best_i[lane] = oi;
            }
        }
        workgroupBarrier();
    }
    if (lane == 0u) {
        out[r] = best_i[0];
    }
}
