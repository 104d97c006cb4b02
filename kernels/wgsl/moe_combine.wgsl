// The MoE output of one token (`Kernel::MoeCombine`): out[c] = (Σ_j ys[j · d + c] · w[j]) +
// ys[k · d + c], j = 0 … k − 1 in the host's order (ascending expert id): row j of `ys` is the
// output of the expert of pick j, row k the shared expert's.
//
// Layout: binding 1 `ys` f32 [k + 1, d]; binding 2 `w` f32 [k]; binding 3 `out` f32 [d]. One
// invocation a channel (2-D grid of 256-wide workgroups). Order (`reference::moe_combine`):
// acc = 0; acc = acc + (ys · w) (each product rounded, as transformers' f32
// `expert_out · weight`); then acc + the shared row.

struct Params {
    d: u32,
    k: u32,
    groups_x: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ys: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn moe_combine(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x + gid.y * p.groups_x * 256u;
    if (c >= p.d) {
        return;
    }
    var acc = 0.0;
    for (var j = 0u; j < p.k; j++) {
        let prod = ys[j * p.d + c] * w[j];
        acc = acc + prod;
    }
    out[c] = acc + ys[p.k * p.d + c];
}
