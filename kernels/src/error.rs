//! Errors of the kernels crate: shapes and byte lengths that do not fit a kernel, and GPU set-up.

/// A kernel refused its inputs, or the GPU harness failed.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("{what}: expected {expected} bytes for {rows}×{k} in {format}, got {actual}")]
    Length {
        what: &'static str,
        format: String,
        rows: usize,
        k: usize,
        expected: usize,
        actual: usize,
    },
    #[error("{format}: K = {k} is not a multiple of {multiple}")]
    KNotMultiple {
        format: String,
        k: usize,
        multiple: usize,
    },
    #[error("{format}: group size {group} must be a positive power of two")]
    BadGroup { format: String, group: usize },
    #[error("{what}: expected {expected} elements, got {actual}")]
    Elements {
        what: &'static str,
        expected: usize,
        actual: usize,
    },
    #[error("{what} = {value} is invalid: {reason}")]
    Shape {
        what: &'static str,
        value: usize,
        reason: &'static str,
    },
    #[error("size overflow computing {what}")]
    Overflow { what: &'static str },
    #[error("token id {id} at position {position} is outside the vocabulary of {vocab}")]
    TokenId {
        id: u32,
        position: usize,
        vocab: usize,
    },
    #[error("no usable wgpu adapter on {backends} ({}): {hint}", asked_note(*.asked))]
    NoAdapter {
        backends: String,
        asked: crate::device::Asked,
        hint: &'static str,
    },
    #[error("{source_name} names the backend `{name}`, which wgpu does not have (vulkan, metal, dx12, gl; comma-separated)")]
    UnknownBackend {
        source_name: &'static str,
        name: String,
    },
    #[error("subgroup reductions were asked for, but the adapter `{0}` has no subgroup operations (wgpu::Features::SUBGROUP)")]
    NoSubgroups(String),
    #[error("wgpu device request failed")]
    Device(#[source] wgpu::RequestDeviceError),
    #[error("gpu buffer of {bytes} bytes exceeds the device binding limit of {limit} bytes")]
    BindingTooLarge { bytes: u64, limit: u64 },
    #[error("{kernel}: expected {expected} buffers, got {actual}")]
    Bindings {
        kernel: &'static str,
        expected: usize,
        actual: usize,
    },
    #[error("{label}: expected {expected} bindings, got {actual}")]
    GeneratedBindings {
        label: String,
        expected: usize,
        actual: usize,
    },
    #[error("gpu readback failed: {0}")]
    Readback(String),
}

fn asked_note(asked: crate::device::Asked) -> &'static str {
    match asked {
        crate::device::Asked::Flag => "asked for with --backend",
        crate::device::Asked::Env => "asked for with WGPU_BACKEND",
        crate::device::Asked::Default => "the default backends",
    }
}
