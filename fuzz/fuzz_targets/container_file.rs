//! A whole tile container file opened by the reader and reassembled (header, length, tiles,
//! digests when present): never panics, whatever the bytes.
#![no_main]

use std::sync::Mutex;

use artifact::container::{ContainerReader, DigestCheck};
use libfuzzer_sys::fuzz_target;
use minirun_fuzz::ScratchFile;

static FILE: Mutex<Option<ScratchFile>> = Mutex::new(None);

fuzz_target!(|data: &[u8]| {
    let mut guard = FILE.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = guard.get_or_insert_with(|| ScratchFile::new("fuzz.til").expect("scratch file"));
    let file = scratch.holding(data).expect("write the scratch file");
    if let Ok(r) = ContainerReader::from_file(file, scratch.path()) {
        let _ = r.reassemble(DigestCheck::IfPresent);
    }
});
