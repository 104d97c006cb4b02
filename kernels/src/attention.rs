//! One-token (decode) attention as three kernels generated for the model's head shape
//! (docs/kernels.md "Decode attention"): `attn_scores` (one invocation per position: every head's
//! scaled q·k), [`crate::Kernel::AttnSoftmax`] (one workgroup per head: max, e_s, Σ e_s) and
//! `attn_values` (one invocation per KV head and four output dimensions: Σ_s e_s·v_s for the
//! query heads sharing that KV head, divided by the sum).
//!
//! Why: `attention.wgsl` gives one workgroup to each head and walks head_dim with a loop index, so
//! on llvmpipe every q and k element is a storage gather (a per-lane loop); its cost grows with
//! the context and dominated a decode step of SmolLM2 beyond ~30 positions. Here the heads and
//! head dimensions are constants of the generated code, so q is read from a uniform block with
//! constant indices (one load for all invocations) and k and v as `vec4` rows.
//!
//! The arithmetic is that of `attention.wgsl` for its token 0, in the same order: q·k as
//! `d = fma(q_i, k_i, d)` for i = 0, 1, … from 0.0, times the scale; the softmax as in
//! `attention_decode.wgsl`; each output `o = fma(e_s, v_s, o)` for s = 0, 1, … from 0.0, then
//! `o / total`. The bits are those of `attention.wgsl` (tests/gpu.rs), so a chunked prefill (which
//! uses `attention.wgsl`) and one-token steps agree.

use std::fmt::Write as _;

use crate::generated::{BindingKind, Generated};

/// Query-head elements the uniform block for q holds (64 KiB of f32).
pub const MAX_Q_ELEMENTS: usize = crate::UNIFORM_X_ELEMENTS;

/// The head shape the decode kernels are generated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeadShape {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
}

impl HeadShape {
    /// Whether decode kernels can be generated: GQA groups, head_dim a multiple of 4, and q of
    /// one token within the uniform block.
    pub fn supported(&self) -> bool {
        self.n_kv_heads > 0
            && self.n_heads % self.n_kv_heads == 0
            && self.head_dim > 0
            && self.head_dim % 4 == 0
            && self.head_dim <= 512
            && self.n_heads * self.head_dim <= MAX_Q_ELEMENTS
    }

    fn group(&self) -> usize {
        self.n_heads / self.n_kv_heads
    }

    fn label(&self, what: &str) -> String {
        format!(
            "{what} h{} kv{} d{}",
            self.n_heads, self.n_kv_heads, self.head_dim
        )
    }

    /// Invocations of `attn_values`: one per KV head and 4 output dimensions.
    pub fn value_invocations(&self) -> usize {
        self.n_kv_heads * self.head_dim / 4
    }
}

const PARAMS: &str = "struct Params {
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
    tokens: u32,
    pos0: u32,
    capacity: u32,
    scale: f32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
";

const XYZW: [&str; 4] = ["x", "y", "z", "w"];

