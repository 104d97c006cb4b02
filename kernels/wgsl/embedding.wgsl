// Embedding lookup (`Kernel::Embedding`): out[t, :] = dequantized row ids[t] of the table.
//
// Layout: binding 1 `ids` u32 [tokens]; binding 2 `table` (array<u32>, unpacked by hand) holding
// vocab rows of `dim` elements in `p.dtype`: 0 = f32, 1 = f16, 2 = bf16 (row-major [vocab, dim]),
// 3 = GGUF Q8_0 (rows of dim/32 blocks of 34 bytes: f16 d | i8 qs[32]), 4 = GGUF Q4_1 (rows of dim/32
// blocks of 20 bytes: f16 d | f16 m | u8 qs[16], element j < 16 = low nibble of qs[j], j ≥ 16 = high
// nibble of qs[j − 16]), 5 = Q5_0, 6 = Q5_1, 10 = Q4_0 (blocks of 32), 7 = Q4_K, 8 = Q5_K, 9 = Q6_K
// (super-blocks of 256) — formats.md §5.2, decoded exactly as in the matmul kernels (matmul_q5_0.wgsl …
// matmul_q6_k.wgsl document the bytes; same formulas, same rounding).
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

fn i8_at(i: u32) -> f32 {
    return f32(bitcast<i32>(table_byte(i) << 24u) >> 24u);
}

// Q5_0 (22-byte blocks: d | qh | qs) and Q5_1 (24-byte blocks: d | m | qh | qs).
fn q5_element(row: u32, k: u32) -> f32 {
    let one = p.dtype == 6u;
    let size = select(22u, 24u, one);
    let base = row * (p.dim / 32u) * size + (k / 32u) * size;
    let d = unpack2x16float(table_half(base >> 1u)).x;
    let hq = base + select(2u, 4u, one);
    let qh = table_half(hq >> 1u) | (table_half((hq >> 1u) + 1u) << 16u);
    let j = k & 31u;
    let q = ((table_byte(hq + 4u + (j & 15u)) >> ((j >> 4u) * 4u)) & 0xfu) | (((qh >> j) & 1u) << 4u);
    if (one) {
        let m = unpack2x16float(table_half((base >> 1u) + 1u)).x;
        return f32(q) * d + m;
    }
    return (f32(q) - 16.0) * d;
}

// Q4_K (144-byte super-blocks) and Q5_K (176 bytes): d | dmin | scales[12] | [qh[32]] | qs[128].
fn q45k_element(row: u32, k: u32) -> f32 {
    let five = p.dtype == 8u;
    let size = select(144u, 176u, five);
    let base = row * (p.dim / 256u) * size + (k / 256u) * size;
    let d = unpack2x16float(table_half(base >> 1u)).x;
    let dmin = unpack2x16float(table_half((base >> 1u) + 1u)).x;
    let e = k & 255u;
    let j = e >> 5u;
    let i = e & 31u;
    let sc = base + 4u;
    var s: u32;
    var m: u32;
    if (j < 4u) {
        s = table_byte(sc + j) & 63u;
        m = table_byte(sc + j + 4u) & 63u;
    } else {
        s = (table_byte(sc + j + 4u) & 15u) | ((table_byte(sc + j - 4u) >> 6u) << 4u);
        m = (table_byte(sc + j + 4u) >> 4u) | ((table_byte(sc + j) >> 6u) << 4u);
    }
    let qs = base + select(16u, 48u, five);
    var q = (table_byte(qs + 32u * (e >> 6u) + i) >> (4u * (j & 1u))) & 0xfu;
    if (five) {
        q = q | (((table_byte(base + 16u + i) >> j) & 1u) << 4u);
    }
    return d * f32(s) * f32(q) - dmin * f32(m);
}

// Q6_K (210-byte super-blocks): ql[128] | qh[64] | i8 scales[16] | d.
fn q6k_element(row: u32, k: u32) -> f32 {
    let base = row * (p.dim / 256u) * 210u + (k / 256u) * 210u;
    let d = unpack2x16float(table_half((base + 208u) >> 1u)).x;
    let e = k & 255u;
    let h = e >> 7u;
    let t = (e & 127u) >> 5u;
    let l = e & 31u;
    let lo = (table_byte(base + 64u * h + 32u * (t & 1u) + l) >> (4u * (t >> 1u))) & 0xfu;
    let hi = (table_byte(base + 128u + 32u * h + l) >> (2u * t)) & 3u;
    let s = i8_at(base + 192u + 8u * h + (l >> 4u) + 2u * t);
    return d * s * (f32(lo | (hi << 4u)) - 32.0);
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
        case 5u, 6u: {
            return q5_element(row, k);
        }
        case 7u, 8u: {
            return q45k_element(row, k);
        }
        case 9u: {
            return q6k_element(row, k);
        }
        case 10u: {
            let base = row * (p.dim / 32u) * 18u + (k / 32u) * 18u;
            let d = unpack2x16float(table_half(base >> 1u)).x;
            let j = k & 31u;
            let q = (table_byte(base + 2u + (j & 15u)) >> ((j >> 4u) * 4u)) & 0xfu;
            return (f32(q) - 8.0) * d;
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
