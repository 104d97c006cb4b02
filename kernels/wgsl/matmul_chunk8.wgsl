// The 8-weight chunk of the block-quantized GGUF families (Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K):
// each format prefix defines `chunk_weights(r, c) -> array<f32, 8>` (the 8 dequantized weights of
// row r, chunk c); this file turns it into the chunk interface the shared multiply body
// (wgsl/matmul_body.wgsl) calls. kernels/src/kernel.rs builds each module as prefix + this file +
// body. One copy, so every such family accumulates in the same order.

fn chunk_count() -> u32 {
    return p.k / 8u;
}

fn chunk_dot(r: u32, c: u32, xb: u32, acc_in: f32) -> f32 {
    let w = chunk_weights(r, c);
    let k0 = xb + 8u * c;
    var acc = acc_in;
    for (var i = 0u; i < 8u; i++) {
        acc = fma(w[i], xv(k0 + i), acc);
    }
    return acc;
}

fn chunk_dot4(r: u32, c: u32, b: vec4<u32>, acc_in: vec4<f32>) -> vec4<f32> {
    let w = chunk_weights(r, c);
    var acc = acc_in;
    for (var i = 0u; i < 8u; i++) {
        let k = 8u * c + i;
        acc = fma(vec4<f32>(w[i]), vec4<f32>(xv(b.x + k), xv(b.y + k), xv(b.z + k), xv(b.w + k)), acc);
    }
    return acc;
}
