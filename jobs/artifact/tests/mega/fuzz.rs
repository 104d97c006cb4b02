//! Proptest fuzz targets for the shard header reader and the index parser. CI runs proptest's
//! default case count; the long run is documented in docs/mega.md §10:
//! `PROPTEST_CASES=200000 cargo test -p artifact --release --test integration mega::fuzz_`.

use std::io::Cursor;
use std::path::Path;

use artifact::mega::index::Index;
use artifact::mega::layout::MAGIC;
use artifact::mega::ShardHeader;
use proptest::prelude::*;

fn golden(rel: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden/mega")
            .join(rel),
    )
    .unwrap()
}

proptest! {
    #[test]
    fn fuzz_shard_header_random_bytes(tail in proptest::collection::vec(any::<u8>(), 0..1024)) {
        let mut bytes = MAGIC.to_vec();
        bytes.extend(tail);
        let _ = ShardHeader::read("fuzz.mega", &mut Cursor::new(bytes));
    }

    #[test]
    fn fuzz_shard_header_mutations(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let mut bytes = golden("single/model.mega");
        for (at, v) in edits {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        if let Some(c) = cut {
            bytes.truncate(c.index(bytes.len()));
        }
        let _ = ShardHeader::read("fuzz.mega", &mut Cursor::new(bytes));
    }

    /// Mutations inside the header region with the header CRC recomputed, so the metadata,
    /// directory and footer parsers (not just the CRC check) see the hostile bytes.
    #[test]
    fn fuzz_shard_header_mutations_crc_fixed(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut bytes = golden("single/model.mega");
        let po = u64::from_le_bytes(bytes[0x48..0x50].try_into().unwrap()) as usize;
        for (at, v) in edits {
            let i = at.index(po);
            if !(0x68..0x6c).contains(&i) {
                bytes[i] = v;
            }
        }
        let po = (u64::from_le_bytes(bytes[0x48..0x50].try_into().unwrap()) as usize).min(bytes.len());
        let mut head = bytes[..po].to_vec();
        if head.len() >= 0x6c {
            head[0x68..0x6c].fill(0);
            let c = crc32fast::hash(&head);
            bytes[0x68..0x6c].copy_from_slice(&c.to_le_bytes());
        }
        let _ = ShardHeader::read("fuzz.mega", &mut Cursor::new(bytes));
    }

    #[test]
    fn fuzz_index_random_text(s in "\\PC{0,512}") {
        let _ = Index::parse("fuzz.mega.index.json", s.as_bytes());
    }

    #[test]
    fn fuzz_index_mutations(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut bytes = golden("sharded/model.mega.index.json");
        for (at, v) in edits {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        let _ = Index::parse("fuzz.mega.index.json", &bytes);
    }
}
