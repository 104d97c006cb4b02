//! `minirun-inspect` on artifact files: the committed golden containers and index.json files, a
//! manifest, a directory, and refusals (a corrupted container, an unknown file).

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_minirun-inspect"))
}

fn golden(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../artifact/tests/golden")
        .join(rel)
}

#[test]
fn containers_show_header_and_every_tile() {
    for (file, mode, version) in [
        ("container/v1-mxfp4.til", "mxfp4", 1),
        ("container/v2-affine-bf16-bias.til", "affine", 2),
        ("container/v3-fp8-block-128.til", "fp8-e4m3-block", 3),
    ] {
        let out = bin().arg(golden(file)).arg("--json").output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{file}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["kind"], "container");
        let header = v["header"].to_string();
        assert!(header.contains(mode), "{file}: {header}");
        assert!(
            header.contains(&format!("\"version\":{version}")),
            "{file}: {header}"
        );
        assert!(!v["tiles"].as_array().unwrap().is_empty());
        if version >= 2 {
            assert!(
                v["tiles"][0]["sha256"]
                    .as_str()
                    .is_some_and(|s| s.len() == 64),
                "{file}"
            );
        }
        let table = bin().arg(golden(file)).output().unwrap();
        assert!(
            String::from_utf8_lossy(&table.stdout).contains("tile"),
            "{file}"
        );
    }
}

#[test]
fn corrupted_container_is_refused_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.til");
    let mut b = std::fs::read(golden("container/v1-mxfp4.til")).unwrap();
    b.truncate(b.len() - 1);
    std::fs::write(&p, b).unwrap();
    let out = bin().arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.til"));
}

#[test]
fn index_shapes_and_identities() {
    for (file, shape) in [
        ("index-single-source-units.json", "singleSourceUnits"),
        ("index-single-source-totals.json", "singleSourceTotals"),
        ("index-multi-source-units.json", "multiSourceUnits"),
    ] {
        let out = bin().arg(golden(file)).arg("--json").output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{file}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["shape"], shape, "{file}");
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("index.json");
    std::fs::write(&p, br#"{"hello": 1, "artifact": "x"}"#).unwrap();
    let out = bin().arg(dir.path()).arg("--json").output().unwrap();
    // printed, then refused: an index no consumer can read is not a pass
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("of shape `unrecognized`"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["shape"], "unrecognized");
    assert_eq!(
        v["detail"]["keys"],
        serde_json::json!(["artifact", "hello"])
    );
    assert_eq!(v["tokenizer"]["present"], false);
    std::fs::write(&p, b"{not json").unwrap();
    let out = bin().arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("shape unreadable"));
}

#[test]
fn manifest_and_unknown_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.bin"), b"hello").unwrap();
    let m = artifact::manifest::Manifest::scan(dir.path(), "layers00").unwrap();
    std::fs::write(dir.path().join("manifest.json"), m.to_bytes()).unwrap();
    let out = bin().arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("layers00") && text.contains("a.bin"),
        "{text}"
    );
    let out = bin().arg(dir.path().join("a.bin")).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}
