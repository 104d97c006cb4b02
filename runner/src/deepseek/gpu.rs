//! Matrices through the wgpu dequantize-and-multiply kernels (placeholder until the GPU backend
//! lands; see docs/runner-deepseek-v4.md).

use std::sync::Arc;

use super::error::V4Error;
use super::linear::{CpuLinears, Linears};
use super::source::WeightSource;

/// The GPU backend.
pub struct GpuLinears;

impl GpuLinears {
    pub fn new(
        src: Arc<dyn WeightSource>,
        _streamed: bool,
        expert_cache: usize,
    ) -> Result<CpuLinears, V4Error> {
        Ok(CpuLinears::new(src, expert_cache))
    }
}

impl Linears for GpuLinears {
    fn declare(&mut self, _: &str, _: usize, _: usize, _: bool) -> Result<(), V4Error> {
        Err(V4Error::Input("the gpu backend is not built yet".into()))
    }
    fn linear_rows(
        &mut self,
        _: &str,
        _: std::ops::Range<usize>,
        _: &[f32],
        _: usize,
    ) -> Result<Vec<f32>, V4Error> {
        Err(V4Error::Input("the gpu backend is not built yet".into()))
    }
}
