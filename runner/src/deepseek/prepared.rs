//! One-token products of resident matrices, prepared once and run in batches
//! (docs/runner-deepseek-v4.md "Batched products").
//!
//! A [`Prepared`] product holds its pipeline and parameter block and, for each x window slot it
//! has been run with, a bind group and an output buffer, so running it again allocates nothing.
//! [`run_batch`] writes each distinct input into its own 64 KiB uniform window
//! ([`BatchBuffers`]), records every product of the batch into one compute pass, copies the
//! outputs into the one shared read-back buffer and submits and maps once: a V4 layer's
//! independent products (the attention's projections of the normalised input, the routed and
//! shared experts' gate/up products, the grouped output projection) cost one device round trip
//! each group instead of one each product.
//!
//! The program is the unrolled one-token module where the format and K have one, else the looped
//! kernel with its input as a uniform block (`Kernel::uniform_x_source`); on a GPU mapping the
//! looped kernel reading the window as storage. All give the bits of
//! the looped kernel over a storage input (kernels tests/matmul.rs), so batching changes no
//! logit.

use std::sync::Arc;

use kernels::generated::Generated;
use kernels::gpu::{matmul_launch, Bind, Compiled, Gpu, MatvecShape};
use kernels::{unrolled, UNIFORM_X_ELEMENTS};

use crate::engine::ResidentMatrix;

use super::error::V4Error;
use super::linear::tensor_err;

/// Distinct inputs one submit holds at most (one 64 KiB window each); a larger batch is split.
pub const MAX_SLOTS: usize = 16;

/// Bytes of one window.
pub const WINDOW_BYTES: u64 = (UNIFORM_X_ELEMENTS * 4) as u64;

/// The buffers a batch shares: the uniform windows the prepared products read their inputs
/// from, made as slots are first needed, and one read-back buffer every output is copied into
/// (grown when a batch needs more), so a batch is one map.
#[derive(Default)]
pub struct BatchBuffers {
    windows: Vec<wgpu::Buffer>,
    staging: Option<(wgpu::Buffer, u64)>,
    /// Where the input windows are written from (`Gpu::write_in`).
    belt: Option<kernels::gpu::Staging>,
}

impl BatchBuffers {
    /// The staging memory the windows are written from (made at first use).
    pub fn belt(&mut self, g: &Gpu) -> &mut kernels::gpu::Staging {
        self.belt.get_or_insert_with(|| g.write_staging())
    }

    /// Window `slot` (made, with those below it, at first use).
    pub fn window(&mut self, g: &Gpu, slot: usize) -> &wgpu::Buffer {
        while self.windows.len() <= slot {
            self.windows
                .push(g.input_window("x window", &vec![0u8; WINDOW_BYTES as usize]));
        }
        &self.windows[slot]
    }

    /// The read-back buffer, at least `bytes` long.
    pub(super) fn staging(&mut self, g: &Gpu, bytes: u64) -> &wgpu::Buffer {
        let cap = self.staging.as_ref().map_or(0, |(_, c)| *c);
        if cap < bytes {
            self.staging = None;
        }
        let size = bytes.max(2 * cap);
        &self
            .staging
            .get_or_insert_with(|| (g.staging("v4 batch readback", size), size))
            .0
    }
}

/// What a prepared product runs.
enum Program {
    Unrolled(Arc<Generated>),
    UniformX(kernels::Kernel),
    /// The looped kernel in the adapter's mapping, its input window bound as storage (a GPU).
    StorageX(kernels::Kernel),
    /// A `kernels::looped` module (a GPU's fused or expert-indexed product).
    Looped(Arc<Generated>),
}

/// One matrix's one-token product, ready to run from any window slot: one output buffer (a
/// submit runs a product at most once) and a bind group per slot it has read from.
pub struct Prepared {
    program: Program,
    compiled: Arc<Compiled>,
    params: wgpu::Buffer,
    groups: (u32, u32, u32),
    rows: usize,
    y: Option<wgpu::Buffer>,
    slots: Vec<Option<wgpu::BindGroup>>,
    /// An expert-indexed product's picks (bound ahead of the weight words).
    picks: Option<wgpu::Buffer>,
}

