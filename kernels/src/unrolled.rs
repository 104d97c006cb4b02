//! The unrolled one-token matvec (docs/kernels.md "Unrolled matvec"): for a CPU adapter, a
//! row-per-invocation matvec generated for one K, whose accumulation order is written out as
//! straight-line code.
//!
//! Why: Mesa's llvmpipe (lavapipe) reads a buffer with one scalar load and a broadcast only when
//! the index is a constant (or derived from push constants alone); any index that depends on a
//! loop variable becomes a gather, and a storage-buffer gather is a per-lane loop. With K fixed
//! when the pipeline is made, every chunk index is a constant, so every read of the input vector
//! (a uniform block, [`crate::X_UNIFORM`]) is one load shared by all rows, and no loop is left.
//!
//! The order is exactly the one of `matvec_row` in `wgsl/matmul_body.wgsl`: lane l's partial sums
//! the chunks l, l + 64, … with `chunk_dot` from 0.0, and the 64 partials are added in lane order.
//! The generated code computes four consecutive partials at a time (chunks 4j .. 4j + 3, then the
//! same + 64, …), which lets a format read each 32-element block once (`four_chunks_dot`, where
//! the format prefix defines it), and folds them into the total in lane order, so the bits are
//! those of `matvec_row` (asserted for every format by `tests/matmul.rs`).

use std::fmt::Write as _;

use crate::generated::{BindingKind, Generated};
use crate::kernel::{Kernel, UNIFORM_X_ELEMENTS, X_STORAGE, X_UNIFORM};

/// The entry point of a generated matvec module.
pub const ENTRY: &str = "matvec_unrolled";

/// Most chunks per row a module is generated for (beyond it the code, and the pipeline's compile
/// time, grow too large; the looped `matvec_row` serves such rows).
pub const MAX_CHUNKS: usize = 2048;

/// Lane partials of the accumulation order (`LANES` in the WGSL body).
const LANES: usize = crate::LANES as usize;

/// The WGSL module of the unrolled matvec of `kernel` (a `Matvec*` kernel) for rows of `k`
/// elements; `None` when the kernel has no such form or `k` is outside its range (then the
/// caller uses the looped row kernel).
pub fn source(kernel: Kernel, k: usize) -> Option<String> {
    let (mut out, n) = module_head(kernel, k)?;
    out.push_str(
        "@compute @workgroup_size(64)
fn matvec_unrolled(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r0 = gid.x + gid.y * p.groups_x * 64u;
    // rows past the end compute the last row again (no early return: a return that depends on
    // the invocation would make llvmpipe treat what follows as divergent)
    let r = min(r0, p.rows - 1u);
",
    );
    row_body(&mut out, n, "r", "total");
    out.push_str("    if (r0 < p.rows) {\n        store(p.y_offset + r, total);\n    }\n}\n");
    Some(out)
}

/// The rows of a fused Q/K/V projection: one weight buffer holding Q's `n_q` rows, then K's
/// `n_kv`, then V's `n_kv` (row blocks of the GGUF tensors, copied as they are).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QkvLayout {
    pub n_q: usize,
    pub n_kv: usize,
    pub head_dim: usize,
    pub rope: crate::RopeMode,
}

