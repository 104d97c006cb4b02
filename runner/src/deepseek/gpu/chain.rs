//! A chain of one-token products in one submit (docs/runner-deepseek-v4.md "Chained products").
//!
//! Each link's input is a 64 KiB uniform window: a host input is written there before the
//! submit (one window per distinct input, as in a batch); a derived input is made on the device
//! between the levels of the chain — the clamped SwiGLU kernel (`activation.wgsl`) over the
//! gate and up products' outputs, or the read products' outputs themselves — and copied into
//! its window. Every link of a level is recorded into one compute pass; the outputs the caller
//! reads are copied into the shared read-back buffer, which is mapped once.
//!
//! The arithmetic is the fallback's: the products are the same prepared modules, and
//! [`GpuLinears::swiglu`] runs the same kernel with the same parameters alone, so a chain gives
//! the same bits whichever way it runs (a chain over a matrix without a prepared product goes
//! level by level).

use std::sync::Arc;

use kernels::gpu::{elementwise_groups, Bind, Compiled, Gpu};
use kernels::{ActivationParams, Kernel};

use super::super::chain::{levels, Input, Link};
use super::super::error::V4Error;
use super::super::linear::{check_shape, tensor_err, Product};
use super::super::prepared::{Prepared, MAX_SLOTS};
use super::norm::{NormKey, READ_ALIGN};
use super::{device_limit, find, GpuLinears};

/// The clamped SwiGLU of two prepared products' outputs, ready to record.
pub(super) struct SwigluOp {
    compiled: Arc<Compiled>,
    group: wgpu::BindGroup,
    groups: (u32, u32, u32),
    act: wgpu::Buffer,
    /// Kept alive for the bind group.
    _params: wgpu::Buffer,
}

impl SwigluOp {
    fn new(g: &Gpu, gate: &Prepared, up: &Prepared, limit: f32) -> Result<Self, V4Error> {
        let n = gate.rows();
        let groups = elementwise_groups(n as u32);
        let params = ActivationParams::new(n as u32, groups.0).with_limit(limit);
        let params = g.uniform("swiglu params", bytemuck::bytes_of(&params));
        let act = g.zeros("swiglu out", (n * 4) as u64)?;
        let compiled = g.compiled(Kernel::Swiglu);
        let group = g.bind_group_for(
            &compiled,
            Kernel::Swiglu,
            &params.as_entire_binding(),
            &[Bind::from(gate.y()?), Bind::from(up.y()?), Bind::from(&act)],
        )?;
        Ok(Self {
            compiled,
            group,
            groups,
            act,
            _params: params,
        })
    }
}

/// How a chain maps onto the device: each link's matrix (after `sliced`), its window slot, the
/// host inputs by slot, the link that first uses each derived slot, and the MLPs whose gate and
/// up are one fused matrix (gate link, up link, the link reading their SwiGLU): the fused
/// product runs for the gate link, writing the activations, and nothing for the up link.
struct Plan<'a> {
    stems: Vec<Product<'a>>,
    slot: Vec<usize>,
    hosts: Vec<&'a [f32]>,
    derived: Vec<usize>,
    level: Vec<usize>,
    fused: Vec<(usize, usize, usize)>,
    /// Links whose product an earlier link of the same matrix over the same input runs (parts
    /// of a merged matrix): they take their rows from its output.
    shared: Vec<bool>,
}

impl Plan<'_> {
    fn fused_gate(&self, i: usize) -> bool {
        self.fused.iter().any(|&(a, _, _)| a == i)
    }

    fn fused_up(&self, i: usize) -> bool {
        self.fused.iter().any(|&(_, b, _)| b == i)
    }

    /// The fused matrix whose product is the SwiGLU link `j` reads.
    fn fused_act(&self, j: usize) -> Option<&str> {
        self.fused
            .iter()
            .find(|&&(_, _, act)| act == j)
            .map(|&(a, _, _)| self.stems[a].stem.as_str())
    }
}

