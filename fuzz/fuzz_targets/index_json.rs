//! A publication's `index.json` with its configuration and tokenizer identities
//! (docs/index-json.md): the reader never panics and classifies every input.
#![no_main]

use artifact::index_json::IndexDocument;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let d = IndexDocument::read(data);
    if d.notes.is_empty() {
        if let Ok(bytes) = d.to_bytes() {
            let again = IndexDocument::read(&bytes);
            assert_eq!(again.shape, d.shape);
        }
    }
});
