// The mHC expansion after a block (`Kernel::HcExpand`), in place:
// streams[k · d + c] = post[k] · out[c] + Σ_j comb[j][k] · streams[j · d + c].
//
// Layout: binding 1 `mix` f32 [pre hc | post hc | comb hc·hc] (`hc_mix.wgsl`'s output); binding 2
// `out` f32 [d] (the block's output); binding 3 `streams` f32 [hc · d], read and rewritten. One
// invocation a channel c (2-D grid of 256-wide workgroups, c = x + y · groups_x · 256); it reads
// every stream's value of c before writing any, so in place is safe. hc is the constant HC = 4
// (`p.hc` must equal it; `hc_mix.wgsl` says why).
// Order (`reference::hc_expand`): v = post[k] · out[c]; then v = fma(comb[j][k], s_j, v) for j = 0, 1, ….

struct Params {
    hc: u32,
    d: u32,
    groups_x: u32,
    _pad0: u32,
}

const HC: u32 = 4u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> mix: array<f32>;
@group(0) @binding(2) var<storage, read> out: array<f32>;
@group(0) @binding(3) var<storage, read_write> streams: array<f32>;

@compute @workgroup_size(256)
fn hc_expand(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x + gid.y * p.groups_x * 256u;
    if (c >= p.d || p.hc != HC) {
        return;
    }
    let hc = HC;
    var s: array<f32, 4>;
    for (var j = 0u; j < hc; j++) {
        s[j] = streams[j * p.d + c];
    }
    for (var k = 0u; k < hc; k++) {
        var v = mix[hc + k] * out[c];
        for (var j = 0u; j < hc; j++) {
            v = fma(mix[2u * hc + j * hc + k], s[j], v);
        }
        streams[k * p.d + c] = v;
    }
}
