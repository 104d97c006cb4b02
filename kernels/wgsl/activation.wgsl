// Element-wise activations (`Kernel::Silu`, `Kernel::Swiglu`).
//
// Layout: f32 vectors of n elements. silu: binding 1 `a` → binding 3 `y`, y = a / (1 + exp(−a)).
// swiglu: y = silu(gate) · up with binding 1 `a` = gate, binding 2 `b` = up (Llama MLP); where
// `limit_bits` is not 0 (DeepSeek V4's `swiglu_limit`, f32 bits), gate = min(gate, limit) and
// up = clamp(up, −limit, limit) first (the gate is capped above only), else the inputs as read.
// One invocation per element (index = x + y·groups_x·256).

struct Params {
    n: u32,
    groups_x: u32,
    limit_bits: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

fn silu_of(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

@compute @workgroup_size(256)
fn silu(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.groups_x * 256u;
    if (i >= p.n) {
        return;
    }
    y[i] = silu_of(a[i]);
}

@compute @workgroup_size(256)
fn swiglu(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.groups_x * 256u;
    if (i >= p.n) {
        return;
    }
    var g = a[i];
    var u = b[i];
    if (p.limit_bits != 0u) {
        let limit = bitcast<f32>(p.limit_bits);
        g = min(g, limit);
        u = clamp(u, -limit, limit);
    }
    y[i] = silu_of(g) * u;
}
