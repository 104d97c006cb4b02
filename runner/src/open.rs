//! Where a front-end gets what it runs on. Every front-end (`minirun-run`, its `-i` chat,
//! `minirun-serve`, the demo's run step through `minirun-run`) opens the process's one wgpu device
//! here, and every model family runs on a clone of that [`Engine`]: no model backend opens a
//! device of its own (`runner/tests/engine_counters.rs` scans the sources for it, `minirun-run --json`
//! reports the count).

use kernels::gpu::MatvecShape;

use crate::engine::Engine;
use crate::error::RunError;

/// Opens the default adapter's device (Mesa lavapipe on a machine without a GPU), its matvec
/// row mapping forced to `shape` where given (`--matvec-shape`; `None`: the adapter's).
pub fn engine(shape: Option<MatvecShape>) -> Result<Engine, RunError> {
    Ok(Engine::new_with_shape(shape)?)
}

/// Devices this process has opened (1 once a front-end has opened its engine).
pub fn devices_opened() -> u64 {
    kernels::gpu::devices_opened()
}
