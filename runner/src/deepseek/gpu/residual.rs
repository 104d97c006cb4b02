//! [`Residual`] on the device (docs/runner-deepseek-v4.md "Device-resident residual"): the
//! token's streams, the last mixer's coefficients, its block input and the MoE's combined output
//! are four buffers made at the first step; each mixer, expansion and combine is a dispatch whose
//! bind group is made at its first use. The calls record into the backend's open encoder
//! (`GpuLinears::open`), which the next read — a chain that reads an output, or
//! [`Residual::read_block`] — submits with everything recorded before it.

use std::collections::HashMap;
use std::sync::Arc;

use kernels::gpu::{elementwise_groups, Bind, Compiled, Gpu};
use kernels::{HcExpandParams, HcMixParams, Kernel, MoeCombineParams};

use super::super::error::V4Error;
use super::super::linear::tensor_err;
use super::super::residual::{BlockOut, Experts, Mixer, Residual};
use super::GpuLinears;

/// One recorded op: its pipeline, bind group and grid, and the buffers only it reads.
struct Op {
    compiled: Arc<Compiled>,
    group: wgpu::BindGroup,
    groups: (u32, u32, u32),
    _keep: Vec<wgpu::Buffer>,
}

impl Op {
    fn new<P: bytemuck::Pod>(
        g: &Gpu,
        kernel: Kernel,
        params: &P,
        binds: &[Bind<'_>],
        groups: (u32, u32, u32),
        mut keep: Vec<wgpu::Buffer>,
    ) -> Result<Self, V4Error> {
        let compiled = g.compiled(kernel);
        let uniform = g.uniform(kernel.name(), bytemuck::bytes_of(params));
        let group = g.bind_group_for(&compiled, kernel, &uniform.as_entire_binding(), binds)?;
        keep.push(uniform);
        Ok(Self {
            compiled,
            group,
            groups,
            _keep: keep,
        })
    }

    fn record(&self, g: &Gpu, enc: &mut wgpu::CommandEncoder) {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        g.dispatch_in(&mut pass, &self.compiled, &self.group, self.groups);
    }
}

/// The residual's buffers and ops.
pub(super) struct DeviceResidual {
    hc: usize,
    d: usize,
    streams: wgpu::Buffer,
    /// [pre hc | post hc | comb hc·hc] of the last mixer.
    mix: wgpu::Buffer,
    /// The last mixer's normalised block input.
    x: wgpu::Buffer,
    /// The last combine's output.
    out: wgpu::Buffer,
    /// The combine's inputs: k + 1 rows of d, and k weights (made for the first k seen).
    ys: Option<(usize, wgpu::Buffer, wgpu::Buffer, Op)>,
    mixers: HashMap<String, Op>,
    /// Expansions by the buffer they read the block output from ("" for the combine's).
    expands: HashMap<String, Op>,
}

impl DeviceResidual {
    fn new(g: &Gpu, hc: usize, d: usize) -> Result<Self, V4Error> {
        Ok(Self {
            hc,
            d,
            streams: g.zeros("v4 streams", (hc * d * 4) as u64)?,
            mix: g.zeros("v4 mix", ((2 + hc) * hc * 4) as u64)?,
            x: g.zeros("v4 block input", (d * 4) as u64)?,
            out: g.zeros("v4 moe out", (d * 4) as u64)?,
            ys: None,
            mixers: HashMap::new(),
            expands: HashMap::new(),
        })
    }

    /// The block input's length and buffer (`Input::Block`).
    pub(super) fn block_len(&self) -> usize {
        self.d
    }

    pub(super) fn block(&self) -> &wgpu::Buffer {
        &self.x
    }

