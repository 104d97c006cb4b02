//! The Minirun stages as library code: the plan model, the shared CLI contract, and one module
//! per stage. Binaries in `jobs/bin` are thin wrappers over this crate.

pub mod cli;
pub mod fetch;
pub mod gate;
pub mod gguf_tool;
pub mod inspect;
pub mod inspect_artifact;
pub mod plan;
pub mod repack;
pub mod synth;
pub mod work;
