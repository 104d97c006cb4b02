//! A one-token step's MoE routed on the device (docs/runner-deepseek-v4.md "Experts by
//! index"): the router's gate product over the block input and `moe_route.wgsl` write the picks
//! and their weights (the weights straight into the staging buffer the next mixer sums with);
//! where the layer's experts are stacks ([`super::stack`]), each pick slot's gate/up + SwiGLU
//! and down products run by index over them and their outputs are staged too, so the MoE
//! reads nothing back. A streamed backend reads the picks back (k ids) and loads those experts.
//!
//! Every op of a layer is made at its first use: the gate matrix (f32, the router's weights as
//! the model holds them), the bias and hash table, the route's bind group and the by-index
//! products of each pick slot; the windows the slots read are shared by the layers.

use std::sync::Arc;

use kernels::gpu::{Bind, Compiled, Gpu, MatvecShape};
use kernels::unrolled::{gate_up_clamped_by_index, source_by_index};
use kernels::{looped, Dtype, Kernel, MoeRouteParams, WeightFormat};

use super::super::error::V4Error;
use super::super::linear::tensor_err;
use super::super::prepared::{Prepared, WINDOW_BYTES};
use super::super::residual::Router;
use super::stack::Stacked;
use super::{device_limit, GpuLinears};
use crate::engine::ResidentMatrix;

/// One MoE's router and by-index products.
pub(super) struct RouteOp {
    gate: Prepared,
    compiled: Arc<Compiled>,
    group: wgpu::BindGroup,
    hash: bool,
    /// Per pick slot: the gate/up + SwiGLU product and the down product (empty where the
    /// experts are not stacks).
    slots: Vec<(Prepared, Prepared)>,
    _keep: Vec<wgpu::Buffer>,
    _gate: ResidentMatrix,
}

/// The buffers every layer's router shares.
pub(super) struct RouteBuffers {
    /// The block input as the products' uniform window.
    x: wgpu::Buffer,
    /// Each slot's activations as the down product's window.
    acts: Vec<wgpu::Buffer>,
    /// The picked expert ids (k, at most 16).
    pub picks: wgpu::Buffer,
    /// The token id a hash layer routes by.
    token: wgpu::Buffer,
}

impl RouteBuffers {
    pub(super) fn new(g: &Gpu) -> Result<Self, V4Error> {
        Ok(Self {
            x: g.input_window("moe x window", &vec![0u8; WINDOW_BYTES as usize]),
            acts: Vec::new(),
            picks: g.zeros("moe picks", 16 * 4)?,
            token: g.zeros("moe token", 16)?,
        })
    }

    fn act(&mut self, g: &Gpu, slot: usize) -> &wgpu::Buffer {
        while self.acts.len() <= slot {
            let w = g.input_window("moe act window", &vec![0u8; WINDOW_BYTES as usize]);
            self.acts.push(w);
        }
        &self.acts[slot]
    }
}

/// Whether `r` is a router the kernel takes for blocks of `d`.
fn fits(r: &Router<'_>, d: usize) -> bool {
    let n = r.experts;
    n > 0
        && n <= kernels::reference::MAX_EXPERTS
        && r.top_k > 0
        && r.top_k <= kernels::reference::MAX_TOP_K
        && r.gate.len() == n * d
        && r.bias.is_none_or(|b| b.len() == n)
        && r.table.is_some() != r.bias.is_some()
        && d <= kernels::UNIFORM_X_ELEMENTS
}

