//! The wgpu runner: engine, GGUF tile streaming, the model families, their exact CPU references,
//! the runtime (generation loop, tokenizer, chat, prompt cache) and the front-ends
//! (`minirun-run`, `minirun-serve`); docs/runner.md is the manual. What follows is
//! `runner/README.md`: the layers and where a change goes.
#![doc = include_str!("../README.md")]

pub mod adapter;
pub mod artifact;
pub mod chat;
pub mod constrain;
pub mod deepseek;
pub mod engine;
pub mod error;
pub mod generate;
pub mod kimi;
pub mod llama;
pub mod logprobs;
pub mod model;
pub mod npy;
pub mod open;
pub mod prompt_cache;
pub mod reference;
pub mod registry;
pub mod run;
pub mod sample;
pub mod sequence;
pub mod serve;
pub mod session;
pub mod step_stats;
pub mod tokenizer;
