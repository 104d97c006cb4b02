//! `.megakv` (docs/mega.md §12): the writer's output for a fixed KV state is frozen byte for byte
//! in `tests/golden/megakv/tiny.megakv` (regenerate deliberately with `MEGA_BLESS=1 cargo test
//! -p artifact --test integration mega::megakv_golden`), the reader returns what was written, and a truncated,
//! extended, altered (every single byte of the file, one at a time) or wrong-version file is
//! refused.

use std::path::Path;

use artifact::mega::kv::{
    read_kv, write_kv, KvError, KvHeader, KvHeads, KvLayout, KvModel, KvSection, KvSections,
    KV_FIXED,
};

fn tiny() -> (KvHeader, Vec<u8>) {
    let header = KvHeader {
        format: "megakv".into(),
        model: KvModel::Gguf {
            sha256: "ab".repeat(32),
            bytes: 123_456,
        },
        layout: KvLayout::Heads(KvHeads {
            layers: 2,
            kv_heads: 1,
            head_dim: 2,
            dtype: "f32".into(),
        }),
        tokens: vec![1, 17, 300],
        payload_sha256: String::new(),
    };
    // 2 layers × (K, V) × 3 positions × 1 head × 2 dims, values i / 4.
    let payload: Vec<u8> = (0..24u16)
        .flat_map(|i| (f32::from(i) / 4.0).to_le_bytes())
        .collect();
    (header, payload)
}

/// `bytes` equal `tests/golden/megakv/NAME` (written there under `MEGA_BLESS=1`).
fn assert_golden(name: &str, bytes: &[u8]) {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/megakv")
        .join(name);
    if std::env::var_os("MEGA_BLESS").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, bytes).unwrap();
    }
    assert_eq!(
        bytes,
        std::fs::read(&golden).unwrap(),
        "writer output drifted from the golden {name}"
    );
}

/// A bit flipped in any byte of `bytes` (a valid file) is refused by the reader.
fn assert_every_flip_refused(bytes: &[u8]) {
    for i in 0..bytes.len() {
        let mut b = bytes.to_vec();
        b[i] ^= 0x01;
        assert!(
            read_kv(&b).is_err(),
            "a flipped bit at byte {i} was accepted"
        );
    }
}

#[test]
fn megakv_golden_is_byte_identical_and_reads_back() {
    let (h, p) = tiny();
    let bytes = write_kv(&h, &p).unwrap();
    assert_golden("tiny.megakv", &bytes);
    let (got, payload) = read_kv(&bytes).unwrap();
    assert_eq!(payload, &p[..]);
    assert_eq!(got.tokens, h.tokens);
    assert_eq!(got.model, h.model);
    assert_eq!(got.payload_sha256.len(), 64);
    // The layout of docs/mega.md §12: payload at a multiple of 64, right after the header.
    assert_eq!(&bytes[..8], b"MEGAKV\r\n");
    let json_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let at = u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize;
    assert_eq!(at, (KV_FIXED + json_len).div_ceil(64) * 64);
    assert_eq!(bytes.len() - at, p.len());
}

#[test]
fn megakv_refuses_every_altered_byte_truncation_and_extension() {
    let (h, p) = tiny();
    let bytes = write_kv(&h, &p).unwrap();
    assert_every_flip_refused(&bytes);
    for n in [0, 7, KV_FIXED, bytes.len() - 1] {
        assert!(
            matches!(read_kv(&bytes[..n]), Err(KvError::Length { .. })),
            "truncated to {n}"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(matches!(read_kv(&longer), Err(KvError::Length { .. })));
    let mut v2 = bytes.clone();
    v2[8] = 2;
    assert!(matches!(read_kv(&v2), Err(KvError::Version(2))));
    // The writer refuses a payload that does not match its layout and tokens.
    assert!(matches!(
        write_kv(&h, &p[..p.len() - 4]),
        Err(KvError::PayloadSize { .. })
    ));
}

/// A two-section decode state (the shape DeepSeek V4's adapter writes, docs/mega.md §12.2).
fn tiny_sections() -> (KvHeader, Vec<u8>) {
    let header = KvHeader {
        format: "megakv".into(),
        model: KvModel::Artifact {
            repo: "org/tiny-minirun".into(),
            commit: "c0".repeat(20),
            tokenizer_sha256: "cd".repeat(32),
        },
        layout: KvLayout::Sections(KvSections {
            family: "deepseek-v4".into(),
            dtype: "f32".into(),
            sections: vec![
                KvSection {
                    name: "layers.0.window".into(),
                    rows: 2,
                    cols: 3,
                },
                KvSection {
                    name: "layers.0.compressor.entries".into(),
                    rows: 0,
                    cols: 3,
                },
                KvSection {
                    name: "layers.1.window".into(),
                    rows: 1,
                    cols: 3,
                },
            ],
        }),
        tokens: vec![0, 5],
        payload_sha256: String::new(),
    };
    let payload: Vec<u8> = (0..9u16)
        .flat_map(|i| (f32::from(i) - 2.5).to_le_bytes())
        .collect();
    (header, payload)
}

#[test]
fn megakv_sections_golden_is_byte_identical_and_refuses_bad_layouts() {
    let (h, p) = tiny_sections();
    let bytes = write_kv(&h, &p).unwrap();
    assert_golden("sections.megakv", &bytes);
    let (got, payload) = read_kv(&bytes).unwrap();
    assert_eq!(got.layout, h.layout);
    assert_eq!(payload, &p[..]);
    assert_every_flip_refused(&bytes);
    // The payload's size is the sections' sum, whatever the token count.
    assert!(matches!(
        write_kv(&h, &p[..p.len() - 4]),
        Err(KvError::PayloadSize { .. })
    ));
    // A repeated or empty name is refused by the writer (and so never read back).
    for bad in ["layers.0.window", ""] {
        let mut h2 = h.clone();
        if let KvLayout::Sections(s) = &mut h2.layout {
            s.sections[2].name = bad.into();
        }
        let err = write_kv(&h2, &p).unwrap_err().to_string();
        assert!(err.contains("empty or repeated"), "{err}");
    }
    // Sizes that would overflow saturate and are refused as a size mismatch, never wrap.
    let mut huge = h.clone();
    if let KvLayout::Sections(s) = &mut huge.layout {
        s.sections[0].rows = u64::MAX;
    }
    assert!(matches!(
        write_kv(&huge, &p),
        Err(KvError::PayloadSize { .. })
    ));
}
