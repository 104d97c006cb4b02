//! Tile container `MNRNTIL1` (docs/container.md): golden files byte for byte, round-trip property
//! tests for every mode, one named test per refusal, the streaming reader and the regeneration
//! check. Fuzz harnesses for the header parser are the `fuzz_` tests (long run: see the doc).
//!
//! Regenerate the goldens after an intentional format change with
//! `MINIRUN_BLESS=1 cargo test -p artifact --test integration container::golden_`.

#![allow(clippy::panic, clippy::too_many_arguments)]

use std::path::{Path, PathBuf};

use artifact::container::geometry::{fixed_end, V1_FIXED_END, V2_FIXED_END, V3_FIXED_END};
use artifact::container::header::{self, HeaderError};
use artifact::container::synthetic::{fill, STREAM_BIAS, STREAM_PACKED, STREAM_SCALE};
use artifact::container::{
    flags, parse_header, regenerate_check, synthetic_streams, write_container, write_synthetic,
    AlignedSlot, ContainerError, ContainerReader, ContainerSpec, ContainerWriter, ContentKind,
    DigestCheck, Dtype, GeometryError, Header, NibbleOrder, Streams, ALIGN,
};

mod props;
mod refusals;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/container")
}

/// "Upstream" streams for a checkpoint-derived spec: deterministic bytes standing in for the
/// checkpoint's (generator stream, seed 0xC0FFEE), so goldens need no model download.
fn fake_upstream(spec: &ContainerSpec) -> Streams {
    let (np, ns, nb) = spec
        .layout()
        .expect("valid golden geometry")
        .stream_lengths();
    let gen = |stream, n: u64| {
        let mut v = vec![0u8; n as usize];
        fill(0xC0FFEE, stream, 0, &mut v);
        v
    };
    Streams {
        packed: gen(STREAM_PACKED, np),
        scale: gen(STREAM_SCALE, ns),
        bias: spec.bias_dtype.map(|_| gen(STREAM_BIAS, nb)),
    }
}

fn streams_for(spec: &ContainerSpec) -> Streams {
    match spec.content {
        ContentKind::SyntheticDeterministic { .. } => synthetic_streams(spec).expect("synthetic"),
        ContentKind::CheckpointDerived => fake_upstream(spec),
    }
}

fn write(path: &Path, spec: &ContainerSpec) -> Streams {
    let s = streams_for(spec);
    write_container(path, spec, &s.packed, &s.scale, s.bias.as_deref()).expect("write");
    s
}

/// The golden cases: (file name, spec). Each documented in docs/container.md §9.
fn golden_cases() -> Vec<(&'static str, ContainerSpec)> {
    vec![
        (
            "v1-mxfp4.til",
            ContainerSpec::mxfp4("synthetic.mxfp4", 128, 512, 64)
                .with_digests(false)
                .with_content(ContentKind::SyntheticDeterministic { seed: 1 }),
        ),
        (
            "v2-mxfp4-digests.til",
            ContainerSpec::mxfp4("layers.0.ffn.experts.0.w1.weight", 128, 512, 64),
        ),
        (
            "v2-affine-bf16-bias.til",
            ContainerSpec::affine(
                "model.layers.0.mlp.down_proj",
                128,
                512,
                64,
                4,
                64,
                Dtype::Bf16,
            ),
        ),
        (
            "v3-fp8-block-128.til",
            ContainerSpec::fp8_e4m3_block("layers.0.attn.wq_a.weight", 256, 256, 128, 128, 128),
        ),
        (
            "v2-mxfp4-last-short-tile.til",
            ContainerSpec::mxfp4("layers.1.ffn.experts.3.w2.weight", 96, 1024, 64)
                .with_content(ContentKind::SyntheticDeterministic { seed: 7 }),
        ),
        (
            "v3-fp8-block-last-short-tile.til",
            ContainerSpec::fp8_e4m3_block("layers.2.attn.wkv.weight", 192, 256, 128, 128, 128),
        ),
    ]
}

