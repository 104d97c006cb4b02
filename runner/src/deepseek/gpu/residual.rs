//! [`Residual`] on the device (docs/runner-deepseek-v4.md "Device-resident residual"): the
//! token's streams, two slots of mixer coefficients (each mixer reads the previous one's and
//! writes its own), its block input, and the MoE's staged outputs and weights are buffers made at
//! the first step; each mixer is one dispatch of `hc_mix.wgsl` (the expansion after the block
//! before it, then the mixer) whose bind group is made at its first use. The calls record into
//! the backend's open encoder (`GpuLinears::open`), which the next read — a chain that reads an
//! output, or [`Residual::read_block`] — submits with everything recorded before it.

use std::collections::HashMap;
use std::sync::Arc;

use kernels::gpu::{Bind, Compiled, Gpu};
use kernels::{HcMixParams, Kernel};

use super::super::attention::{AttnCache, AttnParams, StepRope};
use super::super::config::V4Config;
use super::super::error::V4Error;
use super::super::linear::tensor_err;
use super::super::residual::{BlockOut, Experts, Mixer, Residual, Router};
use super::route::{RouteBuffers, RouteOp};
use super::GpuLinears;

/// Where a mixer's coefficients go in the mix buffer: slot 0 or 1, each 24 values apart.
const SLOT: u32 = 24;
/// Where the parts of a mixer's small parameters are (`hc_mix.wgsl` binding 3).
const SCALE_AT: usize = 24;
const NORM_AT: usize = 28;

/// One mixer's dispatch: its pipeline, bind group, and the buffers only it reads.
struct MixOp {
    compiled: Arc<Compiled>,
    group: wgpu::BindGroup,
    _keep: [wgpu::Buffer; 3],
}

/// The MoE's staged outputs (k + 1 rows) and weights.
pub(super) struct Staged {
    pub k: usize,
    pub ys: wgpu::Buffer,
    pub w: wgpu::Buffer,
}

/// The embedding table on the device, in chunks of whole rows that each fit a binding.
struct EmbedTable {
    vocab: usize,
    rows_per: usize,
    chunks: Vec<wgpu::Buffer>,
}

impl EmbedTable {
    fn new(g: &Gpu, table: &[f32], d: usize) -> Result<Self, V4Error> {
        let rows_per = (g.max_binding() / (d as u64 * 4)).max(1) as usize;
        let chunks = table
            .chunks(rows_per * d)
            .map(|rows| g.upload_f32("v4 embedding", rows))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            vocab: table.len() / d,
            rows_per,
            chunks,
        })
    }

    /// The chunk holding row `id` and the row's byte offset in it.
    fn row(&self, id: u32, d: usize) -> Option<(&wgpu::Buffer, u64)> {
        let id = Some(id as usize).filter(|&i| i < self.vocab)?;
        let chunk = self.chunks.get(id / self.rows_per)?;
        Some((chunk, ((id % self.rows_per) * d * 4) as u64))
    }
}

/// The residual's buffers and ops.
pub(super) struct DeviceResidual {
    hc: usize,
    pub d: usize,
    streams: wgpu::Buffer,
    /// Two slots of [pre hc | post hc | comb hc·hc].
    mix: wgpu::Buffer,
    /// The slot the last mixer wrote.
    last: u32,
    /// The last mixer's normalised block input.
    pub x: wgpu::Buffer,
    /// The weights' binding where the block output has none (a product's output), and the
    /// rows' and weights' where there is no expansion (one vec4, never read).
    no_weights: wgpu::Buffer,
    pub moe: Option<Staged>,
    /// The embedding, uploaded at the first step.
    embed: Option<EmbedTable>,
    /// Mixers by key, with the slot they write (a key runs in one place of the step).
    mixers: HashMap<(String, u32), MixOp>,
    /// The argmax op over a product's output (its bind group and the id's buffer), by stem.
    argmax: HashMap<String, (wgpu::BindGroup, wgpu::Buffer, wgpu::Buffer)>,
    /// Routers by MoE stem (`None`: it cannot run on this device), and their shared buffers
    /// ([`super::route`]).
    pub routes: HashMap<String, Option<RouteOp>>,
    pub route_bufs: Option<RouteBuffers>,
}

