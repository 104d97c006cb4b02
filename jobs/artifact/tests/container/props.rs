//! Property tests (arbitrary valid geometry → write → read → same bytes, every mode) and the
//! `fuzz_` harnesses of the header parser and reader. Long run:
//! `PROPTEST_CASES=1000000 cargo test --release -p artifact --test integration container::fuzz_`.

use super::*;

use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Property tests: arbitrary valid geometry → write → read → same bytes, every mode.

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// A valid spec built from raw choices: rows_per_tile and the last tile are multiples of the
/// smallest row count whose packed bytes fill whole 16 KiB pages (and of rows_per_scale).
fn spec_from(
    mode: u8,
    cols_units: u64,
    knob: u8,
    tiles: u64,
    tile_mult: u64,
    last_frac: u64,
    digests: bool,
    seed: Option<u64>,
) -> ContainerSpec {
    let mut spec = match mode % 3 {
        0 => ContainerSpec::mxfp4("p.mxfp4", 1, 32 * cols_units, 1),
        1 => {
            let bits = [2u8, 3, 4, 5, 6, 8][usize::from(knob % 6)];
            let group = [32u64, 64, 128][usize::from(knob / 6 % 3)];
            let dt = [Dtype::Bf16, Dtype::F16, Dtype::F32][usize::from(knob / 18 % 3)];
            ContainerSpec::affine("p.affine", 1, group * cols_units, group, bits, 1, dt)
        }
        _ => {
            let rps = [1u64, 2, 16, 128][usize::from(knob % 4)];
            let group = [32u64, 64, 128][usize::from(knob / 4 % 3)];
            let dt = [Dtype::E8m0, Dtype::F32][usize::from(knob / 12 % 2)];
            ContainerSpec::fp8_e4m3_block(
                "p.fp8",
                1,
                8 * cols_units + u64::from(knob % 8),
                rps,
                group,
                1,
            )
            .with_scale_dtype(dt)
        }
    };
    let row_bytes = spec.cols * u64::from(spec.element_bits) / 8;
    let unit = ALIGN / gcd(row_bytes, ALIGN);
    let tile_unit = unit / gcd(unit, spec.rows_per_scale) * spec.rows_per_scale;
    spec.rows_per_tile = tile_unit * tile_mult;
    let last = unit * (1 + last_frac % (spec.rows_per_tile / unit));
    spec.rows = spec.rows_per_tile * (tiles - 1) + last;
    spec.digests = digests;
    if let Some(seed) = seed {
        spec.content = ContentKind::SyntheticDeterministic { seed };
    }
    spec
}

fn arb_spec() -> impl Strategy<Value = ContainerSpec> {
    (
        0u8..3,
        1u64..40,
        any::<u8>(),
        1u64..4,
        1u64..3,
        any::<u64>(),
        any::<bool>(),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(|(m, c, k, t, tm, lf, d, s)| spec_from(m, c, k, t, tm, lf, d, s))
        .prop_filter("keep files small", |s| {
            s.layout()
                .map(|l| l.total_bytes <= 1 << 20)
                .unwrap_or(false)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn round_trip_arbitrary_geometry(spec in arb_spec()) {
        let layout = spec.layout().expect("strategy builds valid specs");
        let streams = streams_for(&spec);
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("r.til");
        let summary = write_container(&p, &spec, &streams.packed, &streams.scale, streams.bias.as_deref())
            .expect("write");
        prop_assert_eq!(std::fs::metadata(&p).expect("meta").len(), layout.total_bytes);
        let r = ContainerReader::open(&p).expect("open");
        prop_assert_eq!(r.layout(), &layout);
        if spec.digests {
            prop_assert_eq!(&r.header().digests, &summary.tile_digests);
        }
        let back = r.reassemble(DigestCheck::IfPresent).expect("reassemble");
        prop_assert_eq!(r.pread_count(), layout.tile_count);
        prop_assert_eq!(back, streams);
        if let ContentKind::SyntheticDeterministic { .. } = spec.content {
            regenerate_check(&p).expect("synthetic regenerates");
        }
    }

    #[test]
    fn header_encode_parse_round_trip(spec in arb_spec(), fill_byte in any::<u8>()) {
        let layout = spec.layout().expect("valid");
        let digests = vec![[fill_byte; 32]; if spec.digests { layout.tile_count as usize } else { 0 }];
        let h = Header { layout, digests };
        prop_assert_eq!(parse_header(&h.encode()).expect("parse"), h);
    }
}

// ---------------------------------------------------------------------------------------------
// Fuzz harnesses (bounded here; long run: PROPTEST_CASES=1000000 cargo test -p artifact --test integration container::fuzz_).

fn header_seeds() -> Vec<Vec<u8>> {
    golden_cases()
        .iter()
        .map(|(f, _)| golden_bytes(f)[..ALIGN as usize].to_vec())
        .collect()
}

proptest! {
    #[test]
    fn fuzz_header_mutations(
        which in 0usize..6,
        edits in proptest::collection::vec((0usize..600, any::<u8>()), 1..8),
        cut in proptest::option::of(0usize..(ALIGN as usize)),
    ) {
        let mut b = header_seeds().swap_remove(which);
        for (off, v) in edits {
            b[off] = v;
        }
        if let Some(cut) = cut {
            b.truncate(cut);
        }
        // Never panics; any accepted header describes a layout within the 64 MiB header cap.
        if let Ok(h) = parse_header(&b) {
            prop_assert!(h.layout.header_bytes as usize <= b.len());
            prop_assert!(h.digests.len() * 32 <= b.len());
        }
    }

    #[test]
    fn fuzz_header_arbitrary_bytes(mut b in proptest::collection::vec(any::<u8>(), 0..20_000), magic in any::<bool>()) {
        if magic && b.len() >= 8 {
            b[..8].copy_from_slice(b"MNRNTIL1");
        }
        let _ = parse_header(&b);
    }

    #[test]
    fn fuzz_reader_mutated_files(
        which in 0usize..6,
        edits in proptest::collection::vec((0usize..131_072, any::<u8>()), 1..4),
        trunc in proptest::option::of(0usize..131_072),
    ) {
        let (file, _) = &golden_cases()[which];
        let mut b = golden_bytes(file);
        let n = b.len();
        for (off, v) in edits {
            b[off % n] = v;
        }
        if let Some(t) = trunc {
            b.truncate(t.min(n));
        }
        if let Ok(r) = open_bytes(&b) {
            let _ = r.reassemble(DigestCheck::IfPresent);
        }
    }
}