fn check_golden(name: &str) {
    let (file, spec) = golden_cases()
        .into_iter()
        .find(|(f, _)| *f == name)
        .expect("case");
    let dir = tempfile::tempdir().expect("tempdir");
    let produced = dir.path().join(file);
    write(&produced, &spec);
    let produced = std::fs::read(&produced).expect("read produced");
    let golden = golden_dir().join(file);
    if std::env::var_os("MINIRUN_BLESS").is_some() {
        std::fs::create_dir_all(golden_dir()).expect("mkdir golden");
        std::fs::write(&golden, &produced).expect("bless");
    }
    let committed = std::fs::read(&golden).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with MINIRUN_BLESS=1 to create",
            golden.display()
        )
    });
    assert_eq!(
        produced.len(),
        committed.len(),
        "{file}: length differs from the golden"
    );
    if let Some(i) = produced.iter().zip(&committed).position(|(a, b)| a != b) {
        panic!("{file}: first differing byte at offset {i}");
    }
}

#[test]
fn golden_v1_mxfp4() {
    check_golden("v1-mxfp4.til");
}
#[test]
fn golden_v2_mxfp4_digests() {
    check_golden("v2-mxfp4-digests.til");
}
#[test]
fn golden_v2_affine_bf16_bias() {
    check_golden("v2-affine-bf16-bias.til");
}
#[test]
fn golden_v3_fp8_block_128() {
    check_golden("v3-fp8-block-128.til");
}
#[test]
fn golden_v2_mxfp4_last_short_tile() {
    check_golden("v2-mxfp4-last-short-tile.til");
}
#[test]
fn golden_v3_fp8_block_last_short_tile() {
    check_golden("v3-fp8-block-last-short-tile.til");
}

/// Every committed golden reads back: header fields, versions, flags, streams, digests.
#[test]
fn goldens_read_back_with_expected_versions_and_flags() {
    let expect = [
        ("v1-mxfp4.til", 1, flags::ZERO_PADDING, 2),
        (
            "v2-mxfp4-digests.til",
            2,
            flags::DIGESTS | flags::ZERO_PADDING,
            2,
        ),
        (
            "v2-affine-bf16-bias.til",
            2,
            flags::BIAS | flags::DIGESTS | flags::ZERO_PADDING,
            2,
        ),
        (
            "v3-fp8-block-128.til",
            3,
            flags::DIGESTS | flags::SCALE_GRID_2D | flags::ZERO_PADDING,
            2,
        ),
        (
            "v2-mxfp4-last-short-tile.til",
            2,
            flags::DIGESTS | flags::ZERO_PADDING,
            2,
        ),
        (
            "v3-fp8-block-last-short-tile.til",
            3,
            flags::DIGESTS | flags::SCALE_GRID_2D | flags::ZERO_PADDING,
            2,
        ),
    ];
    for (file, version, flag_word, tiles) in expect {
        let (_, spec) = golden_cases()
            .into_iter()
            .find(|(f, _)| *f == file)
            .expect("case");
        let r = ContainerReader::open(&golden_dir().join(file)).expect(file);
        let l = r.layout();
        assert_eq!(
            (l.version, l.flags, l.tile_count),
            (version, flag_word, tiles),
            "{file}"
        );
        assert_eq!(l.spec, spec, "{file}");
        r.verify()
            .or_else(|e| if version == 1 { Ok(()) } else { Err(e) })
            .expect(file);
        let streams = r.reassemble(DigestCheck::IfPresent).expect(file);
        assert_eq!(streams, streams_for(&spec), "{file}");
    }
}

#[test]
fn last_short_tile_layout_is_compact() {
    let spec = ContainerSpec::fp8_e4m3_block("t", 192, 256, 128, 128, 128);
    let l = spec.layout().expect("layout");
    let last = l.tile(1).expect("tile 1");
    assert_eq!(last.shape.rows, 64);
    assert_eq!(last.shape.packed_region, 64 * 256);
    assert_eq!(
        last.shape.scale_payload, 2,
        "one partial scale row of 2 blocks"
    );
    assert_eq!(last.shape.scale_region, ALIGN);
    assert_eq!(last.offset, ALIGN + l.tile_stride);
    assert_eq!(l.total_bytes, last.offset + 64 * 256 + ALIGN);
}

