//! Truthful dry-runs (issue 20 item 3): stage, candidate-upload and promote under `--dry-run`
//! change nothing, say what they would do (in the conditional, never "copied … verified"), and
//! work before a first publish, when the target repository does not exist yet.

use pipeline::{candidate, promote, stage};

use crate::support::*;

#[test]
fn dry_runs_change_nothing_and_say_what_they_would_do() {
    let plan = plan();
    let w = work();
    let (h, _root) = hub();
    let url = h.url();

    // stage: nothing written, the report in the conditional
    let before = snapshot(w.path());
    let s = stage::run(
        &plan,
        &stage::StageOpts {
            dry_run: true,
            ..stage_opts(w.path())
        },
    )
    .unwrap();
    assert_eq!(snapshot(w.path()), before, "stage --dry-run wrote");
    assert!(
        s.dry_run && s.files > 0 && s.linked.len() == s.files && s.copied.is_empty(),
        "{s:?}"
    );
    let text = s.render();
    assert!(
        text.contains("(dry run)") && text.contains("would stage"),
        "{text}"
    );
    assert!(
        !text.contains("staged;") && !text.contains("round trip:"),
        "{text}"
    );

    // candidate-upload before a first publish: the target repository does not exist
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    let log = h.request_log().len();
    let c = candidate::run(
        &plan,
        &candidate::CandidateOpts {
            dry_run: true,
            ..cand_opts(w.path(), &url)
        },
    )
    .unwrap();
    assert!(c.dry_run && c.new_repo && c.files > 1, "{c:?}");
    let text = c.render();
    assert!(
        text.contains("does not exist yet") && text.contains("nothing sent"),
        "{text}"
    );
    let writes: Vec<_> = h.request_log()[log..]
        .iter()
        .filter(|l| !l.starts_with("GET ") && !l.starts_with("HEAD "))
        .cloned()
        .collect();
    assert!(writes.is_empty(), "a dry run wrote to the hub: {writes:?}");
    let refs = rt().block_on(client(&url).list_refs(&repo(), false));
    assert!(
        refs.is_err_and(|e| e.is_not_found()),
        "the dry run made the repository"
    );

    // a real upload, then promote --dry-run: the public branch does not move
    let up = candidate::run(&plan, &cand_opts(w.path(), &url)).unwrap();
    let head_before = head(&url);
    let dry = candidate::run(
        &plan,
        &candidate::CandidateOpts {
            dry_run: true,
            ..cand_opts(w.path(), &url)
        },
    )
    .unwrap();
    assert!(
        dry.dry_run && !dry.new_repo && dry.candidate == up.candidate,
        "{dry:?}"
    );
    let p = promote::run(
        &plan,
        &promote::PromoteOpts {
            dry_run: true,
            ..promote_opts(w.path(), &url)
        },
    )
    .unwrap();
    assert!(p.dry_run && p.commit.is_empty() && p.copied > 0, "{p:?}");
    let text = p.render();
    assert!(
        text.contains("would commit") && text.contains("nothing sent"),
        "{text}"
    );
    assert!(!text.contains("verified"), "{text}");
    assert_eq!(
        head(&url),
        head_before,
        "promote --dry-run moved the public branch"
    );
}
