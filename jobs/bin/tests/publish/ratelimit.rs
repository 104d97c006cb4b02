//! The Hub's hourly commit quota (issue 46 item 3, docs/publish.md "A real release on the Hub"):
//! a 429 asking for minutes is never slept through by the client; candidate-upload and promote
//! wait it out, showing it, up to `--rate-limit-wait`, or exit 1 saying when to run again — with
//! no partial or duplicate commit on the branch, and a re-run that resumes.

use std::process::Command;
use std::time::Duration;

use hub::client::RetryPolicy;
use pipeline::candidate;
use pipeline::promote;
use pipeline::stage;

use super::support::*;

/// Commits on `branch`, newest first.
fn commits(url: &str, branch: &str) -> Vec<String> {
    rt().block_on(client(url).list_commits(&repo(), branch))
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect()
}

fn candidate_bin(work: &std::path::Path, url: &str, wait: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_minirun-candidate-upload"))
        .arg("--plan")
        .arg(plan_path())
        .arg("--work-dir")
        .arg(work)
        .args(["--endpoint", url, "--rate-limit-wait", wait])
        .env("HF_TOKEN", TOKEN)
        .output()
        .unwrap()
}

/// A 10-minute 429 on the third commit with no patience allowed: exit 1 naming the wait and when
/// to run again; the two batches before it are on the branch once each; the re-run sends only
/// what is missing, and the promoted tree is a clean run's.
#[test]
fn a_ten_minute_rate_limit_stops_candidate_upload_with_the_time_to_run_again() {
    let plan = plan();
    let clean = {
        let w = work();
        stage::run(&plan, &stage_opts(w.path())).unwrap();
        let (h, _r) = hub();
        candidate::run(&plan, &cand_opts(w.path(), &h.url())).unwrap();
        let p = promote::run(&plan, &promote_opts(w.path(), &h.url())).unwrap();
        inventory(&h.url(), &p.commit)
    };
    let w = work();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    let (h, _root) = hub();
    let url = h.url();
    h.set_faults("ratelimit:x1+2@600=/commit/".parse().unwrap());
    let out = candidate_bin(w.path(), &url, "0");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("asked for 600 s"), "{err}");
    assert!(err.contains("run again after 20"), "{err}");
    assert_eq!(h.faults_fired(), 1);
    // The branch holds the two batches committed before the 429 (and the base), once each.
    let name = rt()
        .block_on(client(&url).list_refs(&repo(), false))
        .unwrap()
        .branches
        .into_iter()
        .map(|b| b.name)
        .find(|n| n.starts_with("candidate-"))
        .unwrap();
    let before = commits(&url, &name);
    let log = h.request_log().len();
    let c = candidate::run(&plan, &cand_opts(w.path(), &url)).unwrap();
    let after = commits(&url, &name);
    assert_eq!(
        after.len(),
        before.len() + c.commits,
        "{before:?} → {after:?}"
    );
    assert!(c.present >= 2 * candidate::FILES_PER_COMMIT, "{c:?}");
    let resent = h.request_log()[log..]
        .iter()
        .filter(|l| l.starts_with("PUT /lfs-upload/"))
        .count();
    assert!(resent <= c.lfs_sent, "only missing objects are sent");
    let p = promote::run(&plan, &promote_opts(w.path(), &url)).unwrap();
    assert_eq!(inventory(&url, &p.commit), clean);
}

/// A long 429 the run may wait out: waited (the client's longest backoff shortened to 1 s, so a
/// 3 s wait is "long"), reported, and the upload finishes with each batch committed once.
#[test]
fn candidate_upload_waits_out_a_rate_limit_it_is_allowed_to() {
    let plan = plan();
    let w = work();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    let (h, _root) = hub();
    let url = h.url();
    h.set_faults("ratelimit:x1+1@3=/commit/".parse().unwrap());
    let mut opts = cand_opts(w.path(), &url);
    opts.retry = Some(RetryPolicy {
        max_delay: Duration::from_secs(1),
        ..RetryPolicy::default()
    });
    opts.rate_limit_wait = Duration::from_secs(10);
    let c = candidate::run(&plan, &opts).unwrap();
    assert_eq!(h.faults_fired(), 1);
    assert_eq!(c.rate_limited_s, 3, "{c:?}");
    assert_eq!(c.files_per_commit, candidate::FILES_PER_COMMIT);
    assert_eq!(
        c.commits,
        c.files.div_ceil(candidate::FILES_PER_COMMIT),
        "{c:?}"
    );
    assert_eq!(
        commits(&url, &c.candidate).len(),
        c.commits + 1,
        "one per batch, once"
    );
}

/// The binary shows the wait (a 31 s 429: beyond the client's 30 s backoff) and finishes.
#[test]
fn the_binary_shows_a_rate_limit_wait_and_finishes() {
    let plan = plan();
    let w = work();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    let (h, _root) = hub();
    let url = h.url();
    h.set_faults("ratelimit:x1+1@31=/commit/".parse().unwrap());
    let out = candidate_bin(w.path(), &url, "5m");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("candidate-upload: the hub rate-limits this repository (HTTP 429): waiting 31 s, until 20"),
        "{err}"
    );
    assert!(err.contains("rate limit waited out"), "{err}");
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains("31 s waiting out rate limits"), "{out}");
}

/// Promote's one commit likewise: beyond `--rate-limit-wait`, exit 1 with the time to run again
/// and the public branch untouched; a re-run publishes.
#[test]
fn promote_stops_at_a_rate_limit_it_may_not_wait_out() {
    let plan = plan();
    let w = work();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    let (h, _root) = hub();
    let url = h.url();
    candidate::run(&plan, &cand_opts(w.path(), &url)).unwrap();
    let mut opts = promote_opts(w.path(), &url);
    opts.rate_limit_wait = Some(Duration::from_secs(60));
    // Armed once the head is observed, for the commit alone.
    let armed = std::sync::Arc::new(h);
    let hook = armed.clone();
    opts.before_commit = Some(Box::new(move || {
        hook.set_faults("ratelimit:x1@900=/commit/main".parse().unwrap())
    }));
    let r = promote::run(&plan, &opts);
    let h = armed;
    let e = match r {
        Err(e) => e,
        Ok(p) => panic!(
            "promote finished ({p:?}) with {} faults fired; the hub saw {:?}",
            h.faults_fired(),
            h.request_log()
        ),
    };
    assert!(matches!(e, promote::PromoteError::RateLimited(_)), "{e:?}");
    assert!(e.to_string().contains("asked for 900 s"), "{e}");
    let refs = rt()
        .block_on(client(&url).list_refs(&repo(), false))
        .unwrap();
    let main = refs.branches.iter().find(|b| b.name == "main").unwrap();
    assert_eq!(commits(&url, "main"), vec![main.target_commit.clone()]);
    let p = promote::run(&plan, &promote_opts(w.path(), &url)).unwrap();
    assert!(!p.already_published);
}
