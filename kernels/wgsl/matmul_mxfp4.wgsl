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

// The unrolled one-token module (kernels/src/unrolled/mod.rs) hands a 32-element group's four words to
// `block_dot` and sets `unrolled_row` before each row: word i is chunk k/8 + i, added to lane
// partial acc[i] exactly as `chunk_dot` adds it.
var<private> unrolled_row: u32;

fn word_dot(w: u32, s: f32, k0: u32, acc_in: f32) -> f32 {
    var acc = acc_in;
    for (var i = 0u; i < 8u; i++) {
        acc = fma(e2m1((w >> (4u * i)) & 0xfu) * s, xv(k0 + i), acc);
    }
    return acc;
}

fn block_dot(w0: u32, w1: u32, w2: u32, w3: u32, k: u32, acc: vec4<f32>) -> vec4<f32> {
    let s = e8m0(scale_byte(unrolled_row * (p.k / MX_GROUP) + k / MX_GROUP));
    return vec4<f32>(
        word_dot(w0, s, k, acc.x),
        word_dot(w1, s, k + 8u, acc.y),
        word_dot(w2, s, k + 16u, acc.z),
        word_dot(w3, s, k + 24u, acc.w),
    );
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
        acc = fma(e2m1((word >> (4u * i)) & 0xfu) * s, xv(k0 + i), acc);
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
        acc = fma(vec4<f32>(wv), vec4<f32>(xv(b.x + k), xv(b.y + k), xv(b.z + k), xv(b.w + k)), acc);
    }
    return acc;
}

// The multiply body (entry points, accumulation order) is wgsl/matmul_body.wgsl, appended by
// kernels/src/kernel.rs.
