//! Hostile input: truncated headers, huge counts and sizes, overlapping and out-of-range offsets,
//! bad alignment, bad UTF-8, deep nesting, broken indexes → a clear error, never a panic or a huge
//! allocation. Shards are built byte by byte here (candle `gguf_tests.rs` style).

use std::io::Cursor;
use std::path::Path;

use artifact::mega::index::Index;
use artifact::mega::layout::{FixedHeader, FIXED_HEADER_LEN, HEADER_CRC_AT};
use artifact::mega::metadata::{encode_section, Metadata, Value};
use artifact::mega::writer::append_footer;
use artifact::mega::{write_release, MegaError, ReleaseOptions, ShardHeader, TensorData};

fn golden_single() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/mega/single/model.mega"))
        .unwrap()
}

fn read(bytes: &[u8]) -> Result<ShardHeader, MegaError> {
    ShardHeader::read("hostile.mega", &mut Cursor::new(bytes.to_vec()))
}

fn assert_rejects(bytes: &[u8], msg_contains: &str) {
    match read(bytes) {
        Ok(_) => panic!("accepted hostile input (expected `{msg_contains}`)"),
        Err(e) => {
            let m = e.to_string();
            assert!(
                m.contains(msg_contains),
                "error `{m}` lacks `{msg_contains}`"
            );
            assert!(
                m.contains("hostile.mega"),
                "error `{m}` does not name the file"
            );
        }
    }
}

/// Recompute the header CRC after a deliberate mutation, so the check under test is reached.
fn fix_crc(bytes: &mut [u8]) {
    let po = u64::from_le_bytes(bytes[0x48..0x50].try_into().unwrap()) as usize;
    let end = po.min(bytes.len());
    let mut v = bytes[..end].to_vec();
    v[HEADER_CRC_AT..HEADER_CRC_AT + 4].fill(0);
    let c = crc32fast::hash(&v);
    bytes[HEADER_CRC_AT..HEADER_CRC_AT + 4].copy_from_slice(&c.to_le_bytes());
}

fn set_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn dir_entry(name: &[u8], dtype: &str, shape: &[u64], offset: u64, length: u64) -> Vec<u8> {
    let mut e = (name.len() as u32).to_le_bytes().to_vec();
    e.extend_from_slice(name);
    e.push(dtype.len() as u8);
    e.extend_from_slice(dtype.as_bytes());
    e.extend_from_slice(&(shape.len() as u32).to_le_bytes());
    for d in shape {
        e.extend_from_slice(&d.to_le_bytes());
    }
    e.extend_from_slice(&offset.to_le_bytes());
    e.extend_from_slice(&length.to_le_bytes());
    e
}

/// A raw shard with the given metadata bytes, directory and payload (alignment 64).
fn raw_shard(meta: &[u8], meta_count: u64, dir: &[u8], tensors: u64, payload: &[u8]) -> Vec<u8> {
    let dir_end = FIXED_HEADER_LEN + (meta.len() + dir.len()) as u64;
    let po = dir_end.div_ceil(64) * 64;
    let h = FixedHeader {
        major: 1,
        alignment: 64,
        metadata_count: meta_count,
        tensor_count: tensors,
        metadata_offset: FIXED_HEADER_LEN,
        metadata_size: meta.len() as u64,
        directory_offset: FIXED_HEADER_LEN + meta.len() as u64,
        directory_size: dir.len() as u64,
        payload_offset: po,
        payload_size: payload.len() as u64,
        ..Default::default()
    };
    let mut b = h.encode().to_vec();
    b.extend_from_slice(meta);
    b.extend_from_slice(dir);
    b.resize(po as usize, 0);
    b.extend_from_slice(payload);
    fix_crc(&mut b);
    b
}

#[test]
fn golden_reads_and_truncations_fail_cleanly() {
    let g = golden_single();
    assert!(read(&g).is_ok());
    for cut in [0, 7, 50, 127, 128, 200, g.len() / 2, g.len() - 1] {
        let err = read(&g[..cut]).unwrap_err();
        assert!(
            matches!(err, MegaError::Truncated { .. }),
            "cut {cut}: {err}"
        );
    }
    let mut longer = g.clone();
    longer.push(0);
    assert_rejects(&longer, "the header declares");
}

#[test]
fn bad_magic_version_flags_alignment() {
    let g = golden_single();
    let mut b = g.clone();
    b[0] = b'N';
    assert_rejects(&b, "not a MEGA shard");
    let mut b = g.clone();
    b[8] = 2;
    assert_rejects(&b, "version 2.0");
    let mut b = g.clone();
    b[12] |= 0x80;
    assert_rejects(&b, "unknown flag bits");
    for bad in [0u64, 12, 4, 1 << 40] {
        let mut b = g.clone();
        set_u64(&mut b, 0x10, bad);
        assert_rejects(&b, "alignment");
    }
    let mut b = g.clone();
    b[0x75] = 1;
    assert_rejects(&b, "reserved bytes");
}

