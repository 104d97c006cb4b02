//! On-disk formats of Minirun, each with its reader and writer side by side so round trips are
//! tested in one place. The gate and the runner read artifacts only through this crate.
//! No network, no GPU.

pub mod container;
pub mod dtype;
pub mod evidence;
pub mod fsid;
pub mod gguf;
pub mod identity;
pub mod index_json;
pub mod manifest;
pub mod mega;
pub mod names;
pub mod release_record;
pub mod safetensors;
pub mod sniff;
pub mod tensor_map;
