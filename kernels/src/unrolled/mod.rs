//! Unrolled one-token kernels for CPU adapters (docs/kernels.md "Unrolled matvec"): a
//! row-per-invocation matvec generated for one format and K, and the fused Q/K/V + RoPE and
//! gate/up + SwiGLU kernels built from the same code, each with its accumulation order written
//! out as straight-line code.
//!
//! Why: Mesa's llvmpipe (lavapipe) reads a buffer with one scalar load and a broadcast only when
//! the index is a constant (or derived from push constants alone); an index that depends on a
//! loop variable becomes a gather, and a storage-buffer gather is a per-lane loop whose cost is per
//! load, not per byte. So every x read here has a constant index into the 64 KiB uniform block
//! ([`crate::X_UNIFORM`], one load shared by all rows), and the weights are read in memory order
//! as `vec4` (or `vec2`) words, each word once, and handed to the format's `block_dot`.
//!
//! The order is exactly the one of `matvec_row` in `wgsl/matmul_body.wgsl`: lane l's partial sums
//! the chunks l, l + 64, … from 0.0 and the 64 partials are added in lane order. A block of 32
//! elements is chunks 4b .. 4b+3, i.e. partials 4(b mod 16) .. +3, so walking the blocks in
//! memory order updates partial group b mod 16 (a `vec4` of four partials), and each partial still
//! sees its chunks in increasing order. Each partial passes through `hold` before it is added to
//! the total, so llvmpipe cannot reassociate its additions into the total's (it otherwise does,
//! and the bits would differ). The bits are those of `matvec_row` (tests/matmul.rs, every format
//! that has the form).

use std::fmt::Write as _;

use crate::generated::{BindingKind, Generated};
use crate::kernel::{Kernel, UNIFORM_X_ELEMENTS, X_STORAGE, X_UNIFORM};

mod fused;
mod kquant;
use fused::normed_input;
pub use fused::{
    gate_up, gate_up_clamped, gate_up_clamped_by_index, qkv_rope, InputNorm, QkvLayout,
    NORM_BINDING,
};
use kquant::KQuant;

/// The entry point of a generated matvec module.
pub const ENTRY: &str = "matvec_unrolled";

/// Most blocks per row a module is generated for (beyond it the code, and the pipeline's compile
/// time, grow too large; the looped `matvec_row` serves such rows).
pub const MAX_BLOCKS: usize = 512;

/// Binding of the weight words the generated code reads (the same buffer as binding 3, bound a
/// second time with the load width's type).
const WORDS_BINDING: u32 = 15;

/// Binding of an expert-indexed module's picks (`u32` expert ids, `moe_route.wgsl`'s output):
/// just below the fused norm's weights, which such a module never has.
pub const PICKS_BINDING: u32 = 13;

/// Partial groups of four (`LANES` / 4 in the WGSL body).
const GROUPS: usize = crate::LANES as usize / 4;

/// How a format's blocks are laid out for `block_dot(words…, k, acc)`: a block of `elems`
/// elements updates one group of four lane partials (for 32-element GGUF and mxfp4 blocks the 4
/// chunks of 8; for `fp8-e4m3-block`, whose chunks are single elements, one word of 4).
#[derive(Debug, Clone, Copy)]
struct BlockForm {
    /// Bytes per block (blocks are back to back, rows are whole blocks).
    bytes: usize,
    /// Words `block_dot` takes, starting at the block's first byte.
    words: usize,
    /// Elements per block.
    elems: usize,
    /// The format's scales live outside the rows (`fp8-e4m3-block`'s grid): `block_dot` reads
    /// the row from the private `unrolled_row`, which the code sets before each row.
    row_scoped: bool,
    /// A K-quant super-block (256 elements), written out weight by weight ([`kquant`]) instead
    /// of through `block_dot`.
    kquant: Option<KQuant>,
}

