// Dequantize-and-multiply for GGUF Q5_K super-blocks (`Kernel::MatvecQ5K`, `MatmulQ5K`).
//
// Byte layout read (formats.md §5.2, ggml `block_q5_K`): each row is K/256 super-blocks of
//   176 bytes, [f16 d | f16 dmin | u8 scales[12] | u8 qh[32] | u8 qs[128]],
//   rows back to back. Sub-block j (0..8) = elements 32j .. 32j+31; its 6-bit scale s and min m
//   come from scales[] as ggml's `get_scale_min_k4` unpacks them (j < 4: s = sc[j] & 63,
//   m = sc[j+4] & 63; else s = (sc[j+4] & 15) | (sc[j-4] >> 6) << 4, m = (sc[j+4] >> 4) | (sc[j] >> 6) << 4).
//   Element e of the super-block, with b = e / 64, i = e % 32, j = e / 32: the 4-bit q is the
//   LOW nibble of qs[32b + i] for even j, the HIGH nibble for odd j; Q5_K adds 16 when bit j of
//   qh[i] is set.
//   value = (d · s) · q − dmin · m, each product rounded, then the difference (ggml
//   `dequantize_row_q5_K`). K must be a multiple of 256.
// 176-byte super-blocks keep 4-byte alignment (binding 3 read as array<u32>, 44 words each).
// Chunk c (of K/8 per row) is elements 8(c % 32) .. +7 of super-block c / 32, in increasing order;
// the 8 lie in one sub-block (`reference`: same order). A streamed GGUF tile is a run of whole
// rows, i.e. of whole super-block rows (docs/kernels.md).

// One block: BLOCK_ELEMS elements in BLOCK_BYTES bytes (ggml blck_size / type_size; kernels
// tests/block_layouts.rs holds these against WeightFormat::block and artifact::gguf).
const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 176u;

@group(0) @binding(3) var<storage, read> packed: array<u32>;

fn chunk_weights(r: u32, c: u32) -> array<f32, 8> {
    let base = (r * (p.k / BLOCK_ELEMS) + (c >> 5u)) * BLOCK_BYTES;
    let dd = unpack2x16float(packed[base >> 2u]);
    let e0 = 8u * (c & 31u);
    let b = e0 >> 6u;
    let j = e0 >> 5u;
    let i0 = e0 & 31u;
    let sc = base + 4u;
    var s: u32;
    var m: u32;
    if (j < 4u) {
        s = packed_byte(sc + j) & 63u;
        m = packed_byte(sc + j + 4u) & 63u;
    } else {
        s = (packed_byte(sc + j + 4u) & 15u) | ((packed_byte(sc + j - 4u) >> 6u) << 4u);
        m = (packed_byte(sc + j + 4u) >> 4u) | ((packed_byte(sc + j) >> 6u) << 4u);
    }
    let ds = dd.x * f32(s);
    let dm = dd.y * f32(m);
    let qw = (base + 48u + 32u * b + i0) >> 2u;
    let q2 = vec2<u32>(packed[qw], packed[qw + 1u]);
    let shift = 4u * (j & 1u);
    let hw = (base + 16u + i0) >> 2u;
    let h2 = vec2<u32>(packed[hw], packed[hw + 1u]);
    var w: array<f32, 8>;
    for (var i = 0u; i < 8u; i++) {
        var q = (q2[i >> 2u] >> (8u * (i & 3u) + shift)) & 0xfu;
        q = q | (((h2[i >> 2u] >> (8u * (i & 3u) + j)) & 1u) << 4u);
        w[i] = ds * f32(q) - dm;
    }
    return w;
}

// chunk_count, chunk_dot and chunk_dot4 over chunk_weights: wgsl/matmul_chunk8.wgsl, appended
// after this prefix by kernels/src/kernel.rs.

// The multiply body (entry points, accumulation order) is wgsl/matmul_body.wgsl, appended by
// kernels/src/kernel.rs.