impl DeviceResidual {
    fn new(g: &Gpu, hc: usize, d: usize) -> Result<Self, V4Error> {
        Ok(Self {
            hc,
            d,
            streams: g.zeros("v4 streams", (hc * d * 4) as u64)?,
            mix: g.zeros("v4 mix", u64::from(2 * SLOT) * 4)?,
            last: 0,
            x: g.zeros("v4 block input", (d * 4) as u64)?,
            no_weights: g.zeros("v4 no weights", 16)?,
            moe: None,
            embed: None,
            mixers: HashMap::new(),
            argmax: HashMap::new(),
            routes: HashMap::new(),
            route_bufs: None,
        })
    }

    /// The block input's length and buffer (`Input::Block`).
    pub(super) fn block_len(&self) -> usize {
        self.d
    }

    pub(super) fn block(&self) -> &wgpu::Buffer {
        &self.x
    }

    /// Mixer `m` writing slot `cur`, expanding first with `after` (its rows, weights and k).
    fn mixer(
        &mut self,
        g: &Gpu,
        m: &Mixer<'_>,
        cur: u32,
        after: Option<(&wgpu::Buffer, &wgpu::Buffer, usize)>,
    ) -> Result<&MixOp, V4Error> {
        let key = (m.key.to_owned(), cur);
        if !self.mixers.contains_key(&key) {
            let op = self.make(g, m, cur, after)?;
            self.mixers.insert(key.clone(), op);
        }
        self.mixers
            .get(&key)
            .ok_or_else(|| tensor_err(m.key, "lost its mixer".into()))
    }

    fn make(
        &self,
        g: &Gpu,
        m: &Mixer<'_>,
        cur: u32,
        after: Option<(&wgpu::Buffer, &wgpu::Buffer, usize)>,
    ) -> Result<MixOp, V4Error> {
        let (hc, d) = (self.hc, self.d);
        let rows = if m.head { hc } else { (2 + hc) * hc };
        let p = m.params;
        let fits = p.weight.len() == rows * hc * d
            && p.base.len() == rows
            && p.scale.len() == if m.head { 1 } else { 3 }
            && m.norm.len() == d
            && d % 4 == 0
            && hc == kernels::reference::MAX_HC;
        if !fits {
            return Err(tensor_err(
                m.key,
                format!("is not an mHC mixer of {hc} streams of {d}"),
            ));
        }
        let mut small = vec![0f32; NORM_AT + d];
        small[..rows].copy_from_slice(&p.base);
        small[SCALE_AT..SCALE_AT + p.scale.len()].copy_from_slice(&p.scale);
        small[NORM_AT..].copy_from_slice(m.norm);
        let wfn = g.upload_f32("hc fn", &p.weight)?;
        let small = g.upload_f32("hc base, scale, norm", &small)?;
        let params = HcMixParams {
            hc: hc as u32,
            d: d as u32,
            iters: m.iters as u32,
            head: u32::from(m.head),
            eps: m.eps as f32,
            norm_eps: m.norm_eps as f32,
            expand: u32::from(after.is_some()),
            k: after.map_or(0, |(_, _, k)| k as u32),
            prev: SLOT - cur,
            cur,
            _pad0: 0,
            _pad1: 0,
        };
        let uniform = g.uniform("hc_mix params", bytemuck::bytes_of(&params));
        // (without an expansion neither is read)
        let (ys, w) = match after {
            Some((ys, w, k)) => (
                Bind {
                    buffer: ys,
                    offset: 0,
                    size: Some(((k + 1) * d * 4) as u64),
                },
                Bind::from(w),
            ),
            None => (Bind::from(&self.no_weights), Bind::from(&self.no_weights)),
        };
        let binds = [
            Bind::from(&self.streams),
            Bind::from(&wfn),
            Bind::from(&small),
            Bind::from(&self.mix),
            Bind::from(&self.x),
            ys,
            w,
        ];
        let compiled = g.compiled(Kernel::HcMix);
        let group = g.bind_group_for(
            &compiled,
            Kernel::HcMix,
            &uniform.as_entire_binding(),
            &binds,
        )?;
        Ok(MixOp {
            compiled,
            group,
            _keep: [wfn, small, uniform],
        })
    }

