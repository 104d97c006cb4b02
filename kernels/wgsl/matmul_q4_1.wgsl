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

// One block: BLOCK_ELEMS elements in BLOCK_BYTES bytes (ggml blck_size / type_size; kernels
// tests/block_layouts.rs holds these against WeightFormat::block and artifact::gguf).
const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 20u;

@group(0) @binding(3) var<storage, read> packed: array<u32>;

fn chunk_count() -> u32 {
    return p.k / 8u;
}

// One qs word of a block: elements k .. k+3 (low nibbles), then k+16 .. k+19 (high nibbles), in
// that order, each fma(fma(d, q, m), x, acc). Written out (no loop) so that an unrolled matvec
// (kernels/src/unrolled/mod.rs) reads every x with a constant index.
fn word_dot(q: u32, dm: vec2<f32>, k: u32, acc_in: f32) -> f32 {
    var acc = acc_in;
    acc = fma(fma(dm.x, f32(q & 0xfu), dm.y), xv(k), acc);
    acc = fma(fma(dm.x, f32((q >> 8u) & 0xfu), dm.y), xv(k + 1u), acc);
    acc = fma(fma(dm.x, f32((q >> 16u) & 0xfu), dm.y), xv(k + 2u), acc);
    acc = fma(fma(dm.x, f32((q >> 24u) & 0xfu), dm.y), xv(k + 3u), acc);
    acc = fma(fma(dm.x, f32((q >> 4u) & 0xfu), dm.y), xv(k + 16u), acc);
    acc = fma(fma(dm.x, f32((q >> 12u) & 0xfu), dm.y), xv(k + 17u), acc);
    acc = fma(fma(dm.x, f32((q >> 20u) & 0xfu), dm.y), xv(k + 18u), acc);
    acc = fma(fma(dm.x, f32(q >> 28u), dm.y), xv(k + 19u), acc);
    return acc;
}

fn chunk_dot(r: u32, c: u32, xb: u32, acc_in: f32) -> f32 {
    let blk = c >> 2u;
    let w = c & 3u;
    let word = (r * (p.k / BLOCK_ELEMS) + blk) * (BLOCK_BYTES / 4u);
    let dm = unpack2x16float(packed[word]);
    return word_dot(packed[word + 1u + w], dm, xb + blk * 32u + 4u * w, acc_in);
}

// One whole block from its five words (d | m, then qs as four words): chunks 4b .. 4b+3 into
// the four partials of acc, each in chunk_dot's order; k = 32b, the block's first element. The
// unrolled matvec (kernels/src/unrolled/mod.rs) calls it with words it loaded itself.
fn block_dot(w0: u32, w1: u32, w2: u32, w3: u32, w4: u32, k: u32, acc: vec4<f32>) -> vec4<f32> {
    let dm = unpack2x16float(w0);
    return vec4<f32>(
        word_dot(w1, dm, k, acc.x),
        word_dot(w2, dm, k + 4u, acc.y),
        word_dot(w3, dm, k + 8u, acc.z),
        word_dot(w4, dm, k + 12u, acc.w),
    );
}

fn chunk_dot4(r: u32, c: u32, b: vec4<u32>, acc_in: vec4<f32>) -> vec4<f32> {
    let blk = c >> 2u;
    let w = c & 3u;
    let word = (r * (p.k / BLOCK_ELEMS) + blk) * (BLOCK_BYTES / 4u);
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
