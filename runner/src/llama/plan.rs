//! The recorded forward's static parts (docs/runner.md "Engine"): one uniform parameter block,
//! the list of operations with their bind groups (made once when the model opens), and the
//! parameters of each operation as a function of the chunk length `t` and the first position.
//!
//! Operations of the same kind and shape share one parameter slot (every layer's attention, for
//! instance), so a decode step rewrites only the few slots that depend on the position: RoPE's
//! table row and the KV-cache write offset, and attention's `pos0`.

use kernels::unrolled::Layout;
use std::collections::HashMap;
use std::sync::Arc;

use kernels::gpu::{elementwise_groups, matmul_launch, Compiled, Gpu, MatvecShape};
use kernels::{
    grid_2d, ActivationParams, ArgmaxParams, AttentionParams, EmbeddingParams, Kernel,
    RmsNormParams, RopeParams, WeightFormat,
};

use crate::error::RunError;
use crate::model::LlamaConfig;

/// How many rows an operation covers: the chunk's tokens, or one (the last position's head).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rows {
    Tokens,
    One,
}

/// What one operation computes; equal steps have equal parameters and share a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    Embed,
    Norm(Rows),
    /// `rows` weight rows from `row0` of a matrix with `y_stride` rows; `kv` writes into the KV
    /// cache at the chunk's first position; `accumulate` adds to `y` (a fused residual add).
    Matmul {
        format: WeightFormat,
        rows: usize,
        row0: usize,
        k: usize,
        y_stride: usize,
        kv: bool,
        accumulate: bool,
        tokens: Rows,
    },
    RopeQ,
    RopeK,
    Attention,
    Swiglu,
    Argmax,
    /// One-token attention norm, then Q/K/V projections of one combined matrix with RoPE fused,
    /// K and V written into the caches (`kernels::unrolled::qkv_rope`; `pairs` RoPE pairs of
    /// rows).
    QkvRope {
        format: WeightFormat,
        k: usize,
        pairs: usize,
    },
    /// One-token FFN norm, then gate and up projections of one combined matrix with SwiGLU
    /// fused (`kernels::unrolled::gate_up`).
    GateUp {
        format: WeightFormat,
        k: usize,
        ffn: usize,
    },
}

/// Which chunks an operation is recorded for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Always,
    /// One-token chunks (decode) only: a fused form of operations that `Many` ones perform.
    One,
    /// Chunks of more than one token only.
    Many,
}

impl When {
    pub fn serves(self, t: usize) -> bool {
        match self {
            When::Always => true,
            When::One => t == 1,
            When::Many => t > 1,
        }
    }
}

impl Step {
    /// The same step over `tokens` rows of input (the head's Last and All forms).
    pub fn with_tokens(mut self, rows: Rows) -> Step {
        if let Step::Matmul { tokens, .. } = &mut self {
            *tokens = rows;
        }
        self
    }
}

/// A step's parameter bytes and its workgroup grid.
pub type Launch = (Vec<u8>, (u32, u32, u32));

/// The shapes every step's parameters are made from.
pub struct Shapes {
    pub c: LlamaConfig,
    pub capacity: usize,
    pub embedding_code: u32,
    pub shape: MatvecShape,
}

fn u32_of(what: &'static str, v: usize) -> Result<u32, RunError> {
    u32::try_from(v).map_err(|_| RunError::Tensor {
        name: what.to_string(),
        detail: format!("{v} does not fit the kernels' u32 indexing"),
    })
}

impl Shapes {
    fn kv(&self) -> usize {
        self.c.n_kv_heads * self.c.head_dim
    }

    /// The kernel a step runs for a chunk of `t` tokens.
    pub fn kernel(&self, step: &Step, t: usize) -> Kernel {
        match step {
            Step::Embed => Kernel::Embedding,
            Step::Norm(_) => Kernel::RmsNorm,
            Step::Matmul { format, tokens, .. } => {
                if *tokens == Rows::One || t == 1 {
                    format.matvec_kernel()
                } else {
                    format.matmul_kernel()
                }
            }
            Step::QkvRope { format, .. } | Step::GateUp { format, .. } => format.matvec_kernel(),
            Step::RopeQ | Step::RopeK => Kernel::Rope,
            Step::Attention => Kernel::Attention,
            Step::Swiglu => Kernel::Swiglu,
            Step::Argmax => Kernel::Argmax,
        }
    }

