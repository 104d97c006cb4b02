//! The wgpu backend of [`Linears`]: every matrix multiplication of the V4 forward runs in the
//! kernels crate's dequantize-and-multiply WGSL kernels on the stored bytes (`fp8-e4m3-block`
//! 128×128 for FP8 weights, `mxfp4` for routed experts, plain BF16 for the compressor, indexer
//! and head projections), and so does the MoE's clamped SwiGLU (in a chain of products,
//! [`chain`], or fused into an MLP's gate/up product, [`fused`]); with the device-resident
//! residual ([`residual`]) so do a one-token step's mHC mixers, expansions and MoE sum, its
//! router and its experts by index ([`route`], [`stack`]); everything else (norms, RoPE,
//! compressor pooling, indexer scoring and top-k, prefill routing, attention over ≤ 12 keys)
//! stays on the CPU (docs/runner-deepseek-v4.md).
//!
//! Resident: every matrix is uploaded when declared. Streamed: only the non-expert matrices are;
//! a routed expert's matrices are read from the source tile by tile (one `pread` per tile) when a
//! token is routed to it and kept in a device cache bounded in bytes (`--expert-cache-mib`;
//! hits, misses and evictions counted in [`ExpertCacheStats`]), an expert (gate, up and down)
//! at a time, in slots reused from one expert to the next ([`experts`]). Hotness first: every
//! expert's uses are counted for the whole run; a newcomer evicts cached experts used fewer
//! times than itself (the least recently used of equals first), and one that is not hotter
//! than what it would displace is held in a transient slot outside the budget instead.
//! A decode step sweeps the layers in order, so plain LRU with a budget below one token's
//! working set evicts every expert just before it is needed again and never hits; counting uses
//! keeps the experts the conversation keeps choosing (ds4's hotness-first is the anchor).
//! The kernels' accumulation order depends only on the row and K (docs/kernels.md), so a streamed
//! run produces the resident run's logits bit for bit.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use kernels::generated::Generated;
use kernels::gpu::{Gpu, GpuStats, MatvecShape};
use kernels::unrolled::{self, Layout};
use kernels::WeightFormat;

use crate::engine::{Engine, ResidentMatrix};

use super::chain::{self as chains, Link};
use super::error::V4Error;
use super::linear::{
    check_product, load_matrix, tensor_err, ExpertCacheStats, Linears, Product, QMatrix,
};
use super::prepared::{run_batch, BatchBuffers, Prepared, MAX_SLOTS};
use super::source::WeightSource;

mod attn;
mod chain;
mod experts;
mod fused;
mod merged;
mod norm;
mod residual;
mod route;
mod stack;

/// The GPU backend.
pub struct GpuLinears {
    engine: Engine,
    src: Arc<dyn WeightSource>,
    streamed: bool,
    shapes: HashMap<String, (usize, usize, bool)>,
    resident: HashMap<String, ResidentMatrix>,
    /// The streamed routed experts on the device, in reused slots ([`experts`]).
    slots: experts::ExpertSlots,
    /// The one-token products' unrolled modules (a CPU adapter), by format, K and rows.
    unrolled: HashMap<(WeightFormat, usize, usize), Arc<Generated>>,
    /// The input windows and the read-back buffer batches share.
    buffers: BatchBuffers,
    /// Row groups announced by [`Linears::declare_groups`], by stem.
    groups: HashMap<String, usize>,
    /// A resident or cached matrix's one-token product, ready to run (made at its first use,
    /// dropped with an evicted expert; `None` where the matrix has no such form): nothing is
    /// allocated per product after that.
    prepared: HashMap<String, Option<Prepared>>,
    /// The clamped SwiGLU between two prepared products (gate, up) of a chain, made at its
    /// first use and dropped with either product.
    swiglus: HashMap<(String, String), chain::SwigluOp>,
    /// MLPs announced by [`Linears::declare_mlp`], with their SwiGLU limit.
    mlps: HashMap<String, f64>,
    /// Fused MLP matrices (`{mlp}.w13`: the gate's rows, then the up's) and their gate/up +
    /// SwiGLU products ([`fused`]).
    fused: fused::FusedMlps,
    /// Announced MoEs whose resident experts are kept as stacks ([`stack`]).
    stacks: stack::ExpertStacks,
    /// Parts of a merged matrix ([`Linears::declare_merged`]) → the matrix and their first row.
    merged: HashMap<String, (String, usize)>,
    /// The RMSNorms between chain levels, made at their first use ([`norm`]).
    norms: HashMap<norm::NormKey, norm::NormOp>,
    /// The device-resident residual of one-token steps ([`residual`]), made at the first.
    residual: Option<residual::DeviceResidual>,
    /// The attention of one-token steps on the device ([`attn`]), made at the first.
    attn: Option<attn::DeviceAttn>,
    /// Recorded and not yet submitted: a device-resident step's ops and the chains that read
    /// nothing, up to the next read.
    open: Option<wgpu::CommandEncoder>,
    /// Whether tokens run as device steps (the default; [`Linears::set_device_residual`] turns
    /// the host placement on, a reference for tests: docs "Device-resident residual").
    device_residual: bool,
}

