//! Unit tests of the generated unrolled modules' text.

use super::*;

#[test]
fn interleave_puts_word_j_of_eight_rows_together() {
    // 10 rows of 20 bytes (one Q4_1 block): padded to 32 bytes (2 words), 16 rows
    let bytes: Vec<u8> = (0..200).map(|i| i as u8).collect();
    let out = interleave(20, &bytes);
    assert_eq!(out.len(), 2 * 8 * 2 * 16);
    // row 3's first word is slot 3 of group 0's word 0; its second word (bytes 16..20, then
    // zero padding) is slot 3 of word 1
    assert_eq!(&out[3 * 16..4 * 16], &bytes[60..76]);
    assert_eq!(&out[(8 + 3) * 16..(8 + 3) * 16 + 4], &bytes[76..80]);
    assert!(out[(8 + 3) * 16 + 4..(8 + 4) * 16].iter().all(|b| *b == 0));
    // row 9 is slot 1 of group 1
    assert_eq!(&out[(16 + 1) * 16..(16 + 2) * 16], &bytes[180..196]);
    // rows 10..16 are zero
    assert!(out[(16 + 2) * 16..(16 + 8) * 16].iter().all(|b| *b == 0));
}

#[test]
fn interleaved_modules_read_rows_8_words_apart() {
    let g = source(Kernel::MatvecQ4_1, 576, 1536, Layout::Interleaved).expect("a module");
    // 360-byte rows: 23 vec4 words each, 2 rows an invocation, loaded 8 words apart
    assert_eq!(g.source.matches("= words[").count(), 2 * 23);
    assert!(g.source.contains("* 184u +") && g.source.contains("+ 176u]"));
    assert!(g.label.ends_with(" interleaved"));
}

#[test]
fn fp8_modules_make_the_block_shape_constant() {
    let f = |block_rows, group| crate::WeightFormat::Fp8Block { block_rows, group };
    let a = source_for(f(128, 128), 1024, 512, Layout::Rows).expect("a module");
    // (`p.groups_x`, the grid parameter, stays)
    let reads = |s: &str, p: &str| s.matches(p).count() - s.matches("p.groups_x").count();
    assert_eq!(reads(&a.source, "p.group"), 0);
    assert!(!a.source.contains("p.block_rows"));
    assert!(a.source.contains("const UNROLLED_GROUP: u32 = 128u;"));
    assert!(a.source.contains("const UNROLLED_BLOCK_ROWS: u32 = 128u;"));
    // the pipeline cache is keyed by label: another block shape is another module
    let b = source_for(f(16, 128), 1024, 512, Layout::Rows).expect("a module");
    assert_ne!(a.label, b.label);
    let plain = source(Kernel::MatvecFp8Block, 1024, 512, Layout::Rows).expect("a module");
    assert!(reads(&plain.source, "p.group") > 0);
    assert_ne!(plain.label, a.label);
    // formats without such parameters get the plain module
    let q = source_for(crate::WeightFormat::Q4_1, 576, 64, Layout::Rows).expect("a module");
    assert_eq!(
        q,
        source(Kernel::MatvecQ4_1, 576, 64, Layout::Rows).expect("a module")
    );
}

#[test]
fn replaces_only_the_k_parameter() {
    let s = with_constant_k("a(p.k / 8u) + p.kx + cp.k + p.k)");
    assert_eq!(s, "a(UNROLLED_K / 8u) + p.kx + cp.k + UNROLLED_K)");
}

#[test]
fn rows_are_read_in_memory_order_with_the_widest_words() {
    // K = 576 Q4_1: rows of 360 bytes; two rows are 45 vec4 words
    assert_eq!(plan(360), (2, 4));
    assert_eq!(rows_per_invocation(Kernel::MatvecQ4_1, 576), 2);
    let g = source(Kernel::MatvecQ4_1, 576, 1536, Layout::Rows).expect("a module");
    let s = &g.source;
    assert_eq!(s.matches("= block_dot(").count(), 2 * 18);
    assert_eq!(s.matches("= words[").count(), 45);
    // block 16 of a row folds into partial group 0 again, after block 0
    let first = s.find("t0_0 = block_dot(").expect("block 0");
    let again = s.rfind("t0_0 = block_dot(").expect("block 16");
    assert!(first < again && s[again..].contains("512u, t0_0)"));
    assert_eq!(s.matches("t0 = t0 + hold(t0_").count(), 63);
    // K = 576 Q8_0: 612-byte rows; two rows are 153 vec2 words, odd blocks realigned
    assert_eq!(plan(612), (2, 2));
    let g = source(Kernel::MatvecQ8_0, 576, 1536, Layout::Rows).expect("a module");
    assert_eq!(g.source.matches("= words[").count(), 153);
    assert!(g.source.contains("realign("));
    assert!(!g.source.contains("p.k /"));
}

#[test]
fn small_matvecs_get_smaller_workgroups() {
    // SmolLM2's o and down projections: 576 rows, 288 invocations of two rows
    assert_eq!(workgroup_size(Kernel::MatvecQ4_1, 576, 576), 16);
    // (K = 1536: 960-byte rows, one an invocation)
    assert_eq!(workgroup_size(Kernel::MatvecQ4_1, 1536, 576), 32);
    // its head: 49152 rows
    assert_eq!(workgroup_size(Kernel::MatvecQ8_0, 576, 49152), 64);
    assert_eq!(workgroup_size(Kernel::MatvecQ4_1, 576, 8), 8);
    let g = source(Kernel::MatvecQ4_1, 576, 576, Layout::Rows).expect("a module");
    assert!(g.source.contains("@workgroup_size(16)") && g.source.contains("* 16u;"));
    let mut p = crate::WeightFormat::Q4_1.params(576, 576, 1, 576, 0);
    assert_eq!(launch(Kernel::MatvecQ4_1, 576, &mut p), (18, 1, 1));
}

#[test]
fn refuses_what_it_cannot_unroll() {
    assert!(source(Kernel::MatmulQ4_1, 576, 64, Layout::Rows).is_none());
    assert!(source(Kernel::RmsNorm, 576, 64, Layout::Rows).is_none());
    assert!(source(
        Kernel::MatvecQ4_1,
        UNIFORM_X_ELEMENTS + 32,
        64,
        Layout::Rows
    )
    .is_none());
    assert!(source(Kernel::MatvecQ4_1, 0, 64, Layout::Rows).is_none());
    assert!(source(Kernel::MatvecQ8_0, 32 * (MAX_BLOCKS + 1), 64, Layout::Rows).is_none());
    // not a matvec kernel
    assert!(source(Kernel::MatvecQ4_1, 256, 64, Layout::Interleaved).is_some());
    assert!(source(Kernel::Silu, 256, 64, Layout::Rows).is_none());
    // a K-quant's K must be whole super-blocks
    assert!(source(Kernel::MatvecQ4K, 288, 64, Layout::Rows).is_none());
}
