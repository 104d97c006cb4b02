//! A GGUF file's header (metadata and tensor infos, docs/gguf.md): never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = artifact::gguf::reader::parse_header(data, "fuzz.gguf");
});
