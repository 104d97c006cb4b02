//! Hugging Face Hub protocol: client and embedded server (see docs/hub.md and
//! `../shared/design/hub-protocol.md`). [`protocol`] holds the shapes and validation rules both
//! sides share; [`client`] talks to a hub (huggingface.co or ours); [`server`] is the file-backed
//! hub `minirun-hub serve` runs.

pub mod client;
pub mod protocol;
#[cfg(feature = "server")]
pub mod server;

pub use client::{HubClient, HubError, Token, TokenSource, TOKEN_LOOKUP};
pub use protocol::{RepoId, RepoType};
