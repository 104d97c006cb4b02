// One token through one KV compressor (`Kernel::V4Compress`; DeepSeek V4's CSA / HCA compressors
// and the lightning indexer's, docs/runner-deepseek-v4.md "Attention on the device"; the
// runner's f64 form is `runner/src/deepseek/compress.rs`): the token's kv row and its gate row
// plus `ape[slot]` go to buffer slot `p.slot`; with `p.emit` = 1 (the slot closes a window of
// `p.ratio` tokens) entry `p.entry` is pooled from the window: per channel c, the softmax over
// the window's gates (with two series, `p.coff` = 2, the previous window's first series first,
// from entry 1 on) weights its kv values; then RMSNorm with `norm`, and the trailing `p.pairs`
// channel pairs rotated with row `p.table_row` of the RoPE table; with two series the window's
// first series becomes the overlap.
//
// Layout: binding 1 `src` f32 (kv at `p.kv_at`, gate at `p.gate_at`, each coff·dim); binding 2
// `ape` f32 [ratio, coff·dim]; binding 3 `norm` f32 [dim]; binding 4 `table` f32 [row, pairs,
// (cos, sin)]; binding 5 `state` f32: buffered kv [ratio, coff·dim] at 0, buffered gates at
// ratio·coff·dim, overlap kv [ratio, dim] at 2·ratio·coff·dim, overlap gates after it; binding
// 6 `entries` f32 [·, dim]. One workgroup of 64 lanes; dim ≤ 1024. Order
// (`reference::v4_compress`): lane l takes channels l, l + 64, …; the window in slot order
// (overlap first); m = max of the gates; x = exp(g − m), s = Σ x and acc = Σ fma(x, v, ·) in
// that order, e = acc / s; Σ e² in the lane order then the tree of 64 partials; inv =
// 1/sqrt(Σ/dim + eps); e·inv·norm; a pair (a, b) → (a·c − b·s, b·c + a·s). The window is one
// loop over its slots (a function picks the overlap's or the buffer's): with the overlap and
// the buffer in loops of their own (six runtime loops) llvmpipe took ≈ 6 ms a dispatch whether
// or not an entry was emitted, 0.05–0.08 ms this way (docs/kernels.md "V4 attention kernels").

struct Params {
    ratio: u32,
    coff: u32,
    dim: u32,
    slot: u32,
    emit: u32,
    entry: u32,
    pairs: u32,
    table_row: u32,
    kv_at: u32,
    gate_at: u32,
    eps: f32,
    _pad0: u32,
}

const LANES: u32 = 64u;
const MAX_DIM: u32 = 1024u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> ape: array<f32>;
@group(0) @binding(3) var<storage, read> norm: array<f32>;
@group(0) @binding(4) var<storage, read> table: array<f32>;
@group(0) @binding(5) var<storage, read_write> state: array<f32>;
@group(0) @binding(6) var<storage, read_write> entries: array<f32>;

var<workgroup> e: array<f32, 1024>;
var<workgroup> partial: array<f32, 64>;

// gate and value of window slot j for channel c (the current series' channel `cur`)
fn gate_of(j: u32, n_ov: u32, c: u32, cur: u32, dim: u32, w: u32, gates: u32, ov_gate: u32) -> f32 {
    if (j < n_ov) {
        return state[ov_gate + j * dim + c];
    }
    return state[gates + (j - n_ov) * w + cur];
}

fn value_of(j: u32, n_ov: u32, c: u32, cur: u32, dim: u32, w: u32, ov_kv: u32) -> f32 {
    if (j < n_ov) {
        return state[ov_kv + j * dim + c];
    }
    return state[(j - n_ov) * w + cur];
}

@compute @workgroup_size(64)
fn v4_compress(@builtin(local_invocation_index) lane: u32) {
    let dim = min(p.dim, MAX_DIM);
    let w = p.coff * dim;
    let gates = p.ratio * w;
    for (var i = lane; i < w; i += LANES) {
        state[p.slot * w + i] = src[p.kv_at + i];
        state[gates + p.slot * w + i] = src[p.gate_at + i] + ape[p.slot * w + i];
    }
    if (p.emit == 0u) {
        return;
    }
    storageBarrier();
    workgroupBarrier();
    let ov_kv = 2u * gates;
    let ov_gate = ov_kv + p.ratio * dim;
    let overlap = p.coff == 2u && p.entry > 0u;
    var ss = 0.0;
    // the window's slots: the overlap's (entry 1 on, two series), then the buffer's
    let n_ov = select(0u, p.ratio, overlap);
    let slots = n_ov + p.ratio;
    for (var c = lane; c < dim; c += LANES) {
        let cur = (p.coff - 1u) * dim + c;
        var m = -3.4028235e38;
        for (var j = 0u; j < slots; j++) {
            m = max(m, gate_of(j, n_ov, c, cur, dim, w, gates, ov_gate));
        }
        var s = 0.0;
        var acc = 0.0;
        for (var j = 0u; j < slots; j++) {
            let x = exp(gate_of(j, n_ov, c, cur, dim, w, gates, ov_gate) - m);
            s = s + x;
            acc = fma(x, value_of(j, n_ov, c, cur, dim, w, ov_kv), acc);
        }
        let v = acc / s;
        e[c] = v;
        ss = fma(v, v, ss);
    }
    partial[lane] = ss;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            partial[lane] = partial[lane] + partial[lane + s];
        }
        workgroupBarrier();
    }
    let inv = 1.0 / sqrt(partial[0] / f32(dim) + p.eps);
    for (var c = lane; c < dim; c += LANES) {
        e[c] = e[c] * inv * norm[c];
    }
    workgroupBarrier();
    let start = dim - 2u * p.pairs;
    for (var i = lane; i < p.pairs; i += LANES) {
        let t = (p.table_row * p.pairs + i) * 2u;
        let a = e[start + 2u * i];
        let b = e[start + 2u * i + 1u];
        e[start + 2u * i] = a * table[t] - b * table[t + 1u];
        e[start + 2u * i + 1u] = b * table[t] + a * table[t + 1u];
    }
    workgroupBarrier();
    for (var c = lane; c < dim; c += LANES) {
        entries[p.entry * dim + c] = e[c];
    }
    if (p.coff == 2u) {
        for (var i = lane; i < p.ratio * dim; i += LANES) {
            let j = i / dim;
            let c = i % dim;
            state[ov_kv + i] = state[j * w + c];
            state[ov_gate + i] = state[gates + j * w + c];
        }
    }
}
