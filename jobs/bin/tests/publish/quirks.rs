//! The Hub's current behaviours (issue 46 item 4, hub-protocol.md §13), as minirun-hub modes
//! (docs/hub.md §5), passed by fetch, pull, candidate-upload and promote: CDN redirects answered
//! 307 with the redirect body's `Content-Length`; `X-Xet-Hash` on resolve and `xetHash` in tree
//! and paths-info entries; a commit answered 504 that lands after the client next asks the branch;
//! binary content refused inline; `/preupload` capped at 256 paths a call.

use std::collections::BTreeMap;
use std::path::Path;

use hub::server::{ServerHandle, ServerOptions};
use pipeline::candidate;
use pipeline::fetch::{self, FetchOpts};
use pipeline::promote;
use pipeline::stage;
use pipeline::verify::{self, PullOpts, Verdict};

use super::support::*;

/// Every mode that is a shape of the Hub's answers, always on.
const QUIRKS: &str = "redirect-307:1,xet-hash:1,binary-inline:1,preupload-256:1";

/// A hub with a CDN origin (LFS downloads are redirected to it) and `faults`.
fn cdn_hub(root: &Path, faults: &str, token: bool) -> ServerHandle {
    rt().block_on(hub::server::spawn(
        root,
        "127.0.0.1:0".parse().unwrap(),
        ServerOptions {
            token: token.then(|| TOKEN.into()),
            cdn_addr: Some("127.0.0.1:0".parse().unwrap()),
            faults: faults.parse().unwrap(),
            ..ServerOptions::default()
        },
    ))
    .unwrap()
}

fn fetch_from(url: &str) -> BTreeMap<String, String> {
    let w = tempfile::tempdir().unwrap();
    let opts = FetchOpts {
        work_dir: Some(w.path().to_path_buf()),
        endpoint: Some(url.to_owned()),
        units: Some("layers00..layers01,global00".into()),
        ..FetchOpts::default()
    };
    fetch::run(&plan(), &opts).unwrap();
    tree_digests(&w.path().join("upstream"), "")
}

#[test]
fn fetch_takes_307_redirects_and_xet_hashes_in_its_stride() {
    let clean = cdn_hub(upstream_root(), "", false);
    let want = fetch_from(&clean.url());
    let quirky = cdn_hub(upstream_root(), QUIRKS, false);
    assert_eq!(fetch_from(&quirky.url()), want);
    let log = quirky.request_log();
    assert!(
        log.iter().any(|l| l.starts_with("CDN GET")),
        "downloads went through the CDN"
    );
    assert!(
        quirky.faults_fired() > 10,
        "{} quirks applied",
        quirky.faults_fired()
    );
}

#[test]
fn candidate_upload_promote_and_pull_pass_every_quirk_with_one_commit_per_batch() {
    let plan = plan();
    let w = work();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    let root = tempfile::tempdir().unwrap();
    // The third candidate commit and the promote commit each answered 504 after 200 ms, landing
    // once the client has asked the branch.
    let faults =
        format!("{QUIRKS},commit-504:x1+2@200=/commit/candidate-,commit-504:x1@200=/commit/main");
    let h = cdn_hub(root.path(), &faults, true);
    let url = h.url();
    let c = candidate::run(&plan, &cand_opts(w.path(), &url)).unwrap();
    assert_eq!(
        rt().block_on(client(&url).list_commits(&repo(), &c.candidate))
            .unwrap()
            .len(),
        c.commits + 1,
        "one commit per batch (and the base): the 504'd batch landed once"
    );
    let p = promote::run(&plan, &promote_opts(w.path(), &url)).unwrap();
    let main = rt()
        .block_on(client(&url).list_commits(&repo(), "main"))
        .unwrap();
    assert_eq!(
        main.len(),
        2,
        "exactly one promote commit on the initial one"
    );
    assert_eq!(main[0].id, p.commit);
    // The same tree as a clean hub's.
    let (clean, _r) = hub();
    candidate::run(&plan, &cand_opts(w.path(), &clean.url())).unwrap();
    let cp = promote::run(&plan, &promote_opts(w.path(), &clean.url())).unwrap();
    assert_eq!(
        inventory(&url, &p.commit),
        inventory(&clean.url(), &cp.commit)
    );
    // A consumer pulls it through the 307s and xet hashes, and it verifies.
    let d = tempfile::tempdir().unwrap();
    let r = verify::pull(
        Some(&url),
        TARGET,
        &p.commit,
        d.path(),
        true,
        &PullOpts::default(),
    )
    .unwrap();
    assert_eq!(r.verdict, Verdict::Verified, "{:?}", r.problems);
    // Every mode fired: 504s (2), refusals never needed (our client follows uploadMode and sends
    // 256 paths a preupload), 307s and xet hashes on the downloads.
    assert!(h.faults_fired() >= 2 + 10, "{}", h.faults_fired());
}
