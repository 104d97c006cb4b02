//! The multi-part convention (seed 003 §1.6, formats.md §5.6): our split form and llama.cpp
//! gguf-split's (metadata only in part 0) both load as one model; a missing part, a wrong
//! `split.no`, a count mismatch and a `split.tensors.count` mismatch are refused; one part is a
//! plain file without `split.*` keys; a tensor over the cap is refused with the seed's text.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::borrow::Cow;
use std::path::Path;

use artifact::gguf::split::{assign, parse_part_name, part_name, write_split};
use artifact::gguf::writer::{write_file, TensorSpec};
use artifact::gguf::{GgmlType, GgufModel, Metadata, Value};

fn model() -> (Metadata, Vec<TensorSpec>, Vec<Vec<u8>>) {
    let mut md = Metadata::default();
    md.set("general.architecture", Value::str("llama"));
    md.set("llama.block_count", Value::U32(3));
    let mut specs = Vec::new();
    let mut data = Vec::new();
    for i in 0..6u8 {
        specs.push(TensorSpec {
            name: format!("blk.{i}.w"),
            dims: vec![25],
            ggml_type: GgmlType::F32,
        });
        data.push(vec![i; 100]); // padded to 128
    }
    (md, specs, data)
}

fn split_into(dir: &Path, max: u64) -> Vec<std::path::PathBuf> {
    let (md, specs, data) = model();
    write_split(dir, "m", &md, &specs, 32, max, "--max-size", |i| {
        Ok(Cow::Owned(data[i].clone()))
    })
    .unwrap()
}

#[test]
fn part_names_are_one_based_five_digits() {
    assert_eq!(part_name("m", 0, 3), "m-00001-of-00003.gguf");
    assert_eq!(
        parse_part_name("a-b-00002-of-00010.gguf"),
        Some(("a-b".into(), 2, 10))
    );
    assert_eq!(parse_part_name("m.gguf"), None);
    assert_eq!(parse_part_name("m-1-of-2.gguf"), None);
}

#[test]
fn greedy_assignment_by_padded_size_and_oversize_refusal() {
    let sizes: Vec<(String, u64)> = (0..5).map(|i| (format!("t{i}"), 100)).collect();
    let parts = assign(&sizes, 32, 256, "--max-size").unwrap();
    assert_eq!(parts, vec![0..2, 2..4, 4..5]);
    let e = assign(
        &[("output.weight".into(), 144643072)],
        32,
        67108864,
        "--split-max-size",
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "GGUF split: tensor 'output.weight' is 144643072 bytes, larger than the 67108864-byte part cap — a tensor cannot be split across parts; raise --split-max-size (at least 144643072 bytes) or use a smaller-capable format"
    );
}

#[test]
fn our_split_loads_as_one_model_with_full_metadata_in_every_part() {
    let dir = tempfile::tempdir().unwrap();
    let paths = split_into(dir.path(), 256);
    assert_eq!(paths.len(), 3);
    assert!(paths[2].ends_with("m-00003-of-00003.gguf"));
    let m = GgufModel::open(&paths[0]).unwrap();
    assert_eq!(m.n_parts(), 3);
    let (_, specs, data) = model();
    let names: Vec<&str> = m.tensor_infos().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>()
    );
    for (s, d) in specs.iter().zip(&data) {
        assert_eq!(m.tensor_bytes(&s.name).unwrap(), &d[..]);
    }
    for (i, p) in m.parts.iter().enumerate() {
        let md = &p.header.metadata;
        assert_eq!(md.get("split.no"), Some(&Value::U16(i as u16)));
        assert_eq!(md.get("split.count"), Some(&Value::U16(3)));
        assert_eq!(md.get("split.tensors.count"), Some(&Value::I32(6)));
        assert_eq!(md.get_u32("llama.block_count"), Ok(3));
    }
}

