//! Tests of the header codec: round trips, hostile headers, and a byte-for-byte cross-check with
//! the `safetensors` crate.

use super::*;

fn file_with(json: &str) -> Vec<u8> {
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(json.as_bytes());
    out
}

fn sample_specs() -> Vec<(TensorSpec, Vec<u8>)> {
    vec![
        (
            TensorSpec::new("b.weight", Dtype::BF16, &[2, 3]),
            (0u8..12).collect(),
        ),
        (
            TensorSpec::new("a.scale", Dtype::F8E8M0, &[1, 1]),
            vec![0x7f],
        ),
        (
            TensorSpec::new("a.weight", Dtype::F8E4M3, &[2, 4]),
            vec![0x38; 8],
        ),
        (
            TensorSpec::new("c.tid2eid", Dtype::I64, &[2]),
            vec![1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0],
        ),
        (
            TensorSpec::new("e.f4", Dtype::F4, &[2, 4]),
            vec![0x21, 0x43, 0x65, 0x87],
        ),
        (TensorSpec::new("empty", Dtype::F32, &[0, 3]), vec![]),
        (
            TensorSpec::new("scalar", Dtype::F32, &[]),
            1.0f32.to_le_bytes().to_vec(),
        ),
    ]
}

fn write(specs: &[(TensorSpec, Vec<u8>)], meta: Option<&[(String, String)]>) -> Vec<u8> {
    let pairs: Vec<(TensorSpec, &[u8])> = specs
        .iter()
        .map(|(s, d)| (s.clone(), d.as_slice()))
        .collect();
    let mut out = Vec::new();
    write_file(&mut out, &pairs, meta).unwrap();
    out
}

#[test]
fn writer_keeps_order_pads_to_8_and_round_trips() {
    let specs = sample_specs();
    let meta = pt_metadata();
    let bytes = write(&specs, Some(&meta));
    let n = header_len(bytes[..8].try_into().unwrap()).unwrap();
    assert_eq!(n % 8, 0);
    let json = std::str::from_utf8(&bytes[8..8 + n as usize]).unwrap();
    assert!(
        json.starts_with("{\"__metadata__\":{\"format\":\"pt\"},\"b.weight\":{\"dtype\":\"BF16\"")
    );
    let h = parse_header(&bytes).unwrap();
    h.check_file_len(bytes.len() as u64).unwrap();
    assert_eq!(h.metadata.as_deref(), Some(&meta[..]));
    // File order = given order except that the zero-length tensor sorts first at its offset.
    let names: Vec<&str> = h.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "b.weight",
            "a.scale",
            "a.weight",
            "c.tid2eid",
            "e.f4",
            "empty",
            "scalar"
        ]
    );
    for (spec, data) in &specs {
        let r = h.file_range(&spec.name).unwrap();
        assert_eq!(
            &bytes[r.start as usize..r.end as usize],
            data.as_slice(),
            "{}",
            spec.name
        );
    }
    // Header bytes alone are enough.
    let h2 = parse_header(&bytes[..8 + n as usize]).unwrap();
    assert_eq!(h, h2);
    assert!(h2.check_file_len(bytes.len() as u64 - 1).is_err());
}

