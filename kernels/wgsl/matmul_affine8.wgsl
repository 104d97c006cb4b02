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
// One word of four elements k .. k + 3 of row `unrolled_row` for the unrolled matvec
// (kernels/src/unrolled/mod.rs), which loads the words itself and sets `unrolled_row` before each
// row: element k + i updates lane partial (k + i) mod LANES with `chunk_dot`'s
// `fma(weight, x, acc)`. The four share one group (K and the group are multiples of 4).
var<private> unrolled_row: u32;

fn block_dot(w0: u32, k: u32, acc: vec4<f32>) -> vec4<f32> {
    let g = unrolled_row * (p.k / p.group) + k / p.group;
    let s = scale_at(g);
    let b = bias_at(g);
    return vec4<f32>(
        fma(fma(s, f32(w0 & 0xffu), b), xv(k), acc.x),
        fma(fma(s, f32((w0 >> 8u) & 0xffu), b), xv(k + 1u), acc.y),
        fma(fma(s, f32((w0 >> 16u) & 0xffu), b), xv(k + 2u), acc.z),
        fma(fma(s, f32(w0 >> 24u), b), xv(k + 3u), acc.w),
    );
}

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