#[test]
fn huge_counts_and_sizes_are_refused_before_allocating() {
    let g = golden_single();
    let mut b = g.clone();
    set_u64(&mut b, 0x20, u64::MAX);
    fix_crc(&mut b);
    assert_rejects(&b, "cannot fit");
    let mut b = g.clone();
    set_u64(&mut b, 0x18, 1 << 60);
    fix_crc(&mut b);
    assert_rejects(&b, "cannot fit");
    let mut b = g.clone();
    set_u64(&mut b, 0x30, u64::MAX - 10);
    assert_rejects(&b, "limit");
    let mut b = g.clone();
    set_u64(&mut b, 0x50, u64::MAX - 100);
    assert_rejects(&b, "overflows");
    let mut b = g.clone();
    set_u64(&mut b, 0x60, 1 << 50);
    assert_rejects(&b, "footer");
}

#[test]
fn header_crc_detects_a_flipped_metadata_byte() {
    let mut b = golden_single();
    b[FIXED_HEADER_LEN as usize + 20] ^= 1;
    let err = read(&b).unwrap_err();
    assert!(matches!(err, MegaError::HeaderCrc { .. }), "{err}");
}

#[test]
fn overlapping_out_of_range_and_misaligned_offsets() {
    let payload = vec![7u8; 80];
    let mut dir = dir_entry(b"a", "U8", &[16], 0, 16);
    dir.extend(dir_entry(b"b", "U8", &[16], 0, 16));
    assert_rejects(&raw_shard(&[], 0, &dir, 2, &payload), "overlaps");

    let dir = dir_entry(b"a", "U8", &[16], 128, 16);
    assert_rejects(&raw_shard(&[], 0, &dir, 1, &payload), "outside");

    let mut dir = dir_entry(b"a", "U8", &[4], 0, 4);
    dir.extend(dir_entry(b"b", "U8", &[16], 8, 16));
    assert_rejects(&raw_shard(&[], 0, &dir, 2, &payload), "not aligned");

    let dir = dir_entry(b"a", "U8", &[16], u64::MAX - 4, 16);
    assert_rejects(&raw_shard(&[], 0, &dir, 1, &payload), "outside");

    let dir = dir_entry(b"a", "F32", &[16], 0, 16);
    assert_rejects(
        &raw_shard(&[], 0, &dir, 1, &payload),
        "dtype and shape need 64",
    );

    let dir = dir_entry(b"a", "Q9_Z", &[16], 0, 16);
    assert_rejects(&raw_shard(&[], 0, &dir, 1, &payload), "unknown dtype");

    let dir = dir_entry(b"a", "U8", &[u64::MAX, u64::MAX], 0, 16);
    assert_rejects(&raw_shard(&[], 0, &dir, 1, &payload), "overflows");

    let mut e = dir_entry(b"a", "U8", &[], 0, 1);
    e[8..12].copy_from_slice(&1000u32.to_le_bytes());
    assert_rejects(&raw_shard(&[], 0, &e, 1, &payload), "rank 1000");

    let mut dir = dir_entry(b"a", "U8", &[16], 0, 16);
    dir.extend(dir_entry(b"a", "U8", &[16], 64, 16));
    assert_rejects(&raw_shard(&[], 0, &dir, 2, &payload), "duplicate");
}

#[test]
fn bad_utf8_names_and_keys() {
    let payload = vec![0u8; 16];
    let dir = dir_entry(b"ab\xff\xfe", "U8", &[16], 0, 16);
    assert_rejects(&raw_shard(&[], 0, &dir, 1, &payload), "UTF-8");

    let mut meta = 5u32.to_le_bytes().to_vec();
    meta.extend_from_slice(b"a.\xffxy");
    meta.push(5);
    meta.push(1);
    assert_rejects(&raw_shard(&meta, 1, &[], 0, &[]), "UTF-8");

    let mut meta = 3u32.to_le_bytes().to_vec();
    meta.extend_from_slice(b"a.b");
    meta.push(1);
    meta.extend_from_slice(&2u64.to_le_bytes());
    meta.extend_from_slice(b"\xc3\x28");
    assert_rejects(&raw_shard(&meta, 1, &[], 0, &[]), "UTF-8");
}

