//! The RMSNorm between a chain's levels (docs/runner-deepseek-v4.md "Chained products"): the
//! query LoRA's `q_norm` over `wq_a`'s output, so that the layer's input projections and the
//! query LoRA's products are one submit. The op reads the earlier product's output where it lies
//! (its prepared output buffer, at the link's first row) and writes the normalised values, which
//! the chain copies into the next level's window. [`GpuLinears`]'s `Linears::rmsnorm` runs the
//! same kernel with the same parameters alone, so a chain gives the same bits on either path.

use std::sync::Arc;

use kernels::gpu::{Bind, Compiled, Gpu};
use kernels::{grid_2d, Kernel, RmsNormParams};

use super::super::error::V4Error;
use super::super::linear::tensor_err;
use super::GpuLinears;

/// Alignment of the offset at which the op may read an earlier output (the largest storage
/// offset alignment WebGPU allows an adapter to ask for).
pub(super) const READ_ALIGN: usize = 256;

/// Which op: the stem and first row of the output it normalises, its length, and the weight
/// vector's address (a model's norm weights live as long as it does).
pub(super) type NormKey = (String, usize, usize, usize);

/// One token's RMSNorm of a prepared product's output, ready to record.
pub(super) struct NormOp {
    pub(super) compiled: Arc<Compiled>,
    pub(super) group: wgpu::BindGroup,
    pub(super) groups: (u32, u32, u32),
    pub(super) out: wgpu::Buffer,
    /// Kept alive for the bind group.
    _params: wgpu::Buffer,
    _weight: wgpu::Buffer,
}

impl NormOp {
    /// The op over `n` values of `y` from byte `offset` (a multiple of [`READ_ALIGN`]).
    pub(super) fn new(
        g: &Gpu,
        y: &wgpu::Buffer,
        offset: u64,
        weight: &[f32],
        eps: f64,
    ) -> Result<Self, V4Error> {
        let n = weight.len();
        let (params, groups) = params(n, 1, eps)?;
        let params = g.uniform("rmsnorm params", bytemuck::bytes_of(&params));
        let wb = g.upload_f32("rmsnorm weight", weight)?;
        let out = g.zeros("rmsnorm out", (n * 4) as u64)?;
        let compiled = g.compiled(Kernel::RmsNorm);
        let x = Bind {
            buffer: y,
            offset,
            size: Some((n * 4) as u64),
        };
        let group = g.bind_group_for(
            &compiled,
            Kernel::RmsNorm,
            &params.as_entire_binding(),
            &[x, Bind::from(&wb), Bind::from(&out)],
        )?;
        Ok(Self {
            compiled,
            group,
            groups,
            out,
            _params: params,
            _weight: wb,
        })
    }
}

/// The kernel's parameters and grid for `tokens` rows of `n` values (one workgroup a token; the
/// row's arithmetic does not depend on `tokens`).
fn params(n: usize, tokens: usize, eps: f64) -> Result<(RmsNormParams, (u32, u32, u32)), V4Error> {
    let count = |v: usize, what: &str| {
        u32::try_from(v).map_err(|_| V4Error::Input(format!("RMSNorm of {v} {what}")))
    };
    let (gx, gy) = grid_2d(count(tokens, "tokens")?);
    let p = RmsNormParams {
        n: count(n, "values")?,
        tokens: count(tokens, "tokens")?,
        eps: eps as f32,
        groups_x: gx,
    };
    Ok((p, (gx, gy, 1)))
}

impl GpuLinears {
    /// `Linears::rmsnorm` on the device: the chain's op alone, over every row of `x`.
    pub(super) fn rmsnorm_alone(
        &self,
        x: &[f32],
        weight: &[f32],
        eps: f64,
    ) -> Result<Vec<f32>, V4Error> {
        let n = weight.len();
        if n == 0 || x.len() % n != 0 {
            return Err(V4Error::Input(format!(
                "RMSNorm of {} values in rows of {n}",
                x.len()
            )));
        }
        let g = self.engine.gpu();
        let (xb, wb) = (
            g.upload_f32("rmsnorm x", x)?,
            g.upload_f32("rmsnorm w", weight)?,
        );
        let yb = g.zeros("rmsnorm out", (x.len() * 4) as u64)?;
        // the engine's RMSNorm: the op's kernel and parameters (`params`), every row at once
        self.engine
            .rmsnorm(&xb, &wb, &yb, n, x.len() / n, eps as f32)?;
        Ok(g.read_f32(&yb, x.len())?)
    }

    /// The op of key `key`, made at its first use over `stem`'s prepared output.
    pub(super) fn norm_op(
        &mut self,
        key: &NormKey,
        weight: &[f32],
        eps: f64,
    ) -> Result<&NormOp, V4Error> {
        if !self.norms.contains_key(key) {
            let g = self.engine.gpu();
            let y = self
                .prepared
                .get(&key.0)
                .and_then(Option::as_ref)
                .ok_or_else(|| tensor_err(&key.0, "has no prepared product to normalise".into()))?
                .y()?;
            let op = NormOp::new(g, y, (key.1 * 4) as u64, weight, eps)?;
            self.norms.insert(key.clone(), op);
        }
        self.norms
            .get(key)
            .ok_or_else(|| tensor_err(&key.0, "lost its RMSNorm op".into()))
    }
}
