// Embedding lookup (`Kernel::Embedding`): out[t, :] = dequantized row ids[t] of the table.
//
// Layout: binding 1 `ids` u32 [tokens]; binding 2 `table` (array<u32>, unpacked by hand) holding
// vocab rows of `dim` elements in `p.dtype`: 0 = f32, 1 = f16, 2 = bf16 (row-major [vocab, dim]),
// 3 = GGUF Q8_0 (rows of dim/32 blocks of 34 bytes: f16 d | i8 qs[32]), 4 = GGUF Q4_1 (rows of dim/32
// blocks of 20 bytes: f16 d | f16 m | u8 qs[16], element j < 16 = low nibble of qs[j], j ≥ 16 = high
// nibble of qs[j − 16]) — formats.md §5.2, decoded exactly as in the matmul kernels.
// binding 3 `out` f32 [tokens, dim]. An id ≥ vocab writes zeros (the host rejects such ids first).
// One workgroup per token (token = x + y·groups_x).

struct Params {
    dim: u32,
    tokens: u32,
    vocab: u32,
    dtype: u32,
    groups_x: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read> table: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn table_byte(i: u32) -> u32 {
    return (table[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

fn table_half(h: u32) -> u32 {
    return (table[h >> 1u] >> ((h & 1u) * 16u)) & 0xffffu;
}

fn element(row: u32, k: u32) -> f32 {
    switch p.dtype {
        case 0u: {
            return bitcast<f32>(table[row * p.dim + k]);
        }
        case 1u: {
            return unpack2x16float(table_half(row * p.dim + k)).x;
        }
        case 2u: {
            return bitcast<f32>(table_half(row * p.dim + k) << 16u);
        }
        case 3u: {
            let base = row * (p.dim / 32u) * 34u + (k / 32u) * 34u;
            let d = unpack2x16float(table_half(base >> 1u)).x;
            let q = bitcast<i32>(table_byte(base + 2u + (k & 31u)) << 24u) >> 24u;
            return d * f32(q);
        }
        default: {
            let base = row * (p.dim / 32u) * 20u + (k / 32u) * 20u;
            let d = unpack2x16float(table_half(base >> 1u)).x;
            let m = unpack2x16float(table_half((base >> 1u) + 1u)).x;
            let j = k & 31u;
            let q = (table_byte(base + 4u + (j & 15u)) >> ((j >> 4u) * 4u)) & 0xfu;
            return fma(d, f32(q), m);
        }
    }
}

@compute @workgroup_size(64)
fn embedding(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let t = wg.x + wg.y * p.groups_x;
    if (t >= p.tokens) {
        return;
    }
    let id = ids[t];
    for (var k = lane; k < p.dim; k += 64u) {
        var v = 0.0;
        if (id < p.vocab) {
            v = element(id, k);
        }
        out[t * p.dim + k] = v;
    }
}