#[test]
fn upstream_crate_parses_what_we_write_and_bytes_match_its_writer() {
    let mut specs = sample_specs();
    specs.retain(|(s, _)| s.dtype != Dtype::F4); // the crate's serialize View needs whole elements
    let ours_given = write(&specs, None);
    let st = ::safetensors::SafeTensors::deserialize(&ours_given).unwrap();
    assert_eq!(st.len(), specs.len());
    for (spec, data) in &specs {
        let v = st.tensor(&spec.name).unwrap();
        assert_eq!(v.dtype().to_string(), spec.dtype.as_str());
        assert_eq!(
            v.shape().iter().map(|d| *d as u64).collect::<Vec<_>>(),
            spec.shape
        );
        assert_eq!(v.data(), data.as_slice());
    }
    // In the upstream sort order our bytes equal the crate's serializer, metadata included.
    let mut sorted: Vec<TensorSpec> = specs.iter().map(|(s, _)| s.clone()).collect();
    sort_like_upstream(&mut sorted);
    let data_of = |n: &str| {
        specs
            .iter()
            .find(|(s, _)| s.name == n)
            .map(|(_, d)| d.clone())
            .unwrap()
    };
    let in_order: Vec<(TensorSpec, Vec<u8>)> = sorted
        .iter()
        .map(|s| (s.clone(), data_of(&s.name)))
        .collect();
    let meta = pt_metadata();
    let ours = write(&in_order, Some(&meta));
    let views: Vec<(String, ::safetensors::tensor::TensorView<'_>)> = specs
        .iter()
        .map(|(s, d)| {
            let dt = ::safetensors::Dtype::try_from_str(s.dtype.as_str());
            let shape: Vec<usize> = s.shape.iter().map(|x| *x as usize).collect();
            (
                s.name.clone(),
                ::safetensors::tensor::TensorView::new(dt, shape, d).unwrap(),
            )
        })
        .collect();
    let info = std::collections::HashMap::from([("format".to_string(), "pt".to_string())]);
    let theirs = ::safetensors::serialize(views, Some(info)).unwrap();
    assert_eq!(ours, theirs);
}

trait TryFromStr {
    fn try_from_str(s: &str) -> ::safetensors::Dtype;
}
impl TryFromStr for ::safetensors::Dtype {
    fn try_from_str(s: &str) -> ::safetensors::Dtype {
        use ::safetensors::Dtype as D;
        [
            D::BOOL,
            D::U8,
            D::I8,
            D::F8_E4M3,
            D::F8_E8M0,
            D::BF16,
            D::F16,
            D::F32,
            D::I64,
            D::U32,
            D::I32,
        ]
        .into_iter()
        .find(|d| d.to_string() == s)
        .unwrap()
    }
}

fn expect_err(json: &str, needle: &str) {
    match parse_header(&file_with(json)) {
        Ok(h) => panic!("accepted hostile header {json}: {h:?}"),
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains(needle),
                "error `{msg}` does not mention `{needle}`"
            );
        }
    }
}