#[test]
fn v1_only_request_is_byte_identical_to_a_v1_file() {
    let spec = ContainerSpec::mxfp4("synthetic.mxfp4", 128, 512, 64)
        .with_digests(false)
        .with_content(ContentKind::SyntheticDeterministic { seed: 1 });
    assert_eq!(spec.min_version(), 1);
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("a.til");
    write(&p, &spec);
    let bytes = std::fs::read(&p).expect("read");
    assert_eq!(
        bytes,
        std::fs::read(golden_dir().join("v1-mxfp4.til")).expect("golden")
    );
    assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 1);
    // Nothing of v2/v3 leaks into a v1 header: everything past the v1 fixed fields is zero.
    assert!(bytes[V1_FIXED_END as usize..ALIGN as usize]
        .iter()
        .all(|&b| b == 0));
}

#[test]
fn writer_emits_the_lowest_version() {
    let m = ContainerSpec::mxfp4("m", 64, 512, 64);
    assert_eq!(
        m.clone().with_digests(false).layout().expect("v1").version,
        1
    );
    assert_eq!(m.layout().expect("v2").version, 2);
    let a = ContainerSpec::affine("a", 64, 512, 64, 4, 64, Dtype::F16);
    assert_eq!(
        a.clone().with_digests(false).layout().expect("v1").version,
        1
    );
    let f = ContainerSpec::fp8_e4m3_block("f", 128, 256, 128, 128, 128);
    assert_eq!(
        f.clone().with_digests(false).layout().expect("v3").version,
        3
    );
    let l = f.layout().expect("v3");
    assert_eq!((l.version, l.digest_table_offset), (3, V3_FIXED_END));
    assert_eq!(fixed_end(2), V2_FIXED_END);
}

#[test]
fn tile_reads_are_one_pread_each_into_aligned_slots() {
    let spec = ContainerSpec::affine("a", 256, 512, 64, 4, 64, Dtype::F32);
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("a.til");
    let s = write(&p, &spec);
    let r = ContainerReader::open(&p).expect("open");
    let mut slot = AlignedSlot::for_layout(r.layout());
    for i in 0..r.layout().tile_count {
        let v = r
            .read_tile(i, &mut slot, DigestCheck::Require)
            .expect("tile");
        for part in [v.bytes, v.packed, v.scale, v.bias.expect("bias")] {
            assert_eq!(
                part.as_ptr() as usize % ALIGN as usize,
                0,
                "sub-region not 16 KiB aligned"
            );
        }
    }
    assert_eq!(r.pread_count(), 4);
    let back = r.reassemble(DigestCheck::Skip).expect("reassemble");
    assert_eq!(
        r.pread_count(),
        8,
        "reassembly reads each tile exactly once"
    );
    assert_eq!(back, s);
}

fn golden_bytes(file: &str) -> Vec<u8> {
    std::fs::read(golden_dir().join(file)).expect("golden")
}

fn open_bytes(bytes: &[u8]) -> Result<ContainerReader, ContainerError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("x.til");
    std::fs::write(&p, bytes).expect("write");
    ContainerReader::open(&p)
}

fn header_err(bytes: &[u8]) -> HeaderError {
    match open_bytes(bytes) {
        Err(ContainerError::Header { source, .. }) => source,
        Err(e) => panic!("expected a header error, got {e}"),
        Ok(_) => panic!("expected a header error, got a reader"),
    }
}

fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

// ---------------------------------------------------------------------------------------------
// Regeneration check.

