// Dequantize-and-multiply for GGUF Q6_K super-blocks (`Kernel::MatvecQ6K`, `MatmulQ6K`).
//
// Byte layout read (formats.md §5.2, ggml `block_q6_K`): each row is K/256 super-blocks of 210
//   bytes, [u8 ql[128] | u8 qh[64] | i8 scales[16] | f16 d], rows back to back.
//   Element e of the super-block, with h = e / 128, t = (e % 128) / 32, l = e % 32: the low 4 bits
//   are ql[64h + l + 32(t & 1)], LOW nibble for t < 2, HIGH for t ≥ 2; the high 2 bits are bits
//   2t, 2t+1 of qh[32h + l]; the scale is scales[8h + l/16 + 2t].
//   value = (d · scale) · (q − 32), each product rounded (ggml `dequantize_row_q6_K`).
//   K must be a multiple of 256.
// 210-byte super-blocks start on an even byte only: bytes are unpacked by hand, d is one aligned
// half-word. Chunk c (of K/8 per row) is elements 8(c % 32) .. +7 of super-block c / 32, in
// increasing order (`reference`: same order). A streamed GGUF tile is a run of whole rows, i.e.
// of whole super-block rows (docs/kernels.md).

// One block: BLOCK_ELEMS elements in BLOCK_BYTES bytes (ggml blck_size / type_size; kernels
// tests/block_layouts.rs holds these against WeightFormat::block and artifact::gguf).
const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 210u;

@group(0) @binding(3) var<storage, read> packed: array<u32>;

fn chunk_weights(r: u32, c: u32) -> array<f32, 8> {
    let base = (r * (p.k / BLOCK_ELEMS) + (c >> 5u)) * BLOCK_BYTES;
    let d = f16_from_bits(packed_half((base + 208u) >> 1u));
    let e0 = 8u * (c & 31u);
    let h = e0 >> 7u;
    let t = (e0 & 127u) >> 5u;
    let l0 = e0 & 31u;
    let sc = f32(bitcast<i32>(packed_byte(base + 192u + 8u * h + (l0 >> 4u) + 2u * t) << 24u) >> 24u);
    let ds = d * sc;
    let lo = base + 64u * h + 32u * (t & 1u) + l0;
    let hi = base + 128u + 32u * h + l0;
    var w: array<f32, 8>;
    for (var i = 0u; i < 8u; i++) {
        let q = ((packed_byte(lo + i) >> (4u * (t >> 1u))) & 0xfu) | (((packed_byte(hi + i) >> (2u * t)) & 3u) << 4u);
        w[i] = ds * (f32(q) - 32.0);
    }
    return w;
}

// chunk_count, chunk_dot and chunk_dot4 over chunk_weights: wgsl/matmul_chunk8.wgsl, appended
// after this prefix by kernels/src/kernel.rs.

// The multiply body (entry points, accumulation order) is wgsl/matmul_body.wgsl, appended by
// kernels/src/kernel.rs.