/// Makes MoE `r`'s ops over the shared buffers, `w` being the staged weights; `None` where the
/// adapter has no prepared product for the gate.
#[allow(clippy::too_many_arguments)]
fn make(
    g: &Gpu,
    engine: &crate::engine::Engine,
    r: &Router<'_>,
    d: usize,
    bufs: &mut RouteBuffers,
    w: &wgpu::Buffer,
    stacks: Option<(&Stacked, &ResidentMatrix, &ResidentMatrix)>,
) -> Result<Option<RouteOp>, V4Error> {
    let name = format!("{}.gate", r.ffn);
    let f32s = WeightFormat::Plain(Dtype::F32);
    let gate_m = engine.upload_matrix(
        &name,
        f32s,
        r.experts,
        d,
        [bytemuck::cast_slice(r.gate), &[], &[]],
        None,
    )?;
    let Some(mut gate) = Prepared::new(g, &gate_m, None) else {
        return Ok(None);
    };
    gate.bind(g, &gate_m, 0, &bufs.x)?;
    let bias = match r.bias {
        Some(b) => g.upload_f32("moe bias", b)?,
        None => g.zeros("moe no bias", (r.experts * 4) as u64)?,
    };
    let table = match r.table {
        Some(t) => g.upload("moe tid2eid", bytemuck::cast_slice(t))?,
        None => g.zeros("moe no table", 16)?,
    };
    let params = MoeRouteParams {
        experts: r.experts as u32,
        top_k: r.top_k as u32,
        hash: u32::from(r.table.is_some()),
        token_at: 0,
        scale: r.scale as f32,
        _pad0: 0,
        _pad1: 0,
        _pad2: 0,
    };
    let uniform = g.uniform("moe_route params", bytemuck::bytes_of(&params));
    let compiled = g.compiled(Kernel::MoeRoute);
    let group = g.bind_group_for(
        &compiled,
        Kernel::MoeRoute,
        &uniform.as_entire_binding(),
        &[
            Bind::from(gate.y()?),
            Bind::from(&bias),
            Bind::from(&table),
            Bind::from(&bufs.token),
            Bind::from(&bufs.picks),
            Bind::from(w),
        ],
    )?;
    let slots = match stacks {
        Some((st, s13, s2)) => slots(g, r, st, s13, s2, bufs)?,
        None => Vec::new(),
    };
    Ok(Some(RouteOp {
        gate,
        compiled,
        group,
        hash: r.table.is_some(),
        slots,
        _keep: vec![bias, table, uniform],
        _gate: gate_m,
    }))
}

/// The by-index products of each of `r`'s pick slots over stacks `s13` and `s2` (empty where
/// the format or shape has no indexed module).
fn slots(
    g: &Gpu,
    r: &Router<'_>,
    st: &Stacked,
    s13: &ResidentMatrix,
    s2: &ResidentMatrix,
    bufs: &mut RouteBuffers,
) -> Result<Vec<(Prepared, Prepared)>, V4Error> {
    let Some(limit) = device_limit(st.limit) else {
        return Ok(Vec::new());
    };
    let (m13, m2) = match g.matvec_shape() {
        MatvecShape::Rows => (
            gate_up_clamped_by_index(s13.format, s13.k, st.ffn, limit, st.experts),
            source_by_index(s2.format, s2.k, st.hidden, st.experts),
        ),
        _ => (
            looped::gate_up_clamped(s13.format, st.ffn, limit, Some(st.experts)),
            looped::matvec_by_index(s2.format, st.hidden, st.experts),
        ),
    };
    let (Some(m13), Some(m2)) = (m13, m2) else {
        return Ok(Vec::new());
    };
    let (m13, m2) = (Arc::new(m13), Arc::new(m2));
    let mut out = Vec::with_capacity(r.top_k);
    for s in 0..r.top_k {
        let a = Prepared::by_index(g, s13, Arc::clone(&m13), st.ffn, true, s, &bufs.picks);
        let b = Prepared::by_index(g, s2, Arc::clone(&m2), st.hidden, false, s, &bufs.picks);
        let (Some(mut a), Some(mut b)) = (a, b) else {
            return Ok(Vec::new());
        };
        a.bind(g, s13, 0, &bufs.x)?;
        let act = bufs.act(g, s).clone();
        b.bind(g, s2, 0, &act)?;
        out.push((a, b));
    }
    Ok(out)
}

