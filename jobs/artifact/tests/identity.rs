//! Tokenizer and configuration identities: one named test per fail-closed rule of seed 000
//! ("Tokenizer and configuration identity"), plus the decisions recorded in docs/index-json.md.
#![allow(clippy::unwrap_used, clippy::panic)]

use artifact::identity::{
    Absent, ConfigurationIdentity, Field, JsonKind, Malformed, Parsed, TokenizerIdentity,
};
use artifact::index_json::IndexDocument;
use artifact::names::NameError;
use serde_json::{json, Value};

const SHA: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
const REV: &str = "60d8d70770c6776ff598c94bb586a859a38244f1";

fn tokenizer() -> Value {
    json!({
        "file": "tokenizer.json",
        "bytes": 7_847_654,
        "sha256": SHA,
        "source_repo": "deepseek-ai/DeepSeek-V4-Flash",
        "source_revision": REV,
        "license": "LICENSE",
    })
}

fn configuration() -> Value {
    let mut v = tokenizer();
    v.as_object_mut().unwrap().remove("license");
    v["file"] = json!("config.json");
    v["bytes"] = json!(1571);
    v
}

fn with(mut v: Value, key: &str, value: Value) -> Value {
    v[key] = value;
    v
}

fn without(mut v: Value, key: &str) -> Value {
    v.as_object_mut().unwrap().remove(key);
    v
}

/// The tokenizer's reason for absence; also asserts the configuration object (which shares the
/// rule for the five common fields) agrees, so every rule is checked on both objects.
fn absent(tok: Value) -> Absent {
    let t = TokenizerIdentity::from_value(Some(&tok));
    let reason = match t {
        Parsed::Absent(a) => a,
        Parsed::Present(p) => panic!("accepted {tok}: {p:?}"),
    };
    if !matches!(
        reason,
        Absent::MissingField {
            field: Field::License
        }
    ) && !matches!(
        reason,
        Absent::Malformed {
            field: Field::License,
            ..
        }
    ) {
        let cfg = without(tok, "license");
        match ConfigurationIdentity::from_value(Some(&cfg)) {
            Parsed::Absent(a) => assert_eq!(a, reason, "configuration disagrees on {cfg}"),
            Parsed::Present(p) => panic!("configuration accepted {cfg}: {p:?}"),
        }
    }
    reason
}

fn malformed(field: Field, reason: Malformed) -> Absent {
    Absent::Malformed { field, reason }
}

#[test]
fn well_formed_identities_are_present_with_every_field() {
    let t = TokenizerIdentity::from_value(Some(&tokenizer()));
    let t = t.present().unwrap();
    assert_eq!(t.root.file, "tokenizer.json");
    assert_eq!(t.root.bytes, 7_847_654);
    assert_eq!(t.root.sha256, SHA);
    assert_eq!(t.root.source_repo, "deepseek-ai/DeepSeek-V4-Flash");
    assert_eq!(t.root.source_revision, REV);
    assert_eq!(t.license, "LICENSE");
    assert_eq!(t.to_value(), tokenizer());
    let c = ConfigurationIdentity::from_value(Some(&configuration()));
    assert_eq!(c.present().unwrap().to_value(), configuration());
}

// ---- file ----

#[test]
fn rule_file_is_required() {
    assert_eq!(
        absent(without(tokenizer(), "file")),
        Absent::MissingField { field: Field::File }
    );
}

#[test]
fn rule_file_may_not_contain_a_path_separator() {
    for f in ["sub/tokenizer.json", "/tokenizer.json", "a\\b"] {
        assert_eq!(
            absent(with(tokenizer(), "file", json!(f))),
            malformed(Field::File, Malformed::Name(NameError::Separator)),
            "{f}"
        );
    }
}

#[test]
fn rule_file_may_not_be_dot_or_dotdot() {
    for f in [".", ".."] {
        assert_eq!(
            absent(with(tokenizer(), "file", json!(f))),
            malformed(Field::File, Malformed::Name(NameError::DotName))
        );
    }
}

