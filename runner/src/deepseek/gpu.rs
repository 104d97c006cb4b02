//! The wgpu backend of [`Linears`]: every matrix multiplication of the V4 forward runs in the
//! kernels crate's dequantize-and-multiply WGSL kernels on the stored bytes (`fp8-e4m3-block`
//! 128×128 for FP8 weights, `mxfp4` for routed experts, plain BF16 for the compressor, indexer
//! and head projections); everything else (norms, RoPE, Sinkhorn, compressor pooling, indexer
//! scoring and top-k, routing, attention over ≤ 12 keys) stays on the CPU (docs/runner-deepseek-v4.md).
//!
//! Resident: every matrix is uploaded when declared. Streamed: only the non-expert matrices are;
//! a routed expert's three matrices are read from the source tile by tile (one `pread` per tile)
//! the first time a token is routed to it and kept in a bounded least-recently-used device cache.
//! The kernels' accumulation order depends only on the row and K (docs/kernels.md), so a streamed
//! run produces the resident run's logits bit for bit.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use crate::engine::{Engine, ResidentMatrix};

use super::error::V4Error;
use super::linear::{check_product, load_matrix, tensor_err, Linears};
use super::source::WeightSource;

/// The GPU backend.
pub struct GpuLinears {
    engine: Engine,
    src: Arc<dyn WeightSource>,
    streamed: bool,
    shapes: HashMap<String, (usize, usize, bool)>,
    resident: HashMap<String, ResidentMatrix>,
    experts: VecDeque<(String, ResidentMatrix)>,
    expert_cache: usize,
    /// Routed-expert matrices loaded from the source after open (cache misses).
    pub expert_loads: u64,
    /// Bytes of those loads (packed + scales).
    pub expert_bytes: u64,
}

impl GpuLinears {
    /// Opens the default adapter (lavapipe on a machine without a GPU).
    pub fn new(
        src: Arc<dyn WeightSource>,
        streamed: bool,
        expert_cache: usize,
    ) -> Result<Self, V4Error> {
        Ok(Self {
            engine: Engine::new()?,
            src,
            streamed,
            shapes: HashMap::new(),
            resident: HashMap::new(),
            experts: VecDeque::new(),
            expert_cache: expert_cache.max(3),
            expert_loads: 0,
            expert_bytes: 0,
        })
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

    fn matrix(&mut self, stem: &str) -> Result<&ResidentMatrix, V4Error> {
        if self.resident.contains_key(stem) {
            return self
                .resident
                .get(stem)
                .ok_or_else(|| tensor_err(stem, "vanished from the resident set".into()));
        }
        if let Some(i) = self.experts.iter().position(|(n, _)| n == stem) {
            if let Some(hit) = self.experts.remove(i) {
                self.experts.push_back(hit);
            }
        } else {
            let &(rows, k, _) = self
                .shapes
                .get(stem)
                .ok_or_else(|| tensor_err(stem, "used before it was declared".into()))?;
            let (m, bytes) = self.upload(stem, rows, k)?;
            self.expert_loads += 1;
            self.expert_bytes += bytes;
            if self.experts.len() >= self.expert_cache {
                self.experts.pop_front();
            }
            self.experts.push_back((stem.to_owned(), m));
        }
        self.experts
            .back()
            .map(|(_, m)| m)
            .ok_or_else(|| tensor_err(stem, "expert cache is empty".into()))
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
        let m = self.matrix(stem)?;
        let (n, k) = (m.rows, m.k);
        check_product(stem, &rows, n, k, x, tokens)?;
        let g = self.engine.gpu();
        let xb = g.upload_f32("x", x)?;
        let yb = g.zeros("y", (tokens * n * 4) as u64)?;
        // `matrix` borrowed self mutably; re-borrow immutably for the dispatch.
        let m = self
            .resident
            .get(stem)
            .or_else(|| {
                self.experts
                    .back()
                    .filter(|(s, _)| s == stem)
                    .map(|(_, m)| m)
            })
            .ok_or_else(|| tensor_err(stem, "not loaded".into()))?;
        self.engine.matmul(m, &xb, &yb, tokens)?;
        let y = self.engine.gpu().read_f32(&yb, tokens * n)?;
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
        (self.expert_loads, self.expert_bytes)
    }
}
