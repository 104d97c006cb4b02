//! The tile container's header (docs/container.md): never panics; an accepted header describes a
//! layout inside the bytes it was read from.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = artifact::container::parse_header(data) {
        assert!(h.layout.header_bytes as usize <= data.len());
        assert!(h.digests.len() * 32 <= data.len());
    }
});
