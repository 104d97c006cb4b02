// The MoE router of one token (`Kernel::MoeRoute`; DeepSeek V4, the runner's f64 form is
// `runner/src/deepseek/moe.rs` `route`): scores sqrt(softplus(logit)); the experts are the
// top-k of score + bias (learned layers; ties to the lower id) or row `token` of the frozen
// `tid2eid` table (hash layers, `p.hash` = 1); weights = score / (Σ picked scores + 1e-20) ·
// `p.scale`. The picks are written sorted by expert id (the order their outputs are summed in,
// `moe_combine.wgsl`).
//
// Layout: binding 1 `logits` f32 [experts] (the gate product); binding 2 `bias` f32 [experts];
// binding 3 `table` u32 [vocab, top_k]; binding 4 `token` u32 [≥ p.token_at + 1] (the token id
// at `p.token_at`: the previous step's argmax on a device-resident decode); binding 5 `ids` u32
// [top_k] (out); binding 6 `weights` f32 [top_k] (out). One workgroup of 64 lanes; experts ≤ 512,
// top_k ≤ 16; a table entry past the experts is clamped to the last one.
// softplus(v) = v above 20 (torch's threshold), else max(v, 0) + log1p(exp(−|v|)) with log1p
// by its series below 1e-4 (f32 `log(1 + u)` would round small u away).

struct Params {
    experts: u32,
    top_k: u32,
    hash: u32,
    token_at: u32,
    scale: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

const LANES: u32 = 64u;
const MAX_EXPERTS: u32 = 512u;
const MAX_K: u32 = 16u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read> table: array<u32>;
@group(0) @binding(4) var<storage, read> token: array<u32>;
@group(0) @binding(5) var<storage, read_write> ids: array<u32>;
@group(0) @binding(6) var<storage, read_write> weights: array<f32>;

var<workgroup> score: array<f32, 512>;
var<workgroup> biased: array<f32, 512>;

fn log1p_small(u: f32) -> f32 {
    if (u < 1e-4) {
        return u - 0.5 * u * u;
    }
    return log(1.0 + u);
}

fn sqrt_softplus(v: f32) -> f32 {
    if (v > 20.0) {
        return sqrt(v);
    }
    return sqrt(max(v, 0.0) + log1p_small(exp(-abs(v))));
}

@compute @workgroup_size(64)
fn moe_route(@builtin(local_invocation_index) lane: u32) {
    let n = min(p.experts, MAX_EXPERTS);
    for (var e = lane; e < n; e += LANES) {
        let s = sqrt_softplus(logits[e]);
        score[e] = s;
        biased[e] = s + bias[e];
    }
    workgroupBarrier();
    if (lane != 0u || n == 0u) {
        return;
    }
    let k = min(p.top_k, MAX_K);
    var picked: array<u32, 16>;
    if (p.hash == 1u) {
        let row = token[p.token_at] * p.top_k;
        for (var j = 0u; j < k; j++) {
            picked[j] = min(table[row + j], n - 1u);
        }
    } else {
        for (var j = 0u; j < k; j++) {
            var best = 0u;
            var found = false;
            for (var e = 0u; e < n; e++) {
                var taken = false;
                for (var q = 0u; q < j; q++) {
                    taken = taken || picked[q] == e;
                }
                if (!taken && (!found || biased[e] > biased[best])) {
                    best = e;
                    found = true;
                }
            }
            picked[j] = best;
        }
    }
    var sum = 0.0;
    for (var j = 0u; j < k; j++) {
        sum = sum + score[picked[j]];
    }
    sum = sum + 1e-20;
    // insertion sort by expert id
    for (var j = 1u; j < k; j++) {
        let v = picked[j];
        var q = j;
        while (q > 0u && picked[q - 1u] > v) {
            picked[q] = picked[q - 1u];
            q = q - 1u;
        }
        picked[q] = v;
    }
    for (var j = 0u; j < k; j++) {
        ids[j] = picked[j];
        weights[j] = score[picked[j]] / sum * p.scale;
    }
}
