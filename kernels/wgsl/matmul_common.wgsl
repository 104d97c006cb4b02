// ---- shared by every dequantize-and-multiply module: the parameters, bindings 0-2 and the decode
// ---- helpers. kernels/src/kernel.rs builds each matmul family as format prefix + this file +
// ---- wgsl/matmul_body.wgsl (the entry points and their accumulation order), and
// ---- kernels/src/unrolled/mod.rs builds the unrolled one-token matvec as format prefix + this file +
// ---- a generated entry point performing the same order.

struct Params {
    rows: u32,
    k: u32,
    tokens: u32,
    y_stride: u32,
    y_offset: u32,
    group: u32,
    block_rows: u32,
    dtype: u32,
    groups_x: u32,
    accumulate: u32,
    zero: u32,
    position: u32,
}

const LANES: u32 = 64u;
const TOKEN_TILE: u32 = 4u;

@group(0) @binding(0) var<uniform> p: Params;
// binding 1, the input vectors, read through xv(i) (kernels::X_STORAGE; a matvec on a CPU adapter
// may bind it as a 64 KiB uniform block instead, kernels::X_UNIFORM: the same values)
@group(0) @binding(1) var<storage, read> x: array<f32>;
fn xv(i: u32) -> f32 {
    return x[i];
}
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

fn packed_byte(i: u32) -> u32 {
    return (packed[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

fn packed_half(h: u32) -> u32 {
    return (packed[h >> 1u] >> ((h & 1u) * 16u)) & 0xffffu;
}

// Writes one output: y[at] = v, or y[at] + v (one rounding) when the residual add is fused.
fn store(at: u32, v: f32) {
    if (p.accumulate != 0u) {
        y[at] = y[at] + v;
    } else {
        y[at] = v;
    }
}

fn f16_from_bits(h: u32) -> f32 {
    return unpack2x16float(h).x;
}

fn bf16_from_bits(h: u32) -> f32 {
    return bitcast<f32>(h << 16u);
}