impl GpuLinears {
    /// The backend on `engine`'s device (a clone of the front-end's: it opens none).
    /// `expert_cache_bytes` bounds the streamed experts on the device; the matrix a product
    /// needs is always loaded, so a budget below one matrix keeps just that one.
    pub fn new(
        engine: Engine,
        src: Arc<dyn WeightSource>,
        streamed: bool,
        expert_cache_bytes: u64,
    ) -> Self {
        // (the device-resident forward is the only one the binaries run; the host placement
        // stays for tests: docs/runner-deepseek-v4.md "Device-resident residual")
        let device_residual = true;
        Self {
            engine,
            src,
            streamed,
            shapes: HashMap::new(),
            resident: HashMap::new(),
            slots: experts::ExpertSlots::new(expert_cache_bytes),
            unrolled: HashMap::new(),
            buffers: BatchBuffers::default(),
            groups: HashMap::new(),
            prepared: HashMap::new(),
            swiglus: HashMap::new(),
            mlps: HashMap::new(),
            fused: fused::FusedMlps::default(),
            stacks: stack::ExpertStacks::default(),
            merged: HashMap::new(),
            norms: HashMap::new(),
            residual: None,
            attn: None,
            open: None,
            device_residual,
        }
    }

    /// Whether resident or cached `stem` has a prepared one-token product (made at the first
    /// ask).
    fn ensure_prepared(&mut self, stem: &str) -> bool {
        if let Some(p) = self.prepared.get(stem) {
            return p.is_some();
        }
        let Some(m) = self.resident.get(stem).or_else(|| self.slots.matrix(stem)) else {
            return false;
        };
        let g = self.engine.gpu();
        let module = unrolled_module(&mut self.unrolled, g, m);
        let p = Prepared::new(g, m, module);
        let ok = p.is_some();
        self.prepared.insert(stem.to_owned(), p);
        ok
    }