    fn mixer(&mut self, g: &Gpu, m: &Mixer<'_>) -> Result<&Op, V4Error> {
        if !self.mixers.contains_key(m.key) {
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
            let up = |name: &str, v: &[f32]| g.upload_f32(name, v);
            let keep = vec![
                up("hc fn", &p.weight)?,
                up("hc base", &p.base)?,
                up("hc scale", &p.scale)?,
                up("hc norm", m.norm)?,
            ];
            let params = HcMixParams {
                hc: hc as u32,
                d: d as u32,
                iters: m.iters as u32,
                head: u32::from(m.head),
                eps: m.eps as f32,
                norm_eps: m.norm_eps as f32,
                _pad0: 0,
                _pad1: 0,
            };
            let mut binds: Vec<Bind<'_>> = vec![Bind::from(&self.streams)];
            binds.extend(keep.iter().map(Bind::from));
            binds.push(Bind::from(&self.mix));
            binds.push(Bind::from(&self.x));
            let op = Op::new(g, Kernel::HcMix, &params, &binds, (1, 1, 1), Vec::new())?;
            let op = Op { _keep: keep, ..op };
            self.mixers.insert(m.key.to_owned(), op);
        }
        self.mixers
            .get(m.key)
            .ok_or_else(|| tensor_err(m.key, "lost its mixer".into()))
    }

    fn expansion(&mut self, g: &Gpu, key: &str, out: &wgpu::Buffer) -> Result<&Op, V4Error> {
        if !self.expands.contains_key(key) {
            let groups = elementwise_groups(self.d as u32);
            let params = HcExpandParams {
                hc: self.hc as u32,
                d: self.d as u32,
                groups_x: groups.0,
                _pad0: 0,
            };
            let out = Bind {
                buffer: out,
                offset: 0,
                size: Some((self.d * 4) as u64),
            };
            let binds = [Bind::from(&self.mix), out, Bind::from(&self.streams)];
            let op = Op::new(g, Kernel::HcExpand, &params, &binds, groups, Vec::new())?;
            self.expands.insert(key.to_owned(), op);
        }
        self.expands
            .get(key)
            .ok_or_else(|| tensor_err(key, "lost its expansion".into()))
    }

