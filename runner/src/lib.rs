//! The wgpu runner.
