// Dequantize-and-multiply for GGUF Q4_1 blocks (`Kernel::MatvecQ4_1`, `MatmulQ4_1`).
//
// Byte layout read (formats.md §5.2, ggml `block_q4_1`): each row is K/32 blocks of 20 bytes,
//   [f16 d | f16 m | u8 qs[16]] (little-endian), rows back to back (row r at byte r·(K/32)·20).
//   Element j < 16 is the LOW nibble of qs[j]; element j ≥ 16 is the HIGH nibble of qs[j − 16].
//   value = fma(d, q, m), one rounding (ggml writes q·d + m). K must be a multiple of 32.
// 20-byte blocks keep 4-byte alignment, so binding 3 is read as array<u32>: word 0 of a block is
// d | m (unpack2x16float), words 1..4 are qs[0..16].
// Chunk c (of K/8 per row) is qs word w = c % 4 of block c / 4: elements 4w .. 4w+3 (low nibbles),
// then 16 + 4w .. 16 + 4w + 3 (high nibbles), in that order (`reference`: same order).
// A streamed GGUF tile is a run of whole rows (docs/kernels.md).

@group(0) @binding(3) var<storage, read> packed: array<u32>;

fn chunk_count() -> u32 {
    return p.k / 8u;
}

fn chunk_dot(r: u32, c: u32, xb: u32, acc_in: f32) -> f32 {
    let blk = c >> 2u;
    let w = c & 3u;
    let word = (r * (p.k / 32u) + blk) * 5u;
    let dm = unpack2x16float(packed[word]);
    let q = packed[word + 1u + w];
    let k0 = xb + blk * 32u + 4u * w;
    var acc = acc_in;
    for (var i = 0u; i < 4u; i++) {
        acc = fma(fma(dm.x, f32((q >> (8u * i)) & 0xfu), dm.y), xv(k0 + i), acc);
    }
    for (var i = 0u; i < 4u; i++) {
        acc = fma(fma(dm.x, f32((q >> (8u * i + 4u)) & 0xfu), dm.y), xv(k0 + 16u + i), acc);
    }
    return acc;
}

fn chunk_dot4(r: u32, c: u32, b: vec4<u32>, acc_in: vec4<f32>) -> vec4<f32> {
    let blk = c >> 2u;
    let w = c & 3u;
    let word = (r * (p.k / 32u) + blk) * 5u;
    let dm = unpack2x16float(packed[word]);
    let q = packed[word + 1u + w];
    let k0 = blk * 32u + 4u * w;
    var acc = acc_in;
    for (var i = 0u; i < 4u; i++) {
        let wv = fma(dm.x, f32((q >> (8u * i)) & 0xfu), dm.y);
        let k = k0 + i;
        acc = fma(vec4<f32>(wv), vec4<f32>(xv(b.x + k), xv(b.y + k), xv(b.z + k), xv(b.w + k)), acc);
    }
    for (var i = 0u; i < 4u; i++) {
        let wv = fma(dm.x, f32((q >> (8u * i + 4u)) & 0xfu), dm.y);
        let k = k0 + 16u + i;
        acc = fma(vec4<f32>(wv), vec4<f32>(xv(b.x + k), xv(b.y + k), xv(b.z + k), xv(b.w + k)), acc);
    }
    return acc;
}

// The multiply body (entry points, accumulation order) is wgsl/matmul_body.wgsl, appended by
// kernels/src/kernel.rs.