    /// The MoE's staging buffers for `k` picks.
    pub(super) fn staged(&mut self, g: &Gpu, k: usize) -> Result<&Staged, V4Error> {
        if self.moe.as_ref().is_none_or(|s| s.k != k) {
            // (a mixer or router bound to the old buffers would use stale ones: forget them)
            self.mixers.clear();
            self.routes.clear();
            self.moe = Some(Staged {
                k,
                ys: g.zeros("v4 moe rows", ((k + 1) * self.d * 4) as u64)?,
                w: g.zeros("v4 moe weights", (k.max(1) * 4) as u64)?,
            });
        }
        self.moe
            .as_ref()
            .ok_or_else(|| V4Error::Input("the MoE's staging buffers were lost".into()))
    }
}

impl GpuLinears {
    /// The open encoder (what was recorded and not yet submitted), or a new one.
    pub(super) fn open_encoder(&mut self) -> wgpu::CommandEncoder {
        self.open
            .take()
            .unwrap_or_else(|| self.engine.gpu().encoder("v4 step"))
    }

    /// Submits what is recorded in the open encoder (before any other submit, which would
    /// otherwise run ahead of it, and before the staging belt is reused).
    pub(super) fn submit_open(&mut self) {
        if let Some(enc) = self.open.take() {
            let g = self.engine.gpu();
            g.submit_staged(self.buffers.belt(g), enc.finish());
        }
    }

    /// Submits what is recorded (the open encoder) with a copy of `bytes` of `buffer` and reads
    /// them back: a device-resident step's read.
    pub(super) fn submit_and_read(
        &mut self,
        buffer: &wgpu::Buffer,
        bytes: u64,
    ) -> Result<Vec<u8>, V4Error> {
        let mut enc = self.open_encoder();
        let g = self.engine.gpu();
        let staging = self.buffers.staging(g, bytes).clone();
        enc.copy_buffer_to_buffer(buffer, 0, &staging, 0, bytes);
        g.submit_staged(self.buffers.belt(g), enc.finish());
        let mut out = Vec::with_capacity(bytes as usize);
        g.read_staging(&staging, bytes, &mut out)?;
        Ok(out)
    }

    pub(super) fn state(&mut self) -> Result<&mut DeviceResidual, V4Error> {
        self.residual
            .as_mut()
            .ok_or_else(|| V4Error::Input("the device residual was used before its streams".into()))
    }

    /// The output buffer of `stem`'s prepared one-token product.
    pub(super) fn product_out(&self, stem: &str) -> Result<&wgpu::Buffer, V4Error> {
        match self.prepared.get(stem) {
            Some(Some(p)) => p.y(),
            _ => Err(tensor_err(
                stem,
                "has no one-token product on the device".into(),
            )),
        }
    }
}

