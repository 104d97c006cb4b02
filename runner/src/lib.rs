//! The wgpu runner.

pub mod engine;
