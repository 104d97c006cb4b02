//! GGUF reader/writer contract tests (seed 003 §1): write → parse → compare is the identity,
//! a rewrite is bitwise identical, a golden byte layout, writer refusals, and hostile headers
//! refused by name — fixtures are built byte by byte in the test, nothing is downloaded.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::borrow::Cow;

use artifact::gguf::reader::parse_header;
use artifact::gguf::writer::{write_vec, TensorSpec};
use artifact::gguf::{GgmlType, GgufError, Metadata, Value, ValueType};

fn all_types_metadata() -> Metadata {
    let mut m = Metadata::default();
    m.set("general.architecture", Value::str("llama"));
    m.set("t.u8", Value::U8(200));
    m.set("t.i8", Value::I8(-5));
    m.set("t.u16", Value::U16(65535));
    m.set("t.i16", Value::I16(-300));
    m.set("t.u32", Value::U32(7));
    m.set("t.i32", Value::I32(-7));
    m.set("t.f32", Value::F32(1.5));
    m.set("t.bool", Value::Bool(true));
    m.set("t.str", Value::str("ab ü"));
    m.set("t.u64", Value::U64(u64::MAX));
    m.set("t.i64", Value::I64(i64::MIN));
    m.set("t.f64", Value::F64(-2.25));
    m.set("t.arr_str", Value::str_array(&["a", "", "ccc"]));
    m.set("t.arr_i32", Value::i32_array(&[1, -2, 3]));
    m.set("t.arr_f32", Value::f32_array(&[0.5, -0.25]));
    m.set(
        "t.arr_bool",
        Value::NumArray {
            elem: ValueType::Bool,
            count: 2,
            raw: vec![1, 0],
        },
    );
    m
}

fn tensors() -> (Vec<TensorSpec>, Vec<Vec<u8>>) {
    let specs = vec![
        TensorSpec {
            name: "a.weight".into(),
            dims: vec![32, 2],
            ggml_type: GgmlType::Q8_0,
        },
        TensorSpec {
            name: "b.bias".into(),
            dims: vec![3],
            ggml_type: GgmlType::F32,
        },
        TensorSpec {
            name: "c.weight".into(),
            dims: vec![256, 1, 2],
            ggml_type: GgmlType::Q4_K,
        },
    ];
    let data = vec![
        (0..68u8).collect(),
        vec![0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64],
        (0..288).map(|i| (i * 7 % 251) as u8).collect(),
    ];
    (specs, data)
}

fn write(md: &Metadata, specs: &[TensorSpec], data: &[Vec<u8>], align: u64) -> Vec<u8> {
    write_vec(md, specs, align, |i| Ok(Cow::Borrowed(&data[i][..]))).unwrap()
}

#[test]
fn write_parse_compare_is_the_identity_for_all_13_value_types() {
    let md = all_types_metadata();
    let (specs, data) = tensors();
    let bytes = write(&md, &specs, &data, 32);
    let h = parse_header(&bytes, "mem").unwrap();
    assert_eq!(h.metadata, md);
    assert_eq!(h.alignment, 32);
    let got: Vec<TensorSpec> = h.tensors.iter().map(TensorSpec::from).collect();
    assert_eq!(got, specs);
    // offsets are the padded running sum: 68 → 96, 12 → 32
    let offs: Vec<u64> = h.tensors.iter().map(|t| t.offset).collect();
    assert_eq!(offs, vec![0, 96, 128]);
    assert_eq!(h.data_start % 32, 0);
    for (t, d) in h.tensors.iter().zip(&data) {
        let s = (h.data_start + t.offset) as usize;
        assert_eq!(&bytes[s..s + d.len()], &d[..], "{}", t.name);
    }
    // rewrite of the parsed form is bitwise identical
    let again = write(&h.metadata, &got, &data, h.alignment);
    assert_eq!(again, bytes);
    assert_eq!(bytes.len() as u64, h.data_end);
}