impl Residual for GpuLinears {
    fn embed(&mut self, table: &[f32], d: usize, id: u32, hc: usize) -> Result<(), V4Error> {
        if hc == 0 || d == 0 || table.len() % d != 0 {
            return Err(V4Error::Input(format!(
                "an embedding of {} values is not rows of {d} for {hc} streams",
                table.len()
            )));
        }
        // a step starts from nothing recorded (one that failed may have left its ops open)
        self.open = None;
        let g = self.engine.gpu();
        if !self
            .residual
            .as_ref()
            .is_some_and(|r| r.hc == hc && r.d == d)
        {
            self.residual = Some(DeviceResidual::new(g, hc, d)?);
        }
        let fresh = self
            .state()?
            .embed
            .as_ref()
            .is_none_or(|e| e.vocab * d != table.len());
        if fresh {
            let t = EmbedTable::new(self.engine.gpu(), table, d)?;
            self.state()?.embed = Some(t);
        }
        let r = self.state()?;
        let vocab = table.len() / d;
        let (chunk, at) = r
            .embed
            .as_ref()
            .and_then(|e| e.row(id, d))
            .map(|(b, at)| (b.clone(), at))
            .ok_or_else(|| {
                V4Error::Input(format!("token id {id} is outside the vocabulary ({vocab})"))
            })?;
        let streams = r.streams.clone();
        let mut enc = self.open_encoder();
        let row = (d * 4) as u64;
        for j in 0..hc as u64 {
            enc.copy_buffer_to_buffer(&chunk, at, &streams, j * row, row);
        }
        self.open = Some(enc);
        Ok(())
    }

    fn submit(&mut self) {
        self.submit_open();
    }

