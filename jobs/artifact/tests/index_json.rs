//! index.json: golden bytes for the three shapes, round trips, the fourth shape, unreadable
//! input, soft notes and writer refusals.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;

use artifact::identity::{Absent, ConfigurationIdentity, Parsed, RootFile, TokenizerIdentity};
use artifact::index_json::{
    IndexDocument, IndexWriteError, MultiSourceUnits, Shape, SingleSourceTotals, SingleSourceUnits,
    Source, UnitTotals,
};

const SHA: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
const REV: &str = "60d8d70770c6776ff598c94bb586a859a38244f1";
const REV2: &str = "0123456789abcdef0123456789abcdef01234567";

fn root(file: &str, bytes: u64, repo: &str) -> RootFile {
    RootFile {
        file: file.into(),
        bytes,
        sha256: SHA.into(),
        source_repo: repo.into(),
        source_revision: REV.into(),
    }
}

fn doc(shape: Shape, repo: &str) -> IndexDocument {
    IndexDocument {
        shape,
        tokenizer: Parsed::Present(TokenizerIdentity {
            root: root("tokenizer.json", 7_847_654, repo),
            license: "LICENSE".into(),
        }),
        configuration: Parsed::Present(ConfigurationIdentity {
            root: root("config.json", 1571, repo),
        }),
        notes: vec![],
    }
}

fn unit(name: &str, files: u64, bytes: u64) -> UnitTotals {
    UnitTotals {
        name: name.into(),
        files,
        bytes,
    }
}

fn totals() -> IndexDocument {
    doc(
        Shape::SingleSourceTotals(SingleSourceTotals {
            source_repo: "moonshotai/Kimi-K3".into(),
            source_revision: REV.into(),
            files: 372,
            bytes: 1_559_976_181_760,
            format: Some("minirun".into()),
            format_version: Some(1),
            relationship: Some("byte-preserving-repack".into()),
            layers: Some(93),
            globals: Some(1),
        }),
        "moonshotai/Kimi-K3",
    )
}

fn single_units() -> IndexDocument {
    doc(
        Shape::SingleSourceUnits(SingleSourceUnits {
            source_repo: "deepseek-ai/DeepSeek-V4-Flash".into(),
            source_revision: REV.into(),
            units: vec![
                unit("layers00", 12, 3_000_000),
                unit("mtp00", 9, 2_500_000),
                unit("global00", 3, 1_000_000),
            ],
            total_bytes: 6_500_000,
        }),
        "deepseek-ai/DeepSeek-V4-Flash",
    )
}

fn multi_units() -> IndexDocument {
    let mut sources = BTreeMap::new();
    sources.insert(
        "dit".to_owned(),
        Source {
            repo: "MiniMaxAI/MiniMax-H3-DiT".into(),
            revision: REV.into(),
            role: "diffusion transformer blocks and refiners".into(),
            license: "apache-2.0".into(),
        },
    );
    sources.insert(
        "text-encoder".to_owned(),
        Source {
            repo: "MiniMaxAI/MiniMax-H3-TE".into(),
            revision: REV2.into(),
            role: "text encoder layers and visual tower".into(),
            license: "mit".into(),
        },
    );
    let mut d = doc(
        Shape::MultiSourceUnits(MultiSourceUnits {
            sources,
            units: vec![unit("dit-block-00", 4, 1000), unit("te-layer-00", 2, 24)],
            total_bytes: Some(1024),
        }),
        "MiniMaxAI/MiniMax-H3-TE",
    );
    d.configuration = Parsed::Absent(Absent::NotPublished);
    d
}

/// Set `MINIRUN_BLESS=1` to rewrite a golden file after an intended format change (then review
/// the diff and update docs/index-json.md).
fn check_golden(d: &IndexDocument, name: &str, golden: &[u8]) {
    let bytes = d.to_bytes().unwrap();
    if std::env::var_os("MINIRUN_BLESS").is_some() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(name);
        std::fs::write(path, &bytes).unwrap();
        return;
    }
    assert_eq!(
        String::from_utf8_lossy(&bytes),
        String::from_utf8_lossy(golden),
        "writer bytes differ from the golden file"
    );
    let back = IndexDocument::read(golden);
    assert_eq!(&back, d);
    assert_eq!(back.to_bytes().unwrap(), golden);
}