#[test]
fn hostile_headers_are_refused_with_the_tensor_named() {
    expect_err(
        r#"{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#,
        "`t`",
    );
    expect_err(
        r#"{"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
        "contiguous",
    );
    expect_err(
        r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}"#,
        "`b`",
    );
    expect_err(
        r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}"#,
        "twice",
    );
    expect_err(
        r#"{"t":{"dtype":"F9","shape":[1],"data_offsets":[0,1]}}"#,
        "unknown safetensors dtype",
    );
    expect_err(
        r#"{"t":{"dtype":"U8","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,1]}}"#,
        "overflows",
    );
    expect_err(
        r#"{"t":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}}"#,
        "whole number of bytes",
    );
    expect_err(
        r#"{"t":{"dtype":"U8","shape":[1],"data_offsets":[1,0]}}"#,
        "ends before",
    );
    expect_err(
        r#"{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}"#,
        "want 2",
    );
    expect_err(
        r#"{"t":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}"#,
        "shape",
    );
    expect_err(
        r#"{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}}"#,
        "unexpected key",
    );
    expect_err(r#"{"t":[]}"#, "not a JSON object");
    expect_err(r#"{"__metadata__":{"a":1}}"#, "not a string");
    expect_err(r#"[1,2]"#, "start with");
    expect_err(
        r#"{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}"#,
        "JSON",
    );
    expect_err(
        r#"{"t":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551615,18446744073709551615]}}"#,
        "`t`",
    );
    // Truncations and sizes.
    assert!(matches!(
        parse_header(&[1, 2, 3]),
        Err(SafetensorsError::Truncated { need: 8, have: 3 })
    ));
    let mut f = file_with("{}");
    f.truncate(9);
    assert!(matches!(
        parse_header(&f),
        Err(SafetensorsError::Truncated { .. })
    ));
    assert!(matches!(
        header_len(u64::MAX.to_le_bytes()),
        Err(SafetensorsError::HeaderTooLarge { .. })
    ));
    let mut bad_utf8 = 2u64.to_le_bytes().to_vec();
    bad_utf8.extend_from_slice(&[0xff, 0xfe]);
    assert!(parse_header(&bad_utf8).is_err());
    // Leading whitespace is tolerated (safetensors 0.8 accepts it), empty header is fine.
    let h = parse_header(&file_with("  {}  ")).unwrap();
    assert!(h.tensors.is_empty() && h.data_len == 0);
}

#[test]
fn arbitrary_bytes_never_panic() {
    // A cheap deterministic fuzz: mutate a valid header byte by byte and parse.
    let base = write(&sample_specs(), Some(&pt_metadata()));
    let n = 8 + header_len(base[..8].try_into().unwrap()).unwrap() as usize;
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..4000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut m = base[..n].to_vec();
        let pos = (state as usize) % n;
        m[pos] = (state >> 32) as u8;
        if state % 5 == 0 {
            m.truncate((state >> 40) as usize % n);
        }
        let _ = parse_header(&m);
    }
}

#[test]
fn encode_refuses_bad_specs() {
    let dup = [
        TensorSpec::new("x", Dtype::U8, &[1]),
        TensorSpec::new("x", Dtype::U8, &[1]),
    ];
    assert!(matches!(
        encode_header(&dup, None),
        Err(SafetensorsError::Duplicate(_))
    ));
    let odd = [TensorSpec::new("y", Dtype::F4, &[3])];
    assert!(encode_header(&odd, None)
        .unwrap_err()
        .to_string()
        .contains("`y`"));
    let wrong_len = [(TensorSpec::new("z", Dtype::F32, &[2]), &[0u8; 4][..])];
    assert!(write_file(Vec::new(), &wrong_len, None).is_err());
    // Names needing JSON escapes survive.
    let odd_name = [(
        TensorSpec::new("a\"b\\c\u{1}é", Dtype::U8, &[1]),
        &[7u8][..],
    )];
    let mut out = Vec::new();
    write_file(&mut out, &odd_name, None).unwrap();
    assert_eq!(parse_header(&out).unwrap().tensors[0].name, "a\"b\\c\u{1}é");
    assert_eq!(
        ::safetensors::SafeTensors::deserialize(&out)
            .unwrap()
            .names(),
        vec!["a\"b\\c\u{1}é"]
    );
}

mod property {
    use super::*;
    use proptest::prelude::*;

    fn dtype() -> impl Strategy<Value = Dtype> {
        prop::sample::select(vec![
            Dtype::U8,
            Dtype::I8,
            Dtype::F8E4M3,
            Dtype::F8E8M0,
            Dtype::BF16,
            Dtype::F16,
            Dtype::F32,
            Dtype::I64,
            Dtype::U32,
        ])
    }

    fn specs() -> impl Strategy<Value = Vec<TensorSpec>> {
        prop::collection::vec(
            (
                "[a-z0-9._]{1,12}",
                dtype(),
                prop::collection::vec(0u64..5, 0..4),
            ),
            0..12,
        )
        .prop_map(|v| {
            let mut seen = std::collections::HashSet::new();
            v.into_iter()
                .filter(|(n, _, _)| seen.insert(n.clone()))
                .map(|(n, d, s)| TensorSpec::new(n, d, &s))
                .collect()
        })
    }

    proptest! {
        #[test]
        fn encode_parse_round_trip_and_crate_agrees(specs in specs(), pad in any::<bool>()) {
            let (prefix, header) = encode_header_padded(&specs, Some(&pt_metadata()), pad).unwrap();
            let mut file = prefix.clone();
            for s in &specs {
                let n = s.byte_len().unwrap() as usize;
                file.extend((0..n).map(|i| (i * 31 + s.name.len()) as u8));
            }
            let parsed = parse_header(&file).unwrap();
            prop_assert_eq!(parsed.data_len, header.data_len);
            prop_assert_eq!(parsed.data_start, prefix.len() as u64);
            parsed.check_file_len(file.len() as u64).unwrap();
            // Same tensors; order equal up to zero-length tensors sharing an offset.
            let mut a = parsed.tensors.clone();
            let mut b = header.tensors.clone();
            a.sort_by(|x, y| x.name.cmp(&y.name));
            b.sort_by(|x, y| x.name.cmp(&y.name));
            prop_assert_eq!(a, b);
            let st = ::safetensors::SafeTensors::deserialize(&file).unwrap();
            prop_assert_eq!(st.len(), specs.len());
            for t in &parsed.tensors {
                let v = st.tensor(&t.name).unwrap();
                let r = absolute_range(parsed.data_start, t);
                prop_assert_eq!(v.data(), &file[r.start as usize..r.end as usize]);
            }
        }
    }
}