impl Prepared {
    /// The product of `m` (one part, K within a window): on a `Rows` adapter through
    /// `unrolled` when given, else the looped kernel with a uniform input; on the others the
    /// looped kernel in the adapter's mapping reading the window as storage. `None` where the
    /// form cannot be made (the caller then uses the general matmul path).
    pub fn new(
        g: &Gpu,
        m: &ResidentMatrix,
        unrolled_module: Option<Arc<Generated>>,
    ) -> Option<Self> {
        if m.parts.len() != 1 || m.k > UNIFORM_X_ELEMENTS {
            return None;
        }
        let kernel = m.format.matvec_kernel();
        let mut params = m
            .format
            .params(m.rows as u32, m.k as u32, 1, m.rows as u32, 0);
        let (program, compiled, groups) = match (unrolled_module, g.matvec_shape()) {
            (Some(module), MatvecShape::Rows) => {
                let groups = unrolled::launch_for(m.format, m.k, &mut params);
                let compiled = g.compiled_generated(&module);
                (Program::Unrolled(module), compiled, groups)
            }
            (None, MatvecShape::Rows) => {
                let compiled = g.compiled_uniform_x(kernel)?;
                let groups = matmul_launch(MatvecShape::Rows, kernel, &mut params);
                (Program::UniformX(kernel), compiled, groups)
            }
            (_, shape) => {
                let groups = matmul_launch(shape, kernel, &mut params);
                (Program::StorageX(kernel), g.compiled(kernel), groups)
            }
        };
        Some(Self {
            program,
            compiled,
            params: g.uniform("params", bytemuck::bytes_of(&params)),
            groups,
            rows: m.rows,
            y: None,
            slots: Vec::new(),
            picks: None,
        })
    }

    /// The fused gate/up product with the clamped SwiGLU of an MLP whose gate and up rows `m`
    /// holds one after the other (`module`: for `m`'s format, K, `ffn` and limit,
    /// `kernels::unrolled::gate_up_clamped` on a `Rows` adapter, `kernels::looped::
    /// gate_up_clamped` elsewhere): its output is the `ffn` activations. `None` where `m` is not
    /// such a matrix.
    pub fn gate_up(
        g: &Gpu,
        m: &ResidentMatrix,
        module: Arc<Generated>,
        ffn: usize,
    ) -> Option<Self> {
        if m.parts.len() != 1 || m.k > UNIFORM_X_ELEMENTS || m.rows != 2 * ffn {
            return None;
        }
        let kernel = m.format.matvec_kernel();
        let mut params = m.format.params(ffn as u32, m.k as u32, 1, 0, 0);
        let groups = matmul_launch(g.matvec_shape(), kernel, &mut params);
        Some(Self::generated(g, module, &params, groups, ffn, None))
    }

    /// A prepared product running `module` (a `kernels::unrolled` module on a `Rows` adapter,
    /// a `kernels::looped` one elsewhere).
    fn generated(
        g: &Gpu,
        module: Arc<Generated>,
        params: &kernels::MatmulParams,
        groups: (u32, u32, u32),
        rows: usize,
        picks: Option<&wgpu::Buffer>,
    ) -> Self {
        let compiled = g.compiled_generated(&module);
        let program = match g.matvec_shape() {
            MatvecShape::Rows => Program::Unrolled(module),
            _ => Program::Looped(module),
        };
        Self {
            program,
            compiled,
            params: g.uniform("params", bytemuck::bytes_of(params)),
            groups,
            rows,
            y: None,
            slots: Vec::new(),
            picks: picks.cloned(),
        }
    }

    /// Pick slot `slot` of an expert-indexed product over `stack` (docs/kernels.md "Experts by
    /// index"): `module` is `gate_up_clamped_by_index` / `gate_up_clamped` with experts
    /// (`gate_up`: `rows` is the MLPs' `ffn`) or `source_by_index` / `matvec_by_index` (`rows`
    /// is each matrix's rows), of `kernels::unrolled` on a `Rows` adapter and
    /// `kernels::looped` elsewhere; the matrix is the one `picks[slot]` names when the product
    /// runs. `None` where `stack` is not one part.
    pub fn by_index(
        g: &Gpu,
        stack: &ResidentMatrix,
        module: Arc<Generated>,
        rows: usize,
        gate_up: bool,
        slot: usize,
        picks: &wgpu::Buffer,
    ) -> Option<Self> {
        if stack.parts.len() != 1 || stack.k > UNIFORM_X_ELEMENTS {
            return None;
        }
        let f = stack.format;
        let mut params = if gate_up {
            f.params(rows as u32, stack.k as u32, 1, 0, 0)
        } else {
            f.params(rows as u32, stack.k as u32, 1, rows as u32, 0)
        };
        let groups = match g.matvec_shape() {
            MatvecShape::Rows if !gate_up => unrolled::launch_for(f, stack.k, &mut params),
            shape => matmul_launch(shape, f.matvec_kernel(), &mut params),
        };
        params.position = u32::try_from(slot).ok()?;
        Some(Self::generated(
            g,
            module,
            &params,
            groups,
            rows,
            Some(picks),
        ))
    }