#[test]
fn rule_file_is_letters_digits_hyphen_period_underscore_only() {
    for f in [
        "tok enizer.json",
        "tokénizer.json",
        "tok:json",
        "tok\u{0}",
        "tok*",
    ] {
        assert_eq!(
            absent(with(tokenizer(), "file", json!(f))),
            malformed(Field::File, Malformed::Name(NameError::BadCharacter)),
            "{f:?}"
        );
    }
    assert_eq!(
        absent(with(tokenizer(), "file", json!(""))),
        malformed(Field::File, Malformed::Name(NameError::Empty))
    );
}

#[test]
fn rule_file_is_a_string() {
    assert_eq!(
        absent(with(tokenizer(), "file", json!(["tokenizer.json"]))),
        malformed(
            Field::File,
            Malformed::NotAString {
                found: JsonKind::Array
            }
        )
    );
}

// ---- bytes ----

#[test]
fn rule_bytes_is_required() {
    assert_eq!(
        absent(without(tokenizer(), "bytes")),
        Absent::MissingField {
            field: Field::Bytes
        }
    );
}

#[test]
fn rule_bytes_may_not_be_a_boolean() {
    for b in [true, false] {
        assert_eq!(
            absent(with(tokenizer(), "bytes", json!(b))),
            malformed(Field::Bytes, Malformed::BytesBoolean)
        );
    }
}

#[test]
fn rule_bytes_may_not_be_a_string() {
    for b in ["7847654", "", "0x10"] {
        assert_eq!(
            absent(with(tokenizer(), "bytes", json!(b))),
            malformed(Field::Bytes, Malformed::BytesString)
        );
    }
}