#[test]
fn custom_alignment_is_read_from_general_alignment() {
    let mut md = Metadata::default();
    md.set("general.alignment", Value::U32(64));
    let (specs, data) = tensors();
    let bytes = write(&md, &specs, &data, 64);
    let h = parse_header(&bytes, "mem").unwrap();
    assert_eq!(h.alignment, 64);
    assert_eq!(
        h.tensors.iter().map(|t| t.offset).collect::<Vec<_>>(),
        vec![0, 128, 192]
    );
    // a disagreeing alignment is refused by the writer
    let e = write_vec(&md, &specs, 32, |i| Ok(Cow::Borrowed(&data[i][..]))).unwrap_err();
    assert!(e.to_string().contains("general.alignment"), "{e}");
}

/// Golden layout, cross-checked with gguf-py 0.19.0 (gguf_layout_probe.py writes the same
/// header fields): 24-byte fixed header, then `key` u64 len + bytes, u32 type, value.
#[test]
fn golden_header_bytes() {
    let mut md = Metadata::default();
    md.set("test.u32", Value::U32(7));
    let specs = vec![TensorSpec {
        name: "x".into(),
        dims: vec![2],
        ggml_type: GgmlType::F32,
    }];
    let bytes = write_vec(&md, &specs, 32, |_| {
        Ok(Cow::Owned(vec![1, 2, 3, 4, 5, 6, 7, 8]))
    })
    .unwrap();
    let mut want = Vec::new();
    want.extend_from_slice(b"GGUF");
    want.extend_from_slice(&3u32.to_le_bytes());
    want.extend_from_slice(&1u64.to_le_bytes());
    want.extend_from_slice(&1u64.to_le_bytes());
    want.extend_from_slice(&8u64.to_le_bytes());
    want.extend_from_slice(b"test.u32");
    want.extend_from_slice(&4u32.to_le_bytes());
    want.extend_from_slice(&7u32.to_le_bytes());
    want.extend_from_slice(&1u64.to_le_bytes());
    want.extend_from_slice(b"x");
    want.extend_from_slice(&1u32.to_le_bytes());
    want.extend_from_slice(&2u64.to_le_bytes());
    want.extend_from_slice(&0u32.to_le_bytes());
    want.extend_from_slice(&0u64.to_le_bytes());
    want.resize(96, 0); // 77 bytes of header, padded to 96
    want.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    want.resize(128, 0);
    assert_eq!(bytes, want);
}

fn werr(specs: Vec<TensorSpec>, data: Vec<Vec<u8>>) -> String {
    write_vec(&Metadata::default(), &specs, 32, |i| {
        Ok(Cow::Owned(data[i].clone()))
    })
    .unwrap_err()
    .to_string()
}

fn spec(name: &str, dims: &[u64], t: GgmlType) -> TensorSpec {
    TensorSpec {
        name: name.into(),
        dims: dims.to_vec(),
        ggml_type: t,
    }
}

#[test]
fn writer_refuses_bad_payloads_rows_names_and_duplicates() {
    let e = werr(vec![spec("a", &[4], GgmlType::F32)], vec![vec![0; 15]]);
    assert!(
        e.contains("needs exactly 16 bytes") && e.contains("short"),
        "{e}"
    );
    let e = werr(vec![spec("a", &[4], GgmlType::F32)], vec![vec![0; 17]]);
    assert!(e.contains("long"), "{e}");
    let e = werr(vec![spec("a", &[48, 2], GgmlType::Q4_0)], vec![vec![]]);
    assert!(
        e.contains("not a multiple of the q4_0 block size 32"),
        "{e}"
    );
    let long = "n".repeat(64);
    let e = werr(vec![spec(&long, &[1], GgmlType::F32)], vec![vec![0; 4]]);
    assert!(e.contains("64 bytes") && e.contains("GGML_MAX_NAME"), "{e}");
    let ok63 = "n".repeat(63);
    assert!(write_vec(
        &Metadata::default(),
        &[spec(&ok63, &[1], GgmlType::F32)],
        32,
        |_| Ok(Cow::Owned(vec![0; 4]))
    )
    .is_ok());
    let e = werr(
        vec![
            spec("a", &[1], GgmlType::F32),
            spec("a", &[1], GgmlType::F32),
        ],
        vec![vec![0; 4], vec![0; 4]],
    );
    assert!(e.contains("duplicate tensor name `a`"), "{e}");
    let e = werr(vec![spec("a", &[0], GgmlType::F32)], vec![vec![]]);
    assert!(e.contains("each at least 1"), "{e}");
}

