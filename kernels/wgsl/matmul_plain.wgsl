// Dequantize-and-multiply for plain weights: f32, f16 and bf16 (`Kernel::MatvecPlain`, `MatmulPlain`).
//
// Byte layout read (formats.md §1.3, safetensors dtypes; GGUF F32/F16/BF16 in §5.2 are the same bytes):
//   binding 3 `packed`: the weight matrix row-major [rows, K], little-endian elements of `p.dtype`
//     0 = f32 (4 bytes), 1 = f16 (IEEE binary16, 2 bytes), 2 = bf16 (upper half of an f32, 2 bytes).
//     Element (r, k) is element r·K + k of the buffer, so K need not be even for the 2-byte dtypes.
//   The buffer is read as array<u32> and unpacked by hand; a tail shorter than a word is zero padded.
// Rows are local to the bound buffer: a streamed row tile binds its own rows and sets `y_offset`.
// Decoding is exact (every f16/bf16 value is an f32).

@group(0) @binding(3) var<storage, read> packed: array<u32>;

fn weight(r: u32, k: u32) -> f32 {
    let i = r * p.k + k;
    switch p.dtype {
        case 0u: {
            return bitcast<f32>(packed[i]);
        }
        case 1u: {
            return f16_from_bits(packed_half(i));
        }
        default: {
            return bf16_from_bits(packed_half(i));
        }
    }
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

// The unrolled one-token module (kernels/src/unrolled/mod.rs) of f16 and bf16, where `p.dtype` is a
// module constant: the two words w0, w1 hold elements k .. k + 3, which update lane partials
// k .. k + 3 mod LANES with `chunk_dot`'s `fma(weight, x, acc)`. (f32 has no such form.)
fn half_value(h: u32) -> f32 {
    if (p.dtype == 1u) {
        return f16_from_bits(h);
    }
    return bf16_from_bits(h);
}

fn block_dot(w0: u32, w1: u32, k: u32, acc: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(
        fma(half_value(w0 & 0xffffu), xv(k), acc.x),
        fma(half_value(w0 >> 16u), xv(k + 1u), acc.y),
        fma(half_value(w1 & 0xffffu), xv(k + 2u), acc.z),
        fma(half_value(w1 >> 16u), xv(k + 3u), acc.w)
    );
}

// The multiply body (entry points, accumulation order) is wgsl/matmul_body.wgsl, appended by
// kernels/src/kernel.rs.
