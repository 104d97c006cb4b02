//! The crate's integration tests, one module per suite (each file's own doc says what it covers).
//! Run one suite with `cargo test -p hub --test integration <suite>::`.

mod common;
mod faults;
mod import;
mod roundtrip;
mod security;
mod token_redaction;