/// Parse `bytes` followed by 64 zero bytes (so the count-versus-room checks do not pre-empt the
/// check under test).
fn hostile(bytes: &[u8]) -> String {
    let mut padded = bytes.to_vec();
    padded.resize(bytes.len() + 64, 0);
    match parse_header(&padded, "hostile.gguf") {
        Err(e @ GgufError::Format { .. }) => e.to_string(),
        other => panic!("expected a format error, got {other:?}"),
    }
}

fn head(n_tensors: u64, n_kv: u64) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&n_tensors.to_le_bytes());
    b.extend_from_slice(&n_kv.to_le_bytes());
    b
}

fn kv(b: &mut Vec<u8>, key: &str, ty: u32, val: &[u8]) {
    b.extend_from_slice(&(key.len() as u64).to_le_bytes());
    b.extend_from_slice(key.as_bytes());
    b.extend_from_slice(&ty.to_le_bytes());
    b.extend_from_slice(val);
}

#[test]
fn hostile_headers_are_refused_by_name_without_allocating() {
    assert!(hostile(b"GGUX\x03\0\0\0").contains("bad magic"));
    let mut v2 = head(0, 0);
    v2[4] = 2;
    assert!(hostile(&v2).contains("version 2"));
    assert!(hostile(&head(u64::MAX, 0)).contains("exceeds the limit of 1048576"));
    assert!(hostile(&head(0, u64::MAX)).contains("metadata key count"));
    assert!(hostile(&head(1000, 0)).contains("cannot fit"));
    // huge string length
    let mut b = head(0, 1);
    b.extend_from_slice(&u64::MAX.to_le_bytes());
    assert!(hostile(&b).contains("exceeds the limit of 65536 bytes"));
    let mut b = head(0, 1);
    kv(&mut b, "k", 8, &(1u64 << 40).to_le_bytes());
    assert!(hostile(&b).contains("exceeds the limit of 268435456 bytes"));
    // bad value type
    let mut b = head(0, 1);
    kv(&mut b, "k", 13, &[]);
    assert!(hostile(&b).contains("unknown value type 13"));
    // nested array
    let mut b = head(0, 1);
    let mut v = 9u32.to_le_bytes().to_vec();
    v.extend_from_slice(&1u64.to_le_bytes());
    kv(&mut b, "k", 9, &v);
    assert!(hostile(&b).contains("nested arrays"));
    // huge array
    let mut b = head(0, 1);
    let mut v = 4u32.to_le_bytes().to_vec();
    v.extend_from_slice(&(u64::MAX / 2).to_le_bytes());
    kv(&mut b, "k", 9, &v);
    assert!(hostile(&b).contains("array length"));
    // bad alignment
    let mut b = head(0, 1);
    kv(&mut b, "general.alignment", 4, &48u32.to_le_bytes());
    assert!(hostile(&b).contains("not a power of two"));
    let mut b = head(0, 1);
    kv(&mut b, "general.alignment", 5, &32i32.to_le_bytes());
    assert!(hostile(&b).contains("requires uint32"));
    // duplicate key
    let mut b = head(0, 2);
    kv(&mut b, "k", 4, &1u32.to_le_bytes());
    kv(&mut b, "k", 4, &1u32.to_le_bytes());
    assert!(hostile(&b).contains("duplicate metadata key"));
    // bool that is not 0/1
    let mut b = head(0, 1);
    kv(&mut b, "k", 7, &[2]);
    assert!(hostile(&b).contains("neither 0 nor 1"));
}

fn tensor_info(b: &mut Vec<u8>, name: &str, dims: &[u64], ty: u32, off: u64) {
    b.extend_from_slice(&(name.len() as u64).to_le_bytes());
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(&(dims.len() as u32).to_le_bytes());
    for d in dims {
        b.extend_from_slice(&d.to_le_bytes());
    }
    b.extend_from_slice(&ty.to_le_bytes());
    b.extend_from_slice(&off.to_le_bytes());
}

fn with_pad(mut b: Vec<u8>) -> Vec<u8> {
    b.resize(b.len() + 4096, 0);
    b
}