fn block_form(kernel: Kernel) -> Option<BlockForm> {
    // `block_dot` takes whole words from the block's first byte: 20 bytes are 5, 34 bytes 9;
    // a block that ends mid-word (18, 22 bytes) takes the word it ends in
    let (format, words) = match kernel {
        Kernel::MatvecQ4_0 => (crate::WeightFormat::Q4_0, 5),
        Kernel::MatvecQ4_1 => (crate::WeightFormat::Q4_1, 5),
        Kernel::MatvecQ5_0 => (crate::WeightFormat::Q5_0, 6),
        Kernel::MatvecQ5_1 => (crate::WeightFormat::Q5_1, 6),
        Kernel::MatvecQ8_0 => (crate::WeightFormat::Q8_0, 9),
        // a word of four 8-bit codes (E4M3, or affine's unsigned q); their scales (and affine's
        // biases) are per block or group, outside the rows
        Kernel::MatvecFp8Block | Kernel::MatvecAffine8 => {
            return Some(BlockForm {
                bytes: 4,
                words: 1,
                elems: 4,
                row_scoped: true,
                kquant: None,
            })
        }
        // 32 elements in 16 bytes of E2M1 codes; the E8M0 scales are a grid of their own
        Kernel::MatvecMxfp4 => {
            return Some(BlockForm {
                bytes: 16,
                words: 4,
                elems: 32,
                row_scoped: true,
                kquant: None,
            })
        }
        Kernel::MatvecQ4K => return Some(kquant_form(KQuant::Q4K, 144)),
        Kernel::MatvecQ5K => return Some(kquant_form(KQuant::Q5K, 176)),
        Kernel::MatvecQ6K => return Some(kquant_form(KQuant::Q6K, 210)),
        _ => return None,
    };
    let (_, bytes) = format.block()?;
    Some(BlockForm {
        bytes,
        words,
        elems: 32,
        row_scoped: false,
        kquant: None,
    })
}

/// The form of a K-quant's `bytes`-byte super-blocks.
fn kquant_form(kq: KQuant, bytes: usize) -> BlockForm {
    BlockForm {
        bytes,
        words: 0,
        elems: 256,
        row_scoped: false,
        kquant: Some(kq),
    }
}

/// The block form of `format`'s unrolled matvec: its kernel's ([`block_form`]), and for f16 and
/// bf16, whose kernel serves every plain dtype, 4 elements in 2 words (`block_dot` of
/// `wgsl/matmul_plain.wgsl`, the dtype a module constant). f32 has none.
fn form_of(format: crate::WeightFormat) -> Option<BlockForm> {
    match format {
        crate::WeightFormat::Plain(crate::Dtype::F16 | crate::Dtype::Bf16) => Some(BlockForm {
            bytes: 8,
            words: 2,
            elems: 4,
            row_scoped: false,
            kquant: None,
        }),
        crate::WeightFormat::Plain(_) => None,
        f => block_form(f.matvec_kernel()),
    }
}

/// Bytes of one row of `k` elements.
fn row_bytes_of(form: BlockForm, k: usize) -> usize {
    k / form.elems * form.bytes
}

/// Rows each invocation of the matvec of [`source`] computes (1, 2 or 4: enough consecutive
/// rows that their bytes start on a 16-byte boundary, up to 2 rows; else 8-byte `vec2` words).
/// The grid has `ceil(rows / this / workgroup_size)` workgroups ([`launch`]).
pub fn rows_per_invocation(kernel: Kernel, k: usize) -> usize {
    per_invocation(block_form(kernel), k)
}

fn per_invocation(form: Option<BlockForm>, k: usize) -> usize {
    form.map_or(1, |f| plan(row_bytes_of(f, k)).0)
}

/// Workgroups a matvec should at least have so that a CPU adapter's thread pool shares it
/// evenly (with 5 workgroups, two threads run 3 and 2: a fifth of the time lost).
const MIN_WORKGROUPS: usize = 16;

/// The workgroup size of the matvec of [`source`] over `rows` rows: 64, or smaller (down to 8,
/// one SIMD row of llvmpipe) where that gives at least [`MIN_WORKGROUPS`] workgroups.
pub fn workgroup_size(kernel: Kernel, k: usize, rows: usize) -> usize {
    size_for(rows_per_invocation(kernel, k), rows)
}

