//! Integration tests of `artifact::mega` (docs/mega.md): golden files, round trips from
//! safetensors, index resolution, hostile input, inspection rules and bounded proptest fuzzing.

#![allow(clippy::unwrap_used, clippy::panic)]

/// Fixtures shared with the `tooling` crate's conversion tests (`tests/mega_convert.rs` there),
/// which use the safetensors writers this suite does not.
#[allow(dead_code)]
mod common;
mod fuzz;
mod golden;
mod hostile;
mod inspection;
mod kv;
