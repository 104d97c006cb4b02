//! The DeepSeek V4 CPU reference on the repacked tiny artifact: decode equals prefill, the hard
//! paths (CSA entries, indexer selection, HCA entries, window eviction) run.

mod deepseek_common;

use std::time::Instant;

use runner::deepseek::{Mode, V4Model};

#[test]
fn decode_equals_prefill_and_hard_paths_run() {
    let dir = deepseek_common::release();
    let t0 = Instant::now();
    let mut m = V4Model::open_dir(dir, Mode::Reference { expert_cache: 64 }).expect("opens");
    let ids = deepseek_common::prompt(263, m.config.vocab as u32);
    let whole = m.forward(&ids).expect("prefill");
    eprintln!(
        "prefill 263 tokens: {:?}, stats {:?}",
        t0.elapsed(),
        m.stats
    );
    let stats = m.stats;
    assert!(stats.hca_entries >= 2 * 20, "HCA entries {stats:?}");
    assert!(stats.csa_entries > 0 && stats.indexer_dropped > 0 && stats.window_evicted > 0);
    m.reset();
    let t1 = Instant::now();
    m.forward(&ids[..260]).expect("prefill 260");
    let mut last = Vec::new();
    for &t in &ids[260..] {
        last = m.forward(&[t]).expect("decode");
    }
    eprintln!("prefill 260 + decode 3: {:?}", t1.elapsed());
    assert_eq!(m.position(), 263);
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
