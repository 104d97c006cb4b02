//! The ledger's unit journal and chunk log (docs/ledger.md): never panic; a journal that parses
//! round-trips byte for byte, and a chunk log's valid prefix is whole records.
#![no_main]

use std::path::Path;

use ledger::{ChunkLog, Journal, CHUNK_LOG_HEADER};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((which, bytes)) = minirun_fuzz::split(data, 2) else {
        return;
    };
    match which {
        0 => {
            if let Ok(j) = Journal::parse(Path::new("fuzz.json"), bytes) {
                let written = j.to_bytes();
                let again = Journal::parse(Path::new("fuzz.json"), &written).expect("re-parse");
                assert_eq!(again.to_bytes(), written);
            }
        }
        _ => {
            if let Ok((records, valid)) = ChunkLog::parse(Path::new("fuzz.log"), bytes) {
                assert!(valid <= bytes.len());
                assert_eq!(valid, CHUNK_LOG_HEADER.len() + records.len() * 108);
            }
        }
    }
});
