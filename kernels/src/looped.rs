//! One-token modules for a GPU's mapping (`MatvecShape::Lanes`: a workgroup of 64 lanes a row;
//! docs/kernels.md "One-token modules on a GPU mapping"): the fused, clamped gate/up + SwiGLU of
//! an MLP, and the expert-indexed matvec and gate/up of a MoE's stacks. They are the CPU
//! adapter's unrolled modules ([`crate::unrolled`]) in the looped kernel's form: the format part
//! and the common part of `matmul_<format>.wgsl` (the input a storage buffer, `X_STORAGE`) with an
//! entry point that performs `matvec`'s order (wgsl/matmul_body.wgsl: lane l sums chunks l,
//! l + 64, … from 0.0, then lane 0 adds the 64 partials in lane order). So a gate/up row has the
//! bits of the looped `matvec` over that row, the activation those of `activation.wgsl` with the
//! limit set, and a picked matrix the bits of the looped `matvec` over it
//! (kernels/tests/looped.rs).

use std::fmt::Write as _;

use crate::generated::{BindingKind, Generated};
use crate::kernel::{Kernel, X_STORAGE};
use crate::unrolled::PICKS_BINDING;
use crate::WeightFormat;

/// Entry point of a [`gate_up_clamped`] module.
pub const GATE_UP_ENTRY: &str = "gate_up_lanes";

/// Entry point of a [`matvec_by_index`] module.
pub const MATVEC_ENTRY: &str = "matvec_by_index_lanes";

/// The fused gate/up of an MLP with `limit`'s clamped SwiGLU (`silu(min(gate, limit)) ·
/// clamp(up, −limit, limit)`, `activation.wgsl`'s order): the matrix holds the gate's `ffn` rows
/// then the up's; workgroup u computes gate row u and up row ffn + u and writes y[u]. `p.rows` is
/// `ffn`. With `experts`, the matrix is one of a stack of that many such matrices (2·ffn rows
/// each), the one `picks[p.position]` names (binding [`PICKS_BINDING`]; an id past the stack
/// reads the last). `None` for a format with biases, a limit that is not a positive finite f32,
/// or an `fp8-e4m3-block` `ffn` that is not whole scale blocks of rows.
pub fn gate_up_clamped(
    format: WeightFormat,
    ffn: usize,
    limit: f32,
    experts: Option<usize>,
) -> Option<Generated> {
    let usable = limit > 0.0 && limit.is_finite() && whole_scale_rows(format, ffn);
    if !usable {
        return None;
    }
    let kernel = format.matvec_kernel();
    let mut out = head(kernel)?;
    let prologue = pick_prologue(&mut out, experts, 2 * ffn)?;
    let _ = write!(
        out,
        "var<workgroup> gate_part: array<f32, 64>;
var<workgroup> up_part: array<f32, 64>;

fn silu_of(v: f32) -> f32 {{
    return v / (1.0 + exp(-v));
}}

@compute @workgroup_size(64)
fn {GATE_UP_ENTRY}(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {{
    let u = wg.x + wg.y * p.groups_x;
    if (u >= p.rows) {{
        return;
    }}
{prologue}    let n = chunk_count();
    var ag = 0.0;
    for (var c = lane; c < n; c += LANES) {{
        ag = chunk_dot(prow + u, c, 0u, ag);
    }}
    var au = 0.0;
    for (var c = lane; c < n; c += LANES) {{
        au = chunk_dot(prow + p.rows + u, c, 0u, au);
    }}
    gate_part[lane] = ag;
    up_part[lane] = au;
    workgroupBarrier();
    if (lane == 0u) {{
        var tg = gate_part[0];
        var tu = up_part[0];
        for (var l = 1u; l < LANES; l++) {{
            tg = tg + gate_part[l];
            tu = tu + up_part[l];
        }}
        let limit = bitcast<f32>({bits}u);
        let tgc = min(tg, limit);
        let tuc = clamp(tu, -limit, limit);
        y[u] = silu_of(tgc) * tuc;
    }}
}}
",
        bits = limit.to_bits(),
    );
    Some(Generated {
        label: format!(
            "{GATE_UP_ENTRY} {} f{ffn} clamp{:08x}{}",
            kernel.name(),
            limit.to_bits(),
            indexed(experts)
        ),
        source: out,
        entry: GATE_UP_ENTRY,
        bindings: bindings(kernel, experts.is_some()),
    })
}

/// The matvec of the matrix `picks[p.position]` names in a stack of `experts` matrices of `rows`
/// rows each (an id past the stack reads the last): workgroup r computes row r of the picked
/// matrix into y[p.y_offset + r] (`store`, so `p.accumulate` adds). `None` for an empty stack, a
/// format with biases, or an `fp8-e4m3-block` `rows` that is not whole scale blocks.
pub fn matvec_by_index(format: WeightFormat, rows: usize, experts: usize) -> Option<Generated> {
    if !whole_scale_rows(format, rows) {
        return None;
    }
    let kernel = format.matvec_kernel();
    let mut out = head(kernel)?;
    let prologue = pick_prologue(&mut out, Some(experts), rows)?;
    let _ = write!(
        out,
        "var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn {MATVEC_ENTRY}(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {{
    let r = wg.x + wg.y * p.groups_x;
    if (r >= p.rows) {{
        return;
    }}
{prologue}    let n = chunk_count();
    var acc = 0.0;
    for (var c = lane; c < n; c += LANES) {{
        acc = chunk_dot(prow + r, c, 0u, acc);
    }}
    part[lane] = acc;
    workgroupBarrier();
    if (lane == 0u) {{
        var total = part[0];
        for (var l = 1u; l < LANES; l++) {{
            total = total + part[l];
        }}
        store(p.y_offset + r, total);
    }}
}}
"
    );
    Some(Generated {
        label: format!(
            "{MATVEC_ENTRY} {} x{rows}{}",
            kernel.name(),
            indexed(Some(experts))
        ),
        source: out,
        entry: MATVEC_ENTRY,
        bindings: bindings(kernel, true),
    })
}

