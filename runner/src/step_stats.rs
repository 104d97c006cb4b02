//! What one decode step did, as `minirun-run --stats` and `--json` report it (issue 16 item 4):
//! the engine's counters ([`GpuStats`], counted in the one wgpu wrapper), the weight tiles read
//! from the file, the streamed-expert cache's hits and misses, and the device memory allocated so
//! far.

use kernels::gpu::GpuStats;

/// What a decoder has counted since it opened (two snapshots around a step give the step).
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    pub gpu: GpuStats,
    pub tile_reads: u64,
    pub expert_cache: Option<ExpertCacheStats>,
}

/// One decode step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StepStats {
    /// The engine's counters over the step.
    #[serde(flatten)]
    pub gpu: GpuStats,
    /// Tiles read from the weight file (streamed weights and experts).
    pub tile_reads: u64,
    /// Expert uses the streamed-expert cache served, and expert loads it made.
    pub expert_hits: u64,
    pub expert_misses: u64,
    /// Device memory allocated through the engine since it opened, after the step. Nothing is
    /// freed once a run is warm, so this is the memory the device holds (an upper bound of it
    /// where a buffer was dropped earlier).
    pub device_bytes: u64,
}

impl StepStats {
    /// The step between snapshots `a` and `b`.
    pub fn between(a: &Counters, b: &Counters) -> Self {
        let (ea, eb) = (
            a.expert_cache.unwrap_or_default(),
            b.expert_cache.unwrap_or_default(),
        );
        Self {
            gpu: b.gpu - a.gpu,
            tile_reads: b.tile_reads.saturating_sub(a.tile_reads),
            expert_hits: eb.hits.saturating_sub(ea.hits),
            expert_misses: eb.misses.saturating_sub(ea.misses),
            device_bytes: b.gpu.device_bytes_allocated,
        }
    }
}

/// The largest value of each counter over the decode steps (what a structural check reads).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct StepSummary {
    pub steps: usize,
    pub max: StepStats,
}

impl StepSummary {
    pub fn of(steps: &[StepStats]) -> Self {
        let mut m = StepStats::default();
        for s in steps {
            let (g, x) = (&mut m.gpu, &s.gpu);
            g.submits = g.submits.max(x.submits);
            g.dispatches = g.dispatches.max(x.dispatches);
            g.bytes_uploaded = g.bytes_uploaded.max(x.bytes_uploaded);
            g.bytes_read_back = g.bytes_read_back.max(x.bytes_read_back);
            g.maps = g.maps.max(x.maps);
            g.buffers_created = g.buffers_created.max(x.buffers_created);
            g.bind_groups_created = g.bind_groups_created.max(x.bind_groups_created);
            g.device_bytes_allocated = g.device_bytes_allocated.max(x.device_bytes_allocated);
            m.tile_reads = m.tile_reads.max(s.tile_reads);
            m.expert_hits = m.expert_hits.max(s.expert_hits);
            m.expert_misses = m.expert_misses.max(s.expert_misses);
            m.device_bytes = m.device_bytes.max(s.device_bytes);
        }
        Self {
            steps: steps.len(),
            max: m,
        }
    }

    /// One stderr line.
    pub fn line(&self) -> String {
        let (m, g) = (&self.max, &self.max.gpu);
        if self.steps == 0 {
            return "stats: no decode step was counted".to_string();
        }
        format!(
            "stats: per decode step (max over {} steps): {} submits, {} dispatches, {} B uploaded, {} B read back, {} buffers and {} bind groups created, {} tile reads, {} expert hits and {} misses; device memory {:.1} MiB",
            self.steps,
            g.submits,
            g.dispatches,
            g.bytes_uploaded,
            g.bytes_read_back,
            g.buffers_created,
            g.bind_groups_created,
            m.tile_reads,
            m.expert_hits,
            m.expert_misses,
            m.device_bytes as f64 / f64::from(1u32 << 20),
        )
    }
}

/// What the streamed routed-expert cache did (docs/runner-deepseek-v4.md "Expert cache").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExpertCacheStats {
    /// Expert uses (a token's pick in a layer) that found the expert on the device.
    pub hits: u64,
    /// Expert loads from the source (a use the cache missed, or a product that reloaded it).
    pub misses: u64,
    /// Bytes those loads read (packed + scales of the expert's matrices).
    pub loaded_bytes: u64,
    /// Experts evicted to stay within the budget.
    pub evictions: u64,
    /// Bytes of cached experts on the device now, and at most so far (the transient slots,
    /// one layer's picks at most, are outside the budget).
    pub cached_bytes: u64,
    pub peak_bytes: u64,
    /// The budget (`--expert-cache-mib`).
    pub budget_bytes: u64,
}
