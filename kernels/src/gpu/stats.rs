//! What crossed the wgpu API through [`super::Gpu`]: the counters behind `minirun-run --stats`
//! and `--json`, and the process's count of opened devices.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts of everything that crossed the wgpu API through [`Gpu`] (monotonic; subtract two
/// snapshots for one step's work).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct GpuStats {
    /// `Queue::submit` calls.
    pub submits: u64,
    /// Compute dispatches recorded.
    pub dispatches: u64,
    /// Bytes written from the host (`Queue::write_buffer` and initialised buffers).
    pub bytes_uploaded: u64,
    /// Bytes mapped back to the host.
    pub bytes_read_back: u64,
    /// Buffer maps (blocking read-backs).
    pub maps: u64,
    /// Buffers created.
    pub buffers_created: u64,
    /// Bind groups created.
    pub bind_groups_created: u64,
    /// Bytes of every buffer created so far (the engines free nothing while a model is open, so
    /// for them this is the peak of their device memory).
    pub device_bytes_allocated: u64,
}

impl std::ops::Sub for GpuStats {
    type Output = GpuStats;
    fn sub(self, o: GpuStats) -> GpuStats {
        GpuStats {
            submits: self.submits.saturating_sub(o.submits),
            dispatches: self.dispatches.saturating_sub(o.dispatches),
            bytes_uploaded: self.bytes_uploaded.saturating_sub(o.bytes_uploaded),
            bytes_read_back: self.bytes_read_back.saturating_sub(o.bytes_read_back),
            maps: self.maps.saturating_sub(o.maps),
            buffers_created: self.buffers_created.saturating_sub(o.buffers_created),
            bind_groups_created: self
                .bind_groups_created
                .saturating_sub(o.bind_groups_created),
            device_bytes_allocated: self
                .device_bytes_allocated
                .saturating_sub(o.device_bytes_allocated),
        }
    }
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) submits: AtomicU64,
    pub(super) dispatches: AtomicU64,
    pub(super) bytes_uploaded: AtomicU64,
    pub(super) bytes_read_back: AtomicU64,
    pub(super) maps: AtomicU64,
    pub(super) buffers_created: AtomicU64,
    pub(super) bind_groups_created: AtomicU64,
    pub(super) device_bytes_allocated: AtomicU64,
    pub(super) pipelines: AtomicU64,
    pub(super) compile_ns: AtomicU64,
}

pub(super) fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// Devices this process has requested from an adapter ([`super::Gpu::open`], the only place one is
/// requested).
pub(super) static DEVICES_OPENED: AtomicU64 = AtomicU64::new(0);

/// How many wgpu devices this process has opened so far (`minirun-run --json` reports it: a
/// front-end opens exactly one, whatever the model family).
pub fn devices_opened() -> u64 {
    DEVICES_OPENED.load(Ordering::Relaxed)
}
