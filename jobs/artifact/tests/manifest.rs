//! Unit manifest: golden bytes, determinism, reader refusals and offline verification.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::fs;

use artifact::manifest::{
    FileKind, Manifest, ManifestEntry, ManifestError, Problem, SourceRef, MANIFEST_FILE_NAME,
};

const GOLDEN: &str = r#"{
  "files": [
    {
      "kind": "container",
      "path": "attn.wq.mnt",
      "sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
      "size": 3,
      "sources": [
        {
          "file": "model-00002-of-00046.safetensors",
          "tensor": "layers.0.attn.wq.weight"
        },
        {
          "file": "model-00002-of-00046.safetensors",
          "tensor": "layers.0.attn.wq.weight.scale"
        }
      ]
    },
    {
      "kind": "plain",
      "path": "norm.bin",
      "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
      "size": 0
    }
  ],
  "unit": "layers00",
  "v": 1
}
"#;

fn entry(path: &str, size: u64, sha256: &str, kind: FileKind) -> ManifestEntry {
    ManifestEntry {
        path: path.into(),
        size,
        sha256: sha256.into(),
        kind,
        sources: vec![],
    }
}

fn golden_manifest() -> Manifest {
    let mut m = Manifest::new("layers00").unwrap();
    // Inserted out of order, sources out of order: the bytes are still canonical.
    m.insert(entry(
        "norm.bin",
        0,
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        FileKind::Plain,
    ))
    .unwrap();
    let mut c = entry(
        "attn.wq.mnt",
        3,
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        FileKind::Container,
    );
    for t in ["layers.0.attn.wq.weight.scale", "layers.0.attn.wq.weight"] {
        c.sources.push(SourceRef {
            repo: None,
            file: "model-00002-of-00046.safetensors".into(),
            tensor: Some(t.into()),
        });
    }
    m.insert(c).unwrap();
    m
}

#[test]
fn golden_bytes_and_round_trip() {
    let m = golden_manifest();
    assert_eq!(String::from_utf8(m.to_bytes()).unwrap(), GOLDEN);
    let back = Manifest::parse(GOLDEN.as_bytes()).unwrap();
    assert_eq!(back.to_bytes(), GOLDEN.as_bytes());
    assert_eq!(back.total_bytes(), 3);
}

#[test]
fn scan_is_deterministic_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("layers00");
    fs::create_dir_all(unit.join("sub")).unwrap();
    let mut container = b"MNRNTIL1".to_vec();
    container.resize(100, 0);
    fs::write(unit.join("w.mnt"), &container).unwrap();
    fs::write(unit.join("abc.bin"), b"abc").unwrap();
    fs::write(unit.join("sub/x"), b"MNRN").unwrap();
    let m = Manifest::scan(&unit, "layers00").unwrap();
    let paths: Vec<_> = m.files.iter().map(|e| (e.path.as_str(), e.kind)).collect();
    assert_eq!(
        paths,
        vec![
            ("abc.bin", FileKind::Plain),
            ("sub/x", FileKind::Plain),
            ("w.mnt", FileKind::Container)
        ]
    );
    fs::write(unit.join(MANIFEST_FILE_NAME), m.to_bytes()).unwrap();
    // The manifest itself is never listed, and a second scan gives the same bytes.
    assert_eq!(
        Manifest::scan(&unit, "layers00").unwrap().to_bytes(),
        m.to_bytes()
    );
    let read = Manifest::read(&unit).unwrap();
    let ok = read.verify(&unit).unwrap();
    assert!(ok.is_ok(), "{:?}", ok.problems);
    assert_eq!((ok.files_checked, ok.bytes_checked), (3, 107));

    // Flip one byte, grow one file, remove one, add an unlisted file and a symlink.
    fs::write(unit.join("abc.bin"), b"abd").unwrap();
    fs::write(unit.join("sub/x"), b"MNRNX").unwrap();
    fs::remove_file(unit.join("w.mnt")).unwrap();
    fs::write(unit.join("extra"), b"").unwrap();
    std::os::unix::fs::symlink("abc.bin", unit.join("link")).unwrap();
    let r = read.verify(&unit).unwrap();
    assert_eq!(
        r.problems,
        vec![
            Problem::DigestMismatch {
                path: "abc.bin".into(),
                expected: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".into(),
                found: "a52d159f262b2c6ddb724a61840befc36eb30c88877a4030b65cbe86298449c9".into(),
            },
            Problem::SizeMismatch {
                path: "sub/x".into(),
                expected: 4,
                found: 5
            },
            Problem::Missing {
                path: "w.mnt".into()
            },
            Problem::Unlisted {
                path: "extra".into()
            },
            Problem::Unlisted {
                path: "link".into()
            },
        ]
    );
    assert!(r.problems[0].to_string().contains("`abc.bin`"));
    // A scan refuses a unit with a symbolic link in it.
    assert!(Manifest::scan(&unit, "layers00").is_err());
}

