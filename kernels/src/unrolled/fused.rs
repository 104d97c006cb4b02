//! The fused one-token kernels built from the unrolled matvec's code: Q/K/V + RoPE
//! ([`qkv_rope`]), gate/up + SwiGLU ([`gate_up`]), each optionally with the RMSNorm ahead of it
//! ([`InputNorm`]); docs/kernels.md "Unrolled matvec".

use std::fmt::Write as _;

use super::{
    emit_interleaved_row, emit_rows, matvec_bindings, module_head, pick_prologue, row_bytes_of,
    single_width, with_picks_binding, words_binding, Layout, PICK_ROW,
};
use crate::generated::{BindingKind, Generated};
use crate::kernel::Kernel;

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
/// `p.rows` is the number of pairs. Requires the rotary width to be the whole head. With
/// `norm`, the input is first RMS-normalised on the device ([`InputNorm`]).
pub fn qkv_rope(
    kernel: Kernel,
    k: usize,
    l: &QkvLayout,
    norm: Option<InputNorm>,
    layout: Layout,
) -> Option<Generated> {
    let hd = l.head_dim;
    if hd == 0 || hd % 2 != 0 || l.n_q % hd != 0 || l.n_kv % hd != 0 {
        return None;
    }
    let (mut out, form) = module_head(kernel, k, norm)?;
    if form.row_scoped {
        return None;
    }
    let (lane, prologue, suffix) = norm_parts(norm);
    let row_bytes = row_bytes_of(form, k);
    let half = hd / 2;
    let (nq, nk) = (l.n_q, l.n_kv);
    let pair = l.rope == crate::RopeMode::Interleaved;
    // an interleaved pair is two consecutive rows: load them as one group
    // (in the `Rows` layout a row group is addressed in whole words: a group that ends
    // mid-word, as one 210-byte Q6_K row, has no such module)
    let group_bytes = if pair { 2 * row_bytes } else { row_bytes };
    if layout == Layout::Rows && group_bytes % 4 != 0 {
        return None;
    }
    let width = match (layout, pair) {
        (Layout::Interleaved, _) => 4,
        (Layout::Rows, _) => single_width(group_bytes),
    };
    words_binding(&mut out, width);
    let _ = write!(
        out,
        "@group(0) @binding(4) var<storage, read_write> kc: array<f32>;
@group(0) @binding(5) var<storage, read_write> vc: array<f32>;
@group(0) @binding(6) var<storage, read> rope: array<f32>;

@compute @workgroup_size(64)
fn qkv_rope(@builtin(global_invocation_id) gid: vec3<u32>{lane}) {{{prologue}
    let u0 = gid.x + gid.y * p.groups_x * 64u;
    let u = min(u0, p.rows - 1u);
    let i = u % {half}u;
"
    );
    let names = [
        ("ta".to_string(), "ra".to_string()),
        ("tb".to_string(), "rb".to_string()),
    ];
    if pair {
        out.push_str("    let ra = 2u * u;\n    let rb = ra + 1u;\n");
    } else {
        let _ = writeln!(out, "    let ra = (u / {half}u) * {hd}u + i;");
        let _ = writeln!(out, "    let rb = ra + {half}u;");
    }
    match (layout, pair) {
        (Layout::Interleaved, _) => {
            emit_interleaved_row(&mut out, form, k, "ra", "va", "ta");
            emit_interleaved_row(&mut out, form, k, "rb", "vb", "tb");
        }
        (Layout::Rows, true) => {
            let base = format!("u * {}u", 2 * row_bytes / (4 * width));
            emit_rows(&mut out, form, k, &base, width, 1, "v", &names);
        }
        (Layout::Rows, false) => {
            let unit = row_bytes / (4 * width);
            let (a, b) = (format!("ra * {unit}u"), format!("rb * {unit}u"));
            emit_rows(&mut out, form, k, &a, width, 1, "va", &names[..1]);
            emit_rows(&mut out, form, k, &b, width, 1, "vb", &names[1..]);
        }
    }
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
    bindings.splice(
        bindings.len() - 1..bindings.len() - 1,
        [
            (4, BindingKind::Storage { read_only: false }),
            (5, BindingKind::Storage { read_only: false }),
            (6, BindingKind::Storage { read_only: true }),
        ],
    );
    with_norm_binding(&mut bindings, norm);
    Some(Generated {
        label: format!(
            "qkv_rope {} k{k} q{nq} kv{nk} d{hd} {:?}{suffix}{}",
            kernel.name(),
            l.rope,
            layout.suffix()
        ),
        source: out,
        entry: "qkv_rope",
        bindings,
    })
}

/// The one-token gate and up projections with SwiGLU fused (entry `gate_up`): the weight buffer
/// holds gate's `ffn` rows then up's; invocation u computes row u and row ffn + u, each in the
/// order of [`source`], and writes `silu(gate) · up` exactly as `activation.wgsl` does.
/// `p.rows` is `ffn`. With `norm`, the input is first RMS-normalised on the device
/// ([`InputNorm`]).
pub fn gate_up(
    kernel: Kernel,
    k: usize,
    ffn: usize,
    norm: Option<InputNorm>,
    layout: Layout,
) -> Option<Generated> {
    gate_up_module(kernel, k, ffn, norm, layout, &[], None, None)
}

/// DeepSeek V4's MLP as [`gate_up`] over `format`'s rows (`Rows` layout, no norm, the format's
/// parameters as constants as in [`super::source_for`]), writing the clamped SwiGLU exactly as
/// `activation.wgsl` does with `limit_bits` set: `silu(min(gate, limit)) · clamp(up, −limit,
/// limit)`. The buffer is gate's `ffn` rows then up's, a matrix of 2·ffn rows of the format: for
/// `fp8-e4m3-block` `ffn` must be whole scale blocks of rows (else `None`). `None` also for a
/// limit that is not a positive finite f32.
pub fn gate_up_clamped(
    format: crate::WeightFormat,
    k: usize,
    ffn: usize,
    limit: f32,
) -> Option<Generated> {
    clamped(format, k, ffn, limit, None)
}

/// [`gate_up_clamped`] over one MLP of a stack of `experts` fused gate/up matrices (2·ffn rows
/// each, one after the other in one buffer): the one `picks[p.position]` names (binding
/// [`super::PICKS_BINDING`]; an id past the stack reads the last), with the bits of
/// [`gate_up_clamped`] over that MLP's matrix (docs/kernels.md "Experts by index").
pub fn gate_up_clamped_by_index(
    format: crate::WeightFormat,
    k: usize,
    ffn: usize,
    limit: f32,
    experts: usize,
) -> Option<Generated> {
    clamped(format, k, ffn, limit, Some(experts))
}

fn clamped(
    format: crate::WeightFormat,
    k: usize,
    ffn: usize,
    limit: f32,
    by_index: Option<usize>,
) -> Option<Generated> {
    if let crate::WeightFormat::Fp8Block { block_rows, .. } = format {
        if block_rows == 0 || ffn % block_rows as usize != 0 {
            return None;
        }
    }
    if !(limit > 0.0 && limit.is_finite()) {
        return None;
    }
    let consts = super::format_constants(format);
    let kernel = format.matvec_kernel();
    gate_up_module(
        kernel,
        k,
        ffn,
        None,
        Layout::Rows,
        &consts,
        Some(limit),
        by_index,
    )
}

#[allow(clippy::too_many_arguments)]
fn gate_up_module(
    kernel: Kernel,
    k: usize,
    ffn: usize,
    norm: Option<InputNorm>,
    layout: Layout,
    consts: &[super::Constant],
    limit: Option<f32>,
    by_index: Option<usize>,
) -> Option<Generated> {
    let (head, form) = module_head(kernel, k, norm)?;
    // a row-scoped format reads each row's scales through `unrolled_row`, which `emit_rows`
    // sets for the row it names (the up row is row ffn + u of the combined matrix)
    if form.row_scoped && layout != Layout::Rows {
        return None;
    }
    let (mut out, named) = super::with_constants(head, consts);
    let (lane, prologue, suffix) = norm_parts(norm);
    let row_bytes = row_bytes_of(form, k);
    // (in the `Rows` layout a row is addressed in whole words)
    if layout == Layout::Rows && row_bytes % 4 != 0 {
        return None;
    }
    let width = match layout {
        Layout::Rows => single_width(row_bytes),
        Layout::Interleaved => 4,
    };
    words_binding(&mut out, width);
    if let Some(experts) = by_index {
        if layout != Layout::Rows || norm.is_some() {
            return None;
        }
        pick_prologue(&mut out, experts, 2 * ffn)?;
    }
    let _ = write!(
        out,
        "fn silu_of(v: f32) -> f32 {{
    return v / (1.0 + exp(-v));
}}

@compute @workgroup_size(64)
fn gate_up(@builtin(global_invocation_id) gid: vec3<u32>{lane}) {{{prologue}
    let u0 = gid.x + gid.y * p.groups_x * 64u;
    let u = min(u0, p.rows - 1u);
"
    );
    // (an indexed module's rows are those of the picked MLP, from its first row `prow`)
    let first = if by_index.is_some() {
        out.push_str(PICK_ROW);
        "prow + "
    } else {
        ""
    };
    match layout {
        Layout::Rows => {
            let unit = row_bytes / (4 * width);
            let (g, up) = (
                format!("({first}u) * {unit}u"),
                format!("({first}u + {ffn}u) * {unit}u"),
            );
            let (tg, tu) = (
                ("tg".into(), format!("{first}u")),
                ("tu".into(), format!("{first}u + {ffn}u")),
            );
            emit_rows(&mut out, form, k, &g, width, 1, "vg", &[tg]);
            emit_rows(&mut out, form, k, &up, width, 1, "vu", &[tu]);
        }
        Layout::Interleaved => {
            emit_interleaved_row(&mut out, form, k, "u", "vg", "tg");
            emit_interleaved_row(&mut out, form, k, &format!("u + {ffn}u"), "vu", "tu");
        }
    }
    let clamp = match limit {
        // activation.wgsl's order: min, clamp, then silu(g) · u
        Some(l) => {
            let _ = write!(
                out,
                "    let limit = bitcast<f32>({}u);
    let tgc = min(tg, limit);
    let tuc = clamp(tu, -limit, limit);
",
                l.to_bits()
            );
            format!(" clamp{:08x}", l.to_bits())
        }
        None => {
            out.push_str("    let tgc = tg;\n    let tuc = tu;\n");
            String::new()
        }
    };
    out.push_str("    if (u0 < p.rows) {\n        y[u] = silu_of(tgc) * tuc;\n    }\n}\n");
    let mut bindings = matvec_bindings(kernel);
    with_norm_binding(&mut bindings, norm);
    let indexed = match by_index {
        Some(e) => {
            with_picks_binding(&mut bindings);
            format!(" by-index of {e}")
        }
        None => String::new(),
    };
    Some(Generated {
        label: format!(
            "gate_up {} k{k} f{ffn}{named}{clamp}{suffix}{}{indexed}",
            kernel.name(),
            layout.suffix()
        ),
        source: out,
        entry: "gate_up",
        bindings,
    })
}

/// An RMSNorm fused ahead of a one-token kernel: binding 1 then holds the raw residual stream
/// and binding [`NORM_BINDING`] the norm's f32 weights. Each workgroup first computes
/// `(x[i] · inv) · w[i]` into workgroup memory in exactly the order of `rmsnorm.wgsl` (lane l
/// sums `fma(x, x, acc)` over i = l, l + 64, …, the fixed tree, then `inv`), so the products
/// see the bits the separate norm kernel would have written; the kernel's `xv` reads them there.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InputNorm {
    pub eps: f32,
}

/// Binding of the fused norm's weights (just below the weight words).
pub const NORM_BINDING: u32 = 14;

/// The uniform input declaration of a normalising module: the raw input, the norm weights, the
/// normalised copy in workgroup memory and `norm_input`, which every invocation calls first.
/// `n` and `eps` are read through `p.zero` so the compiler folds them no more than it does the
/// norm kernel's parameters.
pub(super) fn normed_input(k: usize, n: InputNorm) -> String {
    format!(
        "@group(0) @binding(1) var<uniform> x: array<vec4<f32>, 4096>;
@group(0) @binding({NORM_BINDING}) var<storage, read> nw: array<f32>;
var<workgroup> xs: array<f32, {k}>;
var<workgroup> norm_partial: array<f32, 64>;
fn xv(i: u32) -> f32 {{
    return xs[i];
}}
fn x_raw(i: u32) -> f32 {{
    return x[i >> 2u][i & 3u];
}}
fn norm_input(lane: u32) {{
    var acc = 0.0;
    for (var i = lane; i < {k}u; i += 64u) {{
        let v = x_raw(i);
        acc = fma(v, v, acc);
    }}
    norm_partial[lane] = acc;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s = s >> 1u) {{
        if (lane < s) {{
            norm_partial[lane] = norm_partial[lane] + norm_partial[lane + s];
        }}
        workgroupBarrier();
    }}
    let n = f32({k}u + p.zero);
    let eps = bitcast<f32>({eps}u ^ p.zero);
    let inv = 1.0 / sqrt(norm_partial[0] / n + eps);
    for (var i = lane; i < {k}u; i += 64u) {{
        xs[i] = (x_raw(i) * inv) * nw[i];
    }}
    workgroupBarrier();
}}
",
        eps = n.eps.to_bits(),
    )
}

