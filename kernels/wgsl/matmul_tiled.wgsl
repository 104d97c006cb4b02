// ---- shared-memory tiled matmul (docs/kernels.md "Tiled prefill matmul"): appended to a matmul
// ---- family's module whose `xv` reads the workgroup tile `xs` instead of binding 1
// ---- (`Kernel::tiled_source`); only `matmul_tiled` (and `matmul_tiled_sg`) of such a module run.
// ---- One workgroup computes TILE_ROWS rows for the TOKEN_TILE tokens of its tile: slice by
// ---- slice of K, the lanes stage the tokens' inputs in workgroup memory once, then multiply
// ---- every row of the tile by them — each input read from memory once a workgroup, not once a
// ---- row. Lane l still takes the chunks c = l, l + LANES, … of each row in increasing c (a
// ---- slice holds whole chunks: SLICE is a multiple of every format's 32-element block, and a
// ---- chunk's elements lie in the block of its first), and the partials are folded in lane
// ---- order, so each row's output has the bits of `matvec` / `matmul`.

const TILE_ROWS: u32 = 8u;
const SLICE: u32 = 256u;

var<workgroup> xs: array<f32, 1024>; // TOKEN_TILE × SLICE
var<workgroup> tiled: array<vec4<f32>, 512>; // TILE_ROWS × LANES partials

// Lane `lane`'s partials of the tile's rows (a row past the end repeats the last row; its
// partials are never stored). The rows are written out, not looped over, so the partials stay
// in registers.
fn tile_partials(r0: u32, t0: u32, lane: u32) -> array<vec4<f32>, 8> {
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    var a4 = vec4<f32>(0.0);
    var a5 = vec4<f32>(0.0);
    var a6 = vec4<f32>(0.0);
    var a7 = vec4<f32>(0.0);
    let m = p.rows - 1u;
    let n = chunk_count();
    let per = p.k / n; // elements per chunk
    let last = p.tokens - 1u;
    for (var k0 = 0u; k0 < p.k; k0 += SLICE) {
        for (var i = lane; i < TOKEN_TILE * SLICE; i += LANES) {
            let t = min(t0 + i / SLICE, last);
            let k = k0 + i % SLICE;
            xs[i] = select(0.0, x[t * p.k + min(k, p.k - 1u)], k < p.k);
        }
        workgroupBarrier();
        // xv(b_j + k) = xs[j · SLICE + k − k0] (u32 arithmetic wraps)
        let b = vec4<u32>(0u, SLICE, 2u * SLICE, 3u * SLICE) - vec4<u32>(k0);
        let lo = k0 / per;
        let hi = min((k0 + SLICE) / per, n);
        for (var c = lo + (lane + LANES - lo % LANES) % LANES; c < hi; c += LANES) {
            a0 = chunk_dot4(min(r0, m), c, b, a0);
            a1 = chunk_dot4(min(r0 + 1u, m), c, b, a1);
            a2 = chunk_dot4(min(r0 + 2u, m), c, b, a2);
            a3 = chunk_dot4(min(r0 + 3u, m), c, b, a3);
            a4 = chunk_dot4(min(r0 + 4u, m), c, b, a4);
            a5 = chunk_dot4(min(r0 + 5u, m), c, b, a5);
            a6 = chunk_dot4(min(r0 + 6u, m), c, b, a6);
            a7 = chunk_dot4(min(r0 + 7u, m), c, b, a7);
        }
        workgroupBarrier();
    }
    return array<vec4<f32>, 8>(a0, a1, a2, a3, a4, a5, a6, a7);
}

// Row r0 + j's outputs for the tile's tokens.
fn store_tile(r: u32, t0: u32, out: vec4<f32>) {
    for (var j = 0u; j < TOKEN_TILE; j++) {
        let t = t0 + j;
        if (t < p.tokens) {
            store(t * p.y_stride + p.y_offset + r, out[j]);
        }
    }
}

@compute @workgroup_size(64)
fn matmul_tiled(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let r0 = (wg.x + wg.y * p.groups_x) * TILE_ROWS;
    let t0 = wg.z * TOKEN_TILE;
    // (no early return: every lane reaches the barriers)
    let acc = tile_partials(r0, t0, lane);
    for (var j = 0u; j < TILE_ROWS; j++) {
        tiled[j * LANES + lane] = acc[j];
    }
    workgroupBarrier();
    let r = r0 + lane;
    if (lane < TILE_ROWS && r < p.rows && t0 < p.tokens) {
        var out = tiled[lane * LANES];
        for (var l = 1u; l < LANES; l++) {
            out = out + tiled[lane * LANES + l];
        }
        store_tile(r, t0, out);
    }
}
