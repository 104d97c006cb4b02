//! The DeepSeek V4 CPU reference (`Mode::Reference`) on the repacked tiny artifact, checked against
//! the transformers fixture `ci/oracles/deepseek_v4/` (docs/deepseek-v4-reference.md): logits after
//! the 380-token prompt and after each of 16 teacher-forced greedy tokens; and decode == prefill
//! bit for bit across compressor window ends.

use crate::deepseek_common;

use std::time::Instant;

use runner::deepseek::{argmax, Mode, V4Model};

#[test]
fn reference_matches_transformers() {
    let fx = deepseek_common::fixture();
    let dir = deepseek_common::release();
    let mut m = V4Model::open_dir(dir, Mode::Reference { expert_cache: 64 }).expect("opens");
    assert_eq!(m.config.vocab, fx.vocab);
    let t0 = Instant::now();
    let rows = m
        .teacher_forced(&fx.prompt, &fx.greedy)
        .expect("prefill + decode");
    let stats = m.stats;
    eprintln!(
        "prefill {} + 16 decode: {:?}; {stats:?}",
        fx.prompt.len(),
        t0.elapsed()
    );
    // The hard paths ran: ratio-4 and ratio-128 entries were emitted (95 and 2 per layer after
    // the prompt, as transformers' counters), the indexer dropped causal entries, the window evicted.
    assert!(stats.csa_entries >= 21 * 95, "{stats:?}");
    assert!(stats.hca_entries >= 20 * 2, "{stats:?}");
    assert!(
        stats.indexer_dropped > 0 && stats.window_evicted > 0,
        "{stats:?}"
    );
    deepseek_common::dump("reference", &rows);
    let report = deepseek_common::compare(&rows, fx);
    let vs64 = deepseek_common::max_abs_vs_f64(&rows, fx);
    eprintln!("max |Δ| vs transformers f64: {vs64:e}");
    assert!(
        vs64 <= report.tolerance,
        "max |Δ| vs transformers f64 {vs64:e} > tolerance {:e}",
        report.tolerance
    );
    eprintln!("{report}");
    report.assert_within();
}

/// Decode == prefill, bit for bit: 126 prompt tokens then 6 decode steps (crossing the first HCA
/// window end at position 127 and two CSA windows inside decode) give the logits of one 132-token
/// prefill.
#[test]
fn decode_equals_prefill_bit_for_bit() {
    let fx = deepseek_common::fixture();
    let dir = deepseek_common::release();
    let mut m = V4Model::open_dir(dir, Mode::Reference { expert_cache: 64 }).expect("opens");
    let ids = &fx.prompt[..132];
    let t0 = Instant::now();
    let whole = m.forward(ids).expect("prefill 132");
    assert_eq!(m.stats.hca_entries, 20, "one ratio-128 entry per HCA layer");
    m.reset();
    m.forward(&ids[..126]).expect("prefill 126");
    assert_eq!(m.stats.hca_entries, 0);
    let mut last = Vec::new();
    for &t in &ids[126..] {
        last = m.forward(&[t]).expect("decode");
    }
    assert_eq!(
        m.stats.hca_entries, 20,
        "the HCA entries were emitted during decode"
    );
    eprintln!("prefill 132, prefill 126 + decode 6: {:?}", t0.elapsed());
    assert_eq!(argmax(&whole), argmax(&last));
    let diff = whole
        .iter()
        .zip(&last)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(
        whole
            .iter()
            .zip(&last)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "decode differs from prefill by up to {diff}"
    );
}