#[test]
fn golden_single_source_totals() {
    check_golden(
        &totals(),
        "index-single-source-totals.json",
        include_bytes!("golden/index-single-source-totals.json"),
    );
}

#[test]
fn golden_single_source_units() {
    check_golden(
        &single_units(),
        "index-single-source-units.json",
        include_bytes!("golden/index-single-source-units.json"),
    );
}

#[test]
fn golden_multi_source_units() {
    check_golden(
        &multi_units(),
        "index-multi-source-units.json",
        include_bytes!("golden/index-multi-source-units.json"),
    );
}

#[test]
fn fourth_shape_is_unrecognized_with_sorted_keys() {
    let d = IndexDocument::read(br#"{"zeta": 1, "model": "x", "Alpha": [], "weights": {}}"#);
    match d.shape {
        Shape::Unrecognized { keys, reason } => {
            assert_eq!(keys, ["Alpha", "model", "weights", "zeta"]);
            assert!(reason.contains("names no repository"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    for top in [&b"[1, 2]"[..], b"\"index\"", b"42", b"null", b"true"] {
        let d = IndexDocument::read(top);
        assert!(
            matches!(&d.shape, Shape::Unrecognized { keys, .. } if keys.is_empty()),
            "{:?}",
            d.shape
        );
        assert_eq!(d.tokenizer, Parsed::Absent(Absent::NotPublished));
    }
}

#[test]
fn near_misses_are_unrecognized_with_a_reason() {
    let cases = [
        (
            r#"{"source_repo":"a/b","source_revision":"main","files":1,"bytes":2}"#,
            "immutable commit",
        ),
        (
            r#"{"source_repo":"not a repo","source_revision":"REV","files":1,"bytes":2}"#,
            "canonical repository id",
        ),
        (
            r#"{"source_repo":"a/b","source_revision":"REV","files":"1","bytes":2}"#,
            "`files` is not a number",
        ),
        (
            r#"{"source_repo":"a/b","source_revision":"REV","units":[{"name":"../x","files":1,"bytes":1}],"total_bytes":1}"#,
            "units[0].name",
        ),
        (
            r#"{"source_repo":"a/b","source_revision":"REV","units":{},"total_bytes":1}"#,
            "`units` is not an array",
        ),
        (
            r#"{"source_repo":"a/b","source_revision":"REV","units":[]}"#,
            "`total_bytes` is missing",
        ),
        (r#"{"sources":{},"units":[]}"#, "`sources` is empty"),
        (
            r#"{"sources":{"x":{"repo":"a/b","revision":"REV","role":"r"}},"units":[]}"#,
            "`license` is missing",
        ),
        (r#"{"sources":[],"units":[]}"#, "`sources` is not an object"),
        (
            r#"{"source_repo":"a/b","source_revision":"REV"}"#,
            "neither `units` nor",
        ),
    ];
    for (json, want) in cases {
        let json = json.replace("REV", REV);
        match IndexDocument::read(json.as_bytes()).shape {
            Shape::Unrecognized { reason, keys } => {
                assert!(reason.contains(want), "{json}: {reason}");
                let mut sorted = keys.clone();
                sorted.sort();
                assert_eq!(keys, sorted);
            }
            other => panic!("{json} -> {other:?}"),
        }
    }
}

#[test]
fn unreadable_input_is_a_value_of_unknown_identity() {
    let deep = "[".repeat(100_000);
    let cases: Vec<&[u8]> = vec![
        b"",
        b"{",
        b"\xff\xfe{}",
        b"{\"a\":1}{\"b\":2}",
        b"{\"source_repo\": \"a/b\",}",
        deep.as_bytes(),
    ];
    for bytes in cases {
        let d = IndexDocument::read(bytes);
        assert!(matches!(d.shape, Shape::Unreadable { .. }), "{:?}", d.shape);
        assert_eq!(d.tokenizer, Parsed::Absent(Absent::IndexUnreadable));
    }
    let big = vec![b' '; (64 << 20) + 1];
    assert!(matches!(
        IndexDocument::read(&big).shape,
        Shape::Unreadable { .. }
    ));
    let dir = tempfile::tempdir().unwrap();
    let d = IndexDocument::read_file(&dir.path().join("index.json"));
    assert!(matches!(&d.shape, Shape::Unreadable { reason } if reason.contains("index.json")));
    std::fs::write(
        dir.path().join("index.json"),
        single_units().to_bytes().unwrap(),
    )
    .unwrap();
    assert_eq!(
        IndexDocument::read_file(&dir.path().join("index.json")),
        single_units()
    );
}

#[test]
fn soft_findings_are_notes_not_failures() {
    let json = format!(
        r#"{{"source_repo":"a/b","source_revision":"{REV}","units":[{{"name":"u","files":1,"bytes":5}},{{"name":"u","files":1,"bytes":5}}],"total_bytes":11}}"#
    );
    let d = IndexDocument::read(json.as_bytes());
    assert!(matches!(d.shape, Shape::SingleSourceUnits(_)));
    assert_eq!(d.notes.len(), 2, "{:?}", d.notes);
    assert!(d.notes.iter().any(|n| n.contains("more than once")));
    assert!(d.notes.iter().any(|n| n.contains("add up to 10")));
    let json = format!(
        r#"{{"source_repo":"a/b","source_revision":"{REV}","files":1,"bytes":5,"layers":"93","extra":true}}"#
    );
    let d = IndexDocument::read(json.as_bytes());
    match &d.shape {
        Shape::SingleSourceTotals(t) => assert_eq!(t.layers, None),
        other => panic!("{other:?}"),
    }
    assert_eq!(d.notes.len(), 1);
}

#[test]
fn writer_refuses_what_the_reader_would_not_read_back() {
    let mut d = single_units();
    if let Shape::SingleSourceUnits(u) = &mut d.shape {
        u.total_bytes += 1;
    }
    assert!(
        matches!(d.to_bytes(), Err(IndexWriteError::Invalid { field, .. }) if field == "total_bytes")
    );
    let mut d = single_units();
    if let Shape::SingleSourceUnits(u) = &mut d.shape {
        u.source_revision = "main".into();
    }
    assert!(
        matches!(d.to_bytes(), Err(IndexWriteError::Invalid { field, .. }) if field == "source_revision")
    );
    let mut d = totals();
    if let Parsed::Present(t) = &mut d.tokenizer {
        t.root.bytes = 0;
    }
    assert!(
        matches!(d.to_bytes(), Err(IndexWriteError::Invalid { field, .. }) if field == "tokenizer")
    );
    let d = IndexDocument::read(b"{}");
    assert_eq!(
        d.to_bytes(),
        Err(IndexWriteError::NotWritable {
            shape: "unrecognized"
        })
    );
}

#[test]
fn duplicate_names_outside_identities_make_the_shape_unrecognized() {
    let json = format!(
        r#"{{"source_repo":"a/b","source_repo":"c/d","source_revision":"{REV}","files":1,"bytes":2}}"#
    );
    match IndexDocument::read(json.as_bytes()).shape {
        Shape::Unrecognized { keys, reason } => {
            assert_eq!(keys, ["bytes", "files", "source_repo", "source_revision"]);
            assert!(
                reason.contains("`/source_repo` appears more than once"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Inside a units entry, with a JSON-pointer-escaped name.
    let json = format!(
        r#"{{"source_repo":"a/b","source_revision":"{REV}","units":[{{"name":"u","a/b":1,"a/b":2,"files":1,"bytes":1}}],"total_bytes":1}}"#
    );
    match IndexDocument::read(json.as_bytes()).shape {
        Shape::Unrecognized { reason, .. } => assert!(reason.contains("/units/0/a~1b"), "{reason}"),
        other => panic!("{other:?}"),
    }
}
