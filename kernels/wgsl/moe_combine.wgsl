// The MoE output of one token (`Kernel::MoeCombine`): out[c] = (Σ_j ys[j · d + c] · w[j]) +
// shared[c], j = 0 … k − 1 in the router's order (ascending expert id, `moe_route.wgsl`).
//
// Layout: binding 1 `ys` f32 [k, d] (the routed experts' outputs); binding 2 `w` f32 [k]; binding
// 3 `shared` f32 [d] (the shared expert's output); binding 4 `out` f32 [d]. One invocation a
// channel (2-D grid of 256-wide workgroups). Order (`reference::moe_combine`): acc = 0; acc =
// acc + (ys · w) (each product rounded, as transformers' f32 `expert_out · weight`); acc + shared.

struct Params {
    d: u32,
    k: u32,
    groups_x: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ys: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> shared_out: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

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
    out[c] = acc + shared_out[c];
}