/// The workgroup size for `rows` rows, `per` an invocation.
fn size_for(per: usize, rows: usize) -> usize {
    let invocations = rows.div_ceil(per);
    [64, 32, 16, 8]
        .into_iter()
        .find(|w| invocations.div_ceil(*w) >= MIN_WORKGROUPS)
        .unwrap_or(8)
}

/// The grid of the matvec of [`source`] over `params.rows` rows, with `params.groups_x` set.
pub fn launch(kernel: Kernel, k: usize, params: &mut crate::MatmulParams) -> (u32, u32, u32) {
    launch_per(rows_per_invocation(kernel, k), params)
}

/// As [`launch`] for the module of [`source_for`] (`format`'s form: f16 and bf16 have one that
/// their kernel alone does not say).
pub fn launch_for(
    format: crate::WeightFormat,
    k: usize,
    params: &mut crate::MatmulParams,
) -> (u32, u32, u32) {
    launch_per(per_invocation(form_of(format), k), params)
}

fn launch_per(per: usize, params: &mut crate::MatmulParams) -> (u32, u32, u32) {
    let wg = size_for(per, params.rows as usize) as u32;
    let (gx, gy) = crate::grid_2d(params.rows.div_ceil(per as u32).div_ceil(wg));
    params.groups_x = gx;
    (gx, gy, 1)
}

/// (rows per group, words per load) for rows of `row_bytes`: the widest load whose width divides
/// the bytes of at most two consecutive rows.
fn plan(row_bytes: usize) -> (usize, usize) {
    for w in [4, 2, 1] {
        for r in [1, 2] {
            if (r * row_bytes) % (4 * w) == 0 {
                return (r, w);
            }
        }
    }
    (1, 1)
}

/// The widest load width (words) for a single row at any index.
fn single_width(row_bytes: usize) -> usize {
    [4, 2, 1]
        .into_iter()
        .find(|w| row_bytes % (4 * w) == 0)
        .unwrap_or(1)
}

/// The unrolled matvec module of `kernel` (a `Matvec*` kernel) for `n_rows` rows of `k`
/// elements: bindings params, x (uniform window), y, weights, weights again as words. `None`
/// where the kernel has no such form or `k` is out of range (the caller then uses the looped row
/// kernel). Its workgroup size is [`workgroup_size`]; [`launch`] makes its grid.
pub fn source(kernel: Kernel, k: usize, n_rows: usize, layout: Layout) -> Option<Generated> {
    source_with(kernel, block_form(kernel)?, k, n_rows, layout, &[], None)
}

/// As [`source`] for `format`'s matvec, with the format's own parameters made constants of the
/// module too (`fp8-e4m3-block`'s group and block rows: the scale of a word is then the same
/// expression for the 128 elements of a group, computed once instead of a division and a
/// storage gather every 4 elements — 1.4× faster on llvmpipe). The bits are those of [`source`].
pub fn source_for(
    format: crate::WeightFormat,
    k: usize,
    n_rows: usize,
    layout: Layout,
) -> Option<Generated> {
    source_with(
        format.matvec_kernel(),
        form_of(format)?,
        k,
        n_rows,
        layout,
        &format_constants(format),
        None,
    )
}

/// The matvec of [`source_for`] (`Rows` layout) over one matrix of a stack of `experts`
/// matrices of `n_rows` rows each, held one after the other in one buffer (docs/kernels.md
/// "Experts by index"): the matrix is the one `picks[p.position]` names (binding
/// [`PICKS_BINDING`]; an id past the stack reads the last matrix), so the router's choice
/// selects the weights on the device. Row r of the picked matrix is computed exactly as row r
/// of that matrix alone (the same code, at a different base), so the bits are [`source_for`]'s
/// over the picked matrix. `None` where [`source_for`] has none, or a matrix's bytes are not
/// whole load words.
pub fn source_by_index(
    format: crate::WeightFormat,
    k: usize,
    n_rows: usize,
    experts: usize,
) -> Option<Generated> {
    source_with(
        format.matvec_kernel(),
        form_of(format)?,
        k,
        n_rows,
        Layout::Rows,
        &format_constants(format),
        Some(experts),
    )
}

