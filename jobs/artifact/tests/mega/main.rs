//! Integration tests of `artifact::mega` (docs/mega.md): golden files, round trips from
//! safetensors, index resolution, hostile input, inspection rules and bounded proptest fuzzing.

#![allow(clippy::unwrap_used, clippy::panic)]

mod common;
mod fuzz;
mod golden;
mod hostile;
mod inspection;
mod kv;
mod roundtrip;
