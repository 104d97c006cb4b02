//! The wgpu backend of [`Linears`]: every matrix multiplication of the V4 forward runs in the
//! kernels crate's dequantize-and-multiply WGSL kernels on the stored bytes (`fp8-e4m3-block`
//! 128×128 for FP8 weights, `mxfp4` for routed experts, plain BF16 for the compressor, indexer
//! and head projections); everything else (norms, RoPE, Sinkhorn, compressor pooling, indexer
//! scoring and top-k, routing, attention over ≤ 12 keys) stays on the CPU (docs/runner-deepseek-v4.md).
//!
//! Resident: every matrix is uploaded when declared. Streamed: only the non-expert matrices are;
//! a routed expert's matrices are read from the source tile by tile (one `pread` per tile) when a
//! token is routed to it and kept in a device cache bounded in bytes (`--expert-cache-mib`;
//! hits, misses and evictions counted in [`ExpertCacheStats`]). Hotness first: every matrix's
//! uses are counted for the whole run; a newcomer evicts cached matrices used fewer times than
//! itself (the least recently used of equals first), and one that is not hotter than what it
//! would displace serves its product from a one-matrix transient slot instead of being cached.
//! A decode step sweeps the layers in order, so plain LRU with a budget below one token's
//! working set evicts every matrix just before it is needed again and never hits; counting uses
//! keeps the experts the conversation keeps choosing (ds4's hotness-first is the anchor).
//! The kernels' accumulation order depends only on the row and K (docs/kernels.md), so a streamed
//! run produces the resident run's logits bit for bit.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use kernels::generated::Generated;
use kernels::gpu::{Bind, Gpu, MatvecShape};
use kernels::unrolled::{self, Layout};
use kernels::{Kernel, KernelError};

use crate::engine::{Engine, ResidentMatrix};

use super::error::V4Error;
use super::linear::{check_product, load_matrix, tensor_err, ExpertCacheStats, Linears};
use super::source::WeightSource;

/// The GPU backend.
pub struct GpuLinears {
    engine: Engine,
    src: Arc<dyn WeightSource>,
    streamed: bool,
    shapes: HashMap<String, (usize, usize, bool)>,
    resident: HashMap<String, ResidentMatrix>,
    /// Cached routed-expert matrices with their bytes, least recently used first.
    experts: VecDeque<(String, ResidentMatrix, u64)>,
    /// Products each routed-expert matrix has served so far (kept after its eviction).
    uses: HashMap<String, u64>,
    /// A matrix not admitted to the cache, held for the product that needed it.
    transient: Option<(String, ResidentMatrix, u64)>,
    cache: ExpertCacheStats,
    /// The one-token products' unrolled modules (a CPU adapter), by kernel, K and rows.
    unrolled: HashMap<(Kernel, usize, usize), Generated>,
    /// The 64 KiB uniform window their input is written into (made at the first use).
    x_window: Option<wgpu::Buffer>,
    /// A resident matrix's one-token product, ready to run (made at its first use): nothing is
    /// allocated per product after that.
    prepared: HashMap<String, Prepared>,
}

impl GpuLinears {
    /// Opens the default adapter (lavapipe on a machine without a GPU).
    /// `expert_cache_bytes` bounds the streamed experts on the device; the matrix a product
    /// needs is always loaded, so a budget below one matrix keeps just that one.
    pub fn new(
        src: Arc<dyn WeightSource>,
        streamed: bool,
        expert_cache_bytes: u64,
    ) -> Result<Self, V4Error> {
        Ok(Self {
            engine: Engine::new()?,
            src,
            streamed,
            shapes: HashMap::new(),
            resident: HashMap::new(),
            experts: VecDeque::new(),
            uses: HashMap::new(),
            transient: None,
            cache: ExpertCacheStats {
                budget_bytes: expert_cache_bytes,
                ..ExpertCacheStats::default()
            },
            unrolled: HashMap::new(),
            x_window: None,
            prepared: HashMap::new(),
        })
    }

