// Rotary position embedding, in place (`Kernel::Rope`).
//
// Layout: binding 1 `v` f32 [tokens, n_heads, head_dim], rotated in place; binding 2 `table` f32
// [tokens, rot_dim / 2, 2] holding (cos θ, sin θ) for token t and pair i, θ = pos_t · base^(−2i/rot_dim),
// computed on the host in f64 and rounded to f32 (`reference::rope_table`), so the kernel does no
// transcendental maths and matches the CPU reference. Only the first rot_dim dims of a head rotate.
// Pairings (`p.mode`): 0 = half-split / NeoX (i, i + rot_dim/2) — HF Llama `rotate_half`;
//                     1 = interleaved / GPT-J (2i, 2i + 1).
// a' = fma(a, c, −(b·s)), b' = fma(a, s, b·c). One invocation per (token, head, pair).
// A recorded forward keeps one table for every position and rotates in place inside the KV cache:
// token t reads table row `table_row0 + t` and element `v_offset + (t · n_heads + h) · head_dim + d`
// (both 0 for a table and buffer of exactly `tokens` rows).

struct Params {
    tokens: u32,
    n_heads: u32,
    head_dim: u32,
    rot_dim: u32,
    mode: u32,
    groups_x: u32,
    table_row0: u32,
    v_offset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> v: array<f32>;
@group(0) @binding(2) var<storage, read> table: array<f32>;

@compute @workgroup_size(256)
fn rope(@builtin(global_invocation_id) gid: vec3<u32>) {
    let half = p.rot_dim / 2u;
    let idx = gid.x + gid.y * p.groups_x * 256u;
    if (half == 0u || idx >= p.tokens * p.n_heads * half) {
        return;
    }
    let i = idx % half;
    let th = idx / half;
    let t = th / p.n_heads;
    let base = p.v_offset + th * p.head_dim;
    var ia = base + i;
    var ib = base + i + half;
    if (p.mode == 1u) {
        ia = base + 2u * i;
        ib = ia + 1u;
    }
    let row = p.table_row0 + t;
    let c = table[(row * half + i) * 2u];
    let s = table[(row * half + i) * 2u + 1u];
    let a = v[ia];
    let b = v[ib];
    v[ia] = fma(a, c, -(b * s));
    v[ib] = fma(a, s, b * c);
}
