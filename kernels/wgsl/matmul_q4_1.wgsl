// Dequantize-and-multiply for GGUF Q4_1 blocks (`Kernel::MatvecQ4_1`, `MatmulQ4_1`).
//
// Byte layout read (formats.md §5.2, ggml `block_q4_1`): each row is K/32 blocks of 20 bytes,
//   [f16 d | f16 m | u8 qs[16]] (little-endian), rows back to back (row r at byte r·(K/32)·20).
//   Element j < 16 is the LOW nibble of qs[j]; element j ≥ 16 is the HIGH nibble of qs[j − 16].
//   value = fma(d, q, m), one rounding (ggml writes q·d + m). K must be a multiple of 32.
// Blocks are not 4-byte multiples in general: binding 3 is read as array<u32> and unpacked by hand.
// A streamed GGUF tile is a run of whole rows (docs/kernels.md).

@group(0) @binding(3) var<storage, read> packed: array<u32>;

fn weight(r: u32, k: u32) -> f32 {
    let base = r * (p.k / 32u) * 20u + (k / 32u) * 20u;
    let d = f16_from_bits(packed_half(base >> 1u));
    let m = f16_from_bits(packed_half((base >> 1u) + 1u));
    let j = k & 31u;
    let q = (packed_byte(base + 4u + (j & 15u)) >> ((j >> 4u) * 4u)) & 0xfu;
    return fma(d, f32(q), m);
}

// ---- shared by every dequantize-and-multiply family (identical text in each matmul_*.wgsl) ----
//
// Accumulation-order invariant (docs/kernels.md): one workgroup of LANES invocations computes one
// output row r for one token (matvec) or for TOKEN_TILE tokens (matmul). Lane l accumulates the
// products for k = l, l + LANES, l + 2·LANES, … in increasing k with `fma(w, x, acc)`, starting
// from 0.0; after one barrier, lane 0 adds the LANES partial sums in lane order
// (((p0 + p1) + p2) + … + p63). The order therefore depends only on K,
// never on which rows or how many rows one dispatch covers, so a row-tiled (streamed) dispatch
// and a whole-matrix (resident) dispatch give bit-identical outputs, and `matmul` gives, per
// token, exactly the bits of `matvec`. `reference::matmul` performs the same order on the CPU.

struct Params {
    rows: u32,
    k: u32,
    tokens: u32,
    y_stride: u32,
    y_offset: u32,
    group: u32,
    block_rows: u32,
    dtype: u32,
    groups_x: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

const LANES: u32 = 64u;
const TOKEN_TILE: u32 = 4u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

var<workgroup> partial1: array<f32, 64>;
var<workgroup> partial4: array<vec4<f32>, 64>;

fn packed_byte(i: u32) -> u32 {
    return (packed[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

fn packed_half(h: u32) -> u32 {
    return (packed[h >> 1u] >> ((h & 1u) * 16u)) & 0xffffu;
}

fn f16_from_bits(h: u32) -> f32 {
    return unpack2x16float(h).x;
}

fn bf16_from_bits(h: u32) -> f32 {
    return bitcast<f32>(h << 16u);
}

@compute @workgroup_size(64)
fn matvec(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let r = wg.x + wg.y * p.groups_x;
    if (r >= p.rows) {
        return;
    }
    var acc = 0.0;
    for (var k = lane; k < p.k; k += LANES) {
        acc = fma(weight(r, k), x[k], acc);
    }
    partial1[lane] = acc;
    workgroupBarrier();
    if (lane == 0u) {
        var total = partial1[0];
        for (var l = 1u; l < LANES; l++) {
            total = total + partial1[l];
        }
        y[p.y_offset + r] = total;
    }
}

@compute @workgroup_size(64)
fn matmul(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let r = wg.x + wg.y * p.groups_x;
    let t0 = wg.z * TOKEN_TILE;
    if (r >= p.rows || t0 >= p.tokens) {
        return;
    }
    let last = p.tokens - 1u;
    let b0 = t0 * p.k;
    let b1 = min(t0 + 1u, last) * p.k;
    let b2 = min(t0 + 2u, last) * p.k;
    let b3 = min(t0 + 3u, last) * p.k;
    var acc = vec4<f32>(0.0);
    for (var k = lane; k < p.k; k += LANES) {
        let xv = vec4<f32>(x[b0 + k], x[b1 + k], x[b2 + k], x[b3 + k]);
        acc = fma(vec4<f32>(weight(r, k)), xv, acc);
    }
    partial4[lane] = acc;
    workgroupBarrier();
    if (lane == 0u) {
        var out = partial4[0];
        for (var l = 1u; l < LANES; l++) {
            out = out + partial4[l];
        }
        for (var j = 0u; j < TOKEN_TILE; j++) {
            let t = t0 + j;
            if (t < p.tokens) {
                y[t * p.y_stride + p.y_offset + r] = out[j];
            }
        }
    }
}