/// Whether a matrix of `rows` rows of `format` starts a new row of scale blocks after its last
/// row (always, but for `fp8-e4m3-block`, whose scales cover `block_rows` rows).
fn whole_scale_rows(format: WeightFormat, rows: usize) -> bool {
    match format {
        WeightFormat::Fp8Block { block_rows, .. } => {
            block_rows > 0 && rows % block_rows as usize == 0
        }
        _ => true,
    }
}

/// The looped kernel's format part and common part (the input as storage), without its entry
/// points; `None` for a kernel that has none or a format with biases (a stack holds none).
fn head(kernel: Kernel) -> Option<String> {
    if kernel.storage().len() > 4 {
        return None;
    }
    let (prefix, common) = kernel.matmul_parts()?;
    if !common.contains(X_STORAGE) {
        return None;
    }
    Some(format!("{prefix}{common}\n"))
}

/// Declares the picks and names the picked matrix's first row `prow` (0 without `experts`);
/// returns the entry point's prologue. `None` for an empty stack.
fn pick_prologue(out: &mut String, experts: Option<usize>, rows_each: usize) -> Option<String> {
    let Some(experts) = experts else {
        return Some("    let prow = 0u;\n".into());
    };
    let last = experts.checked_sub(1)?;
    let _ = writeln!(
        out,
        "@group(0) @binding({PICKS_BINDING}) var<storage, read> picks: array<u32>;\n"
    );
    Some(format!(
        "    let prow = min(picks[p.position], {last}u) * {rows_each}u;\n"
    ))
}

fn indexed(experts: Option<usize>) -> String {
    experts.map_or(String::new(), |e| format!(" by-index of {e}"))
}

/// Params, then the kernel's storage bindings (x, y, the weight buffers) at 1, 2, …, then the
/// picks where indexed.
fn bindings(kernel: Kernel, picks: bool) -> Vec<(u32, BindingKind)> {
    let mut b = vec![(0, BindingKind::Uniform)];
    for (i, a) in kernel.storage().iter().enumerate() {
        let read_only = *a == crate::Access::Read;
        b.push((i as u32 + 1, BindingKind::Storage { read_only }));
    }
    if picks {
        b.push((PICKS_BINDING, BindingKind::Storage { read_only: true }));
    }
    b
}
