//! The crate's integration tests, one module per suite (each file's own doc says what it covers).
//! Run one suite with `cargo test -p kernels --test integration <suite>::`.

mod attention;
mod block_layouts;
mod by_index;
mod compressed_tensors_mxfp4;
mod fused;
mod gpu;
mod looped;
mod matmul;
mod support;
mod tiled;
mod v4;
mod v4_attn;
mod validate_wgsl;
