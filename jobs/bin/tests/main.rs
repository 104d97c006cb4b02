//! The crate's integration tests, one module per suite (each file's own doc says what it covers).
//! Run one suite with `cargo test -p minirun-bins --test integration <suite>::`.
//! The publication suite is its own binary: `--test publish` (see Cargo.toml).

mod demo_cli;
mod first_mistakes;
#[path = "shared/fixture_dir.rs"]
mod fixture_dir;
mod gguf_cli;
mod hub_cli;
mod inspect_artifact;
mod inspect_plan;
mod mega_cli;
mod minirun_synth;
#[path = "pipeline_styles/main.rs"]
mod pipeline_styles;
#[path = "pipeline_v4/main.rs"]
mod pipeline_v4;