    /// The combine's buffers and op for `k` picks.
    fn combiner(&mut self, g: &Gpu, k: usize) -> Result<(), V4Error> {
        if self.ys.as_ref().is_some_and(|(n, ..)| *n == k) {
            return Ok(());
        }
        let d = self.d;
        let ys = g.zeros("v4 moe rows", ((k + 1) * d * 4) as u64)?;
        let w = g.zeros("v4 moe weights", (k.max(1) * 4) as u64)?;
        let groups = elementwise_groups(d as u32);
        let params = MoeCombineParams {
            d: d as u32,
            k: k as u32,
            groups_x: groups.0,
            _pad0: 0,
        };
        let binds = [Bind::from(&ys), Bind::from(&w), Bind::from(&self.out)];
        let op = Op::new(g, Kernel::MoeCombine, &params, &binds, groups, Vec::new())?;
        self.ys = Some((k, ys, w, op));
        Ok(())
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

    fn state(&mut self) -> Result<&mut DeviceResidual, V4Error> {
        self.residual
            .as_mut()
            .ok_or_else(|| V4Error::Input("the device residual was used before its streams".into()))
    }

    /// The output buffer of `stem`'s prepared one-token product.
    fn product_out(&self, stem: &str) -> Result<&wgpu::Buffer, V4Error> {
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
    fn streams_in(&mut self, h: &[f32], hc: usize) -> Result<(), V4Error> {
        if hc == 0 || h.len() % hc != 0 {
            return Err(V4Error::Input(format!(
                "{} values are not {hc} streams",
                h.len()
            )));
        }
        let d = h.len() / hc;
        if !self
            .residual
            .as_ref()
            .is_some_and(|r| r.hc == hc && r.d == d)
        {
            self.residual = Some(DeviceResidual::new(self.engine.gpu(), hc, d)?);
        }
        let streams = self.state()?.streams.clone();
        let mut enc = self.open_encoder();
        let g = self.engine.gpu();
        g.write_in(
            self.buffers.belt(g),
            &mut enc,
            &streams,
            0,
            bytemuck::cast_slice(h),
        );
        self.open = Some(enc);
        Ok(())
    }

    fn mix(&mut self, m: &Mixer<'_>) -> Result<(), V4Error> {
        let mut enc = self.open_encoder();
        let g = self.engine.gpu();
        let r = self
            .residual
            .as_mut()
            .ok_or_else(|| tensor_err(m.key, "mixes streams never set".into()))?;
        r.mixer(g, m)?.record(g, &mut enc);
        self.open = Some(enc);
        Ok(())
    }

    fn expand(&mut self, out: BlockOut<'_>) -> Result<(), V4Error> {
        let (key, buffer) = match out {
            BlockOut::Product(stem) => (stem, self.product_out(stem)?.clone()),
            BlockOut::Combined => ("", self.state()?.out.clone()),
        };
        let mut enc = self.open_encoder();
        let g = self.engine.gpu();
        let r = self
            .residual
            .as_mut()
            .ok_or_else(|| tensor_err(key, "expands streams never set".into()))?;
        r.expansion(g, key, &buffer)?.record(g, &mut enc);
        self.open = Some(enc);
        Ok(())
    }

    fn read_block(&mut self) -> Result<Vec<f32>, V4Error> {
        let (x, bytes) = {
            let r = self.state()?;
            (r.x.clone(), (r.d * 4) as u64)
        };
        let mut enc = self.open_encoder();
        let g = self.engine.gpu();
        let staging = self.buffers.staging(g, bytes).clone();
        enc.copy_buffer_to_buffer(&x, 0, &staging, 0, bytes);
        g.submit_staged(self.buffers.belt(g), enc.finish());
        let mut out = Vec::with_capacity(bytes as usize);
        g.read_staging(&staging, bytes, &mut out)?;
        Ok(bytemuck::pod_collect_to_vec(&out))
    }

    fn combine(&mut self, routed: Experts<'_>, weights: &[f32]) -> Result<(), V4Error> {
        let k = weights.len();
        let d = self.state()?.d;
        {
            let g = self.engine.gpu();
            let r = self.residual.as_mut().ok_or_else(|| {
                V4Error::Input("the MoE combine ran before the streams were set".into())
            })?;
            r.combiner(g, k)?;
        }
        let row = (d * 4) as u64;
        // the rows' sources: device buffers to copy, or host rows to write
        let mut copies: Vec<wgpu::Buffer> = Vec::new();
        if let Experts::Products { picks, shared } = &routed {
            if picks.len() != k {
                return Err(V4Error::Input(format!(
                    "{} picks for {k} weights",
                    picks.len()
                )));
            }
            for stem in picks.iter().map(String::as_str).chain([*shared]) {
                copies.push(self.product_out(stem)?.clone());
            }
        }
        let mut enc = self.open_encoder();
        let g = self.engine.gpu();
        let r = self.residual.as_ref().ok_or_else(|| {
            V4Error::Input("the MoE combine ran before the streams were set".into())
        })?;
        let Some((_, ys, w, op)) = r.ys.as_ref() else {
            return Err(V4Error::Input("the MoE combine lost its buffers".into()));
        };
        match routed {
            Experts::Products { .. } => {
                for (j, y) in copies.iter().enumerate() {
                    enc.copy_buffer_to_buffer(y, 0, ys, j as u64 * row, row);
                }
            }
            Experts::Host(rows) => {
                if rows.len() != k + 1 || rows.iter().any(|r| r.len() != d) {
                    return Err(V4Error::Input(format!(
                        "{} expert outputs for {k} picks and the shared expert",
                        rows.len()
                    )));
                }
                for (j, y) in rows.iter().enumerate() {
                    let belt = self.buffers.belt(g);
                    g.write_in(belt, &mut enc, ys, j as u64 * row, bytemuck::cast_slice(y));
                }
            }
        }
        g.write_in(
            self.buffers.belt(g),
            &mut enc,
            w,
            0,
            bytemuck::cast_slice(weights),
        );
        op.record(g, &mut enc);
        self.open = Some(enc);
        Ok(())
    }
}