fn refuses(json: &str) -> ManifestError {
    match Manifest::parse(json.as_bytes()) {
        Ok(m) => panic!("accepted {json}: {m:?}"),
        Err(e) => e,
    }
}

const D: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

fn one(path: &str, sha: &str) -> String {
    format!(
        r#"{{"v":1,"unit":"u","files":[{{"path":{},"size":1,"sha256":"{sha}","kind":"plain"}}]}}"#,
        serde_json::Value::String(path.into())
    )
}

#[test]
fn reader_refusals() {
    assert!(matches!(refuses("not json"), ManifestError::Schema { .. }));
    assert!(matches!(
        refuses(r#"{"v":2,"unit":"u","files":[]}"#),
        ManifestError::Version { found: 2 }
    ));
    assert!(matches!(
        refuses(r#"{"unit":"u","files":[]}"#),
        ManifestError::Schema { .. }
    ));
    assert!(matches!(
        refuses(r#"{"v":1,"unit":"u","files":[],"x":1}"#),
        ManifestError::Schema { .. }
    ));
    assert!(matches!(
        refuses(r#"{"v":1,"unit":"../u","files":[]}"#),
        ManifestError::Unit { .. }
    ));
    for bad_path in [
        "../x",
        "/abs",
        "a//b",
        "a/",
        ".",
        "a b",
        "manifest.json",
        "a/./b",
        "a\\b",
        "1/2/3/4/5/6/7/8/9",
    ] {
        assert!(
            matches!(refuses(&one(bad_path, D)), ManifestError::Entry { .. }),
            "{bad_path}"
        );
    }
    assert!(Manifest::parse(one("sub/manifest.json", D).as_bytes()).is_ok());
    for bad_sha in [&D[1..], &D.to_uppercase(), "zz"] {
        assert!(matches!(
            refuses(&one("a", bad_sha)),
            ManifestError::Entry { .. }
        ));
    }
    let dup = format!(
        r#"{{"v":1,"unit":"u","files":[{{"path":"a","size":1,"sha256":"{D}","kind":"plain"}},{{"path":"a","size":1,"sha256":"{D}","kind":"plain"}}]}}"#
    );
    assert!(matches!(refuses(&dup), ManifestError::Entry { .. }));
    let unsorted = dup.replacen("\"a\"", "\"b\"", 1);
    assert!(matches!(refuses(&unsorted), ManifestError::Entry { .. }));
    let bad_kind = one("a", D).replace("plain", "tensor");
    assert!(matches!(refuses(&bad_kind), ManifestError::Schema { .. }));
    let bad_repo = one("a", D).replace(
        r#""kind":"plain""#,
        r#""kind":"plain","sources":[{"repo":"not a repo","file":"f"}]"#,
    );
    assert!(matches!(refuses(&bad_repo), ManifestError::Entry { .. }));
    let big = vec![b' '; (16 << 20) + 1];
    assert!(matches!(
        Manifest::parse(&big),
        Err(ManifestError::TooLarge { .. })
    ));
}

#[test]
fn read_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(MANIFEST_FILE_NAME), b"{").unwrap();
    let err = Manifest::read(dir.path()).unwrap_err();
    assert!(err.to_string().contains("manifest.json"), "{err}");
}

/// Found by the `unit_manifest` fuzz target (docs/fuzz.md): sources out of order parsed, but the
/// written form sorts them, so two byte strings stood for one manifest.
#[test]
fn unsorted_sources_are_refused() {
    let with = |sources: &str| {
        one("a", D).replace(
            r#""kind":"plain""#,
            &format!(r#""kind":"plain","sources":[{sources}]"#),
        )
    };
    let sorted =
        with(r#"{"file":"m-1.safetensors","tensor":"x"},{"file":"m-2.safetensors","tensor":"x"}"#);
    let m = Manifest::parse(sorted.as_bytes()).unwrap();
    assert_eq!(Manifest::parse(&m.to_bytes()).unwrap(), m);
    let unsorted =
        with(r#"{"file":"m-2.safetensors","tensor":"x"},{"file":"m-1.safetensors","tensor":"x"}"#);
    match refuses(&unsorted) {
        ManifestError::Entry { reason, .. } => assert!(reason.contains("sorted"), "{reason}"),
        e => panic!("{e}"),
    }
}
