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

// chunk_count, chunk_dot and chunk_dot4 over chunk_weights: wgsl/matmul_chunk8.wgsl, appended
// after this prefix by kernels/src/kernel.rs.

// The multiply body (entry points, accumulation order) is wgsl/matmul_body.wgsl, appended by
// kernels/src/kernel.rs.