/// The one-token Q/K/V projection with RoPE fused (entry `qkv_rope`): one invocation computes
/// a RoPE pair of rows of the combined matrix, each in the order of [`source`], rotates Q and K
/// pairs exactly as `rope.wgsl` does and writes Q to binding 2 and K and V straight into the
/// caches (bindings 4, 5) at `p.y_offset`; binding 6 is the RoPE table, row `p.position`.
/// `p.rows` is the number of pairs. Requires the rotary width to be the whole head.
pub fn qkv_rope(kernel: Kernel, k: usize, l: &QkvLayout) -> Option<Generated> {
    let hd = l.head_dim;
    if hd == 0 || hd % 2 != 0 || l.n_q % hd != 0 || l.n_kv % hd != 0 {
        return None;
    }
    let (mut out, n) = module_head(kernel, k)?;
    let half = hd / 2;
    let (nq, nk) = (l.n_q, l.n_kv);
    let _ = write!(
        out,
        "@group(0) @binding(4) var<storage, read_write> kc: array<f32>;
@group(0) @binding(5) var<storage, read_write> vc: array<f32>;
@group(0) @binding(6) var<storage, read> rope: array<f32>;

@compute @workgroup_size(64)
fn qkv_rope(@builtin(global_invocation_id) gid: vec3<u32>) {{
    let u0 = gid.x + gid.y * p.groups_x * 64u;
    let u = min(u0, p.rows - 1u);
    let i = u % {half}u;
"
    );
    match l.rope {
        crate::RopeMode::Interleaved => {
            out.push_str("    let ra = 2u * u;\n    let rb = ra + 1u;\n")
        }
        crate::RopeMode::HalfSplit => {
            let _ = writeln!(out, "    let ra = (u / {half}u) * {hd}u + i;");
            let _ = writeln!(out, "    let rb = ra + {half}u;");
        }
    }
    row_body(&mut out, n, "ra", "ta");
    row_body(&mut out, n, "rb", "tb");
    let _ = write!(
        out,
        "    if (u0 < p.rows) {{
        if (ra < {nk2}u) {{
            let c = rope[(p.position * {half}u + i) * 2u];
            let s = rope[(p.position * {half}u + i) * 2u + 1u];
            let a = fma(ta, c, -(tb * s));
            let b = fma(ta, s, tb * c);
            if (ra < {nq}u) {{
                y[ra] = a;
                y[rb] = b;
            }} else {{
                kc[p.y_offset + ra - {nq}u] = a;
                kc[p.y_offset + rb - {nq}u] = b;
            }}
        }} else {{
            vc[p.y_offset + ra - {nk2}u] = ta;
            vc[p.y_offset + rb - {nk2}u] = tb;
        }}
    }}
}}
",
        nk2 = nq + nk,
    );
    let mut bindings = matvec_bindings(kernel);
    bindings.extend([
        BindingKind::Storage { read_only: false },
        BindingKind::Storage { read_only: false },
        BindingKind::Storage { read_only: true },
    ]);
    Some(Generated {
        label: format!(
            "qkv_rope {} k{k} q{nq} kv{nk} d{hd} {:?}",
            kernel.name(),
            l.rope
        ),
        source: out,
        entry: "qkv_rope",
        bindings,
    })
}