#[test]
fn rule_bytes_is_an_integer_not_a_float() {
    // Read from text so `7847654.0` and `1e3` stay floats exactly as a publisher wrote them.
    for text in ["7847654.0", "1e3", "0.5", "18446744073709551616"] {
        let doc = format!(r#"{{"tokenizer": {{"bytes": {text}}}}}"#);
        let v: Value = serde_json::from_str(&doc).unwrap();
        let tok = with(tokenizer(), "bytes", v["tokenizer"]["bytes"].clone());
        assert_eq!(
            absent(tok),
            malformed(Field::Bytes, Malformed::BytesNotInteger),
            "{text}"
        );
    }
}

#[test]
fn rule_bytes_is_positive() {
    assert_eq!(
        absent(with(tokenizer(), "bytes", json!(0))),
        malformed(Field::Bytes, Malformed::BytesZero)
    );
    for b in [json!(-1), json!(-0.5), json!(i64::MIN)] {
        assert_eq!(
            absent(with(tokenizer(), "bytes", b)),
            malformed(Field::Bytes, Malformed::BytesNegative)
        );
    }
    assert!(
        TokenizerIdentity::from_value(Some(&with(tokenizer(), "bytes", json!(1))))
            .present()
            .is_some()
    );
    assert!(
        TokenizerIdentity::from_value(Some(&with(tokenizer(), "bytes", json!(u64::MAX))))
            .present()
            .is_some()
    );
}

#[test]
fn rule_bytes_may_not_be_null_array_or_object() {
    for (b, k) in [
        (json!(null), JsonKind::Null),
        (json!([5]), JsonKind::Array),
        (json!({"n": 5}), JsonKind::Object),
    ] {
        assert_eq!(
            absent(with(tokenizer(), "bytes", b)),
            malformed(Field::Bytes, Malformed::BytesOtherType { found: k })
        );
    }
}

// ---- sha256 ----

#[test]
fn rule_sha256_is_exactly_64_characters() {
    assert_eq!(
        absent(with(tokenizer(), "sha256", json!(&SHA[..63]))),
        malformed(
            Field::Sha256,
            Malformed::Name(NameError::Sha256Length { found: 63 })
        )
    );
    assert_eq!(
        absent(with(tokenizer(), "sha256", json!(format!("{SHA}0")))),
        malformed(
            Field::Sha256,
            Malformed::Name(NameError::Sha256Length { found: 65 })
        )
    );
    assert_eq!(
        absent(without(tokenizer(), "sha256")),
        Absent::MissingField {
            field: Field::Sha256
        }
    );
}

#[test]
fn rule_sha256_is_hexadecimal() {
    let bad = format!("{}g", &SHA[..63]);
    assert_eq!(
        absent(with(tokenizer(), "sha256", json!(bad))),
        malformed(Field::Sha256, Malformed::Name(NameError::Sha256NotHex))
    );
    // Decision (docs/index-json.md): upper-case hex is hexadecimal; it is stored lower-cased.
    let t = TokenizerIdentity::from_value(Some(&with(
        tokenizer(),
        "sha256",
        json!(SHA.to_uppercase()),
    )));
    assert_eq!(t.present().unwrap().root.sha256, SHA);
}

// ---- source_repo ----

#[test]
fn rule_source_repo_is_a_canonical_repository_id() {
    let cases = [
        ("DeepSeek-V4-Flash", NameError::NotOwnerSlashName),
        ("a/b/c", NameError::NotOwnerSlashName),
        (
            "https://huggingface.co/deepseek-ai/DeepSeek-V4-Flash",
            NameError::NotOwnerSlashName,
        ),
        ("deepseek ai/DeepSeek", NameError::BadCharacter),
        ("deepseek-ai/-x", NameError::BadEdge),
        ("deepseek-ai/a--b", NameError::DoubledPunctuation),
        ("deepseek-ai/a.git", NameError::GitSuffix),
        ("", NameError::Empty),
    ];
    for (repo, e) in cases {
        assert_eq!(
            absent(with(tokenizer(), "source_repo", json!(repo))),
            malformed(Field::SourceRepo, Malformed::Name(e)),
            "{repo}"
        );
    }
    assert_eq!(
        absent(with(tokenizer(), "source_repo", json!(7))),
        malformed(
            Field::SourceRepo,
            Malformed::NotAString {
                found: JsonKind::Number
            }
        )
    );
}

// ---- source_revision ----

#[test]
fn rule_source_revision_is_never_a_branch_name() {
    assert_eq!(
        absent(with(tokenizer(), "source_revision", json!("main"))),
        malformed(
            Field::SourceRevision,
            Malformed::Name(NameError::RevisionLength { found: 4 })
        )
    );
}

#[test]
fn rule_source_revision_is_exactly_40_lowercase_hex() {
    assert_eq!(
        absent(with(
            tokenizer(),
            "source_revision",
            json!(REV.to_uppercase())
        )),
        malformed(
            Field::SourceRevision,
            Malformed::Name(NameError::RevisionNotLowerHex)
        )
    );
    assert_eq!(
        absent(with(tokenizer(), "source_revision", json!(&REV[..39]))),
        malformed(
            Field::SourceRevision,
            Malformed::Name(NameError::RevisionLength { found: 39 })
        )
    );
    let forty_non_hex = format!("{}z", &REV[..39]);
    assert_eq!(
        absent(with(tokenizer(), "source_revision", json!(forty_non_hex))),
        malformed(
            Field::SourceRevision,
            Malformed::Name(NameError::RevisionNotLowerHex)
        )
    );
}

// ---- license ----

#[test]
fn rule_license_is_required_on_the_tokenizer() {
    assert_eq!(
        absent(without(tokenizer(), "license")),
        Absent::MissingField {
            field: Field::License
        }
    );
}

#[test]
fn rule_license_is_a_canonical_root_file_name() {
    assert_eq!(
        absent(with(tokenizer(), "license", json!("licenses/LICENSE"))),
        malformed(Field::License, Malformed::Name(NameError::Separator))
    );
    assert_eq!(
        absent(with(tokenizer(), "license", json!("MIT License"))),
        malformed(Field::License, Malformed::Name(NameError::BadCharacter))
    );
    assert_eq!(
        absent(with(tokenizer(), "license", json!(true))),
        malformed(
            Field::License,
            Malformed::NotAString {
                found: JsonKind::Boolean
            }
        )
    );
}

#[test]
fn rule_license_only_on_the_tokenizer_object() {
    // Decision (docs/index-json.md): the configuration object carries no license field, so one
    // that does is not a configuration object as published: absent, with this reason.
    let c = ConfigurationIdentity::from_value(Some(&with(
        configuration(),
        "license",
        json!("LICENSE"),
    )));
    assert_eq!(c, Parsed::Absent(Absent::LicenseOnConfiguration));
}

// ---- whole-object rules ----

#[test]
fn rule_absent_not_partially_filled_or_defaulted() {
    // One bad field among five good ones leaves nothing: the type has no partial state, and the
    // reason names the bad field.
    let t = TokenizerIdentity::from_value(Some(&with(tokenizer(), "bytes", json!("7847654"))));
    assert!(t.present().is_none());
    assert_eq!(
        t.absent(),
        Some(&malformed(Field::Bytes, Malformed::BytesString))
    );
}

#[test]
fn rule_unknown_fields_make_the_identity_absent() {
    assert_eq!(
        absent(with(tokenizer(), "vocab_size", json!(129280))),
        Absent::UnknownField {
            key: "vocab_size".into()
        }
    );
}

#[test]
fn rule_identity_must_be_an_object() {
    for (v, k) in [
        (json!("tokenizer.json"), JsonKind::String),
        (json!(null), JsonKind::Null),
        (json!([]), JsonKind::Array),
    ] {
        assert_eq!(
            TokenizerIdentity::from_value(Some(&v)),
            Parsed::Absent(Absent::NotAnObject { found: k })
        );
    }
}

#[test]
fn identities_inside_an_index() {
    let doc = json!({
        "source_repo": "deepseek-ai/DeepSeek-V4-Flash",
        "source_revision": REV,
        "units": [],
        "total_bytes": 0,
        "tokenizer": tokenizer(),
        "config": configuration(),
    });
    let read = IndexDocument::read(&serde_json::to_vec(&doc).unwrap());
    assert!(read.tokenizer.present().is_some());
    // Decision: the key is `configuration`; `config` is not read as an identity.
    assert_eq!(read.configuration, Parsed::Absent(Absent::NotPublished));
    let read = IndexDocument::read(b"{\"tokenizer\": ");
    assert_eq!(read.tokenizer, Parsed::Absent(Absent::IndexUnreadable));
    assert_eq!(read.configuration, Parsed::Absent(Absent::IndexUnreadable));
    // Every reason renders as a sentence naming the field.
    let t = TokenizerIdentity::from_value(Some(&with(tokenizer(), "bytes", json!(false))));
    assert_eq!(
        t.absent().unwrap().to_string(),
        "field `bytes` is malformed: a boolean, not a positive integer"
    );
}

#[test]
fn rule_duplicate_names_make_the_identity_absent() {
    // `serde_json` would silently keep the last `bytes`; another parser keeps the first. Ambiguous
    // evidence is no evidence.
    let tok = tokenizer().to_string();
    let dup_field = tok.replacen("\"bytes\":7847654", "\"bytes\":7847654,\"bytes\":1", 1);
    assert_ne!(dup_field, tok);
    let doc = format!(
        r#"{{"source_repo":"a/b","source_revision":"{REV}","files":1,"bytes":1,"tokenizer":{dup_field},"configuration":{}}}"#,
        configuration()
    );
    let read = IndexDocument::read(doc.as_bytes());
    assert_eq!(
        read.tokenizer,
        Parsed::Absent(Absent::DuplicateKey {
            pointer: "/tokenizer/bytes".into()
        })
    );
    assert!(read.configuration.present().is_some());
    assert!(matches!(
        read.shape,
        artifact::index_json::Shape::SingleSourceTotals(_)
    ));
    // The whole object given twice.
    let doc = format!(
        r#"{{"configuration":{0},"configuration":{0}}}"#,
        configuration()
    );
    let read = IndexDocument::read(doc.as_bytes());
    assert_eq!(
        read.configuration,
        Parsed::Absent(Absent::DuplicateKey {
            pointer: "/configuration".into()
        })
    );
}
