//! MEGA: a shard's header, the release index and the `.megakv` prefix cache (docs/mega.md):
//! never panic.
#![no_main]

use std::io::Cursor;

use artifact::mega::{Index, ShardHeader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((which, bytes)) = minirun_fuzz::split(data, 3) else {
        return;
    };
    match which {
        0 => {
            let _ = ShardHeader::read("fuzz.mega", &mut Cursor::new(bytes));
        }
        1 => {
            let _ = Index::parse("fuzz.mega.index.json", bytes);
        }
        _ => {
            let _ = artifact::mega::kv::read_kv(bytes);
        }
    }
});