/// The one-token gate and up projections with SwiGLU fused (entry `gate_up`): the weight buffer
/// holds gate's `ffn` rows then up's; invocation u computes row u and row ffn + u, each in the
/// order of [`source`], and writes `silu(gate) · up` exactly as `activation.wgsl` does.
/// `p.rows` is `ffn`.
pub fn gate_up(kernel: Kernel, k: usize, ffn: usize) -> Option<Generated> {
    let (mut out, n) = module_head(kernel, k)?;
    out.push_str(
        "fn silu_of(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

@compute @workgroup_size(64)
fn gate_up(@builtin(global_invocation_id) gid: vec3<u32>) {
    let u0 = gid.x + gid.y * p.groups_x * 64u;
    let u = min(u0, p.rows - 1u);
",
    );
    let _ = writeln!(out, "    let ru = u + {ffn}u;");
    row_body(&mut out, n, "u", "tg");
    row_body(&mut out, n, "ru", "tu");
    out.push_str("    if (u0 < p.rows) {\n        y[u] = silu_of(tg) * tu;\n    }\n}\n");
    Some(Generated {
        label: format!("gate_up {} k{k} f{ffn}", kernel.name()),
        source: out,
        entry: "gate_up",
        bindings: matvec_bindings(kernel),
    })
}

/// Bindings of a matvec module with a uniform input: params, x (uniform), y, weight buffers.
fn matvec_bindings(kernel: Kernel) -> Vec<BindingKind> {
    let mut b = vec![BindingKind::Uniform, BindingKind::Uniform];
    b.extend(
        kernel
            .storage()
            .iter()
            .skip(1)
            .map(|a| BindingKind::Storage {
                read_only: *a == crate::Access::Read,
            }),
    );
    b
}

/// The format prefix (with `p.k` a constant), the common part with a uniform input, `hold`;
/// and the chunks per row. `None` where [`source`] has no module.
fn module_head(kernel: Kernel, k: usize) -> Option<(String, usize)> {
    if !kernel.is_matmul() || kernel.entry_point() != "matvec" {
        return None;
    }
    let chunk = kernel.chunk_elements();
    if k == 0 || k > UNIFORM_X_ELEMENTS || k % chunk != 0 || k / chunk > MAX_CHUNKS {
        return None;
    }
    let (prefix, common) = kernel.matmul_parts()?;
    // only formats whose whole-block step is written out: the others' chunk decoders loop over
    // private arrays, which llvmpipe takes seconds to unroll per pipeline, for little gain
    if !prefix.contains("fn four_chunks_dot(") {
        return None;
    }
    let common = common.replacen(X_STORAGE, X_UNIFORM, 1);
    if !common.contains(X_UNIFORM) {
        return None;
    }
    let mut out = String::with_capacity(64 * 1024);
    out.push_str(&with_constant_k(prefix));
    out.push_str(&common);
    let _ = writeln!(out, "\nconst UNROLLED_K: u32 = {k}u;\n");
    out.push_str(HOLD);
    Some((out, k / chunk))
}

/// `prefix` with every read of the parameter `p.k` replaced by the constant `UNROLLED_K`.
fn with_constant_k(prefix: &str) -> String {
    let mut out = String::with_capacity(prefix.len());
    let mut rest = prefix;
    while let Some(i) = rest.find("p.k") {
        let after = &rest[i + 3..];
        let before_ok = rest[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric() && c != '_' && c != '.');
        let after_ok = after
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphanumeric() && c != '_');
        out.push_str(&rest[..i]);
        out.push_str(if before_ok && after_ok {
            "UNROLLED_K"
        } else {
            "p.k"
        });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `hold(v)` is `v` (`p.zero` is always 0), but the compiler cannot know it: straight-line code
/// would otherwise let llvmpipe reassociate a partial's additions into the running total's
/// (`total + (a + b)` computed as `(total + a) + b`), which the looped kernels never do, and the
/// bits would differ.
const HOLD: &str = "fn hold(v: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(v) ^ p.zero);
}

";

/// Code computing `var {total}`, row `{r}`'s product over `n` chunks, in the order of
/// `matvec_row`: partials 4j .. 4j+3 at a time (each over its chunks l, l + 64, …), folded into
/// the total in lane order.
fn row_body(out: &mut String, n: usize, r: &str, total: &str) {
    let _ = writeln!(out, "    var {total} = 0.0;");
    for j in 0..LANES / 4 {
        let _ = writeln!(
            out,
            "    {{ // {total}: partials {} .. {}",
            4 * j,
            4 * j + 3
        );
        out.push_str("        var a = vec4<f32>(0.0);\n");
        for c0 in (4 * j..n).step_by(LANES) {
            if c0 + 3 < n {
                let _ = writeln!(out, "        a = four_chunks_dot({r}, {c0}u, a);");
                continue;
            }
            // a partial block at the end of a row (element-wise formats only)
            for (u, field) in ["x", "y", "z", "w"].iter().enumerate() {
                if c0 + u < n {
                    let c = c0 + u;
                    let _ = writeln!(
                        out,
                        "        a.{field} = chunk_dot({r}, {c}u, 0u, a.{field});"
                    );
                }
            }
        }
        if j == 0 {
            let _ = writeln!(out, "        {total} = hold(a.x);");
        } else {
            let _ = writeln!(out, "        {total} = {total} + hold(a.x);");
        }
        for f in ["y", "z", "w"] {
            let _ = writeln!(out, "        {total} = {total} + hold(a.{f});");
        }
        out.push_str("    }\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_only_the_k_parameter() {
        let s = with_constant_k("a(p.k / 8u) + p.kx + cp.k + p.k)");
        assert_eq!(s, "a(UNROLLED_K / 8u) + p.kx + cp.k + UNROLLED_K)");
    }

    #[test]
    fn every_chunk_is_read_once_in_lane_order() {
        // K = 576 Q4_1: 72 chunks; lanes 0..7 have two chunks (l, l + 64), the rest one
        let s = source(Kernel::MatvecQ4_1, 576).expect("a module");
        assert_eq!(s.matches("four_chunks_dot(r, ").count(), 18);
        assert!(
            s.contains("a = four_chunks_dot(r, 0u, a);\n        a = four_chunks_dot(r, 64u, a);")
        );
        assert!(!s.contains("p.k /"));
        // K = 96: 12 chunks, three whole blocks; partials 12..63 have no chunk and are still
        // added (as 0.0), as in matvec_row
        let s = source(Kernel::MatvecQ8_0, 96).expect("a module");
        assert_eq!(s.matches("four_chunks_dot(r, ").count(), 3);
        assert_eq!(s.matches("total = total + hold(a.").count(), 63);
        // the fused forms hold two rows each
        let l = QkvLayout {
            n_q: 576,
            n_kv: 192,
            head_dim: 64,
            rope: crate::RopeMode::Interleaved,
        };
        let g = qkv_rope(Kernel::MatvecQ4_1, 576, &l).expect("a module");
        assert_eq!(g.source.matches("four_chunks_dot(ra, ").count(), 18);
        assert_eq!(g.source.matches("four_chunks_dot(rb, ").count(), 18);
        let g = gate_up(Kernel::MatvecQ8_0, 576, 1536).expect("a module");
        assert!(g.source.contains("let ru = u + 1536u;"));
    }

    #[test]
    fn refuses_what_it_cannot_unroll() {
        assert!(source(Kernel::MatmulQ4_1, 576).is_none());
        assert!(source(Kernel::RmsNorm, 576).is_none());
        assert!(source(Kernel::MatvecQ4_1, UNIFORM_X_ELEMENTS + 32).is_none());
        assert!(source(Kernel::MatvecQ4_1, 0).is_none());
        assert!(source(Kernel::MatvecQ8_0, 8 * (MAX_CHUNKS + 4)).is_none());
        // no written-out whole-block step
        assert!(source(Kernel::MatvecQ4K, 256).is_none());
    }
}
