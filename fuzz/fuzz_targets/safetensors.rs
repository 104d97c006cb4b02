//! The safetensors header and the sharded `model.safetensors.index.json`: never panic.
#![no_main]

use artifact::safetensors::index::ShardIndex;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((which, bytes)) = minirun_fuzz::split(data, 2) else {
        return;
    };
    match which {
        0 => {
            let _ = artifact::safetensors::parse_header(bytes);
        }
        _ => {
            let _ = ShardIndex::parse(bytes);
        }
    }
});