#[test]
fn deep_nesting_and_huge_arrays_in_metadata() {
    // 10 nested arrays: tag 7, element tag 7, count 1, ... innermost u64 array of one element.
    let mut body = Vec::new();
    for _ in 0..10 {
        body.push(7u8);
        body.extend_from_slice(&1u64.to_le_bytes());
    }
    body.push(2);
    body.extend_from_slice(&1u64.to_le_bytes());
    body.extend_from_slice(&5u64.to_le_bytes());
    let mut meta = 3u32.to_le_bytes().to_vec();
    meta.extend_from_slice(b"a.b");
    meta.push(7);
    meta.extend_from_slice(&body);
    assert_rejects(&raw_shard(&meta, 1, &[], 0, &[]), "nested deeper");

    let mut meta = 3u32.to_le_bytes().to_vec();
    meta.extend_from_slice(b"a.b");
    meta.push(7);
    meta.push(2);
    meta.extend_from_slice(&u64::MAX.to_le_bytes());
    assert_rejects(&raw_shard(&meta, 1, &[], 0, &[]), "cannot fit");

    let mut meta = 3u32.to_le_bytes().to_vec();
    meta.extend_from_slice(b"a.b");
    meta.push(1);
    meta.extend_from_slice(&(u64::MAX / 2).to_le_bytes());
    assert_rejects(&raw_shard(&meta, 1, &[], 0, &[]), "truncated");
}

#[test]
fn schema_violations_on_read() {
    let mut md = Metadata::new();
    md.insert("general.favourite_colour".into(), Value::Str("blue".into()));
    let meta = encode_section(&md).unwrap();
    assert_rejects(
        &raw_shard(&meta, 1, &[], 0, &[]),
        "unknown key in a reserved namespace",
    );
    // Unknown custom keys are ignored by the schema check; the shard then fails only on the
    // missing required keys.
    let mut md = Metadata::new();
    md.insert("someone.else.key".into(), Value::U64(1));
    let meta = encode_section(&md).unwrap();
    assert_rejects(&raw_shard(&meta, 1, &[], 0, &[]), "required key is missing");
    // Keys out of order (duplicates included) are refused.
    let mut meta = encode_section(&md).unwrap();
    meta.extend(meta.clone());
    assert_rejects(&raw_shard(&meta, 2, &[], 0, &[]), "ascending");
}

#[test]
fn writer_refuses_reserved_and_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = [0u8; 4];
    let t = vec![TensorData {
        name: "x".into(),
        dtype: "U8".into(),
        shape: vec![4],
        bytes: &bytes,
    }];
    let with = |k: &str, v: Value| {
        let mut o = ReleaseOptions::default();
        o.metadata.insert(k.into(), v);
        o
    };
    let cases = [
        (
            with("general.favourite_colour", Value::Str("x".into())),
            "unknown key in a reserved",
        ),
        (
            with("mega.tensor.count", Value::U64(1)),
            "computed by the writer",
        ),
        (
            with("mega.hash.payload.sha256", Value::Str("0".into())),
            "computed by the writer",
        ),
        (
            with("mega.trust.signer", Value::Str("me".into())),
            "footer overlay",
        ),
        (with("tokenizer.tokens", Value::U64(3)), "type"),
        (with("nodots", Value::U64(3)), "owned prefix"),
        (with("acme..x", Value::U64(3)), "empty segment"),
        (
            ReleaseOptions {
                alignment: 100,
                ..Default::default()
            },
            "power of two",
        ),
    ];
    for (opts, want) in cases {
        let e = write_release(tmp.path(), &t, &opts)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "`{e}` lacks `{want}`");
    }
    // Unknown keys outside reserved namespaces are written (and ignored by interpretation).
    let ok = with("acme.routing.partition", Value::Str("gpu-a".into()));
    write_release(tmp.path(), &t, &ok).unwrap();
    let short = vec![TensorData {
        name: "x".into(),
        dtype: "F32".into(),
        shape: vec![4],
        bytes: &bytes,
    }];
    let e = write_release(tmp.path(), &short, &ReleaseOptions::default()).unwrap_err();
    assert!(e.to_string().contains("need 16"), "{e}");
    let dup = vec![t[0].clone(), t[0].clone()];
    let e = write_release(tmp.path(), &dup, &ReleaseOptions::default()).unwrap_err();
    assert!(e.to_string().contains("duplicate"), "{e}");
    let mut bad_footer = Metadata::new();
    bad_footer.insert("general.name".into(), Value::Str("x".into()));
    let e = append_footer(&tmp.path().join("model.mega"), &bad_footer).unwrap_err();
    assert!(e.to_string().contains("footer overlay"), "{e}");
}

fn golden_index() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden/mega/sharded/model.mega.index.json"),
    )
    .unwrap()
}

fn assert_index_rejects(text: &str, want: &str) {
    match Index::parse("hostile.mega.index.json", text.as_bytes()) {
        Ok(_) => panic!("accepted hostile index (expected `{want}`)"),
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains(want), "`{m}` lacks `{want}`");
            assert!(m.contains("hostile.mega.index.json"), "`{m}`");
        }
    }
}

