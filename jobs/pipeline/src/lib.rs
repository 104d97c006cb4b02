//! The Minirun stages as library code: the plan model, the shared CLI contract, and one module
//! per stage. Binaries in `jobs/bin` are thin wrappers over this crate.

pub mod candidate;
pub mod cli;
pub mod direct;
pub mod distributed;
pub mod fetch;
pub mod gate;
pub mod inspect;
pub mod inspect_artifact;
pub mod plan;
pub mod plan_tool;
pub mod progress;
pub mod promote;
pub mod repack;
pub mod stage;
pub mod verify;
pub mod work;