    /// `m · x` for one input vector through the unrolled one-token module
    /// (`kernels::unrolled`: straight-line code in the looped kernel's accumulation order, so the
    /// same bits) where the adapter is a CPU one (the `Rows` mapping, as the Llama path decides),
    /// the matrix one part, and the format and K have one; `None` otherwise.
    fn matvec_unrolled(&mut self, stem: &str, x: &[f32]) -> Option<Result<Vec<f32>, V4Error>> {
        let g = self.engine.gpu();
        let m = self.resident.get(stem).or_else(|| {
            self.experts
                .iter()
                .chain(&self.transient)
                .find(|(n, _, _)| n == stem)
                .map(|(_, m, _)| m)
        })?;
        let kernel = m.format.matvec_kernel();
        let [part] = m.parts.as_slice() else {
            return None;
        };
        if g.matvec_shape() != MatvecShape::Rows || !unrolled::available(kernel, m.k) {
            return None;
        }
        let key = (kernel, m.k, m.rows);
        let module = match self.unrolled.entry(key) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(unrolled::source(kernel, m.k, m.rows, Layout::Rows)?),
        };
        let window = (kernels::UNIFORM_X_ELEMENTS * 4) as u64;
        let xw = self
            .x_window
            .get_or_insert_with(|| g.uniform("x window", &vec![0u8; window as usize]));
        if !self.resident.contains_key(stem) {
            // a streamed expert's buffers come and go with the cache: prepared for this product
            return Some(
                Prepared::new(g, module, m, part, xw)
                    .and_then(|p| p.run(g, xw, x))
                    .map_err(V4Error::from),
            );
        }
        let p = match self.prepared.entry(stem.to_owned()) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => match Prepared::new(g, module, m, part, xw) {
                Ok(p) => e.insert(p),
                Err(err) => return Some(Err(err.into())),
            },
        };
        Some(p.run(g, xw, x).map_err(V4Error::from))
    }

    fn upload(&self, stem: &str, rows: usize, k: usize) -> Result<(ResidentMatrix, u64), V4Error> {
        let q = load_matrix(self.src.as_ref(), stem, rows, k)?;
        let bytes = (q.packed.len() + q.scales.len()) as u64;
        let m = self.engine.upload_matrix(
            stem,
            q.format,
            rows,
            k,
            [&q.packed, &q.scales, &[]],
            None,
        )?;
        Ok((m, bytes))
    }

    /// Products served by `stem` so far.
    fn uses(&self, stem: &str) -> u64 {
        self.uses.get(stem).copied().unwrap_or(0)
    }

    /// The cached matrix with the fewest uses (the least recently used of those): its index.
    fn coldest(&self) -> Option<usize> {
        self.experts
            .iter()
            .enumerate()
            .min_by_key(|(i, (n, _, _))| (self.uses(n), *i))
            .map(|(i, _)| i)
    }

    /// Makes routed expert `stem` available (cached, or in the one-matrix transient slot).
    fn load_expert(&mut self, stem: &str) -> Result<(), V4Error> {
        *self.uses.entry(stem.to_owned()).or_default() += 1;
        if let Some(i) = self.experts.iter().position(|(n, _, _)| n == stem) {
            self.cache.hits += 1;
            if let Some(hit) = self.experts.remove(i) {
                self.experts.push_back(hit);
            }
            return Ok(());
        }
        if self.transient.as_ref().is_some_and(|(n, _, _)| n == stem) {
            self.cache.hits += 1;
            return Ok(());
        }
        let &(rows, k, _) = self
            .shapes
            .get(stem)
            .ok_or_else(|| tensor_err(stem, "used before it was declared".into()))?;
        self.transient = None;
        let (m, loaded) = self.upload(stem, rows, k)?;
        self.cache.misses += 1;
        self.cache.loaded_bytes += loaded;
        // Admission: colder cached matrices make room for a hotter newcomer; one that is not
        // hotter than what it would displace serves this product from the transient slot.
        let hot = self.uses(stem);
        while self.cache.cached_bytes + loaded > self.cache.budget_bytes {
            match self.coldest() {
                Some(i) if self.uses(&self.experts[i].0) < hot => {
                    if let Some((_, _, b)) = self.experts.remove(i) {
                        self.cache.cached_bytes -= b;
                        self.cache.evictions += 1;
                    }
                }
                _ => break,
            }
        }
        if self.cache.cached_bytes + loaded <= self.cache.budget_bytes {
            self.cache.cached_bytes += loaded;
            self.cache.peak_bytes = self.cache.peak_bytes.max(self.cache.cached_bytes);
            self.experts.push_back((stem.to_owned(), m, loaded));
        } else {
            self.transient = Some((stem.to_owned(), m, loaded));
        }
        Ok(())
    }

    /// The device matrix of `stem` (routed experts must have been made available first).
    fn get(&self, stem: &str) -> Result<&ResidentMatrix, V4Error> {
        self.resident
            .get(stem)
            .or_else(|| {
                self.experts
                    .iter()
                    .rev()
                    .chain(self.transient.iter())
                    .find(|(n, _, _)| n == stem)
                    .map(|(_, m, _)| m)
            })
            .ok_or_else(|| tensor_err(stem, "not loaded".into()))
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
        if !(routed_expert && self.streamed) {
            let (m, _) = self.upload(stem, rows, k)?;
            self.resident.insert(stem.to_owned(), m);
        }
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
        if !self.resident.contains_key(stem) {
            self.load_expert(stem)?;
        }
        let m = self.get(stem)?;
        let (n, k) = (m.rows, m.k);
        check_product(stem, &rows, n, k, x, tokens)?;
        let y = match (tokens == 1)
            .then(|| self.matvec_unrolled(stem, x))
            .flatten()
        {
            Some(y) => y?,
            None => {
                let m = self.get(stem)?;
                let g = self.engine.gpu();
                let xb = g.upload_f32("x", x)?;
                let yb = g.zeros("y", (tokens * n * 4) as u64)?;
                self.engine.matmul(m, &xb, &yb, tokens)?;
                self.engine.gpu().read_f32(&yb, tokens * n)?
            }
        };
        if rows.start == 0 && rows.end == n {
            return Ok(y);
        }
        Ok((0..tokens)
            .flat_map(|t| y[t * n + rows.start..t * n + rows.end].iter().copied())
            .collect())
    }

    fn tile_reads(&self) -> u64 {
        self.src.tile_reads()
    }
    fn expert_loads(&self) -> (u64, u64) {
        (self.cache.misses, self.cache.loaded_bytes)
    }
    fn expert_cache(&self) -> Option<ExpertCacheStats> {
        self.streamed.then_some(self.cache)
    }
}