/// What a module with `norm` adds to its entry point and label: the entry-point parameter, the
/// first statement, the label suffix (all empty without a norm).
fn norm_parts(norm: Option<InputNorm>) -> (&'static str, &'static str, &'static str) {
    match norm {
        Some(_) => (
            ", @builtin(local_invocation_index) lane: u32",
            "\n    norm_input(lane);",
            " +norm",
        ),
        None => ("", "", ""),
    }
}

/// Adds the norm weights' binding ahead of the weight words.
fn with_norm_binding(bindings: &mut Vec<(u32, BindingKind)>, norm: Option<InputNorm>) {
    if norm.is_some() {
        let at = bindings.len().saturating_sub(1);
        bindings.insert(at, (NORM_BINDING, BindingKind::Storage { read_only: true }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fused_forms_hold_two_rows() {
        let l = QkvLayout {
            n_q: 576,
            n_kv: 192,
            head_dim: 64,
            rope: crate::RopeMode::Interleaved,
        };
        let g = qkv_rope(Kernel::MatvecQ4_1, 576, &l, None, Layout::Rows).expect("a module");
        assert_eq!(g.source.matches("= block_dot(").count(), 2 * 18);
        let half = QkvLayout {
            rope: crate::RopeMode::HalfSplit,
            ..l
        };
        let g = qkv_rope(Kernel::MatvecQ4_1, 576, &half, None, Layout::Rows).expect("a module");
        assert!(g.source.contains("vb_base = rb * 45u"));
        let g = gate_up(Kernel::MatvecQ8_0, 576, 1536, None, Layout::Rows).expect("a module");
        assert!(g.source.contains("vu_base = (u + 1536u) * 153u"));
    }
}
