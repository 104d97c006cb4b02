//! The crate's integration tests, one module per suite. Run one suite with
//! `cargo test -p tooling --test integration <suite>::`.

#![allow(clippy::unwrap_used, clippy::panic)]

mod gguf_llama_quantize;
mod gguf_synth_like;
/// The MEGA fixtures and recording opener shared with `artifact`'s MEGA suite.
#[allow(dead_code)]
#[path = "../../artifact/tests/mega/common.rs"]
mod mega_common;
mod mega_convert;
