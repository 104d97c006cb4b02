//! The crate's integration tests, one module per suite (each file's own doc says what it covers).
//! Run one suite with `cargo test -p artifact --test integration <suite>::`.

#[path = "container/main.rs"]
mod container;
mod fuzz_index_identity;
mod gguf_format;
mod gguf_real;
mod gguf_split;
mod identity;
mod index_json;
mod manifest;
#[path = "mega/main.rs"]
mod mega;
