//! WGSL compute kernels for the runner, a plain scalar CPU reference of each (`reference`), and a
//! small wgpu dispatch harness (`gpu`).
//!
//! Every kernel family is one `.wgsl` file under `kernels/wgsl/` whose header documents the bytes it
//! reads (citing `../shared/design/formats.md`); [`Kernel`] names each entry point. The weight formats
//! are the tile-container modes of the container spec (seed 000: `fp8-e4m3-block`, `mxfp4`, `affine`),
//! the plain dtypes (f32, f16, bf16), the GGUF blocks Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and the GGUF
//! K-quant super-blocks Q4_K, Q5_K, Q6_K. The accumulation order of every reduction depends only on
//! the row and K, never on the dispatch (docs/kernels.md), which is what lets a streamed
//! (row-tiled) run and a resident run produce bit-identical results.

pub mod attention;
pub mod device;
mod error;
mod format;
pub mod generated;
pub mod gpu;
mod kernel;
mod launch;
pub mod looped;
mod params;
pub mod reference;
pub mod unrolled;

pub use error::KernelError;
pub use format::{Dtype, EmbeddingFormat, WeightFormat};
pub use kernel::{Access, Kernel, UNIFORM_X_ELEMENTS, X_STORAGE, X_UNIFORM};
pub use params::{
    ActivationParams, ArgmaxParams, AttentionParams, EmbeddingParams, HcMixParams, MatmulParams,
    MoeRouteParams, RmsNormParams, RopeMode, RopeParams, SoftmaxParams, StreamReadParams,
    V4AttendParams, V4CompressParams, V4IndexParams,
};

/// Invocations per workgroup of every reduction kernel: the number of lane partial sums.
pub const LANES: u32 = 64;
/// Tokens one `matmul` workgroup multiplies at once (the weights are decoded once per tile).
pub const TOKEN_TILE: u32 = 4;
/// Invocations per workgroup of the element-wise kernels (RoPE, SiLU, SwiGLU).
pub const ELEMENTWISE_WORKGROUP: u32 = 256;
/// Largest workgroup count in one dispatch dimension (WebGPU default limit); bigger grids use y.
pub const MAX_GROUPS_X: u32 = 65_535;
/// What `Kernel::Argmax` writes for a row without a comparable value (empty or all NaN).
pub const ARGMAX_NONE: u32 = u32::MAX;

/// A 2-D workgroup grid for `items` workgroups: `(groups_x, groups_y)` with
/// `groups_x · groups_y ≥ items`; kernels recover the item as `x + y · groups_x`.
pub fn grid_2d(items: u32) -> (u32, u32) {
    if items <= MAX_GROUPS_X {
        (items.max(1), 1)
    } else {
        (MAX_GROUPS_X, items.div_ceil(MAX_GROUPS_X))
    }
}
