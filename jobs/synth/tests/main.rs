//! The crate's integration tests, one module per suite. Run one suite with
//! `cargo test -p synth --test integration <suite>::`.

mod compressed_tensors_mxfp4;
mod synth;