/// One matrix's unrolled one-token product: its pipeline, bind group, output and read-back
/// buffers.
struct Prepared {
    compiled: Arc<kernels::gpu::Compiled>,
    group: wgpu::BindGroup,
    groups: (u32, u32, u32),
    y: wgpu::Buffer,
    staging: wgpu::Buffer,
    rows: usize,
}

impl Prepared {
    fn new(
        g: &Gpu,
        module: &Generated,
        m: &ResidentMatrix,
        part: &crate::engine::ResidentPart,
        x_window: &wgpu::Buffer,
    ) -> Result<Self, KernelError> {
        let kernel = m.format.matvec_kernel();
        let y = g.zeros("y", (m.rows * 4) as u64)?;
        let mut params = m
            .format
            .params(m.rows as u32, m.k as u32, 1, m.rows as u32, 0);
        let groups = unrolled::launch(kernel, m.k, &mut params);
        let ub = g.uniform("params", bytemuck::bytes_of(&params));
        let w = part.row_buffers();
        let window = Bind {
            buffer: x_window,
            offset: 0,
            size: Some((kernels::UNIFORM_X_ELEMENTS * 4) as u64),
        };
        let mut binds = vec![Bind::from(&ub), window, Bind::from(&y), w.packed];
        binds.extend(w.scales);
        binds.extend(w.biases);
        binds.push(w.packed);
        let compiled = g.compiled_generated(module);
        let group = g.bind_group_generated(&compiled, module, &binds)?;
        let staging = g.staging("y readback", (m.rows * 4) as u64);
        Ok(Self {
            compiled,
            group,
            groups,
            y,
            staging,
            rows: m.rows,
        })
    }

    /// `x` written into the window, one submit (the product and the copy back), one map.
    fn run(&self, g: &Gpu, x_window: &wgpu::Buffer, x: &[f32]) -> Result<Vec<f32>, KernelError> {
        g.write(x_window, 0, bytemuck::cast_slice(x));
        let bytes = (self.rows * 4) as u64;
        let mut enc = g.encoder("v4 unrolled matvec");
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            g.dispatch_in(&mut pass, &self.compiled, &self.group, self.groups);
        }
        enc.copy_buffer_to_buffer(&self.y, 0, &self.staging, 0, bytes.div_ceil(4) * 4);
        g.submit(enc.finish());
        let mut out = Vec::with_capacity(bytes as usize);
        g.read_staging(&self.staging, bytes, &mut out)?;
        Ok(out
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}
