// Dequantize-and-multiply for GGUF Q5_1 blocks (`Kernel::MatvecQ5_1`, `MatmulQ5_1`).
//
// Byte layout read (formats.md §5.2, ggml `block_q5_1`): each row is K/32 blocks of 24 bytes,
//   [f16 d | f16 m | u8 qh[4] (one u32, little-endian) | u8 qs[16]], rows back to back.
//   Element j: low 4 bits = nibble (j & 15) of qs, LOW nibble for j < 16, HIGH for j ≥ 16;
//   bit 4 = bit j of qh. value = q · d + m (ggml `dequantize_row_q5_1`: product, then sum).
//   K must be a multiple of 32.
// 24-byte blocks keep 4-byte alignment: word 0 = d | m, word 1 = qh, words 2..5 = qs.
// Chunk c (of K/8 per row) is elements 8w .. 8w+7 (w = c % 4) of block c / 4, in increasing order
// (`reference`: same order). A streamed GGUF tile is a run of whole rows (docs/kernels.md).

// One block: BLOCK_ELEMS elements in BLOCK_BYTES bytes (ggml blck_size / type_size; kernels
// tests/block_layouts.rs holds these against WeightFormat::block and artifact::gguf).
const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 24u;

@group(0) @binding(3) var<storage, read> packed: array<u32>;

fn chunk_weights(r: u32, c: u32) -> array<f32, 8> {
    let word = (r * (p.k / BLOCK_ELEMS) + (c >> 2u)) * (BLOCK_BYTES / 4u);
    let dm = unpack2x16float(packed[word]);
    let qh = packed[word + 1u];
    let j0 = 8u * (c & 3u);
    var w: array<f32, 8>;
    for (var i = 0u; i < 8u; i++) {
        let j = j0 + i;
        let q = ((packed_byte(4u * word + 8u + (j & 15u)) >> ((j >> 4u) * 4u)) & 0xfu) | (((qh >> j) & 1u) << 4u);
        w[i] = f32(q) * dm.x + dm.y;
    }
    return w;
}

// One whole block from its 6 words (the block's first byte is word 0's; the words past the
// block are ignored): chunks 4b .. 4b+3 into the four partials of acc, each in chunk_dot's order
// (matmul_chunk8.wgsl: the chunk's 8 weights ascending, each fma(w, x, acc)); k = 32b, the
// block's first element. The unrolled matvec (kernels/src/unrolled/mod.rs) calls it with words
// it loaded (and realigned) itself, so every x index is a constant.
fn block_dot(u0: u32, u1: u32, u2: u32, u3: u32, u4: u32, u5: u32,
             k: u32, acc: vec4<f32>) -> vec4<f32> {
    let dm = unpack2x16float(u0);
    let qh = u1;
    var a0 = acc[0];
    a0 = fma(f32((((u2 >> 0u) & 0xfu) | (((qh >> 0u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 0u), a0);
    a0 = fma(f32((((u2 >> 8u) & 0xfu) | (((qh >> 1u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 1u), a0);
    a0 = fma(f32((((u2 >> 16u) & 0xfu) | (((qh >> 2u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 2u), a0);
    a0 = fma(f32((((u2 >> 24u) & 0xfu) | (((qh >> 3u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 3u), a0);
    a0 = fma(f32((((u3 >> 0u) & 0xfu) | (((qh >> 4u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 4u), a0);
    a0 = fma(f32((((u3 >> 8u) & 0xfu) | (((qh >> 5u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 5u), a0);
    a0 = fma(f32((((u3 >> 16u) & 0xfu) | (((qh >> 6u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 6u), a0);
    a0 = fma(f32((((u3 >> 24u) & 0xfu) | (((qh >> 7u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 7u), a0);
    var a1 = acc[1];
    a1 = fma(f32((((u4 >> 0u) & 0xfu) | (((qh >> 8u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 8u), a1);
    a1 = fma(f32((((u4 >> 8u) & 0xfu) | (((qh >> 9u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 9u), a1);
    a1 = fma(f32((((u4 >> 16u) & 0xfu) | (((qh >> 10u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 10u), a1);
    a1 = fma(f32((((u4 >> 24u) & 0xfu) | (((qh >> 11u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 11u), a1);
    a1 = fma(f32((((u5 >> 0u) & 0xfu) | (((qh >> 12u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 12u), a1);
    a1 = fma(f32((((u5 >> 8u) & 0xfu) | (((qh >> 13u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 13u), a1);
    a1 = fma(f32((((u5 >> 16u) & 0xfu) | (((qh >> 14u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 14u), a1);
    a1 = fma(f32((((u5 >> 24u) & 0xfu) | (((qh >> 15u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 15u), a1);
    var a2 = acc[2];
    a2 = fma(f32((((u2 >> 4u) & 0xfu) | (((qh >> 16u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 16u), a2);
    a2 = fma(f32((((u2 >> 12u) & 0xfu) | (((qh >> 17u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 17u), a2);
    a2 = fma(f32((((u2 >> 20u) & 0xfu) | (((qh >> 18u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 18u), a2);
    a2 = fma(f32((((u2 >> 28u) & 0xfu) | (((qh >> 19u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 19u), a2);
    a2 = fma(f32((((u3 >> 4u) & 0xfu) | (((qh >> 20u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 20u), a2);
    a2 = fma(f32((((u3 >> 12u) & 0xfu) | (((qh >> 21u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 21u), a2);
    a2 = fma(f32((((u3 >> 20u) & 0xfu) | (((qh >> 22u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 22u), a2);
    a2 = fma(f32((((u3 >> 28u) & 0xfu) | (((qh >> 23u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 23u), a2);
    var a3 = acc[3];
    a3 = fma(f32((((u4 >> 4u) & 0xfu) | (((qh >> 24u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 24u), a3);
    a3 = fma(f32((((u4 >> 12u) & 0xfu) | (((qh >> 25u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 25u), a3);
    a3 = fma(f32((((u4 >> 20u) & 0xfu) | (((qh >> 26u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 26u), a3);
    a3 = fma(f32((((u4 >> 28u) & 0xfu) | (((qh >> 27u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 27u), a3);
    a3 = fma(f32((((u5 >> 4u) & 0xfu) | (((qh >> 28u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 28u), a3);
    a3 = fma(f32((((u5 >> 12u) & 0xfu) | (((qh >> 29u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 29u), a3);
    a3 = fma(f32((((u5 >> 20u) & 0xfu) | (((qh >> 30u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 30u), a3);
    a3 = fma(f32((((u5 >> 28u) & 0xfu) | (((qh >> 31u) & 1u) << 4u))) * dm.x + dm.y, xv(k + 31u), a3);
    return vec4<f32>(a0, a1, a2, a3);
}

// chunk_count, chunk_dot and chunk_dot4 over chunk_weights: wgsl/matmul_chunk8.wgsl, appended
// after this prefix by kernels/src/kernel.rs.

// The multiply body (entry points, accumulation order) is wgsl/matmul_body.wgsl, appended by
// kernels/src/kernel.rs.