#[test]
fn a_single_part_is_a_plain_file_without_split_keys() {
    let dir = tempfile::tempdir().unwrap();
    let paths = split_into(dir.path(), 1 << 30);
    assert_eq!(paths, vec![dir.path().join("m.gguf")]);
    let m = GgufModel::open(&paths[0]).unwrap();
    assert!(m
        .metadata()
        .kv
        .iter()
        .all(|(k, _)| !k.starts_with("split.")));
    // and it is byte-identical to a plain write
    let (md, specs, data) = model();
    let plain = dir.path().join("plain.gguf");
    write_file(&plain, &md, &specs, 32, |i| Ok(Cow::Owned(data[i].clone()))).unwrap();
    assert_eq!(
        std::fs::read(&plain).unwrap(),
        std::fs::read(&paths[0]).unwrap()
    );
}

/// llama.cpp gguf-split form: part 0 has the metadata and split keys; the others only the
/// split keys.
#[test]
fn llama_cpp_form_with_metadata_only_in_part_0_loads() {
    let dir = tempfile::tempdir().unwrap();
    let (md, specs, data) = model();
    for (i, r) in [0..2usize, 2..6].into_iter().enumerate() {
        let mut m = Metadata::default();
        m.set("split.no", Value::U16(i as u16));
        m.set("split.count", Value::U16(2));
        m.set("split.tensors.count", Value::I32(6));
        if i == 0 {
            m.kv.extend(md.kv.iter().cloned());
        }
        let base = r.start;
        write_file(
            &dir.path().join(part_name("x", i, 2)),
            &m,
            &specs[r],
            32,
            |j| Ok(Cow::Owned(data[base + j].clone())),
        )
        .unwrap();
    }
    let m = GgufModel::open(&dir.path().join("x-00001-of-00002.gguf")).unwrap();
    assert_eq!(m.tensors.len(), 6);
    assert_eq!(m.metadata().get_u32("llama.block_count"), Ok(3));
    assert_eq!(m.tensor_bytes("blk.5.w").unwrap(), &data[5][..]);
}

fn expect_err(p: &Path, needle: &str) {
    let e = GgufModel::open(p).unwrap_err().to_string();
    assert!(e.contains(needle), "`{e}` lacks `{needle}`");
}

#[test]
fn broken_sets_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let paths = split_into(dir.path(), 256);
    // missing part
    let moved = dir.path().join("away.gguf");
    std::fs::rename(&paths[2], &moved).unwrap();
    expect_err(&paths[0], "part 3 of 3 is missing");
    std::fs::rename(&moved, &paths[2]).unwrap();
    // wrong split.no: swap parts 2 and 3
    let tmp = dir.path().join("tmp");
    std::fs::rename(&paths[1], &tmp).unwrap();
    std::fs::rename(&paths[2], &paths[1]).unwrap();
    std::fs::rename(&tmp, &paths[2]).unwrap();
    expect_err(&paths[0], "split.no = 2, expected 1");
    // filename count disagrees with split.count
    let dir2 = tempfile::tempdir().unwrap();
    let p = split_into(dir2.path(), 256);
    let renamed = dir2.path().join("m-00001-of-00004.gguf");
    std::fs::copy(&p[0], &renamed).unwrap();
    expect_err(&renamed, "the file name says 4 parts but split.count is 3");
    // opening a later part
    expect_err(&p[1], "open the first part");
}

#[test]
fn split_tensors_count_mismatch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (md, specs, data) = model();
    for i in 0..2usize {
        let mut m = Metadata::default();
        m.set("split.no", Value::U16(i as u16));
        m.set("split.count", Value::U16(2));
        m.set("split.tensors.count", Value::I32(7));
        m.kv.extend(md.kv.iter().cloned());
        let r = if i == 0 { 0..3 } else { 3..6 };
        let base = r.start;
        write_file(
            &dir.path().join(part_name("y", i, 2)),
            &m,
            &specs[r],
            32,
            |j| Ok(Cow::Owned(data[base + j].clone())),
        )
        .unwrap();
    }
    expect_err(
        &dir.path().join("y-00001-of-00002.gguf"),
        "split.tensors.count is 7, but the 2 parts hold 6 tensors",
    );
}