    /// Makes the bind group of `slot` (reading `window`), and the output at the first bind, if
    /// it has none yet.
    pub fn bind(
        &mut self,
        g: &Gpu,
        m: &ResidentMatrix,
        slot: usize,
        window: &wgpu::Buffer,
    ) -> Result<(), V4Error> {
        if self.slots.get(slot).is_some_and(Option::is_some) {
            return Ok(());
        }
        let [part] = m.parts.as_slice() else {
            return Err(tensor_err(
                &m.name,
                "a prepared product needs a one-part matrix".into(),
            ));
        };
        if self.y.is_none() {
            self.y = Some(g.zeros("y", (self.rows * 4) as u64)?);
        }
        let y = self.y()?;
        let w = part.row_buffers();
        let window = Bind {
            buffer: window,
            offset: 0,
            size: Some(WINDOW_BYTES),
        };
        let group = match &self.program {
            Program::Unrolled(module) | Program::Looped(module) => {
                let mut binds = vec![Bind::from(&self.params), window, Bind::from(y), w.packed];
                binds.extend(w.scales);
                binds.extend(w.biases);
                binds.extend(self.picks.as_ref().map(Bind::from));
                if matches!(self.program, Program::Unrolled(_)) {
                    // (an unrolled module reads the weights a second time as words)
                    binds.push(w.packed);
                }
                g.bind_group_generated(&self.compiled, module, &binds)?
            }
            Program::UniformX(kernel) | Program::StorageX(kernel) => {
                let mut binds = vec![window, Bind::from(y), w.packed];
                binds.extend(w.scales);
                binds.extend(w.biases);
                g.bind_group_for(
                    &self.compiled,
                    *kernel,
                    &self.params.as_entire_binding(),
                    &binds,
                )?
            }
        };
        if self.slots.len() <= slot {
            self.slots.resize_with(slot + 1, || None);
        }
        self.slots[slot] = Some(group);
        Ok(())
    }

    fn slot(&self, slot: usize) -> Result<&wgpu::BindGroup, V4Error> {
        self.slots
            .get(slot)
            .and_then(Option::as_ref)
            .ok_or_else(|| V4Error::Input(format!("x window slot {slot} was not bound")))
    }

    /// The output buffer (made at the first [`Prepared::bind`]).
    pub fn y(&self) -> Result<&wgpu::Buffer, V4Error> {
        self.y
            .as_ref()
            .ok_or_else(|| V4Error::Input("a prepared product was run before it was bound".into()))
    }

    /// Output rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Records this product reading window `slot` into `pass`.
    pub fn record(
        &self,
        g: &Gpu,
        pass: &mut wgpu::ComputePass<'_>,
        slot: usize,
    ) -> Result<(), V4Error> {
        g.dispatch_in(pass, &self.compiled, self.slot(slot)?, self.groups);
        Ok(())
    }
}

/// Runs `batch` (products with the window slot each reads) in one submit after writing
/// `inputs[s]` into window `s`, every output copied into the shared read-back buffer and mapped
/// once; returns each product's output rows, in order.
pub fn run_batch(
    g: &Gpu,
    buffers: &mut BatchBuffers,
    inputs: &[&[f32]],
    batch: &[(&Prepared, usize)],
) -> Result<Vec<Vec<f32>>, V4Error> {
    let mut enc = g.encoder("v4 batched products");
    for (s, x) in inputs.iter().enumerate() {
        let window = buffers.window(g, s).clone();
        g.write_in(
            buffers.belt(g),
            &mut enc,
            &window,
            0,
            bytemuck::cast_slice(x),
        );
    }
    {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        for (p, s) in batch {
            p.record(g, &mut pass, *s)?;
        }
    }
    let total: u64 = batch.iter().map(|(p, _)| (p.rows * 4) as u64).sum();
    let staging = buffers.staging(g, total).clone();
    let mut offset = 0;
    for (p, _) in batch {
        let bytes = (p.rows * 4) as u64;
        enc.copy_buffer_to_buffer(p.y()?, 0, &staging, offset, bytes);
        offset += bytes;
    }
    g.submit_staged(buffers.belt(g), enc.finish());
    let mut out = Vec::with_capacity(total as usize);
    g.read_staging(&staging, total, &mut out)?;
    let mut rest = out.as_slice();
    let mut ys = Vec::with_capacity(batch.len());
    for (p, _) in batch {
        let (y, tail) = rest.split_at((p.rows * 4).min(rest.len()));
        ys.push(
            y.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        );
        rest = tail;
    }
    Ok(ys)
}
