//! Publication over a lossy link (docs/publish.md §5): with about 1 % of requests faulted in every
//! request-side way minirun-hub knows (upload bodies corrupted or cut, connections reset
//! mid-request, 503s, 429s, commits applied with their answer lost), one run of candidate-upload
//! plus promote finishes each time, and the promoted tree equals a clean run's. The runs repeat
//! until at least [`MIN_FAULTS`] faults have fired.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use pipeline::candidate;
use pipeline::promote;
use pipeline::stage;

use super::support::*;

/// Faults per eligible request; together about 1 % of all requests.
const LOSSY: &str = "5xx:0.002,ratelimit:0.001,reset-request:0.003,corrupt-upload:0.003,truncate-upload:0.002,drop-after-commit:0.05,delay:0.001@20";
/// Faults the test injects at least, over all its runs.
const MIN_FAULTS: u64 = 1_000;
/// Runs at most (a bound on the test's time should the fault rate be much lower than planned).
const MAX_RUNS: usize = 400;

/// One lossy run on a fresh hub: (faults fired, requests served, the promoted inventory).
fn lossy_run() -> (u64, usize, candidate::Inventory) {
    let plan = plan();
    let w = work();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    let (h, _root) = hub();
    let url = h.url();
    h.set_faults(LOSSY.parse().unwrap());
    let c = candidate::run(&plan, &cand_opts(w.path(), &url))
        .unwrap_or_else(|e| panic!("candidate-upload gave up on a lossy link: {e:?}"));
    let p = promote::run(&plan, &promote_opts(w.path(), &url))
        .unwrap_or_else(|e| panic!("promote gave up on a lossy link: {e:?}"));
    let fired = h.faults_fired();
    let requests = h.request_log().len();
    h.set_faults(Default::default());
    assert_eq!(head(&url), p.commit);
    assert_eq!(p.candidate, c.candidate);
    (fired, requests, inventory(&url, &p.commit))
}

#[test]
fn lossy_link_candidate_upload_and_promote_finish_in_one_run_each_time() {
    let plan = plan();
    // The clean run the lossy ones must equal.
    let w = work();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    let (h, _root) = hub();
    let url = h.url();
    candidate::run(&plan, &cand_opts(w.path(), &url)).unwrap();
    let clean = inventory(
        &url,
        &promote::run(&plan, &promote_opts(w.path(), &url))
            .unwrap()
            .commit,
    );
    let fired = AtomicU64::new(0);
    let requests = AtomicUsize::new(0);
    let runs = AtomicUsize::new(0);
    let trees = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while fired.load(Ordering::SeqCst) < MIN_FAULTS
                    && runs.fetch_add(1, Ordering::SeqCst) < MAX_RUNS
                {
                    let (f, n, tree) = lossy_run();
                    fired.fetch_add(f, Ordering::SeqCst);
                    requests.fetch_add(n, Ordering::SeqCst);
                    trees.lock().unwrap().push(tree);
                }
            });
        }
    });
    let fired = fired.into_inner();
    let requests = requests.into_inner();
    let trees = trees.into_inner().unwrap();
    eprintln!(
        "{} lossy runs: {fired} faults in {requests} requests ({:.2} %)",
        trees.len(),
        100.0 * fired as f64 / requests as f64
    );
    assert!(
        fired >= MIN_FAULTS,
        "only {fired} faults in {} runs",
        trees.len()
    );
    let rate = fired as f64 / requests as f64;
    assert!((0.004..0.03).contains(&rate), "fault rate {rate}");
    for t in &trees {
        assert_eq!(t, &clean);
    }
}
