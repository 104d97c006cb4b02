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

// chunk_count, chunk_dot and chunk_dot4 over chunk_weights: wgsl/matmul_chunk8.wgsl, appended
// after this prefix by kernels/src/kernel.rs.

// The multiply body (entry points, accumulation order) is wgsl/matmul_body.wgsl, appended by
// kernels/src/kernel.rs.
