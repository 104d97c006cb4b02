//! `minirun-gguf`'s command line ([`cli`]), its operations ([`ops`]: split, quantize with its per-tensor plan, info, the size
//! parser), llama-quantize's file rules ([`pure`], [`mixture`]), the HF → GGUF converter
//! ([`convert`], with [`special_vocab`]), the deterministic test models ([`testmodel`]) and
//! models shaped like another file's header ([`like`]).
//! Spec: the third seed document (`../shared/seeds/003_*.txt`); decisions in docs/gguf.md.

pub mod cli;
pub mod convert;
pub mod like;
pub mod mixture;
pub mod ops;
pub mod pure;
pub mod special_vocab;
pub mod testmodel;
