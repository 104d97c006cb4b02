//! The real releases counted against the Hub's limits (issue 46 item 5, docs/plans.md "What a real
//! release holds"): the real DeepSeek V4 Flash tensor list (69,187 tensors) and a real-shape Kimi K3
//! list resolve to at most 2,000 release files each — stacked experts and one file of plain
//! streams a unit — which promote can commit (≤ 25,000 operations) and candidate-upload sends in at
//! most 50 commits of `candidate::FILES_PER_COMMIT`.
#![allow(clippy::unwrap_used, clippy::panic)] // tests: a failed unwrap is a failed test

use crate::common;

use common::*;
use pipeline::plan::*;

/// The release's files, and what publishing it takes: (files, promote operations, commits).
fn counted(plan: &str, tensors: &[UpstreamTensor]) -> (Vec<String>, usize, usize) {
    let plan = Plan::load(&plans_dir().join(plan)).unwrap();
    let r = plan.resolve(tensors).unwrap();
    let files = pipeline::repack::planned_files(&plan, &r);
    // The published tree adds the release record; a first promote copies every file.
    let operations = files.len() + 1;
    let commits = operations.div_ceil(pipeline::candidate::FILES_PER_COMMIT);
    (files, operations, commits)
}

#[test]
fn the_real_v4_flash_release_fits_the_hub() {
    let tensors = v4_tensors(256);
    assert_eq!(tensors.len(), 69187);
    let (files, ops, commits) = counted("deepseek-v4.toml", &tensors);
    eprintln!(
        "V4 Flash: {} files, {ops} operations, {commits} commits",
        files.len()
    );
    assert!(files.len() <= 2000, "{} files", files.len());
    assert!(ops <= pipeline::promote::MAX_OPERATIONS);
    assert!(commits <= 50, "{commits} commits");
    // Per layer: 3 expert stacks, the FP8 containers, one file of plain streams, the map and the
    // manifest — layers00 (SWA): 3 + 8 + 1 + 2.
    let l0 = files.iter().filter(|f| f.starts_with("layers00/")).count();
    assert_eq!(l0, 14, "{files:?}");
    assert!(files.contains(&"layers00/layers.0.ffn.experts.w1.til".to_owned()));
    assert!(files.contains(&"layers00/plain.bin".to_owned()));
    assert_eq!(files.len(), EXPECTED_V4_FILES);
}

#[test]
fn a_real_shape_k3_release_fits_the_hub() {
    let tensors = k3_tensors(896);
    let (files, ops, commits) = counted("kimi-k3.toml", &tensors);
    eprintln!(
        "K3: {} tensors, {} files, {ops} operations, {commits} commits",
        tensors.len(),
        files.len()
    );
    assert!(files.len() <= 2000, "{} files", files.len());
    assert!(ops <= pipeline::promote::MAX_OPERATIONS);
    // A MoE layer: 3 stacks of 896 experts, one file of plain streams, the map and the manifest.
    let l5 = files.iter().filter(|f| f.starts_with("layer05/")).count();
    assert_eq!(l5, 6, "{files:?}");
    assert_eq!(files.len(), EXPECTED_K3_FILES);
}

/// docs/plans.md quotes these counts.
const EXPECTED_V4_FILES: usize = 648;
const EXPECTED_K3_FILES: usize = 562;
