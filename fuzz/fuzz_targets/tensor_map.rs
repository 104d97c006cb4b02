//! A unit's `tensors.json` (docs/repack.md): never panics; what parses round-trips.
#![no_main]

use artifact::tensor_map::TensorMap;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = TensorMap::parse(data) {
        let bytes = serde_json::to_vec(&m).expect("serialize");
        assert_eq!(TensorMap::parse(&bytes).expect("a written map parses"), m);
    }
});