    /// The parameter bytes and the grid of `step` for `t` tokens at positions `pos ..`.
    pub fn params(&self, step: &Step, t: usize, pos: usize) -> Result<Launch, RunError> {
        let c = &self.c;
        let t32 = u32_of("tokens", t)?;
        let rows_of = |r: Rows| if r == Rows::One { 1 } else { t32 };
        Ok(match *step {
            Step::Embed => {
                let (gx, gy) = grid_2d(t32);
                let p = EmbeddingParams {
                    dim: u32_of("dim", c.dim)?,
                    tokens: t32,
                    vocab: u32_of("vocab", c.vocab)?,
                    dtype: self.embedding_code,
                    groups_x: gx,
                    _pad: [0; 3],
                };
                (bytemuck::bytes_of(&p).to_vec(), (gx, gy, 1))
            }
            Step::Norm(r) => {
                let (gx, gy) = grid_2d(rows_of(r));
                let p = RmsNormParams {
                    n: u32_of("dim", c.dim)?,
                    tokens: rows_of(r),
                    eps: c.eps,
                    groups_x: gx,
                };
                (bytemuck::bytes_of(&p).to_vec(), (gx, gy, 1))
            }
            Step::Matmul {
                format,
                rows,
                row0,
                k,
                y_stride,
                kv,
                accumulate,
                tokens,
            } => {
                let y_offset = row0 + if kv { pos * self.kv() } else { 0 };
                let kernel = self.kernel(step, t);
                let mut p = format.params(
                    u32_of("rows", rows)?,
                    u32_of("k", k)?,
                    rows_of(tokens),
                    u32_of("y_stride", y_stride)?,
                    u32_of("y_offset", y_offset)?,
                );
                p.accumulate = u32::from(accumulate);
                let groups = match unrolled(self, step, t) {
                    Some((kernel, k)) => kernels::unrolled::launch(kernel, k, &mut p),
                    None => matmul_launch(self.shape, kernel, &mut p),
                };
                (bytemuck::bytes_of(&p).to_vec(), groups)
            }
            Step::RopeQ | Step::RopeK => {
                let (heads, v_offset) = match step {
                    Step::RopeK => (c.n_kv_heads, pos * self.kv()),
                    _ => (c.n_heads, 0),
                };
                let pairs = t * heads * (c.rot_dim / 2);
                let groups = elementwise_groups(u32_of("rope pairs", pairs)?);
                let p = RopeParams {
                    tokens: t32,
                    n_heads: u32_of("heads", heads)?,
                    head_dim: u32_of("head_dim", c.head_dim)?,
                    rot_dim: u32_of("rot_dim", c.rot_dim)?,
                    mode: c.rope_mode as u32,
                    groups_x: groups.0,
                    table_row0: u32_of("position", pos)?,
                    v_offset: u32_of("kv offset", v_offset)?,
                };
                (bytemuck::bytes_of(&p).to_vec(), groups)
            }
            Step::Attention => {
                let p = AttentionParams {
                    n_heads: u32_of("heads", c.n_heads)?,
                    n_kv_heads: u32_of("kv heads", c.n_kv_heads)?,
                    head_dim: u32_of("head_dim", c.head_dim)?,
                    tokens: t32,
                    pos0: u32_of("position", pos)?,
                    capacity: u32_of("capacity", self.capacity)?,
                    scale: 1.0 / (c.head_dim as f32).sqrt(),
                    _pad: 0,
                };
                (bytemuck::bytes_of(&p).to_vec(), (p.n_heads, t32, 1))
            }
            Step::Swiglu => {
                let n = u32_of("ffn elements", t * c.ffn)?;
                let groups = elementwise_groups(n);
                let p = ActivationParams::new(n, groups.0);
                (bytemuck::bytes_of(&p).to_vec(), groups)
            }
            Step::QkvRope { format, k, pairs } => {
                let kernel = format.matvec_kernel();
                let mut p = format.params(
                    u32_of("pairs", pairs)?,
                    u32_of("k", k)?,
                    1,
                    0,
                    u32_of("kv offset", pos * self.kv())?,
                );
                p.position = u32_of("position", pos)?;
                let groups = matmul_launch(MatvecShape::Rows, kernel, &mut p);
                (bytemuck::bytes_of(&p).to_vec(), groups)
            }
            Step::GateUp { format, k, ffn } => {
                let kernel = format.matvec_kernel();
                let mut p = format.params(u32_of("ffn", ffn)?, u32_of("k", k)?, 1, 0, 0);
                let groups = matmul_launch(MatvecShape::Rows, kernel, &mut p);
                (bytemuck::bytes_of(&p).to_vec(), groups)
            }

            Step::Argmax => {
                let p = ArgmaxParams {
                    n: u32_of("vocab", c.vocab)?,
                    rows: 1,
                    groups_x: 1,
                    _pad: 0,
                };
                (bytemuck::bytes_of(&p).to_vec(), (1, 1, 1))
            }
        })
    }
}