#[test]
fn hostile_tensor_infos_are_refused() {
    let one = |name: &str, dims: &[u64], ty: u32, off: u64| {
        let mut b = head(1, 0);
        tensor_info(&mut b, name, dims, ty, off);
        hostile(&with_pad(b))
    };
    assert!(one("t", &[1, 1, 1, 1, 1], 0, 0).contains("GGML_MAX_DIMS"));
    assert!(one("t", &[1 << 62, 1 << 62], 0, 0).contains("overflows int64"));
    assert!(one("t", &[u64::MAX], 0, 0).contains("exceeds int64"));
    assert!(one("t", &[4], 4, 0).contains("unknown ggml type id 4"));
    assert!(one("t", &[4], 0, 32).contains("padded running sum"));
    assert!(one("t", &[33], 2, 0).contains("block size 32"));
    assert!(one(&"x".repeat(64), &[1], 0, 0).contains("GGML_MAX_NAME"));
    assert!(one("t", &[1 << 40], 0, 0).contains("truncated"));
    let mut b = head(2, 0);
    tensor_info(&mut b, "t", &[1], 0, 0);
    tensor_info(&mut b, "t", &[1], 0, 32);
    assert!(hostile(&with_pad(b)).contains("duplicate tensor name"));
}

#[test]
fn truncation_anywhere_is_an_error_never_a_panic() {
    let md = all_types_metadata();
    let (specs, data) = tensors();
    let bytes = write(&md, &specs, &data, 32);
    let payload_end = bytes.len() - (288usize.next_multiple_of(32) - 288);
    for cut in 0..payload_end {
        assert!(parse_header(&bytes[..cut], "cut").is_err(), "cut at {cut}");
    }
    assert!(parse_header(&bytes[..payload_end], "cut").is_ok());
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<u8>().prop_map(Value::U8),
            any::<i8>().prop_map(Value::I8),
            any::<u16>().prop_map(Value::U16),
            any::<i16>().prop_map(Value::I16),
            any::<u32>().prop_map(Value::U32),
            any::<i32>().prop_map(Value::I32),
            any::<u32>().prop_map(|b| Value::F32(f32::from_bits(b))),
            any::<bool>().prop_map(Value::Bool),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::String),
            any::<u64>().prop_map(Value::U64),
            any::<i64>().prop_map(Value::I64),
            any::<u64>().prop_map(|b| Value::F64(f64::from_bits(b))),
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..8), 0..6)
                .prop_map(Value::StringArray),
            proptest::collection::vec(any::<i32>(), 0..9).prop_map(|v| Value::i32_array(&v)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// write → parse → write is the identity on bytes (NaN payloads included).
        #[test]
        fn rewrite_is_bitwise_identical(
            vals in proptest::collection::vec(value(), 0..12),
            dims in proptest::collection::vec((1u64..4, 1u64..3), 0..5),
            align_pow in 3u32..8,
        ) {
            let align = 1u64 << align_pow;
            let mut md = Metadata::default();
            md.set("general.alignment", Value::U32(align as u32));
            for (i, v) in vals.into_iter().enumerate() {
                md.set(&format!("k.{i}"), v);
            }
            let specs: Vec<TensorSpec> = dims
                .iter()
                .enumerate()
                .map(|(i, (a, b))| TensorSpec { name: format!("t{i}"), dims: vec![32 * a, *b], ggml_type: GgmlType::Q8_0 })
                .collect();
            let data: Vec<Vec<u8>> = dims.iter().map(|(a, b)| vec![7u8; (34 * a * b) as usize]).collect();
            let bytes = write(&md, &specs, &data, align);
            let h = parse_header(&bytes, "prop").unwrap();
            let specs2: Vec<TensorSpec> = h.tensors.iter().map(TensorSpec::from).collect();
            prop_assert_eq!(&specs2, &specs);
            let again = write(&h.metadata, &specs2, &data, h.alignment);
            prop_assert!(again == bytes);
        }

        /// Arbitrary corruption of a valid file is an error or a valid parse, never a panic.
        #[test]
        fn corrupted_headers_never_panic(
            flips in proptest::collection::vec((0usize..600, any::<u8>()), 1..8),
        ) {
            let (specs, data) = tensors();
            let mut bytes = write(&all_types_metadata(), &specs, &data, 32);
            for (at, b) in flips {
                let n = bytes.len();
                bytes[at % n] = b;
            }
            let _ = parse_header(&bytes, "corrupt");
        }
    }
}