/// `attn_scores`: bindings params, q (uniform, 64 KiB window), k_cache (`vec4` rows), scratch
/// [n_heads, capacity]. One invocation per position 0 ..= pos0 (workgroups of 64 along x).
pub fn scores(s: &HeadShape) -> Option<Generated> {
    if !s.supported() {
        return None;
    }
    let mut w = String::from(PARAMS);
    w.push_str(
        "@group(0) @binding(1) var<uniform> q: array<vec4<f32>, 4096>;
@group(0) @binding(2) var<storage, read> kc: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> scratch: array<f32>;

@compute @workgroup_size(64)
fn attn_scores(@builtin(global_invocation_id) gid: vec3<u32>) {
    let n_ctx = min(p.pos0 + 1u, p.capacity);
    // positions past the end redo the last one and store nothing (no early return: it would make
    // llvmpipe treat what follows as divergent)
    let s = min(gid.x, n_ctx - 1u);
    let live = gid.x < n_ctx;
",
    );
    emit_scores(&mut w, s, "    ", |h, d| {
        format!(
            "if (live) {{\n                scratch[{h}u * p.capacity + s] = {d};\n            }}"
        )
    });
    w.push_str("}\n");
    Some(Generated {
        label: s.label("attn_scores"),
        source: w,
        entry: "attn_scores",
        bindings: vec![
            (0, BindingKind::Uniform),
            (1, BindingKind::Uniform),
            (2, BindingKind::Storage { read_only: true }),
            (3, BindingKind::Storage { read_only: false }),
        ],
    })
}

/// The scaled q·k of position `s` (a variable in scope) for every head, each in the order of
/// `attention.wgsl` (`d = fma(q_i, k_i, d)` for i = 0, 1, …, then `· scale`); `store(h, value)`
/// is the statement that consumes head h's score.
fn emit_scores(w: &mut String, s: &HeadShape, indent: &str, store: impl Fn(usize, &str) -> String) {
    let quads = s.head_dim / 4;
    for g in 0..s.n_kv_heads {
        let _ = writeln!(w, "{indent}{{ // kv head {g}");
        let _ = writeln!(
            w,
            "{indent}    let kb = (s * {}u + {g}u) * {quads}u;",
            s.n_kv_heads
        );
        for j in 0..quads {
            let _ = writeln!(w, "{indent}    let k{j} = kc[kb + {j}u];");
        }
        for h in g * s.group()..(g + 1) * s.group() {
            let _ = writeln!(w, "{indent}    {{\n{indent}        var d = 0.0;");
            for j in 0..quads {
                let qi = h * quads + j;
                for c in XYZW {
                    let _ = writeln!(w, "{indent}        d = fma(q[{qi}u].{c}, k{j}.{c}, d);");
                }
            }
            let _ = writeln!(
                w,
                "{indent}        {}\n{indent}    }}",
                store(h, "d * p.scale")
            );
        }
        let _ = writeln!(w, "{indent}}}");
    }
}

/// Σ_s e_s·v_s of invocation `u` (a variable in scope: KV head u / (head_dim/4), dimensions
/// 4·(u mod head_dim/4) ..) for the query heads of its group, `o = fma(e_s, v_s, o)` for s = 0,
/// 1, … from 0.0 as in `attention.wgsl`, each divided by `{total}(h)` and written to `out` when
/// `live`.
fn emit_values(w: &mut String, s: &HeadShape, total: impl Fn(&str) -> String) {
    let quads = s.head_dim / 4;
    let _ = writeln!(w, "    let g = u / {quads}u;");
    let _ = writeln!(w, "    let j = u % {quads}u;");
    for m in 0..s.group() {
        let _ = writeln!(w, "    var o{m} = vec4<f32>(0.0);");
        let _ = writeln!(
            w,
            "    let sb{m} = (g * {}u + {m}u) * p.capacity;",
            s.group()
        );
    }
    let _ = writeln!(w, "    for (var s = 0u; s < n_ctx; s++) {{");
    let _ = writeln!(
        w,
        "        let v = vc[(s * {}u + g) * {quads}u + j];",
        s.n_kv_heads
    );
    for m in 0..s.group() {
        let _ = writeln!(
            w,
            "        o{m} = fma(vec4<f32>(scratch[sb{m} + s]), v, o{m});"
        );
    }
    w.push_str("    }\n    if (live) {\n");
    for m in 0..s.group() {
        let _ = writeln!(w, "        let h{m} = g * {}u + {m}u;", s.group());
        let _ = writeln!(w, "        let t{m} = {};", total(&format!("h{m}")));
        for (c, f) in XYZW.iter().enumerate() {
            let _ = writeln!(
                w,
                "        out[h{m} * {}u + 4u * j + {c}u] = o{m}.{f} / t{m};",
                s.head_dim
            );
        }
    }
    w.push_str("    }\n");
}

/// `attn_values`: bindings params, scratch (e_s), v_cache (`vec4` rows), totals, out
/// [n_heads, head_dim]. One invocation per KV head and 4 dimensions
/// ([`HeadShape::value_invocations`], workgroups of 64 along x).
pub fn values(s: &HeadShape) -> Option<Generated> {
    if !s.supported() {
        return None;
    }
    let n = s.value_invocations();
    let mut w = String::from(PARAMS);
    w.push_str(
        "@group(0) @binding(1) var<storage, read> scratch: array<f32>;
@group(0) @binding(2) var<storage, read> vc: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> totals: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn attn_values(@builtin(global_invocation_id) gid: vec3<u32>) {
",
    );
    let _ = writeln!(w, "    let u = min(gid.x, {}u);", n - 1);
    let _ = writeln!(w, "    let live = gid.x < {n}u;");
    w.push_str("    let n_ctx = min(p.pos0 + 1u, p.capacity);\n");
    emit_values(&mut w, s, |h| format!("totals[{h}]"));
    w.push_str("}\n");
    Some(Generated {
        label: s.label("attn_values"),
        source: w,
        entry: "attn_values",
        bindings: vec![
            (0, BindingKind::Uniform),
            (1, BindingKind::Storage { read_only: true }),
            (2, BindingKind::Storage { read_only: true }),
            (3, BindingKind::Storage { read_only: true }),
            (4, BindingKind::Storage { read_only: false }),
        ],
    })
}

/// `fold_max(h)` / `fold_sum(h)`: the tree of `attention_decode.wgsl` (partial[l] op=
/// partial[l + s] for s = 32, …, 1) over head h's 64 lane values in `part`, performed by one
/// invocation with the same operations on the same operands. Every intermediate passes through
/// `hold` (an xor with the always-zero `p._pad0`) so the compiler keeps the tree's shape.
fn fold_fn() -> String {
    let mut w = String::from(
        "fn hold(v: f32) -> f32 {\n    return bitcast<f32>(bitcast<u32>(v) ^ p._pad0);\n}\n",
    );
    for (name, op) in [("fold_max", "max(a, b)"), ("fold_sum", "a + b")] {
        let _ = writeln!(
            w,
            "fn {name}_op(a: f32, b: f32) -> f32 {{\n    return hold({op});\n}}"
        );
        let _ = writeln!(w, "fn {name}(h: u32) -> f32 {{");
        for l in 0..64 {
            let _ = writeln!(w, "    var t{l} = part[{l}u * NH + h];");
        }
        let mut st = 32;
        while st > 0 {
            for l in 0..st {
                let _ = writeln!(w, "    t{l} = {name}_op(t{l}, t{});", l + st);
            }
            st /= 2;
        }
        w.push_str("    return t0;\n}\n");
    }
    w
}

/// Positions up to which the runner uses [`single`] (beyond, its one workgroup's serial loops
/// cost more than the three dispatches of [`scores`], softmax and [`values`]).
pub const SINGLE_MAX_POSITIONS: usize = 512;

/// The whole one-token attention in one workgroup of 64 invocations (entry `attn_one`): on a
/// CPU adapter a dispatch costs a thread-pool round trip (~0.1 ms on a 2-core VM) whatever its
/// size, and for short contexts the three kernels were mostly that. Bindings params, q (uniform
/// window), k cache, v cache (`vec4` rows), scratch [n_heads, capacity], out. Phases, separated
/// by barriers: each invocation l scores positions l, l + 64, … (as `attn_scores`) keeping each
/// head's running max; one invocation per head folds the 64 maxima with the tree of
/// `attention_decode.wgsl`; each invocation turns its scores into e_s and sums them per head as
/// `attn_softmax` does; one invocation per head folds the 64 sums with the same tree; then the
/// values as `attn_values`. Every value is computed by the same operations in the same order as
/// in the three kernels, so the bits are theirs (tests/attention.rs).
pub fn single(s: &HeadShape) -> Option<Generated> {
    if !s.supported() || s.value_invocations() > 64 * 8 {
        return None;
    }
    let nh = s.n_heads;
    let mut w = String::from(PARAMS);
    let _ = write!(
        w,
        "@group(0) @binding(1) var<uniform> q: array<vec4<f32>, 4096>;
@group(0) @binding(2) var<storage, read> kc: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> vc: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> scratch: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

const NH: u32 = {nh}u;
// lane-major: part[lane * NH + h]
var<workgroup> part: array<f32, {np}>;
var<workgroup> folded: array<f32, {nh}>;

{fold}
@compute @workgroup_size(64)
fn attn_one(@builtin(local_invocation_index) lane: u32) {{
    let n_ctx = min(p.pos0 + 1u, p.capacity);
",
        np = 64 * nh,
        fold = fold_fn(),
    );
    for h in 0..nh {
        let _ = writeln!(w, "    var m{h} = bitcast<f32>(0xff800000u);");
    }
    w.push_str(
        "    for (var s = lane; s < n_ctx; s += 64u) {
",
    );
    emit_scores(&mut w, s, "        ", |h, d| {
        format!(
            "let sc = {d};
                scratch[{h}u * p.capacity + s] = sc;
                m{h} = max(m{h}, sc);"
        )
    });
    w.push_str(
        "    }
",
    );
    for h in 0..nh {
        let _ = writeln!(w, "    part[lane * {nh}u + {h}u] = m{h};");
    }
    let _ = write!(
        w,
        "    workgroupBarrier();
    if (lane < {nh}u) {{
        folded[lane] = fold_max(lane);
    }}
    workgroupBarrier();
"
    );
    for h in 0..nh {
        let _ = writeln!(
            w,
            "    let mx{h} = folded[{h}u];
    var a{h} = 0.0;"
        );
    }
    w.push_str(
        "    for (var s = lane; s < n_ctx; s += 64u) {
",
    );
    for h in 0..nh {
        let _ = writeln!(
            w,
            "        {{
            let e = exp(scratch[{h}u * p.capacity + s] - mx{h});
            scratch[{h}u * p.capacity + s] = e;
            a{h} = a{h} + e;
        }}"
        );
    }
    w.push_str(
        "    }
",
    );
    for h in 0..nh {
        let _ = writeln!(w, "    part[lane * {nh}u + {h}u] = a{h};");
    }
    let _ = write!(
        w,
        "    storageBarrier();
    workgroupBarrier();
    if (lane < {nh}u) {{
        folded[lane] = fold_sum(lane);
    }}
    workgroupBarrier();
    for (var u0 = lane; u0 < {n}u; u0 += 64u) {{
    let u = u0;
    let live = true;
",
        n = s.value_invocations()
    );
    emit_values(&mut w, s, |h| format!("folded[{h}]"));
    w.push_str(
        "    }
}
",
    );
    Some(Generated {
        label: s.label("attn_one"),
        source: w,
        entry: "attn_one",
        bindings: vec![
            (0, BindingKind::Uniform),
            (1, BindingKind::Uniform),
            (2, BindingKind::Storage { read_only: true }),
            (3, BindingKind::Storage { read_only: true }),
            (4, BindingKind::Storage { read_only: false }),
            (5, BindingKind::Storage { read_only: false }),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMOLLM2: HeadShape = HeadShape {
        n_heads: 9,
        n_kv_heads: 3,
        head_dim: 64,
    };

    #[test]
    fn scores_read_every_q_element_once_per_head_with_constant_indices() {
        let g = scores(&SMOLLM2).expect("supported");
        assert_eq!(g.source.matches("d = fma(q[").count(), 9 * 64);
        assert!(g.source.contains("d = fma(q[143u].w, k15.w, d);"));
        assert_eq!(g.source.matches("kc[kb + ").count(), 3 * 16);
    }

    #[test]
    fn values_serve_each_query_head_of_a_group() {
        let g = values(&SMOLLM2).expect("supported");
        assert_eq!(g.source.matches("scratch[sb").count(), 3);
        assert!(g.source.contains("let u = min(gid.x, 47u);"));
    }

    #[test]
    fn unsupported_shapes_have_no_kernels() {
        let odd = HeadShape {
            head_dim: 62,
            ..SMOLLM2
        };
        assert!(scores(&odd).is_none() && values(&odd).is_none());
        let big = HeadShape {
            n_heads: 128,
            n_kv_heads: 1,
            head_dim: 256,
        };
        assert!(!big.supported());
    }
}
