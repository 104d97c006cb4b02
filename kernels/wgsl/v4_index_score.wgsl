// The lightning indexer's scores of one query (`Kernel::V4IndexScore`; DeepSeek V4 CSA layers,
// docs/runner-deepseek-v4.md "Attention on the device"; the runner's f64 form is in
// `runner/src/deepseek/attention.rs`): for each of the first `p.n` (causal) compressed entries
// e, score[e] = Σ_h max(q_h · e, 0) / sqrt(dim) · (w_h / sqrt(heads)), where q_h is head h of
// the indexer query with its trailing `p.pairs` channel pairs rotated by row `p.table_row` of
// the RoPE table.
//
// Layout: binding 1 `q` f32 (heads · dim at `p.q_at`, unrotated); binding 2 `w` f32 (heads at
// `p.w_at`); binding 3 `entries` f32 [·, dim]; binding 4 `table` f32 [row, pairs, (cos, sin)];
// binding 5 `scores` f32 [n] (out). One workgroup an entry (x + y · `groups_x`, the grid of
// `crate::grid_2d` over `p.n`); its 64 lanes take the heads h ≡ lane (mod 64), at most
// `MAX_HEADS`. Order (`reference::v4_index_scores`): a head's dot over channels ascending, a
// rotated pair's two channels each rotated then multiplied in turn; sc_h = max(dot, 0) /
// sqrt(dim) · (w_h / sqrt(heads)); lane 0 sums sc_h over heads ascending from 0. (One
// invocation an entry looping over every head ran 8192 serial steps a lane whatever `p.n`:
// 1.9 ms a dispatch on llvmpipe; docs/kernels.md "V4 attention kernels".)

struct Params {
    heads: u32,
    dim: u32,
    n: u32,
    pairs: u32,
    table_row: u32,
    q_at: u32,
    w_at: u32,
    k: u32,
    groups_x: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> entries: array<f32>;
@group(0) @binding(4) var<storage, read> table: array<f32>;
@group(0) @binding(5) var<storage, read_write> scores: array<f32>;

const MAX_HEADS: u32 = 256u;

var<workgroup> contrib: array<f32, 256>;

@compute @workgroup_size(64)
fn v4_index_score(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lane: u32,
) {
    let e = wid.x + wid.y * p.groups_x;
    if (e >= p.n) {
        return;
    }
    let heads = min(p.heads, MAX_HEADS);
    let start = p.dim - 2u * p.pairs;
    let qs = 1.0 / sqrt(f32(p.dim));
    let ws = 1.0 / sqrt(f32(p.heads));
    let eh = e * p.dim;
    for (var h = lane; h < heads; h += 64u) {
        let qh = p.q_at + h * p.dim;
        var dot = 0.0;
        for (var c = 0u; c < start; c++) {
            dot = fma(q[qh + c], entries[eh + c], dot);
        }
        for (var i = 0u; i < p.pairs; i++) {
            let t = (p.table_row * p.pairs + i) * 2u;
            let a = q[qh + start + 2u * i];
            let b = q[qh + start + 2u * i + 1u];
            let ra = a * table[t] - b * table[t + 1u];
            let rb = b * table[t] + a * table[t + 1u];
            dot = fma(ra, entries[eh + start + 2u * i], dot);
            dot = fma(rb, entries[eh + start + 2u * i + 1u], dot);
        }
        contrib[h] = max(dot, 0.0) * qs * (w[p.w_at + h] * ws);
    }
    workgroupBarrier();
    if (lane == 0u) {
        var total = 0.0;
        for (var h = 0u; h < heads; h++) {
            total = total + contrib[h];
        }
        scores[e] = total;
    }
}
