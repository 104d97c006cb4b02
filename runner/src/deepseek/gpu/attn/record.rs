//! Recording one layer's attention of a one-token step ([`super`]).

use kernels::gpu::{Bind, Gpu};
use kernels::{Kernel, V4AttendParams, V4CompressParams, V4IndexParams};

use super::super::super::attention::{AttnParams, StepRope};
use super::super::super::config::{LayerKind, V4Config};
use super::super::super::error::V4Error;
use super::super::super::linear::tensor_err;
use super::super::GpuLinears;
use super::{grow, CompDev, Groups, LayerAttn};

/// A compressor's parameters for the token at `pos`.
fn compress_params(d: &CompDev, pos: usize, rope: &StepRope, eps: f32) -> V4CompressParams {
    let r = d.sh.ratio;
    let closes = (pos + 1) % r == 0;
    V4CompressParams {
        ratio: r as u32,
        coff: d.sh.coff as u32,
        dim: d.sh.dim as u32,
        slot: (pos % r) as u32,
        emit: u32::from(closes),
        entry: if closes {
            ((pos + 1) / r - 1) as u32
        } else {
            0
        },
        pairs: rope.pairs as u32,
        table_row: rope.entry_row(r).unwrap_or(0),
        kv_at: d.kv_at,
        gate_at: d.gate_at,
        eps,
        _pad0: 0,
    }
}

/// The output buffers of the products a layer's kernels read, by matrix name.
type Outputs = std::collections::HashMap<String, wgpu::Buffer>;

fn out_of<'a>(outs: &'a Outputs, name: &str) -> Result<&'a wgpu::Buffer, V4Error> {
    outs.get(name)
        .ok_or_else(|| tensor_err(name, "has no output buffer yet".into()))
}

fn compress_group(
    g: &Gpu,
    d: &CompDev,
    table: &wgpu::Buffer,
    outs: &Outputs,
) -> Result<wgpu::BindGroup, V4Error> {
    let compiled = g.compiled(Kernel::V4Compress);
    Ok(g.bind_group_for(
        &compiled,
        Kernel::V4Compress,
        &d.params.as_entire_binding(),
        &[
            Bind::from(out_of(outs, &d.src)?),
            Bind::from(&d.ape),
            Bind::from(&d.norm),
            Bind::from(table),
            Bind::from(&d.state),
            Bind::from(&d.entries),
        ],
    )?)
}

/// The layer's bind groups over its current buffers.
fn groups(
    g: &Gpu,
    l: &LayerAttn,
    table: &wgpu::Buffer,
    out: &wgpu::Buffer,
    dummy: &wgpu::Buffer,
    outs: &Outputs,
) -> Result<Groups, V4Error> {
    let comp = l
        .comp
        .as_ref()
        .map(|d| compress_group(g, d, table, outs))
        .transpose()?;
    let idx = l
        .idx
        .as_ref()
        .map(|d| compress_group(g, d, table, outs))
        .transpose()?;
    let (mut score, mut topk) = (None, None);
    if let (Some(d), Some(scores), Some(iq), Some(w)) = (&l.idx, &l.scores, &l.iq, &l.w) {
        let compiled = g.compiled(Kernel::V4IndexScore);
        score = Some(g.bind_group_for(
            &compiled,
            Kernel::V4IndexScore,
            &l.index_params.as_entire_binding(),
            &[
                Bind::from(out_of(outs, &iq.0)?),
                Bind::from(out_of(outs, &w.0)?),
                Bind::from(&d.entries),
                Bind::from(table),
                Bind::from(scores),
            ],
        )?);
        let compiled = g.compiled(Kernel::V4IndexTopk);
        topk = Some(g.bind_group_for(
            &compiled,
            Kernel::V4IndexTopk,
            &l.index_params.as_entire_binding(),
            &[Bind::from(scores), Bind::from(&l.list)],
        )?);
    }
    let entries = l.comp.as_ref().map_or(dummy, |d| &d.entries);
    let compiled = g.compiled(Kernel::V4Attend);
    let attend = g.bind_group_for(
        &compiled,
        Kernel::V4Attend,
        &l.attend_params.as_entire_binding(),
        &[
            Bind::from(out_of(outs, &l.q.0)?),
            Bind::from(out_of(outs, &l.kv.0)?),
            Bind::from(&l.kv_norm),
            Bind::from(&l.sinks),
            Bind::from(table),
            Bind::from(&l.ring),
            Bind::from(entries),
            Bind::from(&l.list),
            Bind::from(out),
        ],
    )?;
    Ok(Groups {
        comp,
        idx,
        score,
        topk,
        attend,
    })
}

/// What the attention kernel reads of the entries at `pos`: (mode, n).
fn seen(c: &V4Config, kind: LayerKind, pos: usize) -> (u32, usize) {
    match kind {
        LayerKind::Sliding => (0, 0),
        LayerKind::Hca => (1, (pos + 1) / 128),
        LayerKind::Csa => (2, ((pos + 1) / 4).min(c.index_topk)),
    }
}