#[test]
fn hostile_indexes() {
    let g = golden_index();
    assert!(Index::parse("g", g.as_bytes()).is_ok());
    // Deep nesting: unterminated, in a typed field, or closed inside an ignored field — never a
    // stack overflow; only the last is a valid index.
    let deep = format!("{{\"future\": {}", "[".repeat(100_000));
    assert_index_rejects(&deep, "EOF");
    let deep = format!("{{\"metadata\": {}", "[".repeat(100_000));
    assert_index_rejects(&deep, "expected a map");
    let nested = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let ok = g.replacen('{', &format!("{{\n  \"future\": {nested},"), 1);
    assert!(Index::parse("g", ok.as_bytes()).is_ok());
    assert_index_rejects("{\"metadata\": {}, \"weight_map\": {}", "EOF");
    assert_index_rejects(
        &g.replacen("model-00001-of-00004.mega\"", "../escape.mega\"", 1),
        "plain",
    );
    assert_index_rejects(
        &g.replace(
            "\"mega.index.version\": \"1\"",
            "\"mega.index.version\": \"9\"",
        ),
        "mega.index.version",
    );
    assert_index_rejects(
        &g.replace(
            "\"mega.shard.count\": \"4\"",
            "\"mega.shard.count\": \"40\"",
        ),
        "mega.shard.count",
    );
    assert_index_rejects(
        &g.replace("\"general.name\"", "\"general.bogus\""),
        "reserved namespace",
    );
    assert_index_rejects(
        &g.replacen(
            ": \"model-00004-of-00004.mega\"",
            ": \"model-00009-of-00004.mega\"",
            1,
        ),
        "not in the shard list",
    );
    assert_index_rejects(
        &g.replacen("\"tensor_count\": ", "\"tensor_count\": 1", 1),
        "weight map places",
    );
    assert_index_rejects(
        &g.replacen(
            "\"payload_range\": [\n        0,",
            "\"payload_range\": [\n        5,",
            1,
        ),
        "does not continue",
    );
    let big = g.replacen("\"nbytes\": ", "\"nbytes\": 99999999999999999999999", 1);
    assert_index_rejects(&big, "expected u64");
    let e = Index::parse("hostile.mega.index.json", b"{\"metadata\": \"\xff\xfe\"}").unwrap_err();
    assert!(e.to_string().contains("hostile.mega.index.json"), "{e}");
    // Unknown top-level fields are ignored (compatibility policy).
    let extra = g.replacen('{', "{\n  \"future_field\": {\"x\": [1, 2]},", 1);
    assert!(Index::parse("g", extra.as_bytes()).is_ok());
}

/// Rebuild the golden single shard with extra header metadata and a chosen minor version.
fn golden_with_key(minor: u16, key: &str) -> Vec<u8> {
    use artifact::mega::metadata::decode_section;
    let g = golden_single();
    let mut h = FixedHeader::decode("g", g[..128].try_into().unwrap()).unwrap();
    let meta_end = (128 + h.metadata_size) as usize;
    let mut md = decode_section(&g[128..meta_end], h.metadata_count, "g").unwrap();
    md.insert(key.into(), Value::Str("from the future".into()));
    let meta = encode_section(&md).unwrap();
    let dir = &g[meta_end..(h.directory_offset + h.directory_size) as usize];
    let rest = &g[h.payload_offset as usize..];
    h.minor = minor;
    h.metadata_count = md.len() as u64;
    h.metadata_size = meta.len() as u64;
    h.directory_offset = 128 + meta.len() as u64;
    h.payload_offset = (h.directory_offset + h.directory_size).div_ceil(64) * 64;
    h.footer_offset = h.payload_offset + h.payload_size;
    let mut b = h.encode().to_vec();
    b.extend_from_slice(&meta);
    b.extend_from_slice(dir);
    b.resize(h.payload_offset as usize, 0);
    b.extend_from_slice(rest);
    fix_crc(&mut b);
    b
}

#[test]
fn compatibility_policy_for_unknown_keys() {
    // Unknown custom key: accepted and kept, not interpreted.
    let h = read(&golden_with_key(0, "vendor.new.field")).unwrap();
    assert!(h.unknown_reserved.is_empty());
    assert!(h.metadata.contains_key("vendor.new.field"));
    // Unknown reserved key: an error in a 1.0 file, a warning in a newer-minor file.
    assert_rejects(
        &golden_with_key(0, "mega.future.thing"),
        "unknown key in a reserved",
    );
    let h = read(&golden_with_key(1, "mega.future.thing")).unwrap();
    assert_eq!(h.unknown_reserved, vec!["mega.future.thing".to_string()]);
}