    /// Runs the pending products (`(item, window slot)`) of `items` in one submit, the inputs of
    /// the slots written first; their outputs go to `out`.
    fn flush(
        &mut self,
        items: &[Product<'_>],
        pending: &mut Batch,
        inputs: &mut Vec<&[f32]>,
        out: &mut [Option<Vec<f32>>],
    ) -> Result<(), V4Error> {
        if pending.runs.is_empty() {
            return Ok(());
        }
        let g = self.engine.gpu();
        for &(i, s) in pending.runs.iter() {
            let stem = &items[i].stem;
            let m = find(&self.resident, &self.slots, stem)?;
            let window = self.buffers.window(g, s);
            if let Some(Some(p)) = self.prepared.get_mut(stem) {
                p.bind(g, m, s, window)?;
            }
        }
        let mut batch = Vec::with_capacity(pending.runs.len());
        for &(i, s) in pending.runs.iter() {
            match self.prepared.get(&items[i].stem) {
                Some(Some(p)) => batch.push((p, s)),
                _ => return Err(tensor_err(&items[i].stem, "has no prepared product".into())),
            }
        }
        let ys = run_batch(g, &mut self.buffers, inputs, &batch)?;
        for (r, &(i, _)) in pending.runs.iter().enumerate() {
            let Some(y) = ys.get(r) else {
                return Err(tensor_err(
                    &items[i].stem,
                    "the batch lost its output".into(),
                ));
            };
            for &(j, _) in pending.shares.iter().filter(|&&(_, run)| run == r) {
                out[j] = Some(select_rows(y.clone(), &items[j].rows, y.len(), 1));
            }
            out[i] = Some(select_rows(y.clone(), &items[i].rows, y.len(), 1));
        }
        pending.runs.clear();
        pending.shares.clear();
        inputs.clear();
        Ok(())
    }

    /// One product outside a batch (a prefill chunk, or a matrix without a prepared one-token
    /// product), its matrix available, through the general matmul path.
    fn unbatched(&mut self, item: &Product<'_>) -> Result<(Vec<f32>, usize), V4Error> {
        let (stem, x, tokens) = (item.stem.as_str(), item.x, item.tokens);
        let m = find(&self.resident, &self.slots, stem)?;
        let (n, k) = (m.rows, m.k);
        check_product(stem, &item.rows, n, k, x, tokens)?;
        let g = self.engine.gpu();
        let xb = g.upload_f32("x", x)?;
        let yb = g.zeros("y", (tokens * n * 4) as u64)?;
        self.engine.matmul(m, &xb, &yb, tokens)?;
        Ok((g.read_f32(&yb, tokens * n)?, n))
    }

    /// `item` over a matrix of its own rows when it asks for one of the row groups uploaded by
    /// [`Linears::declare_groups`] (a `wo_a` group: otherwise every group's product multiplies
    /// all the groups' rows, 8× the work at V4's real shape); unchanged otherwise.
    fn sliced<'a>(&self, item: &Product<'a>) -> Product<'a> {
        let redirect = self.fused.redirect(&item.stem);
        if let Some((whole, off)) = redirect.or_else(|| self.merged_into(&item.stem)) {
            return Product {
                stem: whole.to_owned(),
                rows: item.rows.start + off..item.rows.end + off,
                x: item.x,
                tokens: item.tokens,
            };
        }
        let key = slice_key(&item.stem, &item.rows);
        if self.resident.contains_key(&key) {
            return Product::new(key, item.rows.len(), item.x, item.tokens);
        }
        Product {
            stem: item.stem.clone(),
            rows: item.rows.clone(),
            x: item.x,
            tokens: item.tokens,
        }
    }

    /// `rows` rows of `q`'s format and K (their packed and scale bytes) as device matrix `name`.
    fn upload_rows(
        &self,
        name: &str,
        q: &QMatrix,
        rows: usize,
        packed: &[u8],
        scales: &[u8],
    ) -> Result<ResidentMatrix, V4Error> {
        Ok(self
            .engine
            .upload_matrix(name, q.format, rows, q.k, [packed, scales, &[]], None)?)
    }

    /// All of `q` as resident matrix `stem`.
    fn upload_resident(&mut self, stem: &str, q: &QMatrix) -> Result<(), V4Error> {
        let m = self.upload_rows(stem, q, q.rows, &q.packed, &q.scales)?;
        self.resident.insert(stem.to_owned(), m);
        Ok(())
    }
}

