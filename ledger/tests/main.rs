//! The crate's integration tests, one module per suite (each file's own doc says what it covers).
//! Run one suite with `cargo test -p ledger --test integration <suite>::`.

mod fuzz;
mod it;