/// The picks' binding and the constants of an expert-indexed module over a stack of `experts`
/// matrices of `rows_each` rows ([`PICK_ROW`] then names the picked matrix `pick` and its first
/// row `prow`); `None` for an empty stack.
fn pick_prologue(out: &mut String, experts: usize, rows_each: usize) -> Option<()> {
    let last = experts.checked_sub(1)?;
    let _ = writeln!(
        out,
        "@group(0) @binding({PICKS_BINDING}) var<storage, read> picks: array<u32>;\n"
    );
    let _ = writeln!(out, "const PICK_ROWS: u32 = {rows_each}u;");
    let _ = writeln!(out, "const PICK_LAST: u32 = {last}u;\n");
    Some(())
}

/// The statement an expert-indexed module's entry point starts with.
const PICK_ROW: &str =
    "    let pick = min(picks[p.position], PICK_LAST);\n    let prow = pick * PICK_ROWS;\n";

/// The picks' binding in a module's binding list: ahead of the weight words.
fn with_picks_binding(bindings: &mut Vec<(u32, BindingKind)>) {
    let at = bindings.len().saturating_sub(1);
    bindings.insert(
        at,
        (PICKS_BINDING, BindingKind::Storage { read_only: true }),
    );
}

/// The parameters of `format`'s prefix a generated module makes constants.
fn format_constants(format: crate::WeightFormat) -> Vec<Constant> {
    match format {
        crate::WeightFormat::Fp8Block { block_rows, group } => vec![
            Constant::new("p.group", "UNROLLED_GROUP", group),
            Constant::new("p.block_rows", "UNROLLED_BLOCK_ROWS", block_rows),
        ],
        crate::WeightFormat::Plain(d) => vec![Constant::new("p.dtype", "UNROLLED_DTYPE", d.code())],
        crate::WeightFormat::Affine8 { group, scale_dtype } => vec![
            Constant::new("p.group", "UNROLLED_GROUP", group),
            Constant::new("p.dtype", "UNROLLED_DTYPE", scale_dtype.code()),
        ],
        _ => Vec::new(),
    }
}

/// `head` with `consts` made constants of the module, and the label suffix naming them.
fn with_constants(head: String, consts: &[Constant]) -> (String, String) {
    let mut out = consts
        .iter()
        .fold(head, |o, c| replace_param(&o, c.param, c.name));
    for c in consts {
        let _ = writeln!(out, "const {}: u32 = {}u;", c.name, c.value);
    }
    let named = consts
        .iter()
        .map(|c| format!(" {}{}", c.name.to_lowercase(), c.value))
        .collect();
    (out, named)
}

/// A parameter of the format prefix replaced by a module constant.
pub(super) struct Constant {
    param: &'static str,
    name: &'static str,
    value: u32,
}

impl Constant {
    fn new(param: &'static str, name: &'static str, value: u32) -> Self {
        Self { param, name, value }
    }
}

