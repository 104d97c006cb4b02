//! A compute module generated for one model shape (the decode attention of [`crate::attention`]):
//! its WGSL text, entry point and binding kinds, compiled by [`crate::gpu::Gpu::compiled_generated`]
//! once per label.

/// The kind of one binding of a generated module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingKind {
    /// A uniform block (parameters, or an input read as a 64 KiB window).
    Uniform,
    /// A storage buffer.
    Storage { read_only: bool },
}

/// One generated compute module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// Unique per (kernel, shape): the pipeline cache key and the label in messages.
    pub label: String,
    pub source: String,
    pub entry: &'static str,
    /// (binding number, kind) of every binding, in the order buffers are given for it.
    pub bindings: Vec<(u32, BindingKind)>,
}