    fn mix(&mut self, m: &Mixer<'_>, after: Option<BlockOut<'_>>) -> Result<(), V4Error> {
        let rows = match &after {
            Some(BlockOut::Product(stem)) => Some((self.product_out(stem)?.clone(), None)),
            Some(BlockOut::Moe) => {
                let s = self.state()?.moe.as_ref().ok_or_else(|| {
                    tensor_err(m.key, "expands with an MoE output never staged".into())
                })?;
                Some((s.ys.clone(), Some((s.w.clone(), s.k))))
            }
            None => None,
        };
        let mut enc = self.open_encoder();
        let g = self.engine.gpu();
        let r = self
            .residual
            .as_mut()
            .ok_or_else(|| tensor_err(m.key, "mixes streams never set".into()))?;
        let cur = SLOT - r.last;
        let no_weights = r.no_weights.clone();
        let after = rows.as_ref().map(|(ys, w)| match w {
            Some((w, k)) => (ys, w, *k),
            None => (ys, &no_weights, 0),
        });
        let op = r.mixer(g, m, cur, after)?;
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            g.dispatch_in(&mut pass, &op.compiled, &op.group, (1, 1, 1));
        }
        r.last = cur;
        self.open = Some(enc);
        Ok(())
    }

    fn read_block(&mut self) -> Result<Vec<f32>, V4Error> {
        let (x, bytes) = {
            let r = self.state()?;
            (r.x.clone(), (r.d * 4) as u64)
        };
        Ok(bytemuck::pod_collect_to_vec(
            &self.submit_and_read(&x, bytes)?,
        ))
    }

    fn stage_moe(&mut self, routed: Experts<'_>, weights: Option<&[f32]>) -> Result<(), V4Error> {
        let k = match &routed {
            Experts::Products { picks, .. } => picks.len(),
            Experts::Host(rows) => rows.len().saturating_sub(1),
        };
        if weights.is_some_and(|w| w.len() != k) {
            return Err(V4Error::Input(format!(
                "{} weights for {k} picks",
                weights.map_or(0, <[f32]>::len)
            )));
        }
        let d = self.state()?.d;
        let row = (d * 4) as u64;
        // the rows' sources: device buffers to copy, or host rows to write
        let mut copies: Vec<wgpu::Buffer> = Vec::new();
        match &routed {
            Experts::Products { picks, shared } => {
                for stem in picks.iter().map(String::as_str).chain([*shared]) {
                    copies.push(self.product_out(stem)?.clone());
                }
            }
            Experts::Host(rows) => {
                if rows.len() != k + 1 || rows.iter().any(|r| r.len() != d) {
                    return Err(V4Error::Input(format!(
                        "{} expert outputs for {k} picks and the shared expert",
                        rows.len()
                    )));
                }
            }
        }
        let (ys, w) = {
            let g = self.engine.gpu();
            let r = self.residual.as_mut().ok_or_else(|| {
                V4Error::Input("the MoE was staged before the streams were set".into())
            })?;
            let s = r.staged(g, k)?;
            (s.ys.clone(), s.w.clone())
        };
        let mut enc = self.open_encoder();
        let g = self.engine.gpu();
        for (j, y) in copies.iter().enumerate() {
            enc.copy_buffer_to_buffer(y, 0, &ys, j as u64 * row, row);
        }
        if let Experts::Host(rows) = routed {
            for (j, y) in rows.iter().enumerate() {
                let belt = self.buffers.belt(g);
                g.write_in(belt, &mut enc, &ys, j as u64 * row, bytemuck::cast_slice(y));
            }
        }
        if let Some(weights) = weights.filter(|w| !w.is_empty()) {
            let belt = self.buffers.belt(g);
            g.write_in(belt, &mut enc, &w, 0, bytemuck::cast_slice(weights));
        }
        self.open = Some(enc);
        Ok(())
    }

    fn route(&mut self, r: &Router<'_>) -> Result<bool, V4Error> {
        self.record_route(r)
    }

    fn read_picks(&mut self, k: usize) -> Result<Vec<u32>, V4Error> {
        self.picks_back(k)
    }

    fn experts_by_index(&mut self, ffn: &str, shared: &str) -> Result<bool, V4Error> {
        self.record_by_index(ffn, shared)
    }

    fn attention_ready(&mut self, c: &V4Config, layers: &[&AttnParams]) -> bool {
        self.attention_fits(c, layers)
    }

    fn step_rope(&mut self, c: &V4Config, rope: &StepRope) -> Result<(), V4Error> {
        self.write_rope(c, rope)
    }

    fn attend(
        &mut self,
        c: &V4Config,
        layer: usize,
        p: &AttnParams,
        pos: usize,
        rope: &StepRope,
    ) -> Result<(), V4Error> {
        self.record_attend(c, layer, p, pos, rope)
    }

    fn read_heads(&mut self) -> Result<Vec<f32>, V4Error> {
        self.heads_back()
    }

    fn push_attn(
        &mut self,
        c: &V4Config,
        layer: usize,
        p: &AttnParams,
        cache: &AttnCache,
        positions: usize,
    ) -> Result<(), V4Error> {
        self.push_state(c, layer, p, cache, positions)
    }

    fn argmax_ready(&mut self, stem: &str) -> bool {
        self.ensure_prepared(stem)
    }

    fn argmax_of(&mut self, stem: &str, n: usize) -> Result<u32, V4Error> {
        let y = self.product_out(stem)?.clone();
        let g = self.engine.gpu();
        let r = self
            .residual
            .as_mut()
            .ok_or_else(|| tensor_err(stem, "picks an argmax of a step never begun".into()))?;
        if !r.argmax.contains_key(stem) {
            let params = kernels::ArgmaxParams {
                n: n as u32,
                rows: 1,
                groups_x: 1,
                _pad: 0,
            };
            let uniform = g.uniform("argmax params", bytemuck::bytes_of(&params));
            let out = g.zeros("argmax id", 4)?;
            let compiled = g.compiled(Kernel::Argmax);
            let group = g.bind_group_for(
                &compiled,
                Kernel::Argmax,
                &uniform.as_entire_binding(),
                &[Bind::from(&y), Bind::from(&out)],
            )?;
            r.argmax.insert(stem.to_owned(), (group, out, uniform));
        }
        let (group, out, _) = r
            .argmax
            .get(stem)
            .ok_or_else(|| tensor_err(stem, "lost its argmax".into()))?;
        let out = out.clone();
        let mut enc = self.open.take().unwrap_or_else(|| g.encoder("v4 step"));
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            g.dispatch_in(&mut pass, &g.compiled(Kernel::Argmax), group, (1, 1, 1));
        }
        self.open = Some(enc);
        let bytes = self.submit_and_read(&out, 4)?;
        let id: u32 = bytemuck::pod_read_unaligned(bytes.get(..4).unwrap_or(&[0xff; 4]));
        if id as usize >= n {
            return Err(tensor_err(
                stem,
                "has no comparable output (all NaN)".into(),
            ));
        }
        Ok(id)
    }
}