impl Linears for GpuLinears {
    fn declare(
        &mut self,
        stem: &str,
        rows: usize,
        k: usize,
        routed_expert: bool,
    ) -> Result<(), V4Error> {
        self.shapes
            .insert(stem.to_owned(), (rows, k, routed_expert));
        if routed_expert && self.streamed {
            self.slots.declare(stem);
            return Ok(());
        }
        let q = load_matrix(self.src.as_ref(), stem, rows, k)?;
        let Some(q) = self.declare_mlp_part(stem, q)? else {
            return Ok(());
        };
        let Some(q) = self.gather_w2(stem, q)? else {
            return Ok(());
        };
        self.upload_resident(stem, &q)?;
        // Each announced row group as a matrix of its own, from the same bytes (where the format
        // can be cut there: an fp8 group must start on a scale block).
        let g = self.groups.get(stem).copied().unwrap_or(1);
        if g > 1 && rows % g == 0 {
            for r in (0..g).map(|i| i * rows / g..(i + 1) * rows / g) {
                let cut = q
                    .format
                    .row_ranges(k, r.start, r.end)
                    .ok()
                    .and_then(|[p, s, _]| Some((q.packed.get(p)?, q.scales.get(s)?)));
                let Some((packed, scales)) = cut else {
                    break;
                };
                let key = slice_key(stem, &r);
                let m = self.upload_rows(&key, &q, r.len(), packed, scales)?;
                self.resident.insert(key, m);
            }
        }
        Ok(())
    }

    fn declare_merged(
        &mut self,
        name: &str,
        parts: &[(String, usize, usize)],
    ) -> Result<(), V4Error> {
        self.declare_merged_parts(name, parts)
    }

    fn declare_mlp(&mut self, stem: &str, limit: f64) -> Result<(), V4Error> {
        self.mlps.insert(stem.to_owned(), limit);
        Ok(())
    }

    /// Resident experts are gathered into stacks ([`stack`]).
    fn declare_experts(&mut self, ffn: &str, experts: usize) -> Result<(), V4Error> {
        if !self.streamed {
            self.stacks.announce(ffn, experts);
        }
        Ok(())
    }

    fn declare_groups(&mut self, stem: &str, groups: usize) -> Result<(), V4Error> {
        self.groups.insert(stem.to_owned(), groups);
        Ok(())
    }

    /// The whole matrix is multiplied and the requested rows returned (only `wo_a` asks for a
    /// part: one output group).
    fn linear_rows(
        &mut self,
        stem: &str,
        rows: Range<usize>,
        x: &[f32],
        tokens: usize,
    ) -> Result<Vec<f32>, V4Error> {
        let item = Product {
            stem: stem.to_owned(),
            rows,
            x,
            tokens,
        };
        self.linear_batch(std::slice::from_ref(&item))?
            .pop()
            .ok_or_else(|| tensor_err(stem, "the product returned no output".into()))
    }

