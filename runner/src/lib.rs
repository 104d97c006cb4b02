//! The wgpu runner: engine, GGUF tile streaming, the Llama-family adapter, its exact CPU
//! reference, the tokenizer and `minirun-run` (docs/runner.md).

pub mod artifact;
pub mod chat;
pub mod deepseek;
pub mod engine;
pub mod error;
pub mod llama;
pub mod model;
pub mod npy;
pub mod open;
pub mod prompt_cache;
pub mod reference;
pub mod registry;
pub mod run;
pub mod sample;
pub mod serve;
pub mod session;
pub mod step_stats;
pub mod tokenizer;
