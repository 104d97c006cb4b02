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
    let quads = s.head_dim / 4;
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
    for g in 0..s.n_kv_heads {
        let _ = writeln!(w, "    {{ // kv head {g}");
        let _ = writeln!(
            w,
            "        let kb = (s * {}u + {g}u) * {quads}u;",
            s.n_kv_heads
        );
        for j in 0..quads {
            let _ = writeln!(w, "        let k{j} = kc[kb + {j}u];");
        }
        for h in g * s.group()..(g + 1) * s.group() {
            w.push_str("        {\n            var d = 0.0;\n");
            for j in 0..quads {
                let qi = h * quads + j;
                for c in XYZW {
                    let _ = writeln!(w, "            d = fma(q[{qi}u].{c}, k{j}.{c}, d);");
                }
            }
            let _ = writeln!(
                w,
                "            if (live) {{\n                scratch[{h}u * p.capacity + s] = d * p.scale;\n            }}\n        }}"
            );
        }
        w.push_str("    }\n");
    }
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

/// `attn_values`: bindings params, scratch (e_s), v_cache (`vec4` rows), totals, out
/// [n_heads, head_dim]. One invocation per KV head and 4 dimensions
/// ([`HeadShape::value_invocations`], workgroups of 64 along x).
pub fn values(s: &HeadShape) -> Option<Generated> {
    if !s.supported() {
        return None;
    }
    let quads = s.head_dim / 4;
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
    let _ = writeln!(w, "    let g = u / {quads}u;");
    let _ = writeln!(w, "    let j = u % {quads}u;");
    w.push_str("    let n_ctx = min(p.pos0 + 1u, p.capacity);\n");
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
        let _ = writeln!(w, "        let t{m} = totals[h{m}];");
        for (c, f) in XYZW.iter().enumerate() {
            let _ = writeln!(
                w,
                "        out[h{m} * {}u + 4u * j + {c}u] = o{m}.{f} / t{m};",
                s.head_dim
            );
        }
    }
    w.push_str("    }\n}\n");
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
