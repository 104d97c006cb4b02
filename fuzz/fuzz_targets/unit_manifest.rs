//! A unit's `manifest.json` (docs/manifest.md): never panics; what parses is canonical, so its
//! written form parses back to the same manifest.
#![no_main]

use artifact::manifest::Manifest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Manifest::parse(data) {
        let again = Manifest::parse(&m.to_bytes()).expect("a written manifest parses");
        assert_eq!(again, m);
    }
});
