//! The crate's integration tests, one module per suite (each file's own doc says what it covers).
//! Run one suite with `cargo test -p pipeline --test integration <suite>::`.

mod common;
mod plan;
mod plan_fuzz;
mod real_size;
mod release_files;
mod stack;