fn source_with(
    kernel: Kernel,
    form: BlockForm,
    k: usize,
    n_rows: usize,
    layout: Layout,
    consts: &[Constant],
    by_index: Option<usize>,
) -> Option<Generated> {
    let head = module_head_with(kernel, form, k, None)?;
    let (mut out, named) = with_constants(head, consts);
    let row_bytes = row_bytes_of(form, k);
    let (rows, mut width) = plan(row_bytes);
    if layout == Layout::Interleaved {
        width = 4;
    }
    let wg = size_for(rows, n_rows);
    words_binding(&mut out, width);
    // an indexed module starts the picked matrix's words at a whole load word
    let matrix_words = (n_rows * row_bytes) / (4 * width);
    if let Some(experts) = by_index {
        if layout != Layout::Rows || (n_rows * row_bytes) % (4 * width) != 0 {
            return None;
        }
        pick_prologue(&mut out, experts, n_rows)?;
    }
    let _ = write!(
        out,
        "@compute @workgroup_size({wg})
fn matvec_unrolled(@builtin(global_invocation_id) gid: vec3<u32>) {{
    let g0 = gid.x + gid.y * p.groups_x * {wg}u;
    let ng = (p.rows + {r1}u) / {rows}u;
    // invocations past the end redo the last group and store nothing (no early return: one that
    // depends on the invocation would make llvmpipe treat what follows as divergent)
    let g = min(g0, ng - 1u);
",
        r1 = rows - 1,
    );
    let pick = if by_index.is_some() {
        out.push_str(PICK_ROW);
        ("prow + ".to_string(), format!("pick * {matrix_words}u + "))
    } else {
        (String::new(), String::new())
    };
    let names: Vec<(String, String)> = (0..rows)
        .map(|i| (format!("t{i}"), format!("{}{rows}u * g + {i}u", pick.0)))
        .collect();
    match layout {
        Layout::Rows => {
            let base = format!("{}g * {}u", pick.1, rows * row_bytes / (4 * width));
            emit_rows(&mut out, form, k, &base, width, 1, "v", &names);
        }
        Layout::Interleaved => {
            for (i, (name, row)) in names.iter().enumerate() {
                emit_interleaved_row(&mut out, form, k, row, &format!("v{i}_"), name);
            }
        }
    }
    out.push_str("    if (g0 < ng) {\n");
    for (i, (t, _)) in names.iter().enumerate() {
        let _ = writeln!(
            out,
            "        if ({rows}u * g + {i}u < p.rows) {{\n            store(p.y_offset + {rows}u * g + {i}u, {t});\n        }}"
        );
    }
    out.push_str("    }\n}\n");
    let mut bindings = matvec_bindings(kernel);
    let indexed = match by_index {
        Some(e) => {
            with_picks_binding(&mut bindings);
            format!(" by-index of {e} x{n_rows}")
        }
        None => String::new(),
    };
    Some(Generated {
        label: format!(
            "matvec_unrolled {} k{k} wg{wg}{named}{}{indexed}",
            kernel.name(),
            layout.suffix()
        ),
        source: out,
        entry: ENTRY,
        bindings,
    })
}

/// Rows the interleaved layout groups: llvmpipe runs 8 invocations as the lanes of one
/// 256-bit SIMD row, so word j of 8 consecutive rows is stored together and the lanes' loads of
/// it are one contiguous 128-byte run (each lane's row is still read in memory order).
pub const INTERLEAVE: usize = 8;

/// `vec4` words of one row in the interleaved layout (the row padded to 16 bytes).
pub fn interleaved_row_words(row_bytes: usize) -> usize {
    row_bytes.div_ceil(16)
}

/// `bytes` (whole rows of `row_bytes`) in the interleaved layout of [`source_interleaved`]:
/// rows padded with zeros to whole `vec4` words, and word j of rows 8g .. 8g + 7 stored as the
/// 8 consecutive words (8g · P + j) · 8 + r mod 8, P words per row; the row count is padded to a
/// multiple of 8 with zero rows. The block bytes are copied as they are.
pub fn interleave(row_bytes: usize, bytes: &[u8]) -> Vec<u8> {
    let rows = bytes.len() / row_bytes.max(1);
    let p = interleaved_row_words(row_bytes);
    let groups = rows.div_ceil(INTERLEAVE);
    let mut out = vec![0u8; groups * INTERLEAVE * p * 16];
    for (r, row) in bytes.chunks_exact(row_bytes.max(1)).enumerate() {
        for (j, word) in row.chunks(16).enumerate() {
            let at = ((r / INTERLEAVE * p + j) * INTERLEAVE + r % INTERLEAVE) * 16;
            if let Some(dst) = out.get_mut(at..at + word.len()) {
                dst.copy_from_slice(word);
            }
        }
    }
    out
}

/// How a weight matrix is laid out in the buffer a generated module reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// The rows back to back, as in the file.
    Rows,
    /// [`interleave`]d: word j of 8 consecutive rows together.
    Interleaved,
}

impl Layout {
    fn suffix(self) -> &'static str {
        match self {
            Layout::Rows => "",
            Layout::Interleaved => " interleaved",
        }
    }
}

