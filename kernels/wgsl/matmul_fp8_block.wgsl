// Dequantize-and-multiply for the `fp8-e4m3-block` tile-container mode (`Kernel::MatvecFp8Block`,
// `MatmulFp8Block`).
//
// Byte layout read (formats.md §4.1, §4.2, §4.3; container seed 000 "fp8-e4m3-block"):
//   binding 3 `packed`: FP8 E4M3FN bytes row-major [rows, K] (S.EEEE.MMM, bias 7, no infinities,
//     0x7F/0xFF = NaN, subnormals m·2^-9). Element (r, k) is byte r·K + k.
//   binding 4 `scales`: a 2-D grid of E8M0 bytes row-major [ceil(rows / block_rows), ceil(K / group)]
//     (DeepSeek: block_rows = group = 128); byte (i, j) = 2^(e − 127), 0xFF decodes as NaN (OCP).
//   value(r, k) = e4m3(packed[r, k]) · 2^(scales[r / block_rows, k / group] − 127).
// Both buffers are read as array<u32> (little-endian bytes) and unpacked by hand. Row tiles hold whole
// rows and start on a multiple of block_rows, so a tile's scale sub-region is its own grid rows.
// The product is exact in f32 except where it underflows to a subnormal.

@group(0) @binding(3) var<storage, read> packed: array<u32>;
@group(0) @binding(4) var<storage, read> scales: array<u32>;

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

// Without branches (llvmpipe evaluates both sides of a per-lane branch): the magnitude bits
// E.EEE.MMM moved into an f32's exponent and mantissa, the exponent rebiased by 120 (7 → 127),
// are 2^(e−7)·(1 + m/8) for e ≥ 1; for e = 0 they are 2^-7·(1 + m/8), and (v − 2^-7)·2 = m·2^-9
// is the subnormal, exactly (Sterbenz, then a power of two). The sign is or-ed in last
// (0x80 is −0.0, as before).
fn e4m3(c: u32) -> f32 {
    let a = c & 0x7fu;
    let v = bitcast<f32>((a << 20u) + 0x3c000000u);
    let mag = select(select(v, (v - 0.0078125) * 2.0, a < 8u), bitcast<f32>(0x7fc00000u), a == 0x7fu);
    return bitcast<f32>(bitcast<u32>(mag) | ((c & 0x80u) << 24u));
}

fn weight(r: u32, k: u32) -> f32 {
    let code = packed_byte(r * p.k + k);
    let cols = (p.k + p.group - 1u) / p.group;
    let e = scale_byte((r / p.block_rows) * cols + k / p.group);
    return e4m3(code) * e8m0(e);
}

// The unrolled one-token module (kernels/src/unrolled/mod.rs) reads each row's bytes a word at a time
// and sets `unrolled_row` before each row: the four elements k .. k + 3 of word `w0` update lane
// partials k .. k + 3 mod LANES with the same `fma(weight, x, acc)` as `chunk_dot`.
var<private> unrolled_row: u32;

fn block_dot(w0: u32, k: u32, acc: vec4<f32>) -> vec4<f32> {
    let cols = (p.k + p.group - 1u) / p.group;
    let s = e8m0(scale_byte((unrolled_row / p.block_rows) * cols + k / p.group));
    return vec4<f32>(
        fma(e4m3(w0 & 0xffu) * s, xv(k), acc.x),
        fma(e4m3((w0 >> 8u) & 0xffu) * s, xv(k + 1u), acc.y),
        fma(e4m3((w0 >> 16u) & 0xffu) * s, xv(k + 2u), acc.z),
        fma(e4m3(w0 >> 24u) * s, xv(k + 3u), acc.w),
    );
}

// One chunk = one element: lane l visits k = l, l + LANES, … in increasing k.
fn chunk_count() -> u32 {
    return p.k;
}

fn chunk_dot(r: u32, c: u32, xb: u32, acc: f32) -> f32 {
    return fma(weight(r, c), xv(xb + c), acc);
}

fn chunk_dot4(r: u32, c: u32, b: vec4<u32>, acc: vec4<f32>) -> vec4<f32> {
    let xv = vec4<f32>(xv(b.x + c), xv(b.y + c), xv(b.z + c), xv(b.w + c));
    return fma(vec4<f32>(weight(r, c)), xv, acc);
}

// The multiply body (entry points, accumulation order) is wgsl/matmul_body.wgsl, appended by
// kernels/src/kernel.rs.
