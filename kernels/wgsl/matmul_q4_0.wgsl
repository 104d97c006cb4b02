// Dequantize-and-multiply for GGUF Q4_0 blocks (`Kernel::MatvecQ4_0`, `MatmulQ4_0`).
//
// Byte layout read (formats.md §5.2, ggml `block_q4_0`): each row is K/32 blocks of 18 bytes,
//   [f16 d | u8 qs[16]], rows back to back. Element j < 16 is the LOW nibble of qs[j], j ≥ 16 the
//   HIGH nibble of qs[j − 16]. value = (q − 8) · d (one product; ggml `dequantize_row_q4_0`).
//   K must be a multiple of 32.
// 18-byte blocks start on an even byte: d is one aligned half-word, qs bytes are unpacked by hand.
// Chunk c (of K/8 per row) is elements 8w .. 8w+7 (w = c % 4) of block c / 4, in increasing order
// (`reference`: same order). A streamed GGUF tile is a run of whole rows (docs/kernels.md).

// One block: BLOCK_ELEMS elements in BLOCK_BYTES bytes (ggml blck_size / type_size; kernels
// tests/block_layouts.rs holds these against WeightFormat::block and artifact::gguf).
const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 18u;

@group(0) @binding(3) var<storage, read> packed: array<u32>;

fn chunk_weights(r: u32, c: u32) -> array<f32, 8> {
    let base = (r * (p.k / BLOCK_ELEMS) + (c >> 2u)) * BLOCK_BYTES;
    let d = f16_from_bits(packed_half(base >> 1u));
    let j0 = 8u * (c & 3u);
    var w: array<f32, 8>;
    for (var i = 0u; i < 8u; i++) {
        let j = j0 + i;
        let q = (packed_byte(base + 2u + (j & 15u)) >> ((j >> 4u) * 4u)) & 0xfu;
        w[i] = (f32(q) - 8.0) * d;
    }
    return w;
}

// One whole block from its 5 words (the block's first byte is word 0's; the words past the
// block are ignored): chunks 4b .. 4b+3 into the four partials of acc, each in chunk_dot's order
// (matmul_chunk8.wgsl: the chunk's 8 weights ascending, each fma(w, x, acc)); k = 32b, the
// block's first element. The unrolled matvec (kernels/src/unrolled/mod.rs) calls it with words
// it loaded (and realigned) itself, so every x index is a constant.
fn block_dot(u0: u32, u1: u32, u2: u32, u3: u32, u4: u32,
             k: u32, acc: vec4<f32>) -> vec4<f32> {
    let d = f16_from_bits(u0 & 0xffffu);
    var a0 = acc[0];
    a0 = fma((f32(((u0 >> 16u) & 0xfu)) - 8.0) * d, xv(k + 0u), a0);
    a0 = fma((f32(((u0 >> 24u) & 0xfu)) - 8.0) * d, xv(k + 1u), a0);
    a0 = fma((f32(((u1 >> 0u) & 0xfu)) - 8.0) * d, xv(k + 2u), a0);
    a0 = fma((f32(((u1 >> 8u) & 0xfu)) - 8.0) * d, xv(k + 3u), a0);
    a0 = fma((f32(((u1 >> 16u) & 0xfu)) - 8.0) * d, xv(k + 4u), a0);
    a0 = fma((f32(((u1 >> 24u) & 0xfu)) - 8.0) * d, xv(k + 5u), a0);
    a0 = fma((f32(((u2 >> 0u) & 0xfu)) - 8.0) * d, xv(k + 6u), a0);
    a0 = fma((f32(((u2 >> 8u) & 0xfu)) - 8.0) * d, xv(k + 7u), a0);
    var a1 = acc[1];
    a1 = fma((f32(((u2 >> 16u) & 0xfu)) - 8.0) * d, xv(k + 8u), a1);
    a1 = fma((f32(((u2 >> 24u) & 0xfu)) - 8.0) * d, xv(k + 9u), a1);
    a1 = fma((f32(((u3 >> 0u) & 0xfu)) - 8.0) * d, xv(k + 10u), a1);
    a1 = fma((f32(((u3 >> 8u) & 0xfu)) - 8.0) * d, xv(k + 11u), a1);
    a1 = fma((f32(((u3 >> 16u) & 0xfu)) - 8.0) * d, xv(k + 12u), a1);
    a1 = fma((f32(((u3 >> 24u) & 0xfu)) - 8.0) * d, xv(k + 13u), a1);
    a1 = fma((f32(((u4 >> 0u) & 0xfu)) - 8.0) * d, xv(k + 14u), a1);
    a1 = fma((f32(((u4 >> 8u) & 0xfu)) - 8.0) * d, xv(k + 15u), a1);
    var a2 = acc[2];
    a2 = fma((f32(((u0 >> 20u) & 0xfu)) - 8.0) * d, xv(k + 16u), a2);
    a2 = fma((f32(((u0 >> 28u) & 0xfu)) - 8.0) * d, xv(k + 17u), a2);
    a2 = fma((f32(((u1 >> 4u) & 0xfu)) - 8.0) * d, xv(k + 18u), a2);
    a2 = fma((f32(((u1 >> 12u) & 0xfu)) - 8.0) * d, xv(k + 19u), a2);
    a2 = fma((f32(((u1 >> 20u) & 0xfu)) - 8.0) * d, xv(k + 20u), a2);
    a2 = fma((f32(((u1 >> 28u) & 0xfu)) - 8.0) * d, xv(k + 21u), a2);
    a2 = fma((f32(((u2 >> 4u) & 0xfu)) - 8.0) * d, xv(k + 22u), a2);
    a2 = fma((f32(((u2 >> 12u) & 0xfu)) - 8.0) * d, xv(k + 23u), a2);
    var a3 = acc[3];
    a3 = fma((f32(((u2 >> 20u) & 0xfu)) - 8.0) * d, xv(k + 24u), a3);
    a3 = fma((f32(((u2 >> 28u) & 0xfu)) - 8.0) * d, xv(k + 25u), a3);
    a3 = fma((f32(((u3 >> 4u) & 0xfu)) - 8.0) * d, xv(k + 26u), a3);
    a3 = fma((f32(((u3 >> 12u) & 0xfu)) - 8.0) * d, xv(k + 27u), a3);
    a3 = fma((f32(((u3 >> 20u) & 0xfu)) - 8.0) * d, xv(k + 28u), a3);
    a3 = fma((f32(((u3 >> 28u) & 0xfu)) - 8.0) * d, xv(k + 29u), a3);
    a3 = fma((f32(((u4 >> 4u) & 0xfu)) - 8.0) * d, xv(k + 30u), a3);
    a3 = fma((f32(((u4 >> 12u) & 0xfu)) - 8.0) * d, xv(k + 31u), a3);
    return vec4<f32>(a0, a1, a2, a3);
}

// chunk_count, chunk_dot and chunk_dot4 over chunk_weights: wgsl/matmul_chunk8.wgsl, appended
// after this prefix by kernels/src/kernel.rs.

// The multiply body (entry points, accumulation order) is wgsl/matmul_body.wgsl, appended by
// kernels/src/kernel.rs.
