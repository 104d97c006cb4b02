// Dequantize-and-multiply for the `mxfp4` tile-container mode (`Kernel::MatvecMxfp4`, `MatmulMxfp4`).
//
// Byte layout read (formats.md §2.1, §2.2, §2.3 "Nibble order", §2.4; container seed 000 "mxfp4"):
//   binding 3 `packed`: E2M1 codes, two per byte, row-major [rows, K/2] bytes; byte i holds element 2i
//     in its LOW nibble and element 2i+1 in its HIGH nibble (== MLX uint32 words, LSB-first codes).
//     Code S.EE.M: 0..7 = +0, 0.5, 1, 1.5, 2, 3, 4, 6; 8..15 the same negated.
//   binding 4 `scales`: one E8M0 byte per 32 elements, row-major [rows, K/32]; 2^(e − 127), 0xFF = NaN.
//   value(r, k) = e2m1(code(r, k)) · 2^(scales[r, k / 32] − 127). K must be a multiple of 32.
// Both buffers are read as array<u32> (little-endian bytes) and unpacked by hand; decoding is exact.

@group(0) @binding(3) var<storage, read> packed: array<u32>;
@group(0) @binding(4) var<storage, read> scales: array<u32>;

const MX_GROUP: u32 = 32u;

fn scale_byte(i: u32) -> u32 {
    return (scales[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

fn e8m0(e: u32) -> f32 {
    if (e == 0u) {
        return bitcast<f32>(0x00400000u);
    }
    if (e == 255u) {
        return bitcast<f32>(0x7fc00000u);
    }
    return bitcast<f32>(e << 23u);
}

fn e2m1(c: u32) -> f32 {
    let e = (c >> 1u) & 3u;
    let m = f32(c & 1u);
    var mag = 0.5 * m;
    if (e != 0u) {
        mag = (1.0 + 0.5 * m) * f32(1u << (e - 1u));
    }
    if ((c & 8u) != 0u) {
        return -mag;
    }
    return mag;
}

fn weight(r: u32, k: u32) -> f32 {
    let i = r * p.k + k;
    let code = (packed_byte(i >> 1u) >> ((i & 1u) * 4u)) & 0xfu;
    let e = scale_byte(r * (p.k / MX_GROUP) + k / MX_GROUP);
    return e2m1(code) * e8m0(e);
}

// One chunk = one packed u32 word = 8 consecutive elements 8c .. 8c+7 (codes LSB-first, i.e. the
// low nibble of each byte first), all under one scale (a group of 32 is 4 words); K/8 chunks.
fn chunk_count() -> u32 {
    return p.k / 8u;
}

fn chunk_dot(r: u32, c: u32, xb: u32, acc_in: f32) -> f32 {
    let word = packed[r * (p.k / 8u) + c];
    let s = e8m0(scale_byte(r * (p.k / MX_GROUP) + c / 4u));
    let k0 = xb + 8u * c;
    var acc = acc_in;
    for (var i = 0u; i < 8u; i++) {
        acc = fma(e2m1((word >> (4u * i)) & 0xfu) * s, x[k0 + i], acc);
    }
    return acc;
}

fn chunk_dot4(r: u32, c: u32, b: vec4<u32>, acc_in: vec4<f32>) -> vec4<f32> {
    let word = packed[r * (p.k / 8u) + c];
    let s = e8m0(scale_byte(r * (p.k / MX_GROUP) + c / 4u));
    var acc = acc_in;
    for (var i = 0u; i < 8u; i++) {
        let wv = e2m1((word >> (4u * i)) & 0xfu) * s;
        let k = 8u * c + i;
        acc = fma(vec4<f32>(wv), vec4<f32>(x[b.x + k], x[b.y + k], x[b.z + k], x[b.w + k]), acc);
    }
    return acc;
}

// ---- shared by every dequantize-and-multiply family (identical text in each matmul_*.wgsl) ----
//
// Accumulation-order invariant (docs/kernels.md): one workgroup of LANES invocations computes one
// output row r for one token (matvec) or for TOKEN_TILE tokens (matmul). A row's K elements form
// chunks (`chunk_count`, `chunk_dot` in the format part above: one element for plain, fp8 and
// affine; one packed u32 word of 8 elements for Q4_1, Q8_0 and mxfp4). Lane l takes chunks
// c = l, l + LANES, … in increasing c and, inside a chunk, the elements in the chunk's fixed
// order, each with `acc = fma(w, x, acc)`, starting from 0.0; after one barrier, lane 0 adds the
// LANES partial sums in lane order (((p0 + p1) + p2) + … + p63). The order therefore depends only
// on K, never on which rows or how many rows one dispatch covers, so a row-tiled (streamed) dispatch
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
    let n = chunk_count();
    for (var c = lane; c < n; c += LANES) {
        acc = chunk_dot(r, c, 0u, acc);
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
    let bases = vec4<u32>(b0, b1, b2, b3);
    let n = chunk_count();
    for (var c = lane; c < n; c += LANES) {
        acc = chunk_dot4(r, c, bases, acc);
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