    /// One-token products of matrices on the device run together: one submit per at most
    /// [`MAX_SLOTS`] distinct inputs (and before a cache miss, which may take a slot); the
    /// others (prefill chunks) one by one, in order.
    fn linear_batch(&mut self, items: &[Product<'_>]) -> Result<Vec<Vec<f32>>, V4Error> {
        self.submit_open();
        let sliced: Vec<Product<'_>> = items.iter().map(|it| self.sliced(it)).collect();
        let items = sliced.as_slice();
        let mut out: Vec<Option<Vec<f32>>> = vec![None; items.len()];
        let mut pending = Batch::default();
        let mut inputs: Vec<&[f32]> = Vec::new();
        // the last product run alone, whole: the next item over the same matrix and input (an
        // MLP's gate and up, halves of one fused matrix) takes its rows from it
        let mut whole: Option<(usize, Vec<f32>, usize)> = None;
        for (i, it) in items.iter().enumerate() {
            if !self.resident.contains_key(&it.stem) && !self.slots.holds(&it.stem) {
                // A miss may take the slot of an expert a pending product reads: run those first.
                self.flush(items, &mut pending, &mut inputs, &mut out)?;
                self.load_for_product(&it.stem)?;
            }
            if it.tokens != 1 || !self.ensure_prepared(&it.stem) {
                let same = |&(j, _, _): &(usize, Vec<f32>, usize)| {
                    let p: &Product<'_> = &items[j];
                    p.stem == it.stem && std::ptr::eq(p.x, it.x) && p.tokens == it.tokens
                };
                let (y, n) = match whole.take().filter(same) {
                    Some((_, y, n)) => (y, n),
                    None => self.unbatched(it)?,
                };
                out[i] = Some(select_rows(y.clone(), &it.rows, n, it.tokens));
                whole = Some((i, y, n));
                continue;
            }
            let m = find(&self.resident, &self.slots, &it.stem)?;
            check_product(&it.stem, &it.rows, m.rows, m.k, it.x, 1)?;
            let mut slot = inputs.iter().position(|x| *x == it.x);
            // the same matrix over the same input already runs (parts of a merged matrix, or
            // one product asked twice): take its rows from that run
            let run = slot.and_then(|s| {
                pending
                    .runs
                    .iter()
                    .position(|&(j, t)| t == s && items[j].stem == it.stem)
            });
            if let Some(r) = run {
                pending.shares.push((i, r));
                continue;
            }
            // (a product has one output buffer: over another input it runs in the next submit)
            let busy = pending.runs.iter().any(|&(j, _)| items[j].stem == it.stem);
            if slot.is_none() && inputs.len() == MAX_SLOTS || busy {
                self.flush(items, &mut pending, &mut inputs, &mut out)?;
                slot = None;
            }
            let slot = slot.unwrap_or_else(|| {
                inputs.push(it.x);
                inputs.len() - 1
            });
            pending.runs.push((i, slot));
        }
        self.flush(items, &mut pending, &mut inputs, &mut out)?;
        out.into_iter()
            .zip(items)
            .map(|(y, it)| y.ok_or_else(|| tensor_err(&it.stem, "no output".into())))
            .collect()
    }

    /// One submit for the whole chain where [`GpuLinears::chain_on_device`] can run it, else
    /// level by level (with SwiGLU on the device all the same).
    fn linear_chain(&mut self, links: &[Link<'_>]) -> Result<Vec<Vec<f32>>, V4Error> {
        match self.chain_on_device(links)? {
            Some(out) => Ok(out),
            None => chains::on_host(self, links),
        }
    }

    fn chain_ready(&mut self, links: &[Link<'_>]) -> bool {
        self.chain_planned(links)
    }

    fn ensure_experts(&mut self, experts: &[String]) -> Result<(), V4Error> {
        self.ensure_loaded(experts)
    }

    /// The kernel a chain uses between its products (`activation.wgsl`, f32), run alone: a chain
    /// that cannot run in one submit gives the same bits. A limit the kernel cannot express (not
    /// a positive f32) goes to the host's f64 form.
    fn swiglu(&mut self, gate: &[f32], up: &[f32], limit: f64) -> Result<Vec<f32>, V4Error> {
        if gate.len() != up.len() {
            return Err(V4Error::Input(format!(
                "SwiGLU of {} gate and {} up values",
                gate.len(),
                up.len()
            )));
        }
        let Some(lim) = device_limit(limit) else {
            return Ok(super::moe::swiglu(gate, up, limit));
        };
        self.submit_open();
        let g = self.engine.gpu();
        let (gb, ub) = (g.upload_f32("gate", gate)?, g.upload_f32("up", up)?);
        let yb = g.zeros("swiglu out", (gate.len() * 4) as u64)?;
        self.engine.swiglu(&gb, &ub, &yb, gate.len(), lim)?;
        Ok(g.read_f32(&yb, gate.len())?)
    }

    /// The kernel a chain uses for its RMSNorm links (`rmsnorm.wgsl`, f32), run alone: a chain
    /// that cannot run in one submit gives the same bits.
    fn rmsnorm(&mut self, x: &[f32], weight: &[f32], eps: f64) -> Result<Vec<f32>, V4Error> {
        self.submit_open();
        self.rmsnorm_alone(x, weight, eps)
    }

    fn residual(&mut self) -> Option<&mut dyn super::residual::Residual> {
        if self.device_residual {
            Some(self)
        } else {
            None
        }
    }

    /// Every mapping has prepared one-token products (a GPU's read their window as storage),
    /// so the device residual can be set anywhere.
    fn set_device_residual(&mut self, on: bool) -> bool {
        self.device_residual = on;
        true
    }

    fn gpu_stats(&self) -> Option<GpuStats> {
        Some(self.engine.gpu().stats())
    }

    fn pull_attn(
        &self,
        c: &super::config::V4Config,
        layer: usize,
        p: &super::attention::AttnParams,
        positions: usize,
    ) -> Result<super::attention::AttnCache, V4Error> {
        self.pull_state(c, layer, p, positions)
    }

    fn tile_reads(&self) -> u64 {
        self.src.tile_reads()
    }
    fn expert_loads(&self) -> (u64, u64) {
        (self.slots.stats.misses, self.slots.stats.loaded_bytes)
    }
    fn expert_cache(&self) -> Option<ExpertCacheStats> {
        self.streamed.then_some(self.slots.stats)
    }
}

/// The products a submit runs, `(item, window slot)` each, and the items that take their rows
/// from one of them (`(item, index into runs)`: the same matrix over the same input).
#[derive(Default)]
struct Batch {
    runs: Vec<(usize, usize)>,
    shares: Vec<(usize, usize)>,
}

/// The device matrix of `stem`: resident, or a streamed expert's on the device.
fn find<'a>(
    resident: &'a HashMap<String, ResidentMatrix>,
    slots: &'a experts::ExpertSlots,
    stem: &str,
) -> Result<&'a ResidentMatrix, V4Error> {
    resident
        .get(stem)
        .or_else(|| slots.matrix(stem))
        .ok_or_else(|| tensor_err(stem, "not loaded".into()))
}

/// The unrolled one-token module of `m` (made once per format, K and rows), where the adapter
/// is a CPU one (the `Rows` mapping, as the Llama path decides), the matrix one part, and the
/// format and K have one.
fn unrolled_module(
    cache: &mut HashMap<(WeightFormat, usize, usize), Arc<Generated>>,
    g: &Gpu,
    m: &ResidentMatrix,
) -> Option<Arc<Generated>> {
    if g.matvec_shape() != MatvecShape::Rows
        || m.parts.len() != 1
        || !unrolled::available_for(m.format, m.k)
    {
        return None;
    }
    match cache.entry((m.format, m.k, m.rows)) {
        Entry::Occupied(e) => Some(Arc::clone(e.get())),
        Entry::Vacant(e) => Some(Arc::clone(e.insert(Arc::new(unrolled::source_for(
            m.format,
            m.k,
            m.rows,
            Layout::Rows,
        )?)))),
    }
}

/// A SwiGLU limit as the device kernels take it (`ActivationParams::with_limit`): a positive
/// finite f32; `None` for any other, which the host's f64 form serves.
fn device_limit(limit: f64) -> Option<f32> {
    let lim = limit as f32;
    (lim > 0.0 && lim.is_finite()).then_some(lim)
}

/// The resident name of rows `r` of `stem` kept as a matrix of their own.
fn slice_key(stem: &str, r: &Range<usize>) -> String {
    format!("{stem}[{}..{}]", r.start, r.end)
}

/// Rows `rows` of each token's `n` outputs in `y`.
fn select_rows(y: Vec<f32>, rows: &Range<usize>, n: usize, tokens: usize) -> Vec<f32> {
    if rows.start == 0 && rows.end == n {
        return y;
    }
    (0..tokens)
        .flat_map(|t| y[t * n + rows.start..t * n + rows.end].iter().copied())
        .collect()
}
