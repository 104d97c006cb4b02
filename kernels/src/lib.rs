//! WGSL compute kernels and their CPU references.
