//! The DeepSeek V4 (Flash) model adapter: executes a Minirun V4 artifact straight from its tile
//! containers and plain streams (no conversion step), following transformers 5.24's
//! `modeling_deepseek_v4.py` operation by operation (docs/runner-deepseek-v4.md;
//! `../shared/design/models.md` §1–2).
//!
//! * [`source`]: the [`WeightSource`] trait and [`ReleaseDir`] (a release directory read in place);
//! * [`config`]: `config.json` and the two RoPE tables;
//! * [`linear`]: weight loading in the stored formats and the [`linear::Linears`] backends;
//! * [`hc`], [`attention`], [`compress`], [`moe`], [`ops`]: the forward pass;
//! * [`residual`]: the mHC residual of a one-token step kept on the device;
//! * [`gpu`]: matrices through the wgpu kernels, resident or streamed;
//! * [`model`]: [`V4Model`] (`open`, `forward`, `teacher_forced`, `logits_for`);
//! * [`chat`]: the conversation format (DeepSeek's own renderer, chat mode).
//! * [`state`]: the decode state as `.megakv` sections and in-memory snapshots.
//! * [`tools`]: tool calls (DSML) rendered and parsed.

pub mod attention;
pub mod chain;
pub mod chat;
pub mod compress;
pub mod config;
pub mod entry;
pub mod error;
pub mod gpu;
pub mod hc;
pub mod linear;
pub mod model;
pub mod moe;
pub mod ops;
mod prepared;
pub mod residual;
pub mod source;
pub mod state;
pub mod tools;
pub mod verified;

pub use config::V4Config;
pub use error::V4Error;
pub use model::{argmax, Mode, V4Model};
pub use source::{ReleaseDir, Tensor, WeightSource};
