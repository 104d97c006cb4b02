// Dequantize-and-multiply for GGUF Q8_0 blocks (`Kernel::MatvecQ8_0`, `MatmulQ8_0`).
//
// Byte layout read (formats.md §5.2, ggml `block_q8_0`): each row is K/32 blocks of 34 bytes,
//   [f16 d (little-endian) | i8 qs[32]], rows back to back (row r starts at byte r·(K/32)·34).
//   value = d · qs[j] for element j of the block (exact in f32). K must be a multiple of 32.
// Blocks are not 4-byte multiples: binding 3 is read as array<u32> and bytes are unpacked by hand
// (every block starts on an even byte, so d is one aligned half-word).
// Chunk c (of K/8 per row) is elements 8w .. 8w+7 (w = c % 4) of block c / 4, in increasing order.
// A streamed GGUF tile is a run of whole rows (docs/kernels.md).

@group(0) @binding(3) var<storage, read> packed: array<u32>;

fn chunk_count() -> u32 {
    return p.k / 8u;
}

fn q8_at(byte: u32) -> f32 {
    return f32(bitcast<i32>(packed_byte(byte) << 24u) >> 24u);
}

fn chunk_dot(r: u32, c: u32, xb: u32, acc_in: f32) -> f32 {
    let blk = c >> 2u;
    let base = (r * (p.k / 32u) + blk) * 34u;
    let d = f16_from_bits(packed_half(base >> 1u));
    let j0 = 8u * (c & 3u);
    let k0 = xb + blk * 32u + j0;
    var acc = acc_in;
    for (var i = 0u; i < 8u; i++) {
        acc = fma(d * q8_at(base + 2u + j0 + i), xv(k0 + i), acc);
    }
    return acc;
}

fn chunk_dot4(r: u32, c: u32, b: vec4<u32>, acc_in: vec4<f32>) -> vec4<f32> {
    let blk = c >> 2u;
    let base = (r * (p.k / 32u) + blk) * 34u;
    let d = f16_from_bits(packed_half(base >> 1u));
    let j0 = 8u * (c & 3u);
    let k0 = blk * 32u + j0;
    var acc = acc_in;
    for (var i = 0u; i < 8u; i++) {
        let wv = d * q8_at(base + 2u + j0 + i);
        let k = k0 + i;
        acc = fma(vec4<f32>(wv), vec4<f32>(xv(b.x + k), xv(b.y + k), xv(b.z + k), xv(b.w + k)), acc);
    }
    return acc;
}

// The multiply body (entry points, accumulation order) is wgsl/matmul_body.wgsl, appended by
// kernels/src/kernel.rs.
