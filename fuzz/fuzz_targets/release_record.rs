//! The release record a candidate carries (docs/publish.md): never panics; what parses
//! round-trips.
#![no_main]

use artifact::release_record::ReleaseRecord;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = ReleaseRecord::parse(data) {
        assert_eq!(ReleaseRecord::parse(&r.to_bytes()).expect("re-parse"), r);
    }
});