impl GpuLinears {
    /// Runs `links` in one submit when every one is a one-token product of a matrix already on
    /// the device (resident, or a cached expert: loading one could evict another link's) with a
    /// prepared product, each matrix once, and the inputs fit the windows; `None` otherwise.
    pub(super) fn chain_on_device(
        &mut self,
        links: &[Link<'_>],
    ) -> Result<Option<Vec<Vec<f32>>>, V4Error> {
        let Some(plan) = self.plan(links)? else {
            return Ok(None);
        };
        self.bind_chain(links, &plan)?;
        self.record_chain(links, &plan).map(Some)
    }

    /// Whether [`GpuLinears::chain_on_device`] would run `links` with nothing to load.
    pub(super) fn chain_planned(&mut self, links: &[Link<'_>]) -> bool {
        matches!(self.plan(links), Ok(Some(_)))
    }

    fn plan<'a>(&mut self, links: &[Link<'a>]) -> Result<Option<Plan<'a>>, V4Error> {
        let level = levels(links)?;
        if links.iter().any(|l| l.tokens != 1) {
            return Ok(None);
        }
        let stems: Vec<Product<'a>> = links
            .iter()
            .map(|l| {
                let x = match l.input {
                    Input::Host(x) => x,
                    _ => &[],
                };
                self.sliced(&Product {
                    stem: l.stem.clone(),
                    rows: l.rows.clone(),
                    x,
                    tokens: 1,
                })
            })
            .collect();
        let fused = self.fused_pairs(links, &stems);
        let mut shared = vec![false; links.len()];
        for (i, p) in stems.iter().enumerate() {
            if fused.iter().any(|&(a, b, _)| i == a || i == b) {
                continue; // the fused product runs instead (it was prepared when declared)
            }
            let on_device = self.resident.contains_key(&p.stem) || self.slots.holds(&p.stem);
            let earlier = |j: &usize| stems[*j].stem == p.stem;
            match (0..i).find(earlier) {
                Some(j) if links[j].input == links[i].input && !shared[j] => shared[i] = true,
                Some(_) => return Ok(None),
                None => {}
            }
            if !on_device || !self.ensure_prepared(&p.stem) {
                return Ok(None);
            }
        }
        let Some((slot, hosts, derived)) = self.slots(links, &stems, &fused)? else {
            return Ok(None);
        };
        Ok(Some(Plan {
            stems,
            slot,
            hosts,
            derived,
            level,
            fused,
            shared,
        }))
    }

    /// Each link's window slot (the host inputs first, by content, then one for each distinct
    /// derived input), the host inputs and the first link of each derived input; every link's
    /// shape checked. `None` where a SwiGLU cannot run on the device or the inputs do not fit
    /// the windows.
    #[allow(clippy::type_complexity)]
    fn slots<'a>(
        &self,
        links: &[Link<'a>],
        stems: &[Product<'a>],
        fused: &[(usize, usize, usize)],
    ) -> Result<Option<(Vec<usize>, Vec<&'a [f32]>, Vec<usize>)>, V4Error> {
        let (mut slot, mut hosts, mut derived) = (Vec::new(), Vec::<&[f32]>::new(), Vec::new());
        for (i, l) in links.iter().enumerate() {
            let k = match &l.input {
                Input::Host(x) => {
                    slot.push(hosts.iter().position(|h| h == x).unwrap_or_else(|| {
                        hosts.push(x);
                        hosts.len() - 1
                    }));
                    x.len()
                }
                input => {
                    let same = derived
                        .iter()
                        .position(|&j: &usize| links[j].input == *input);
                    slot.push(same.unwrap_or_else(|| {
                        derived.push(i);
                        derived.len() - 1
                    }));
                    match self.derived_len(input, stems, fused.iter().any(|f| f.2 == i)) {
                        Some(k) => k,
                        None => return Ok(None),
                    }
                }
            };
            let m = find(&self.resident, &self.slots, &stems[i].stem)?;
            check_shape(&stems[i].stem, &stems[i].rows, m.rows, m.k, k, 1)?;
        }
        if hosts.len() + derived.len() > MAX_SLOTS {
            return Ok(None);
        }
        for (s, l) in slot.iter_mut().zip(links) {
            if !matches!(l.input, Input::Host(_)) {
                *s += hosts.len();
            }
        }
        Ok(Some((slot, hosts, derived)))
    }

    /// The length of a derived input; `None` for a SwiGLU the device cannot run (a limit that is
    /// not a positive f32, or gate and up that are not whole prepared outputs of one length)
    /// unless `fused` (its fused product writes it).
    fn derived_len(&self, input: &Input<'_>, stems: &[Product<'_>], fused: bool) -> Option<usize> {
        match input {
            Input::Host(x) => Some(x.len()),
            Input::Concat(reads) => Some(reads.iter().map(|&r| stems[r].rows.len()).sum()),
            Input::SwiGlu { gate, .. } if fused => Some(stems[*gate].rows.len()),
            Input::SwiGlu { gate, up, limit } => {
                let n = self.whole_rows(&stems[*gate])?;
                let usable = device_limit(*limit).is_some();
                (usable && Some(n) == self.whole_rows(&stems[*up])).then_some(n)
            }
            Input::Block => self.residual.as_ref().map(|r| r.block_len()),
            Input::Heads(r) => self
                .heads()
                .filter(|&(_, n)| r.end <= n && (r.start * 4) % READ_ALIGN == 0)
                .map(|_| r.len()),
            // the op reads the resident product's output in place
            Input::RmsNorm { of, weight, .. } => {
                let p = &stems[*of];
                let fits = self.resident.contains_key(&p.stem)
                    && weight.len() == p.rows.len()
                    && (p.rows.start * 4) % READ_ALIGN == 0
                    && !fused;
                fits.then_some(p.rows.len())
            }
        }
    }

    /// The MLPs of `links` whose gate and up links are the two halves of one fused matrix
    /// ([`super::fused`]) with the same input and limit, read by their SwiGLU link alone.
    fn fused_pairs(&self, links: &[Link<'_>], stems: &[Product<'_>]) -> Vec<(usize, usize, usize)> {
        let only_by = |j: usize, r: usize| {
            links
                .iter()
                .enumerate()
                .all(|(i, l)| i == j || !l.reads().contains(&r))
        };
        links
            .iter()
            .enumerate()
            .filter_map(|(j, l)| {
                let Input::SwiGlu { gate, up, limit } = l.input else {
                    return None;
                };
                let (a, b) = (stems.get(gate)?, stems.get(up)?);
                let (lim, _) = self.fused.product(&a.stem)?;
                let n = a.rows.len();
                let fits = a.stem == b.stem
                    && lim == limit
                    && a.rows == (0..n)
                    && b.rows == (n..2 * n)
                    && links[gate].input == links[up].input
                    && !links[gate].read
                    && !links[up].read
                    && only_by(j, gate)
                    && only_by(j, up);
                fits.then_some((gate, up, j))
            })
            .collect()
    }

    /// The output length of `p` when it asks for every row of its prepared product.
    fn whole_rows(&self, p: &Product<'_>) -> Option<usize> {
        let rows = self.prepared.get(&p.stem)?.as_ref()?.rows();
        (p.rows == (0..rows)).then_some(rows)
    }

    /// Binds every link's product to its window and makes the SwiGLU and RMSNorm ops the chain
    /// lacks.
    fn bind_chain(&mut self, links: &[Link<'_>], plan: &Plan<'_>) -> Result<(), V4Error> {
        let g = self.engine.gpu();
        for (i, p) in plan.stems.iter().enumerate() {
            if plan.shared[i] {
                continue;
            }
            let m = find(&self.resident, &self.slots, &p.stem)?;
            let window = self.buffers.window(g, plan.slot[i]);
            let prepared = if plan.fused_gate(i) {
                self.fused.product_mut(&p.stem)
            } else if plan.fused_up(i) {
                None
            } else {
                self.prepared.get_mut(&p.stem).and_then(Option::as_mut)
            };
            if let Some(prepared) = prepared {
                prepared.bind(g, m, plan.slot[i], window)?;
            }
        }
        for &i in &plan.derived {
            if plan.fused_act(i).is_some() {
                continue;
            }
            if let Input::SwiGlu { gate, up, limit } = links[i].input {
                let key = (plan.stems[gate].stem.clone(), plan.stems[up].stem.clone());
                if self.swiglus.contains_key(&key) {
                    continue;
                }
                let op = SwigluOp::new(
                    g,
                    self.prepared_of(&key.0)?,
                    self.prepared_of(&key.1)?,
                    limit as f32,
                )?;
                self.swiglus.insert(key, op);
            }
        }
        // (after the products are bound: an RMSNorm reads a product's output buffer)
        for &i in &plan.derived {
            if let Input::RmsNorm { of, weight, eps } = links[i].input {
                self.norm_op(&norm_key(plan, of, weight), weight, eps)?;
            }
        }
        Ok(())
    }

    fn prepared_of(&self, stem: &str) -> Result<&Prepared, V4Error> {
        match self.prepared.get(stem) {
            Some(Some(p)) => Ok(p),
            _ => Err(tensor_err(stem, "has no prepared product".into())),
        }
    }

    /// Records the chain level by level, submits once and reads back the outputs asked for.
    fn record_chain(
        &mut self,
        links: &[Link<'_>],
        plan: &Plan<'_>,
    ) -> Result<Vec<Vec<f32>>, V4Error> {
        let mut enc = self.open_encoder();
        let g = self.engine.gpu();
        for (s, x) in plan.hosts.iter().enumerate() {
            let window = self.buffers.window(g, s).clone();
            g.write_in(
                self.buffers.belt(g),
                &mut enc,
                &window,
                0,
                bytemuck::cast_slice(x),
            );
        }
        let windows: Vec<wgpu::Buffer> = (0..plan.hosts.len() + plan.derived.len())
            .map(|s| self.buffers.window(g, s).clone())
            .collect();
        for lv in 0..=plan.level.iter().copied().max().unwrap_or(0) {
            self.record_derived(&mut enc, links, plan, lv, &windows)?;
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            for (i, p) in plan.stems.iter().enumerate() {
                if plan.level[i] != lv || plan.fused_up(i) || plan.shared[i] {
                    continue;
                }
                let product = match plan.fused_gate(i) {
                    true => self.fused_of(&p.stem)?,
                    false => self.prepared_of(&p.stem)?,
                };
                product.record(g, &mut pass, plan.slot[i])?;
            }
        }
        self.read_back(enc, links, plan)
    }

    /// Records the derived inputs of level `lv`'s links into their windows: the SwiGLU
    /// dispatches (a fused MLP's product already wrote its activations), then the copies.
    fn record_derived(
        &self,
        enc: &mut wgpu::CommandEncoder,
        links: &[Link<'_>],
        plan: &Plan<'_>,
        lv: usize,
        windows: &[wgpu::Buffer],
    ) -> Result<(), V4Error> {
        let g = self.engine.gpu();
        let made: Vec<(usize, usize)> = plan
            .derived
            .iter()
            .enumerate()
            .filter(|&(_, &i)| plan.level[i] == lv)
            .map(|(d, &i)| (i, plan.hosts.len() + d))
            .collect();
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            for &(i, _) in &made {
                if let Some(op) = self.swiglu_of(links, plan, i) {
                    g.dispatch_in(&mut pass, &op.compiled, &op.group, op.groups);
                }
                if let Input::RmsNorm { of, weight, .. } = links[i].input {
                    let op = self.norm_of(&norm_key(plan, of, weight))?;
                    g.dispatch_in(&mut pass, &op.compiled, &op.group, op.groups);
                }
            }
        }
        for &(i, s) in &made {
            match (&links[i].input, plan.fused_act(i)) {
                (Input::Concat(reads), _) => {
                    let mut at = 0;
                    for &r in reads {
                        let bytes = (plan.stems[r].rows.len() * 4) as u64;
                        let from = (plan.stems[r].rows.start * 4) as u64;
                        let y = self.prepared_of(&plan.stems[r].stem)?.y()?;
                        enc.copy_buffer_to_buffer(y, from, &windows[s], at, bytes);
                        at += bytes;
                    }
                }
                (Input::SwiGlu { .. }, Some(w13)) => {
                    let act = self.fused_of(w13)?.y()?;
                    enc.copy_buffer_to_buffer(act, 0, &windows[s], 0, act.size());
                }
                (Input::SwiGlu { .. }, None) => {
                    let op = self.swiglu_of(links, plan, i).ok_or_else(|| {
                        tensor_err(&links[i].stem, "its SwiGLU was not prepared".into())
                    })?;
                    enc.copy_buffer_to_buffer(&op.act, 0, &windows[s], 0, op.act.size());
                }
                (Input::RmsNorm { of, weight, .. }, _) => {
                    let op = self.norm_of(&norm_key(plan, *of, weight))?;
                    enc.copy_buffer_to_buffer(&op.out, 0, &windows[s], 0, op.out.size());
                }
                (Input::Block, _) => {
                    let r = self.residual.as_ref().ok_or_else(|| {
                        tensor_err(&links[i].stem, "reads a block input never made".into())
                    })?;
                    let x = r.block();
                    enc.copy_buffer_to_buffer(x, 0, &windows[s], 0, x.size());
                }
                (Input::Heads(r), _) => {
                    let (out, _) = self.heads().ok_or_else(|| {
                        tensor_err(&links[i].stem, "reads heads never written".into())
                    })?;
                    let bytes = (r.len() * 4) as u64;
                    enc.copy_buffer_to_buffer(out, (r.start * 4) as u64, &windows[s], 0, bytes);
                }
                (Input::Host(_), _) => {}
            }
        }
        Ok(())
    }

    /// Copies the outputs the caller reads into the read-back buffer, submits `enc` and maps once;
    /// a chain that reads nothing leaves `enc` open for what is recorded next (a device-resident
    /// step: [`super::residual`]).
    fn read_back(
        &mut self,
        mut enc: wgpu::CommandEncoder,
        links: &[Link<'_>],
        plan: &Plan<'_>,
    ) -> Result<Vec<Vec<f32>>, V4Error> {
        let read: Vec<usize> = (0..links.len()).filter(|&i| links[i].read).collect();
        if read.is_empty() {
            self.open = Some(enc);
            return Ok(vec![Vec::new(); links.len()]);
        }
        let g = self.engine.gpu();
        let total: u64 = read
            .iter()
            .map(|&i| (plan.stems[i].rows.len() * 4) as u64)
            .sum();
        let staging = self.buffers.staging(g, total).clone();
        let mut at = 0;
        for &i in &read {
            let p = &plan.stems[i];
            let bytes = (p.rows.len() * 4) as u64;
            let y = self.prepared_of(&p.stem)?.y()?;
            enc.copy_buffer_to_buffer(y, (p.rows.start * 4) as u64, &staging, at, bytes);
            at += bytes;
        }
        g.submit_staged(self.buffers.belt(g), enc.finish());
        let mut bytes = Vec::with_capacity(total as usize);
        g.read_staging(&staging, total, &mut bytes)?;
        let mut rest = bytes.as_slice();
        let mut out = vec![Vec::new(); links.len()];
        for &i in &read {
            let (y, tail) = rest.split_at((plan.stems[i].rows.len() * 4).min(rest.len()));
            out[i] = bytemuck::pod_collect_to_vec(y);
            rest = tail;
        }
        Ok(out)
    }

    fn fused_of(&self, w13: &str) -> Result<&Prepared, V4Error> {
        self.fused
            .product(w13)
            .map(|(_, p)| p)
            .ok_or_else(|| tensor_err(w13, "has no fused gate/up product".into()))
    }

    fn norm_of(&self, key: &NormKey) -> Result<&super::norm::NormOp, V4Error> {
        self.norms
            .get(key)
            .ok_or_else(|| tensor_err(&key.0, "its RMSNorm was not prepared".into()))
    }

    fn swiglu_of(&self, links: &[Link<'_>], plan: &Plan<'_>, i: usize) -> Option<&SwigluOp> {
        let Input::SwiGlu { gate, up, .. } = links[i].input else {
            return None;
        };
        self.swiglus
            .get(&(plan.stems[gate].stem.clone(), plan.stems[up].stem.clone()))
    }
}

/// The key of the RMSNorm of link `of`'s output with `weight`.
fn norm_key(plan: &Plan<'_>, of: usize, weight: &[f32]) -> NormKey {
    let p = &plan.stems[of];
    (
        p.stem.clone(),
        p.rows.start,
        p.rows.len(),
        weight.as_ptr() as usize,
    )
}
