// The lightning indexer's choice (`Kernel::V4IndexTopk`; the runner's form is `select` in
// `runner/src/deepseek/attention.rs`): of `p.n` scores, the `p.k` highest (ties to the lower
// index), written as their indices in ascending order to `list` (all n, in order, when n ≤ k).
//
// Layout: binding 1 `scores` f32 [n]; binding 2 `list` u32 [k] (out). One workgroup of 64 lanes:
// k rounds, each finding the best entry below the last one found in the order (score
// descending, index ascending) with each lane scanning the entries l, l + 64, … and the 64
// candidates folded by the tree; that k-th best is the threshold, and lane 0 writes every entry
// at or above it in index order. O(k · n / 64) (a parallel selection for long contexts is not
// built). A NaN score is never chosen.

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

const LANES: u32 = 64u;
const NONE: u32 = 0xffffffffu;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> scores: array<f32>;
@group(0) @binding(2) var<storage, read_write> list: array<u32>;

var<workgroup> best_s: array<f32, 64>;
var<workgroup> best_i: array<u32, 64>;

// (s, i) comes before (t, j) in the order: higher score, then lower index
fn before(s: f32, i: u32, t: f32, j: u32) -> bool {
    return s > t || (s == t && i < j);
}

@compute @workgroup_size(64)
fn v4_index_topk(@builtin(local_invocation_index) lane: u32) {
    let n = p.n;
    if (n <= p.k) {
        for (var i = lane; i < n; i += LANES) {
            list[i] = i;
        }
        return;
    }
    // the last found: start above everything
    var last_s = 3.4028235e38;
    var last_i = NONE;
    var first = true;
    for (var r = 0u; r < p.k; r++) {
        var bs = 0.0;
        var bi = NONE;
        for (var e = lane; e < n; e += LANES) {
            let s = scores[e];
            let below = first || before(last_s, last_i, s, e);
            if (s == s && below && (bi == NONE || before(s, e, bs, bi))) {
                bs = s;
                bi = e;
            }
        }
        best_s[lane] = bs;
        best_i[lane] = bi;
        workgroupBarrier();
        for (var h = 32u; h > 0u; h = h >> 1u) {
            if (lane < h) {
                let j = best_i[lane + h];
                if (j != NONE && (best_i[lane] == NONE || before(best_s[lane + h], j, best_s[lane], best_i[lane]))) {
                    best_s[lane] = best_s[lane + h];
                    best_i[lane] = j;
                }
            }
            workgroupBarrier();
        }
        last_s = best_s[0];
        last_i = best_i[0];
        first = false;
        workgroupBarrier();
    }
    if (lane == 0u) {
        var at = 0u;
        for (var e = 0u; e < n; e++) {
            let s = scores[e];
            if (at < p.k && s == s && (e == last_i || before(s, e, last_s, last_i))) {
                list[at] = e;
                at = at + 1u;
            }
        }
    }
}
