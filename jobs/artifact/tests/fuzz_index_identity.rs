//! Property-based fuzz harnesses for the index.json reader and the identity parsers (issue 2,
//! "Fuzz targets ... index.json, identity objects"), on the stable toolchain with proptest.
//!
//! CI runs the default case count (256 per property, a few seconds). Long run (documented in
//! docs/index-json.md):
//!
//! ```text
//! PROPTEST_CASES=200000 cargo test -p artifact --release --test integration fuzz_index_identity::
//! ```
#![allow(clippy::unwrap_used, clippy::panic)]

use artifact::identity::{ConfigurationIdentity, Parsed, TokenizerIdentity};
use artifact::index_json::{IndexDocument, Shape};
use artifact::names::{check_repo_id, check_revision, check_root_file_name, check_sha256};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

const SHA: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
const REV: &str = "60d8d70770c6776ff598c94bb586a859a38244f1";

/// Keys the reader looks at, plus noise, so generated objects often hit real code paths.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "source_repo", "source_revision", "files", "bytes", "units", "total_bytes", "sources",
            "format", "format_version", "relationship", "layers", "globals", "tokenizer",
            "configuration", "name", "repo", "revision", "role", "license", "file", "sha256",
        ])
        .prop_map(str::to_owned),
        1 => ".{0,12}",
    ]
}

/// Strings that are sometimes valid names, repo ids, revisions and digests.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "deepseek-ai/DeepSeek-V4-Flash",
            "a/b",
            "LICENSE",
            "tokenizer.json",
            ".",
            "..",
            "main",
            REV,
            SHA,
            "",
            "a/../b",
            "layers00",
        ])
        .prop_map(str::to_owned),
        "[a-f0-9]{38,42}",
        "[A-Za-z0-9._/-]{0,20}",
        ".{0,16}",
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-3i64..5).prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

fn valid_tokenizer() -> Value {
    json!({
        "file": "tokenizer.json", "bytes": 5, "sha256": SHA,
        "source_repo": "deepseek-ai/DeepSeek-V4-Flash", "source_revision": REV, "license": "LICENSE",
    })
}

fn valid_units_index() -> Value {
    json!({
        "source_repo": "deepseek-ai/DeepSeek-V4-Flash", "source_revision": REV,
        "units": [{"name": "layers00", "files": 1, "bytes": 5}], "total_bytes": 5,
        "tokenizer": valid_tokenizer(),
    })
}

/// Every field of a present identity satisfies its rule (checked independently of the parser).
fn assert_identity_sound(t: &Parsed<TokenizerIdentity>, c: &Parsed<ConfigurationIdentity>) {
    let roots = t
        .present()
        .map(|t| {
            assert!(check_root_file_name(&t.license).is_ok());
            &t.root
        })
        .into_iter()
        .chain(c.present().map(|c| &c.root));
    for r in roots {
        assert!(check_root_file_name(&r.file).is_ok());
        assert!(r.bytes > 0);
        assert!(check_sha256(&r.sha256).is_ok());
        assert!(check_repo_id(&r.source_repo).is_ok());
        assert!(check_revision(&r.source_revision).is_ok());
    }
}

fn assert_reader_sound(d: &IndexDocument) {
    assert_identity_sound(&d.tokenizer, &d.configuration);
    match &d.shape {
        Shape::Unrecognized { keys, .. } => {
            let mut sorted = keys.clone();
            sorted.sort();
            assert_eq!(keys, &sorted);
        }
        Shape::Unreadable { .. } => {
            assert!(d.tokenizer.present().is_none() && d.configuration.present().is_none());
        }
        _ => {
            // A recognized document without soft findings is written back and re-read with the
            // same shape and the same present identities (an absent one is simply not written).
            if d.notes.is_empty() {
                let bytes = d.to_bytes().unwrap();
                let again = IndexDocument::read(&bytes);
                assert_eq!(&again.shape, &d.shape);
                assert_eq!(again.tokenizer.present(), d.tokenizer.present());
                assert_eq!(again.configuration.present(), d.configuration.present());
                assert!(again.notes.is_empty());
                assert_eq!(again.to_bytes().unwrap(), bytes);
            }
        }
    }
}

proptest! {
    #[test]
    fn index_reader_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let d = IndexDocument::read(&bytes);
        assert_reader_sound(&d);
    }

    #[test]
    fn index_reader_never_panics_on_strings(s in ".{0,256}") {
        assert_reader_sound(&IndexDocument::read(s.as_bytes()));
    }

    #[test]
    fn index_reader_is_sound_on_arbitrary_json(v in json_value()) {
        let bytes = serde_json::to_vec(&v).unwrap();
        let read = IndexDocument::read(&bytes);
        assert_reader_sound(&read);
        // Without duplicate names, the duplicate-detecting parser agrees with serde_json's.
        prop_assert_eq!(read, IndexDocument::from_value(&v));
    }

    #[test]
    fn index_reader_is_sound_on_mutated_valid_documents(
        field in key(),
        replacement in json_value(),
        drop_it in any::<bool>(),
    ) {
        let mut v = valid_units_index();
        let obj = v.as_object_mut().unwrap();
        if drop_it { obj.remove(&field); } else { obj.insert(field, replacement); }
        assert_reader_sound(&IndexDocument::from_value(&v));
    }

    #[test]
    fn identity_parsers_are_fail_closed_on_arbitrary_json(v in json_value()) {
        let t = TokenizerIdentity::from_value(Some(&v));
        let c = ConfigurationIdentity::from_value(Some(&v));
        assert_identity_sound(&t, &c);
    }

    #[test]
    fn identity_with_one_field_replaced_is_complete_or_absent(
        field in prop::sample::select(vec!["file", "bytes", "sha256", "source_repo", "source_revision", "license", "extra"]),
        replacement in json_value(),
    ) {
        let mut v = valid_tokenizer();
        v[field] = replacement.clone();
        let t = TokenizerIdentity::from_value(Some(&v));
        let mut cv = v.clone();
        cv.as_object_mut().unwrap().remove("license");
        let c = ConfigurationIdentity::from_value(Some(&cv));
        assert_identity_sound(&t, &c);
        // Present means the replacement itself was accepted as the field's value.
        if let Parsed::Present(t) = &t {
            let back = t.to_value();
            prop_assert_eq!(back.as_object().unwrap().len(), 6);
            if field != "sha256" {
                prop_assert_eq!(&back[field], &replacement);
            }
        }
    }
}