/// The uniform buffer every operation's parameters live in, one aligned slot per distinct
/// [`Step`], and a host mirror so only slots whose bytes change are written.
pub struct ParamBlock {
    pub buffer: wgpu::Buffer,
    slots: HashMap<Step, (u64, u64)>,
    mirror: HashMap<Step, Vec<u8>>,
}

/// Largest parameter struct (`MatmulParams`).
const SLOT_BYTES: u64 = 48;

impl ParamBlock {
    /// One slot for each distinct step of `steps`.
    pub fn new<'s>(gpu: &Gpu, steps: impl Iterator<Item = &'s Step>) -> Self {
        let align = u64::from(gpu.device().limits().min_uniform_buffer_offset_alignment).max(16);
        let stride = SLOT_BYTES.div_ceil(align) * align;
        let mut slots = HashMap::new();
        for s in steps {
            let next = slots.len() as u64 * stride;
            slots.entry(*s).or_insert((next, SLOT_BYTES));
        }
        let size = (slots.len() as u64 * stride).max(stride);
        let buffer = gpu.uniform("params", &vec![0u8; size as usize]);
        Self {
            buffer,
            slots,
            mirror: HashMap::new(),
        }
    }

    /// The binding of `step`'s slot.
    pub fn binding(&self, step: &Step) -> Result<wgpu::BindingResource<'_>, RunError> {
        let (offset, size) = self
            .slots
            .get(step)
            .copied()
            .ok_or_else(|| RunError::Tensor {
                name: format!("{step:?}"),
                detail: "no parameter slot (engine plan bug)".into(),
            })?;
        Ok(wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: &self.buffer,
            offset,
            size: wgpu::BufferSize::new(size),
        }))
    }

    /// `step`'s slot as a buffer window (for generated modules, which bind it like any buffer).
    pub fn bind(&self, step: &Step) -> Result<kernels::gpu::Bind<'_>, RunError> {
        let (offset, size) = self
            .slots
            .get(step)
            .copied()
            .ok_or_else(|| RunError::Tensor {
                name: format!("{step:?}"),
                detail: "no parameter slot (engine plan bug)".into(),
            })?;
        Ok(kernels::gpu::Bind {
            buffer: &self.buffer,
            offset,
            size: Some(size),
        })
    }

    /// Writes the parameters of every step for `t` tokens at `pos` whose bytes changed.
    pub fn update(
        &mut self,
        gpu: &Gpu,
        shapes: &Shapes,
        t: usize,
        pos: usize,
    ) -> Result<(), RunError> {
        for (step, (offset, _)) in &self.slots {
            let (mut bytes, _) = shapes.params(step, t, pos)?;
            bytes.resize(SLOT_BYTES as usize, 0);
            if self.mirror.get(step) != Some(&bytes) {
                gpu.write(&self.buffer, *offset, &bytes);
                self.mirror.insert(*step, bytes);
            }
        }
        Ok(())
    }
}

/// The unrolled matvec's (kernel, K) where it serves `step` for chunks of `t` tokens: a
/// one-row product on a CPU adapter whose format has one (docs/kernels.md "Unrolled matvec").
/// Its grid differs from the looped kernel's, so `Shapes::params` and `Op::new` both ask here.
fn unrolled(shapes: &Shapes, step: &Step, t: usize) -> Option<(Kernel, usize)> {
    let Step::Matmul { k, .. } = *step else {
        return None;
    };
    let kernel = shapes.kernel(step, t);
    (shapes.shape == MatvecShape::Rows
        && kernel.entry_point() == "matvec"
        && kernels::unrolled::available(kernel, k))
    .then_some((kernel, k))
}

