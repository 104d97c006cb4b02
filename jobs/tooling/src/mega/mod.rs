//! `minirun-mega`'s command line ([`cli`]) and operations: safetensors (single or sharded) → MEGA, byte-preserving
//! ([`convert`]), and convert/inspect/verify returning text + status ([`ops`]); docs/mega.md §11.

pub mod cli;
pub mod convert;
pub mod ops;