impl GpuLinears {
    /// The output buffers of the products layer `layer`'s kernels read.
    fn layer_outputs(&self, layer: usize) -> Result<Outputs, V4Error> {
        let Some(l) = self.attn.as_ref().and_then(|a| a.layers.get(&layer)) else {
            return Ok(Outputs::new());
        };
        let mut names: Vec<&String> = vec![&l.q.0, &l.kv.0];
        names.extend(l.iq.iter().chain(&l.w).map(|x| &x.0));
        names.extend(l.comp.iter().chain(&l.idx).map(|d| &d.src));
        names
            .into_iter()
            .map(|n| Ok((n.clone(), self.product_out(n)?.clone())))
            .collect()
    }

    /// Records layer `layer`'s attention of the token at `pos` (module docs of [`super`]).
    pub(in crate::deepseek::gpu) fn record_attend(
        &mut self,
        c: &V4Config,
        layer: usize,
        p: &AttnParams,
        pos: usize,
        rope: &StepRope,
    ) -> Result<(), V4Error> {
        let eps = c.eps as f32;
        let (mode, n) = seen(c, p.kind, pos);
        if p.kind == LayerKind::Hca && c.window + n > kernels::reference::MAX_ATTN_KEYS {
            return Err(tensor_err(
                &p.stem,
                format!(
                    "attends {} keys at position {pos}: the device kernel takes 2048",
                    c.window + n
                ),
            ));
        }
        self.layer_attn(c, layer, p)?;
        let outs = self.layer_outputs(layer)?;
        let mut enc = self.open_encoder();
        let g = self.engine.gpu();
        let a = self
            .attn
            .as_mut()
            .ok_or_else(|| tensor_err(&p.stem, "lost its device attention".into()))?;
        let (table, out, dummy) = (a.table.clone(), a.out.clone(), a.dummy.clone());
        let l = a
            .layers
            .get_mut(&layer)
            .ok_or_else(|| tensor_err(&p.stem, "lost its device attention".into()))?;
        let mut stale = false;
        if let Some(d) = l.comp.as_mut() {
            stale |= grow(g, d, (pos + 1) / d.sh.ratio, &mut enc)?;
        }
        if let Some(d) = l.idx.as_mut() {
            if grow(g, d, (pos + 1) / d.sh.ratio, &mut enc)? {
                l.scores = Some(g.zeros("v4 index scores", (d.cap * 4) as u64)?);
                stale = true;
            }
        }
        if stale || l.groups.is_none() {
            l.groups = Some(groups(g, l, &table, &out, &dummy, &outs)?);
        }
        let belt = self.buffers.belt(g);
        for d in [&l.comp, &l.idx].into_iter().flatten() {
            let params = compress_params(d, pos, rope, eps);
            g.write_in(belt, &mut enc, &d.params, 0, bytemuck::bytes_of(&params));
        }
        let causal = (pos + 1) / 4;
        let (gx, gy) = kernels::grid_2d((causal as u32).max(1));
        let ip = V4IndexParams {
            heads: c.index_heads as u32,
            dim: c.index_head_dim as u32,
            n: causal as u32,
            pairs: rope.pairs as u32,
            table_row: 1,
            q_at: l.iq.as_ref().map_or(0, |x| x.1),
            w_at: l.w.as_ref().map_or(0, |x| x.1),
            k: c.index_topk as u32,
            groups_x: gx,
            _pad0: 0,
            _pad1: 0,
            _pad2: 0,
        };
        g.write_in(belt, &mut enc, &l.index_params, 0, bytemuck::bytes_of(&ip));
        let ap = V4AttendParams {
            heads: c.heads as u32,
            dim: c.head_dim as u32,
            window: c.window as u32,
            pos: pos as u32,
            lo: (pos + 1).saturating_sub(c.window) as u32,
            mode,
            n: n as u32,
            pairs: rope.pairs as u32,
            table_row: StepRope::query_row(p.kind),
            q_at: l.q.1,
            kv_at: l.kv.1,
            eps,
            scale: 1.0 / (c.head_dim as f32).sqrt(),
            _pad0: 0,
            _pad1: 0,
            _pad2: 0,
        };
        g.write_in(belt, &mut enc, &l.attend_params, 0, bytemuck::bytes_of(&ap));
        let gr = l
            .groups
            .as_ref()
            .ok_or_else(|| tensor_err(&p.stem, "lost its bind groups".into()))?;
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            for grp in [&gr.comp, &gr.idx].into_iter().flatten() {
                g.dispatch_in(&mut pass, &g.compiled(Kernel::V4Compress), grp, (1, 1, 1));
            }
            if let (Some(score), Some(topk), true) = (&gr.score, &gr.topk, causal > 0) {
                g.dispatch_in(
                    &mut pass,
                    &g.compiled(Kernel::V4IndexScore),
                    score,
                    (gx, gy, 1),
                );
                g.dispatch_in(&mut pass, &g.compiled(Kernel::V4IndexTopk), topk, (1, 1, 1));
            }
            let heads = c.heads as u32;
            g.dispatch_in(
                &mut pass,
                &g.compiled(Kernel::V4Attend),
                &gr.attend,
                (heads, 1, 1),
            );
        }
        self.open = Some(enc);
        Ok(())
    }
}