/// The looped uniform-x pipeline and the 64 KiB window of `x` for a one-token matvec on a CPU
/// adapter without an unrolled form, where it is faster (docs/kernels.md "Uniform input"), when
/// K fits the block and the input buffer is at least that large.
fn uniform_x<'b>(
    gpu: &Gpu,
    shapes: &Shapes,
    step: &Step,
    t: usize,
    buffers: &[kernels::gpu::Bind<'b>],
) -> Option<(Arc<Compiled>, kernels::gpu::Bind<'b>)> {
    let Step::Matmul { k, .. } = *step else {
        return None;
    };
    let x = *buffers.first()?;
    if t != 1 || shapes.shape != MatvecShape::Rows || k > kernels::UNIFORM_X_ELEMENTS {
        return None;
    }
    let window = x_window(x)?;
    let compiled = gpu.compiled_uniform_x(shapes.kernel(step, t))?;
    Some((compiled, window))
}

/// `x` bound as the 64 KiB uniform window of the uniform-input kernels, if it is large enough.
fn x_window(x: kernels::gpu::Bind<'_>) -> Option<kernels::gpu::Bind<'_>> {
    let window = (kernels::UNIFORM_X_ELEMENTS * 4) as u64;
    (x.offset == 0 && x.buffer.size() >= window).then_some(kernels::gpu::Bind {
        buffer: x.buffer,
        offset: 0,
        size: Some(window),
    })
}

/// The unrolled matvec's pipeline and bind group over `buffers` = x, y, weights.
fn unrolled_op(
    gpu: &Gpu,
    params: &ParamBlock,
    step: &Step,
    (kernel, k): (Kernel, usize),
    buffers: &[kernels::gpu::Bind<'_>],
    layout: Layout,
) -> Result<(Arc<Compiled>, wgpu::BindGroup), RunError> {
    let bug = |detail: &str| RunError::Tensor {
        name: format!("{step:?}"),
        detail: format!("{detail} (engine plan bug)"),
    };
    let Step::Matmul { rows, .. } = *step else {
        return Err(bug("not a matrix product"));
    };
    let module = kernels::unrolled::source(kernel, k, rows, layout)
        .ok_or_else(|| bug("no unrolled module"))?;
    let (x, rest) = buffers.split_first().ok_or_else(|| bug("no input"))?;
    let x = x_window(*x).ok_or_else(|| bug("input smaller than the uniform window"))?;
    let words = *rest.get(1).ok_or_else(|| bug("no weights"))?;
    let mut binds = vec![params.bind(step)?, x];
    binds.extend_from_slice(rest);
    binds.push(words);
    let compiled = gpu.compiled_generated(&module);
    let group = gpu.bind_group_generated(&compiled, &module, &binds)?;
    Ok((compiled, group))
}

/// A streamed operation's tile: its index in the per-forward schedule and its ring slot.
#[derive(Debug, Clone, Copy)]
pub struct TileUse {
    pub index: usize,
    pub slot: usize,
}

/// How a dispatch of the one-token decode attention sizes its grid.
#[derive(Debug, Clone, Copy)]
enum DecodeGrid {
    /// One invocation per position 0 ..= pos (workgroups of 64).
    Positions,
    /// One workgroup per query head.
    Heads,
    /// One invocation per KV head and 4 dimensions (workgroups of 64).
    Values,
    /// The whole attention in one workgroup (`kernels::attention::single`), used instead of
    /// the three others while the context is at most `SINGLE_MAX_POSITIONS`.
    Single,
}

/// One recorded operation: the pipelines for a one-token and a many-token chunk, and their bind
/// groups (the same buffers; two groups because each pipeline has its own layout). Attention's
/// one-token form on a CPU adapter is instead the three generated decode kernels
/// (`kernels::attention`), which give the same bits.
pub struct Op {
    pub step: Step,
    pipelines: [Arc<Compiled>; 2],
    groups: [wgpu::BindGroup; 2],
    decode: Vec<(Arc<Compiled>, wgpu::BindGroup, DecodeGrid)>,
    pub tile: Option<TileUse>,
    pub when: When,
}

/// The generated module of a fused step over weights in `layout`, its input RMS-normalised on
/// the device with the model's eps (`None` for other steps, or where it cannot be made).
pub fn fused_module(
    c: &LlamaConfig,
    step: &Step,
    layout: Layout,
) -> Option<kernels::generated::Generated> {
    let norm = kernels::unrolled::InputNorm { eps: c.eps };
    match *step {
        Step::QkvRope { format, k, .. } => {
            if c.rot_dim != c.head_dim {
                return None;
            }
            let qkv = kernels::unrolled::QkvLayout {
                n_q: c.n_heads * c.head_dim,
                n_kv: c.n_kv_heads * c.head_dim,
                head_dim: c.head_dim,
                rope: c.rope_mode,
            };
            kernels::unrolled::qkv_rope(format.matvec_kernel(), k, &qkv, Some(norm), layout)
        }
        Step::GateUp { format, k, ffn } => {
            kernels::unrolled::gate_up(format.matvec_kernel(), k, ffn, Some(norm), layout)
        }
        _ => None,
    }
}

/// A fused step's pipeline and bind group over `buffers` = x (the raw residual stream), y,
/// weights, then the module's extra buffers and the norm's weights (x bound as a 64 KiB uniform
/// window).
fn fused_op(
    gpu: &Gpu,
    shapes: &Shapes,
    params: &ParamBlock,
    step: &Step,
    buffers: &[kernels::gpu::Bind<'_>],
    layout: Layout,
) -> Result<(Arc<Compiled>, wgpu::BindGroup), RunError> {
    let bug = |detail: &str| RunError::Tensor {
        name: format!("{step:?}"),
        detail: format!("{detail} (engine plan bug)"),
    };
    let module = fused_module(&shapes.c, step, layout).ok_or_else(|| bug("no fused module"))?;
    let window = (kernels::UNIFORM_X_ELEMENTS * 4) as u64;
    let x = buffers.first().ok_or_else(|| bug("no input"))?;
    if x.offset != 0 || x.buffer.size() < window {
        return Err(bug("input smaller than the uniform window"));
    }
    let mut binds = vec![params.bind(step)?];
    binds.push(kernels::gpu::Bind {
        size: Some(window),
        ..*x
    });
    binds.extend_from_slice(buffers.get(1..).unwrap_or(&[]));
    // the weights again, as the words the generated code loads
    binds.push(*buffers.get(2).ok_or_else(|| bug("no weights"))?);
    let compiled = gpu.compiled_generated(&module);
    let group = gpu.bind_group_generated(&compiled, &module, &binds)?;
    Ok((compiled, group))
}

/// The decode attention's dispatches over `buffers` = q, k cache, v cache, out, scores, totals;
/// empty where the adapter or the shape does not take them (then `attention.wgsl` serves one
/// token too).
fn decode_attention(
    gpu: &Gpu,
    shapes: &Shapes,
    params: &ParamBlock,
    buffers: &[kernels::gpu::Bind<'_>],
) -> Result<Vec<(Arc<Compiled>, wgpu::BindGroup, DecodeGrid)>, RunError> {
    let c = &shapes.c;
    let shape = kernels::attention::HeadShape {
        n_heads: c.n_heads,
        n_kv_heads: c.n_kv_heads,
        head_dim: c.head_dim,
    };
    let window = (kernels::UNIFORM_X_ELEMENTS * 4) as u64;
    let [q, k, v, out, scores, totals] = buffers else {
        return Ok(Vec::new());
    };
    let fits = q.offset == 0 && q.buffer.size() >= window && shapes.capacity.div_ceil(64) <= 65_535;
    let (Some(sg), Some(vg)) = (
        kernels::attention::scores(&shape),
        kernels::attention::values(&shape),
    ) else {
        return Ok(Vec::new());
    };
    if shapes.shape != MatvecShape::Rows || !fits {
        return Ok(Vec::new());
    }
    let pres = params.binding(&Step::Attention)?;
    let pb = params.bind(&Step::Attention)?;
    let qw = kernels::gpu::Bind {
        size: Some(window),
        ..*q
    };
    let cs = gpu.compiled_generated(&sg);
    let gs = gpu.bind_group_generated(&cs, &sg, &[pb, qw, *k, *scores])?;
    let soft = gpu.compiled(Kernel::AttnSoftmax);
    let gsm = gpu.bind_group(Kernel::AttnSoftmax, &pres, &[*scores, *totals])?;
    let cv = gpu.compiled_generated(&vg);
    let gv = gpu.bind_group_generated(&cv, &vg, &[pb, *scores, *v, *totals, *out])?;
    let mut ops = vec![
        (cs, gs, DecodeGrid::Positions),
        (soft, gsm, DecodeGrid::Heads),
        (cv, gv, DecodeGrid::Values),
    ];
    if let Some(og) = kernels::attention::single(&shape) {
        let co = gpu.compiled_generated(&og);
        let go = gpu.bind_group_generated(&co, &og, &[pb, qw, *k, *v, *scores, *out])?;
        ops.push((co, go, DecodeGrid::Single));
    }
    Ok(ops)
}

impl Op {
    /// Creates the pipelines and bind groups of `step` over `buffers`, whose weights are in
    /// `layout` (`Interleaved` only for a one-token op with a generated module: the chunk
    /// length it does not serve gets no pipeline of its own).
    pub fn new(
        gpu: &Gpu,
        shapes: &Shapes,
        params: &ParamBlock,
        (step, when): (Step, When),
        buffers: &[kernels::gpu::Bind<'_>],
        tile: Option<TileUse>,
        layout: Layout,
    ) -> Result<Self, RunError> {
        if let Step::QkvRope { .. } | Step::GateUp { .. } = step {
            let (p, g) = fused_op(gpu, shapes, params, &step, buffers, layout)?;
            return Ok(Self {
                step,
                pipelines: [Arc::clone(&p), p],
                groups: [g.clone(), g],
                decode: Vec::new(),
                tile,
                when,
            });
        }
        let (buffers, decode) = if step == Step::Attention {
            let decode = decode_attention(gpu, shapes, params, buffers)?;
            (buffers.get(..5).unwrap_or(buffers), decode)
        } else {
            (buffers, Vec::new())
        };
        let make = |t: usize| -> Result<(Arc<Compiled>, wgpu::BindGroup), RunError> {
            let kernel = shapes.kernel(&step, t);
            let binding = params.binding(&step)?;
            if let Some(form) = unrolled(shapes, &step, t) {
                return unrolled_op(gpu, params, &step, form, buffers, layout);
            }
            if let Some((compiled, x)) = uniform_x(gpu, shapes, &step, t, buffers) {
                let mut binds = buffers.to_vec();
                binds[0] = x;
                let group = gpu.bind_group_for(&compiled, kernel, &binding, &binds)?;
                return Ok((compiled, group));
            }
            let group = gpu.bind_group(kernel, &binding, buffers)?;
            Ok((gpu.compiled(kernel), group))
        };
        let [(p1, g1), (p2, g2)] = match when {
            // an op that serves one length needs that length's pipeline only
            When::One => {
                let one = make(1)?;
                [one.clone(), one]
            }
            When::Many => {
                let many = make(2)?;
                [many.clone(), many]
            }
            When::Always => {
                let one = make(1)?;
                let many = if shapes.kernel(&step, 1) == shapes.kernel(&step, 2) {
                    one.clone()
                } else {
                    make(2)?
                };
                [one, many]
            }
        };
        Ok(Self {
            step,
            pipelines: [p1, p2],
            groups: [g1, g2],
            decode,
            tile,
            when,
        })
    }

    /// Records this operation for a chunk of `t` tokens at `pos` into `pass`.
    pub fn record(
        &self,
        gpu: &Gpu,
        shapes: &Shapes,
        pass: &mut wgpu::ComputePass<'_>,
        t: usize,
        pos: usize,
    ) -> Result<(), RunError> {
        if !self.when.serves(t) {
            return Ok(());
        }
        if t == 1 && !self.decode.is_empty() {
            let c = &shapes.c;
            let has_single = self
                .decode
                .iter()
                .any(|d| matches!(d.2, DecodeGrid::Single));
            let single = has_single && pos < kernels::attention::SINGLE_MAX_POSITIONS;
            for (pipeline, group, grid) in &self.decode {
                if matches!(grid, DecodeGrid::Single) != single {
                    continue;
                }
                let n = match grid {
                    DecodeGrid::Positions => (pos + 1).div_ceil(64),
                    DecodeGrid::Heads => c.n_heads,
                    DecodeGrid::Values => (c.n_kv_heads * c.head_dim / 4).div_ceil(64),
                    DecodeGrid::Single => 1,
                };
                gpu.dispatch_in(pass, pipeline, group, (u32_of("workgroups", n)?, 1, 1));
            }
            return Ok(());
        }
        let i = usize::from(t > 1);
        let (_, groups) = shapes.params(&self.step, t, pos)?;
        gpu.dispatch_in(pass, &self.pipelines[i], &self.groups[i], groups);
        Ok(())
    }
}