/// Emits row `row` (a WGSL `u32` expression) of an interleaved matrix as `name`: its `vec4`
/// words are 8 apart from `(row / 8) · 8P + row mod 8`.
fn emit_interleaved_row(
    out: &mut String,
    form: BlockForm,
    k: usize,
    row: &str,
    tag: &str,
    name: &str,
) {
    let p = interleaved_row_words(row_bytes_of(form, k));
    let base = format!(
        "(({row}) / {INTERLEAVE}u) * {}u + ({row}) % {INTERLEAVE}u",
        INTERLEAVE * p
    );
    let names = [(name.to_string(), row.to_string())];
    emit_rows(out, form, k, &base, 4, INTERLEAVE, tag, &names);
}

/// Bindings of a generated matvec module: params, x (uniform), y, the weight buffers, and the
/// weights again as words ([`WORDS_BINDING`]).
fn matvec_bindings(kernel: Kernel) -> Vec<(u32, BindingKind)> {
    let mut b = vec![(0, BindingKind::Uniform), (1, BindingKind::Uniform)];
    for (i, a) in kernel.storage().iter().enumerate().skip(1) {
        let read_only = *a == crate::Access::Read;
        b.push((i as u32 + 1, BindingKind::Storage { read_only }));
    }
    b.push((WORDS_BINDING, BindingKind::Storage { read_only: true }));
    b
}

/// Declares the weight words as `width`-word vectors.
fn words_binding(out: &mut String, width: usize) {
    let ty = match width {
        4 => "vec4<u32>",
        2 => "vec2<u32>",
        _ => "u32",
    };
    let _ = writeln!(
        out,
        "@group(0) @binding({WORDS_BINDING}) var<storage, read> words: array<{ty}>;\n"
    );
}

/// The largest K [`source`] generates a module for (0 where the kernel has no unrolled form):
/// [`MAX_BLOCKS`] blocks, within the uniform window (`fp8-e4m3-block`, 4 elements a block: 2048).
pub fn max_k(kernel: Kernel) -> usize {
    block_form(kernel).map_or(0, |f| (f.elems * MAX_BLOCKS).min(UNIFORM_X_ELEMENTS))
}

/// Whether [`source`] has a module for `kernel` and `k` (without generating it).
pub fn available(kernel: Kernel, k: usize) -> bool {
    block_form(kernel).is_some_and(|f| available_form(kernel, f, k))
}

/// Whether [`source_for`] has a module for `format` and `k`.
pub fn available_for(format: crate::WeightFormat, k: usize) -> bool {
    form_of(format).is_some_and(|f| available_form(format.matvec_kernel(), f, k))
}

fn available_form(kernel: Kernel, f: BlockForm, k: usize) -> bool {
    k % f.elems == 0
        && k / f.elems <= MAX_BLOCKS
        && k > 0
        && k <= UNIFORM_X_ELEMENTS
        && kernel
            .matmul_parts()
            .is_some_and(|(prefix, _)| f.kquant.is_some() || prefix.contains("fn block_dot("))
}

/// The format prefix (with `p.k` a constant), the common part with a uniform input, `hold` and
/// `funnel` (and, with `norm`, the normalising prologue); `None` where the kernel has no
/// unrolled form or `k` is out of range.
fn module_head(kernel: Kernel, k: usize, norm: Option<InputNorm>) -> Option<(String, BlockForm)> {
    let form = block_form(kernel)?;
    Some((module_head_with(kernel, form, k, norm)?, form))
}

/// [`module_head`] for blocks of `form`.
fn module_head_with(
    kernel: Kernel,
    form: BlockForm,
    k: usize,
    norm: Option<InputNorm>,
) -> Option<String> {
    if !available_form(kernel, form, k) {
        return None;
    }
    let (prefix, common) = kernel.matmul_parts()?;
    let common = common.replacen(X_STORAGE, X_UNIFORM, 1);
    if !common.contains(X_UNIFORM) {
        return None;
    }
    let common = match norm {
        None => common,
        Some(n) => common.replacen(X_UNIFORM, &normed_input(k, n), 1),
    };
    let mut out = String::with_capacity(64 * 1024);
    out.push_str(&with_constant_k(prefix));
    out.push_str(&common);
    let _ = writeln!(out, "\nconst UNROLLED_K: u32 = {k}u;\n");
    out.push_str(HELPERS);
    Some(out)
}