impl GpuLinears {
    /// Records MoE `r`'s router over the block input (made at its first use); `false` where it
    /// cannot run on this device (nothing recorded).
    pub(super) fn record_route(&mut self, r: &Router<'_>) -> Result<bool, V4Error> {
        let (d, x) = {
            let s = self.state()?;
            (s.d, s.x.clone())
        };
        if !fits(r, d) {
            return Ok(false);
        }
        self.ensure_route(r, d)?;
        let mut enc = self.open_encoder();
        let g = self.engine.gpu();
        let Some(res) = self.residual.as_mut() else {
            return Err(tensor_err(r.ffn, "routes a block never mixed".into()));
        };
        let (Some(bufs), Some(Some(op))) = (res.route_bufs.as_ref(), res.routes.get(r.ffn)) else {
            self.open = Some(enc);
            return Ok(false);
        };
        enc.copy_buffer_to_buffer(&x, 0, &bufs.x, 0, (d * 4) as u64);
        if op.hash {
            let belt = self.buffers.belt(g);
            g.write_in(belt, &mut enc, &bufs.token, 0, bytemuck::bytes_of(&r.token));
        }
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            op.gate.record(g, &mut pass, 0)?;
            g.dispatch_in(&mut pass, &op.compiled, &op.group, (1, 1, 1));
        }
        self.open = Some(enc);
        Ok(true)
    }

    /// Makes MoE `r`'s ops if it has none (or a `None` where it cannot run here).
    fn ensure_route(&mut self, r: &Router<'_>, d: usize) -> Result<(), V4Error> {
        let g = self.engine.gpu();
        let w = {
            let Some(res) = self.residual.as_mut() else {
                return Ok(());
            };
            res.staged(g, r.top_k)?;
            if res.routes.contains_key(r.ffn) {
                return Ok(());
            }
            if res.route_bufs.is_none() {
                res.route_bufs = Some(RouteBuffers::new(g)?);
            }
            match res.moe.as_ref() {
                Some(s) => s.w.clone(),
                None => return Ok(()),
            }
        };
        let stacks = self.stacks.get(r.ffn).filter(|s| s.experts == r.experts);
        let stacks = match stacks {
            Some(st) => match (self.resident.get(&st.w13), self.resident.get(&st.w2)) {
                (Some(a), Some(b)) => Some((st, a, b)),
                _ => None,
            },
            None => None,
        };
        let Some(res) = self.residual.as_mut() else {
            return Ok(());
        };
        let Some(bufs) = res.route_bufs.as_mut() else {
            return Ok(());
        };
        let op = make(g, &self.engine, r, d, bufs, &w, stacks)?;
        res.routes.insert(r.ffn.to_owned(), op);
        Ok(())
    }

    /// Records the picked experts of MoE `ffn` by index and stages their outputs with the
    /// shared expert's (`shared`: its down product, already recorded); `false` (nothing
    /// recorded) where its experts are not stacks.
    pub(super) fn record_by_index(&mut self, ffn: &str, shared: &str) -> Result<bool, V4Error> {
        let shared_y = self.product_out(shared)?.clone();
        let mut enc = self.open_encoder();
        let g = self.engine.gpu();
        let Some(res) = self.residual.as_ref() else {
            return Err(tensor_err(
                ffn,
                "runs experts of a block never mixed".into(),
            ));
        };
        let (Some(bufs), Some(Some(op)), Some(staged)) = (
            res.route_bufs.as_ref(),
            res.routes.get(ffn),
            res.moe.as_ref(),
        ) else {
            self.open = Some(enc);
            return Ok(false);
        };
        if op.slots.is_empty() || op.slots.len() != staged.k {
            self.open = Some(enc);
            return Ok(false);
        }
        let row = (res.d * 4) as u64;
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            for (a, _) in &op.slots {
                a.record(g, &mut pass, 0)?;
            }
        }
        for (s, (a, _)) in op.slots.iter().enumerate() {
            let act = bufs
                .acts
                .get(s)
                .ok_or_else(|| tensor_err(ffn, "lost a window".into()))?;
            enc.copy_buffer_to_buffer(a.y()?, 0, act, 0, (a.rows() * 4) as u64);
        }
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            for (_, b) in &op.slots {
                b.record(g, &mut pass, 0)?;
            }
        }
        for (s, (_, b)) in op.slots.iter().enumerate() {
            enc.copy_buffer_to_buffer(b.y()?, 0, &staged.ys, s as u64 * row, row);
        }
        enc.copy_buffer_to_buffer(&shared_y, 0, &staged.ys, staged.k as u64 * row, row);
        self.open = Some(enc);
        Ok(true)
    }

    /// The picks of the last recorded route, read back (this submits what is recorded).
    pub(super) fn picks_back(&mut self, k: usize) -> Result<Vec<u32>, V4Error> {
        let picks = {
            let res = self.state()?;
            match res.route_bufs.as_ref() {
                Some(b) => b.picks.clone(),
                None => return Err(V4Error::Input("no route was recorded".into())),
            }
        };
        let bytes = self.submit_and_read(&picks, (k * 4) as u64)?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }
}
