// Dequantize-and-multiply for GGUF Q8_0 blocks (`Kernel::MatvecQ8_0`, `MatmulQ8_0`).
//
// Byte layout read (formats.md §5.2, ggml `block_q8_0`): each row is K/32 blocks of 34 bytes,
//   [f16 d (little-endian) | i8 qs[32]], rows back to back (row r starts at byte r·(K/32)·34).
//   value = d · qs[j] for element j of the block (exact in f32). K must be a multiple of 32.
// Blocks are not 4-byte multiples: binding 3 is read as array<u32> and bytes are unpacked by hand
// (every block starts on an even byte, so d is one aligned half-word).
// Chunk c (of K/8 per row) is elements 8w .. 8w+7 (w = c % 4) of block c / 4, in increasing order.
// A streamed GGUF tile is a run of whole rows (docs/kernels.md).

// One block: BLOCK_ELEMS elements in BLOCK_BYTES bytes (ggml blck_size / type_size; kernels
// tests/block_layouts.rs holds these against WeightFormat::block and artifact::gguf).
const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 34u;

@group(0) @binding(3) var<storage, read> packed: array<u32>;

fn chunk_count() -> u32 {
    return p.k / 8u;
}

fn q8_at(byte: u32) -> f32 {
    return f32(bitcast<i32>(packed_byte(byte) << 24u) >> 24u);
}

fn chunk_dot(r: u32, c: u32, xb: u32, acc_in: f32) -> f32 {
    let blk = c >> 2u;
    let base = (r * (p.k / BLOCK_ELEMS) + blk) * BLOCK_BYTES;
    let d = f16_from_bits(packed_half(base >> 1u));
    let j0 = 8u * (c & 3u);
    let k0 = xb + blk * 32u + j0;
    var acc = acc_in;
    for (var i = 0u; i < 8u; i++) {
        acc = fma(d * q8_at(base + 2u + j0 + i), xv(k0 + i), acc);
    }
    return acc;
}

// Byte i (0..3) of word u as a signed 8-bit value.
fn q8_in(u: u32, i: u32) -> f32 {
    return f32(bitcast<i32>(u << (24u - 8u * i)) >> 24u);
}

// One whole block from its 34 bytes as nine words u0 .. u8 starting at the block's first byte
// (u0 = d | qs[0] << 16 | qs[1] << 24, …): chunks 4b .. 4b+3 into the four partials of acc,
// each in chunk_dot's order; k = 32b. Written out (no loop) so that the unrolled matvec
// (kernels/src/unrolled/mod.rs), which loads and realigns the words itself, reads every x with a
// constant index.
fn block_dot(u0: u32, u1: u32, u2: u32, u3: u32, u4: u32, u5: u32, u6: u32, u7: u32, u8: u32,
             k: u32, acc: vec4<f32>) -> vec4<f32> {
    let d = f16_from_bits(u0 & 0xffffu);
    var a0 = acc[0];
    a0 = fma(d * q8_in(u0, 2u), xv(k + 0u), a0);
    a0 = fma(d * q8_in(u0, 3u), xv(k + 1u), a0);
    a0 = fma(d * q8_in(u1, 0u), xv(k + 2u), a0);
    a0 = fma(d * q8_in(u1, 1u), xv(k + 3u), a0);
    a0 = fma(d * q8_in(u1, 2u), xv(k + 4u), a0);
    a0 = fma(d * q8_in(u1, 3u), xv(k + 5u), a0);
    a0 = fma(d * q8_in(u2, 0u), xv(k + 6u), a0);
    a0 = fma(d * q8_in(u2, 1u), xv(k + 7u), a0);
    var a1 = acc[1];
    a1 = fma(d * q8_in(u2, 2u), xv(k + 8u), a1);
    a1 = fma(d * q8_in(u2, 3u), xv(k + 9u), a1);
    a1 = fma(d * q8_in(u3, 0u), xv(k + 10u), a1);
    a1 = fma(d * q8_in(u3, 1u), xv(k + 11u), a1);
    a1 = fma(d * q8_in(u3, 2u), xv(k + 12u), a1);
    a1 = fma(d * q8_in(u3, 3u), xv(k + 13u), a1);
    a1 = fma(d * q8_in(u4, 0u), xv(k + 14u), a1);
    a1 = fma(d * q8_in(u4, 1u), xv(k + 15u), a1);
    var a2 = acc[2];
    a2 = fma(d * q8_in(u4, 2u), xv(k + 16u), a2);
    a2 = fma(d * q8_in(u4, 3u), xv(k + 17u), a2);
    a2 = fma(d * q8_in(u5, 0u), xv(k + 18u), a2);
    a2 = fma(d * q8_in(u5, 1u), xv(k + 19u), a2);
    a2 = fma(d * q8_in(u5, 2u), xv(k + 20u), a2);
    a2 = fma(d * q8_in(u5, 3u), xv(k + 21u), a2);
    a2 = fma(d * q8_in(u6, 0u), xv(k + 22u), a2);
    a2 = fma(d * q8_in(u6, 1u), xv(k + 23u), a2);
    var a3 = acc[3];
    a3 = fma(d * q8_in(u6, 2u), xv(k + 24u), a3);
    a3 = fma(d * q8_in(u6, 3u), xv(k + 25u), a3);
    a3 = fma(d * q8_in(u7, 0u), xv(k + 26u), a3);
    a3 = fma(d * q8_in(u7, 1u), xv(k + 27u), a3);
    a3 = fma(d * q8_in(u7, 2u), xv(k + 28u), a3);
    a3 = fma(d * q8_in(u7, 3u), xv(k + 29u), a3);
    a3 = fma(d * q8_in(u8, 0u), xv(k + 30u), a3);
    a3 = fma(d * q8_in(u8, 1u), xv(k + 31u), a3);
    return vec4<f32>(a0, a1, a2, a3);
}

fn chunk_dot4(r: u32, c: u32, b: vec4<u32>, acc_in: vec4<f32>) -> vec4<f32> {
    let blk = c >> 2u;
    let base = (r * (p.k / BLOCK_ELEMS) + blk) * BLOCK_BYTES;
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
