// Causal attention of new queries over an f32 KV cache with grouped-query head mapping
// (`Kernel::Attention`). Decode is tokens = 1; prefill passes all new tokens at once.
//
// Layout: binding 1 `q` f32 [tokens, n_heads, head_dim]; bindings 2/3 `k_cache`/`v_cache` f32
// [capacity, n_kv_heads, head_dim] (position-major); binding 4 `out` f32 [tokens, n_heads, head_dim];
// binding 5 `scratch` f32 [tokens, n_heads, capacity] (scores, then exp values).
// Query t sits at position pos0 + t and attends to positions 0 ..= pos0 + t (causal); query head h
// reads kv head h / (n_heads / n_kv_heads). One workgroup per (head = x, token = y).
// Order: score_s = (Σ_i fma(q_i, k_si, acc) serially over i) · scale; m = max; e_s = exp(score_s − m);
// lane l sums its e_s (s = l, l + 64, …), fixed tree; out_i = (Σ_s fma(e_s, v_si, acc) serially over s)
// / sum — normalised once at the end.

struct Params {
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
    tokens: u32,
    pos0: u32,
    capacity: u32,
    scale: f32,
    _pad0: u32,
}

const LANES: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k_cache: array<f32>;
@group(0) @binding(3) var<storage, read> v_cache: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> scratch: array<f32>;

var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(64)
fn attention(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let h = wg.x;
    let t = wg.y;
    if (h >= p.n_heads || t >= p.tokens) {
        return;
    }
    let kvh = h / (p.n_heads / p.n_kv_heads);
    let n_ctx = min(p.pos0 + t + 1u, p.capacity);
    let qb = (t * p.n_heads + h) * p.head_dim;
    let sb = (t * p.n_heads + h) * p.capacity;
    var m = bitcast<f32>(0xff800000u);
    for (var s = lane; s < n_ctx; s += LANES) {
        let kb = (s * p.n_kv_heads + kvh) * p.head_dim;
        var d = 0.0;
        for (var i = 0u; i < p.head_dim; i++) {
            d = fma(q[qb + i], k_cache[kb + i], d);
        }
        let sc = d * p.scale;
        scratch[sb + s] = sc;
        m = max(m, sc);
    }
    partial[lane] = m;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            partial[lane] = max(partial[lane], partial[lane + s]);
        }
        workgroupBarrier();
    }
    let mx = partial[0];
    workgroupBarrier();
    var acc = 0.0;
    for (var s = lane; s < n_ctx; s += LANES) {
        let e = exp(scratch[sb + s] - mx);
        scratch[sb + s] = e;
        acc = acc + e;
    }
    partial[lane] = acc;
    storageBarrier();
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            partial[lane] = partial[lane] + partial[lane + s];
        }
        workgroupBarrier();
    }
    let total = partial[0];
    for (var i = lane; i < p.head_dim; i += LANES) {
        var o = 0.0;
        for (var s = 0u; s < n_ctx; s++) {
            o = fma(scratch[sb + s], v_cache[(s * p.n_kv_heads + kvh) * p.head_dim + i], o);
        }
        out[qb + i] = o / total;
    }
}
