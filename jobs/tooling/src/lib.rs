//! The `minirun-gguf` and `minirun-mega` operations as library code, over the byte layouts,
//! readers and writers of `artifact`: GGUF quantize (llama-quantize's `--pure` and mixture rules),
//! split/merge/info and the HF → GGUF converter ([`gguf`]); safetensors → MEGA conversion and the
//! inspect/verify texts ([`mega`]). Their command lines are here too (`gguf::cli`, `mega::cli`): the binaries only call `main`.

pub mod gguf;
pub mod mega;