/// `prefix` with every read of the parameter `p.k` replaced by the constant `UNROLLED_K`.
fn with_constant_k(prefix: &str) -> String {
    replace_param(prefix, "p.k", "UNROLLED_K")
}

/// `text` with every read of the parameter `param` (`p.<name>`, as a whole word) replaced by
/// `name`.
fn replace_param(text: &str, param: &str, name: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(param) {
        let after = &rest[i + param.len()..];
        let before_ok = rest[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric() && c != '_' && c != '.');
        let after_ok = after
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphanumeric() && c != '_');
        out.push_str(&rest[..i]);
        out.push_str(if before_ok && after_ok { name } else { param });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `hold(v)` is `v` (`p.zero` is always 0), but the compiler cannot know it (module docs).
/// `realign(a, b, s)` is the word of bytes s/8 .. s/8 + 3 of the pair (a, b), s = 8, 16 or 24.
const HELPERS: &str = "fn hold(v: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(v) ^ p.zero);
}

fn realign(a: u32, b: u32, s: u32) -> u32 {
    return (a >> s) | (b << (32u - s));
}

";

/// Code computing `var {names[i]}`, the product of row `i` of a group of consecutive rows whose
/// first byte is word `{base} · width` of the weights, in the order of `matvec_row`. Words are
/// loaded once each, as `width`-word vectors named `{tag}N`, right before their first use.
#[allow(clippy::too_many_arguments)]
fn emit_rows(
    out: &mut String,
    form: BlockForm,
    k: usize,
    base: &str,
    width: usize,
    stride: usize,
    tag: &str,
    names: &[(String, String)],
) {
    let blocks = k / form.elems;
    let row_bytes = blocks * form.bytes;
    let group_words = (names.len() * row_bytes).div_ceil(4);
    let mut loaded = 0; // vectors loaded so far (they are loaded in order)
    let _ = writeln!(out, "    let {tag}_base = {base};");
    let mut word = |out: &mut String, i: usize| -> String {
        while loaded <= i / width {
            let _ = writeln!(
                out,
                "    let {tag}{loaded} = words[{tag}_base + {}u];",
                loaded * stride
            );
            loaded += 1;
        }
        if width == 1 {
            format!("{tag}{i}")
        } else {
            format!("{tag}{}.{}", i / width, ["x", "y", "z", "w"][i % width])
        }
    };
    for (row, (name, index)) in names.iter().enumerate() {
        if form.row_scoped {
            let _ = writeln!(out, "    unrolled_row = {index};");
        }
        for j in 0..GROUPS {
            let _ = writeln!(out, "    var {name}_{j} = vec4<f32>(0.0);");
        }
        for b in 0..blocks {
            let at = row * row_bytes + b * form.bytes;
            if let Some(kq) = form.kquant {
                kquant::emit_block(out, kq, at, &mut word, name, b);
                continue;
            }
            let (w0, shift) = (at / 4, (at % 4) * 8);
            let mut args = Vec::with_capacity(form.words);
            for t in 0..form.words {
                let a = word(out, w0 + t);
                if shift == 0 {
                    args.push(a);
                } else {
                    // a word past the group holds only bytes past the block
                    let b2 = if w0 + t + 1 < group_words {
                        word(out, w0 + t + 1)
                    } else {
                        "0u".to_string()
                    };
                    args.push(format!("realign({a}, {b2}, {shift}u)"));
                }
            }
            let j = b % GROUPS;
            let _ = writeln!(
                out,
                "    {name}_{j} = block_dot({}, {}u, {name}_{j});",
                args.join(", "),
                form.elems * b
            );
        }
        let _ = writeln!(out, "    var {name} = hold({name}_0.x);");
        for j in 0..GROUPS {
            for f in ["x", "y", "z", "w"] {
                if j > 0 || f != "x" {
                    let _ = writeln!(out, "    {name} = {name} + hold({name}_{j}.{f});");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
