// Dequantize-and-multiply for the `affine` tile-container mode, 8 bits (`Kernel::MatvecAffine8`,
// `MatmulAffine8`).
//
// Byte layout read (formats.md §3; container seed 000 "affine"):
//   binding 3 `packed`: unsigned 8-bit q packed little-endian LSB-first into u32 words, row-major
//     [rows, K/4] words, i.e. element (r, k) is byte r·K + k.
//   binding 4 `scales`, binding 5 `biases`: one value per group of `p.group` consecutive elements
//     along K, row-major [rows, K / group], element type `p.dtype` (0 = f32, 1 = f16, 2 = bf16 — the
//     source checkpoint's dtype, recorded in the container header). Scales may be negative.
//   value(r, k) = fma(scale, q, bias), one rounding (documented choice; MLX writes scale·q + bias).
// K must be a multiple of the group, and the group a power of two.

@group(0) @binding(3) var<storage, read> packed: array<u32>;
@group(0) @binding(4) var<storage, read> scales: array<u32>;
@group(0) @binding(5) var<storage, read> biases: array<u32>;

fn scale_at(i: u32) -> f32 {
    switch p.dtype {
        case 0u: {
            return bitcast<f32>(scales[i]);
        }
        case 1u: {
            return f16_from_bits((scales[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu);
        }
        default: {
            return bf16_from_bits((scales[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu);
        }
    }
}

fn bias_at(i: u32) -> f32 {
    switch p.dtype {
        case 0u: {
            return bitcast<f32>(biases[i]);
        }
        case 1u: {
            return f16_from_bits((biases[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu);
        }
        default: {
            return bf16_from_bits((biases[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu);
        }
    }
}

fn weight(r: u32, k: u32) -> f32 {
    let q = f32(packed_byte(r * p.k + k));
    let g = r * (p.k / p.group) + k / p.group;
    return fma(scale_at(g), q, bias_at(g));
}

// One chunk = one element: lane l visits k = l, l + LANES, … in increasing k.
fn chunk_count() -> u32 {
    return p.k;
}

fn chunk_dot(r: u32, c: u32, xb: u32, acc: f32) -> f32 {
    return fma(weight(r, c), x[xb + c], acc);
}

fn chunk_dot4(r: u32, c: u32, b: vec4<u32>, acc: vec4<f32>) -> vec4<f32> {
    let xv = vec4<f32>(x[b.x + c], x[b.y + c], x[b.z + c], x[b.w + c]);
    return fma(vec4<f32>(weight(r, c)), xv, acc);
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
