//! First mistakes refused with the next step (docs/cli.md "First mistakes"): a work directory
//! fetched for another pin of the upstream is refused by every stage before it changes anything
//! (before, fetch and repack called every unit done and candidate-upload uploaded a candidate
//! whose record named a revision its bytes did not come from); promote before any candidate was
//! uploaded, and a pull of a repository that is not published, name the command that makes one.

use super::common::*;

const PINNED: &str = "60d8d70770c6776ff598c94bb586a859a38244f1";
const OTHER: &str = "1111111111111111111111111111111111111111";

#[test]
fn a_work_dir_of_another_pin_is_refused_by_every_stage_before_it_changes_anything() {
    let fx = fixture();
    let hub = Hub::start(&fx.hub_root, "");
    let w = tempfile::tempdir().unwrap();
    let work = w.path().join("work");
    stage_ok(
        "minirun-fetch",
        &fx.plan,
        &work,
        &hub.url,
        &["--units", "global00"],
    );
    let text = std::fs::read_to_string(&fx.plan).unwrap();
    assert!(
        text.contains(PINNED),
        "the plan's pin moved: update this test"
    );
    let other = w.path().join("other-pin.toml");
    std::fs::write(&other, text.replace(PINNED, OTHER)).unwrap();
    let before = tree_state(&work);
    for bin in [
        "minirun-fetch",
        "minirun-repack",
        "minirun-gate",
        "minirun-stage",
        "minirun-candidate-upload",
    ] {
        let mut c = cmd(bin);
        c.args(["--plan", other.to_str().unwrap(), "--work-dir"])
            .arg(&work);
        if matches!(bin, "minirun-fetch" | "minirun-candidate-upload") {
            c.args(["--endpoint", &hub.url]);
        }
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{bin}: {err}");
        assert!(
            err.contains("a work directory belongs to one pin")
                && err.contains(&format!("DeepSeek-V4-Flash@{PINNED}"))
                && err.contains(&format!("DeepSeek-V4-Flash@{OTHER}")),
            "{bin}: {err}"
        );
        assert!(
            err.contains("hint: give this plan a work directory of its own"),
            "{bin}: {err}"
        );
    }
    assert_eq!(
        tree_state(&work),
        before,
        "a refused stage changed the work dir"
    );
    // The plan that made the work directory still runs on it.
    stage_ok(
        "minirun-repack",
        &fx.plan,
        &work,
        &hub.url,
        &["--units", "global00"],
    );
}

#[test]
fn promote_and_pull_of_a_repository_never_uploaded_name_the_command_that_makes_one() {
    let fx = fixture();
    let hub = Hub::start(&fx.hub_root, "");
    let w = tempfile::tempdir().unwrap();
    for extra in [&["--dry-run"][..], &[]] {
        let out = cmd("minirun-promote")
            .args(["--plan", fx.plan.to_str().unwrap(), "--work-dir"])
            .arg(w.path())
            .args(["--endpoint", &hub.url])
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("`minirun/DeepSeek-V4-Flash-minirun` does not exist"),
            "{err}"
        );
        assert!(
            err.contains("hint: upload a candidate first: `minirun-candidate-upload --plan P`"),
            "{err}"
        );
    }
    let out = cmd("minirun-verify")
        .args([
            "pull",
            "--endpoint",
            &hub.url,
            "minirun/DeepSeek-V4-Flash-minirun",
        ])
        .arg("--dir")
        .arg(w.path().join("copy"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("hint: nothing is published under that id here"),
        "{err}"
    );
    assert!(err.contains("minirun-promote --plan P"), "{err}");
}

#[test]
fn stages_run_out_of_order_name_the_stage_to_run_first() {
    let fx = fixture();
    let w = tempfile::tempdir().unwrap();
    let work = w.path();
    let run = |bin: &str| {
        let out = cmd(bin)
            .args(["--plan", fx.plan.to_str().unwrap(), "--work-dir"])
            .arg(work)
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), all)
    };
    let (code, all) = run("minirun-gate");
    assert_eq!(code, Some(1), "{all}");
    assert!(
        all.contains("run `minirun-repack --units global00`")
            && all.contains("run `minirun-repack --finalize`")
            && all.contains("run `minirun-fetch` first"),
        "{all}"
    );
    let (code, all) = run("minirun-stage");
    assert_eq!(code, Some(1), "{all}");
    assert!(all.contains("hint: run `minirun-gate --plan P`"), "{all}");
    let (code, all) = run("minirun-candidate-upload");
    assert_eq!(code, Some(1), "{all}");
    assert!(
        all.contains("hint: run `minirun-stage --plan P` first"),
        "{all}"
    );
}
