// ---- shared by every dequantize-and-multiply family: kernels/src/kernel.rs appends this file to
// ---- each matmul_*.wgsl (concat! of include_str!), so one accumulation order serves every format ----
//
// Accumulation-order invariant (docs/kernels.md): one workgroup of LANES invocations computes one
// output row r for one token (matvec; several tokens: wgsl/matmul_tiled.wgsl). A row's K
// elements form chunks (`chunk_count`, `chunk_dot` in the format part above: one element for plain, fp8 and
// affine; one packed u32 word of 8 elements for Q4_1, Q8_0 and mxfp4). Lane l takes chunks
// c = l, l + LANES, … in increasing c and, inside a chunk, the elements in the chunk's fixed
// order, each with `acc = fma(w, x, acc)`, starting from 0.0; after one barrier, lane 0 adds the
// LANES partial sums in lane order (((p0 + p1) + p2) + … + p63). The order therefore depends only
// on K, never on which rows or how many rows one dispatch covers, so a row-tiled (streamed) dispatch
// and a whole-matrix (resident) dispatch give bit-identical outputs, and `matmul` gives, per
// token, exactly the bits of `matvec`. `reference::matmul` performs the same order on the CPU.

var<workgroup> partial1: array<f32, 64>;

// Lane `lane`'s partial of row r: chunks lane, lane + LANES, … in increasing order, fma from 0.0
// (also the first step of the subgroup reduction, wgsl/matmul_subgroup.wgsl).
fn lane_partial(r: u32, lane: u32) -> f32 {
    var acc = 0.0;
    let n = chunk_count();
    for (var c = lane; c < n; c += LANES) {
        acc = chunk_dot(r, c, 0u, acc);
    }
    return acc;
}

// The same for the TOKEN_TILE tokens whose inputs start at `bases`.
fn lane_partial4(r: u32, lane: u32, bases: vec4<u32>) -> vec4<f32> {
    var acc = vec4<f32>(0.0);
    let n = chunk_count();
    for (var c = lane; c < n; c += LANES) {
        acc = chunk_dot4(r, c, bases, acc);
    }
    return acc;
}

// The input bases of the token tile starting at t0 (the last token repeated past the end).
fn tile_bases(t0: u32) -> vec4<u32> {
    let last = p.tokens - 1u;
    return vec4<u32>(
        t0 * p.k,
        min(t0 + 1u, last) * p.k,
        min(t0 + 2u, last) * p.k,
        min(t0 + 3u, last) * p.k,
    );
}

@compute @workgroup_size(64)
fn matvec(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let r = wg.x + wg.y * p.groups_x;
    if (r >= p.rows) {
        return;
    }
    partial1[lane] = lane_partial(r, lane);
    workgroupBarrier();
    if (lane == 0u) {
        var total = partial1[0];
        for (var l = 1u; l < LANES; l++) {
            total = total + partial1[l];
        }
        store(p.y_offset + r, total);
    }
}

// ---- row-per-invocation entry points (CPU adapters such as lavapipe): one invocation computes
// ---- one output row and performs exactly the arithmetic of the LANES-wide entry points above:
// ---- lane l's partial p_l (chunks l, l + LANES, … in increasing order, fma from 0.0), then the
// ---- lane-order fold (((p0 + p1) + p2) + … + p63). No barrier, no workgroup memory.

@compute @workgroup_size(64)
fn matvec_row(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x + gid.y * p.groups_x * 64u;
    if (r >= p.rows) {
        return;
    }
    var total = 0.0;
    for (var l = 0u; l < LANES; l++) {
        let acc = lane_partial(r, l);
        if (l == 0u) {
            total = acc;
        } else {
            total = total + acc;
        }
    }
    store(p.y_offset + r, total);
}

@compute @workgroup_size(64)
fn matmul_row(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x + gid.y * p.groups_x * 64u;
    let t0 = gid.z * TOKEN_TILE;
    if (r >= p.rows || t0 >= p.tokens) {
        return;
    }
    let bases = tile_bases(t0);
    var out = vec4<f32>(0.0);
    for (var l = 0u; l < LANES; l++) {
        let acc = lane_partial4(r, l, bases);
        if (l == 0u) {
            out = acc;
        } else {
            out = out + acc;
        }
    }
    for (var j = 0u; j < TOKEN_TILE; j++) {
        let t = t0 + j;
        if (t < p.tokens) {
            store(t * p.y_stride + p.y_offset + r, out[j]);
        }
    }
}
