//! The crate's integration tests, one module per suite (each file's own doc says what it covers).
//! Run one suite with `cargo test -p runner --test integration <suite>::`.

#[path = "artifact/main.rs"]
mod artifact;
mod chat_templates;
mod cli;
mod common;
mod constrain;
mod deepseek_bench;
mod deepseek_chat;
mod deepseek_common;
mod deepseek_gpu;
mod deepseek_reference;
mod deepseek_stream;
mod device;
mod engine;
mod engine_counters;
mod kimi_tokenizer;
mod kquant_run_gate;
mod layers;
mod profile;
mod prompt_cache;
mod sequence;
mod session;
mod smollm2_exact;
mod smollm2_llamacpp;
mod smollm2_model;
mod smollm2_stream;
mod smollm2_tokenizer;