#[test]
fn regeneration_accepts_synthetic_containers() {
    let rep = regenerate_check(&golden_dir().join("v1-mxfp4.til")).expect("v1 synthetic");
    assert_eq!((rep.seed, rep.tiles, rep.bytes_compared), (1, 2, ALIGN * 5));
    regenerate_check(&golden_dir().join("v2-mxfp4-last-short-tile.til")).expect("v2 synthetic");
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("s.til");
    let spec = ContainerSpec::affine("s", 128, 1024, 32, 8, 64, Dtype::F16)
        .with_content(ContentKind::SyntheticDeterministic { seed: 99 });
    write_synthetic(&p, &spec).expect("write synthetic");
    regenerate_check(&p).expect("affine synthetic");
}
#[test]
fn regeneration_detects_a_changed_byte() {
    let mut b = golden_bytes("v1-mxfp4.til");
    b[ALIGN as usize + 77] ^= 0xFF;
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("x.til");
    std::fs::write(&p, &b).expect("write");
    let e = regenerate_check(&p).expect_err("mismatch");
    assert!(
        matches!(&e, ContainerError::RegenerationMismatch { region, .. } if region.contains("tile 0 packed")),
        "{e}"
    );
}
#[test]
fn regeneration_refuses_checkpoint_derived() {
    for file in [
        "v2-mxfp4-digests.til",
        "v2-affine-bf16-bias.til",
        "v3-fp8-block-128.til",
    ] {
        let e = regenerate_check(&golden_dir().join(file)).expect_err(file);
        assert!(
            matches!(e, ContainerError::NotRegenerable { .. }),
            "{file}: {e}"
        );
        assert!(e.to_string().contains("cannot be regenerated"));
    }
    let spec = ContainerSpec::mxfp4("t", 64, 512, 64);
    assert!(matches!(
        synthetic_streams(&spec),
        Err(ContainerError::NotRegenerable { .. })
    ));
}

#[test]
fn expect_geometry_compares_before_reading() {
    let r = ContainerReader::open(&golden_dir().join("v3-fp8-block-128.til")).expect("open");
    let same = ContainerSpec::fp8_e4m3_block("any name", 256, 256, 128, 128, 64);
    r.expect_geometry(&same)
        .expect("tiling and name are not compared");
    let other = ContainerSpec::fp8_e4m3_block("x", 256, 512, 128, 128, 128);
    let e = r.expect_geometry(&other).expect_err("cols differ");
    assert!(
        matches!(e, ContainerError::GeometryMismatch { field: "cols", .. }),
        "{e}"
    );
    assert_eq!(r.pread_count(), 0);
}

#[test]
fn write_container_refuses_streams_of_the_wrong_length() {
    let spec = ContainerSpec::affine("a", 128, 512, 64, 4, 64, Dtype::Bf16);
    let s = fake_upstream(&spec);
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("a.til");
    let e =
        write_container(&p, &spec, &s.packed, &s.scale[1..], s.bias.as_deref()).expect_err("short");
    assert!(
        matches!(
            e,
            ContainerError::MatrixStreamLength {
                stream: "scale",
                ..
            }
        ),
        "{e}"
    );
    let e = write_container(&p, &spec, &s.packed, &s.scale, None).expect_err("no bias");
    assert!(
        matches!(
            e,
            ContainerError::MatrixStreamLength {
                stream: "bias",
                actual: 0,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn describe_reports_header_and_tiles_as_json() {
    let r = ContainerReader::open(&golden_dir().join("v3-fp8-block-last-short-tile.til"))
        .expect("open");
    let j = r.header().describe();
    assert_eq!(j["version"], 3);
    assert_eq!(j["mode"], "fp8-e4m3-block");
    assert_eq!(
        j["flags"],
        serde_json::json!(["digests", "scale-grid-2d", "zero-padding"])
    );
    assert_eq!(j["scale_grid"], serde_json::json!([2, 2]));
    assert_eq!(j["tiles"][1]["rows"], 64);
    assert_eq!(j["tiles"][1]["scale"]["offset"], 16384 + 49152 + 16384);
    assert_eq!(j["tiles"][0]["sha256"].as_str().map(str::len), Some(64));
}
