//! Publication end to end against the in-process hub (docs/publish.md): stage → candidate-upload
//! → promote on the generated DeepSeek V4 release, built once per test binary (synth → import →
//! fetch → repack → gate) and copied into each test's work directory.
#![allow(clippy::unwrap_used, clippy::panic)] // test helpers outside #[test] functions

mod distributed;
mod dry_run;
#[path = "../shared/fixture_dir.rs"]
mod fixture_dir;
mod flips;
mod full_disk;
mod linked;
mod lossy;
mod pull;
mod quirks;
mod ratelimit;
mod support;
mod window;

use std::process::Command;

use hub::client::{CommitOperation, HubClient, HubError};
use hub::protocol::RepoId;
use hub::server::{ServerHandle, ServerOptions};
use pipeline::candidate;
use pipeline::promote::{self, PromoteError};
use pipeline::stage;
use support::*;

#[test]
fn full_publish_then_every_rerun_writes_nothing_and_only_reads_the_hub() {
    let plan = plan();
    let w = work();
    let (h, _root) = hub();
    let url = h.url();
    let s = stage::run(&plan, &stage_opts(w.path())).unwrap();
    assert!(s.containers > 0 && s.tiles > 0 && s.manifests == plan.units.len());
    let c = candidate::run(&plan, &cand_opts(w.path(), &url)).unwrap();
    assert!(c.candidate.starts_with("candidate-") && !c.candidate.contains('/'));
    // Promote from a directory that never ran anything: only the plan, the endpoint and the
    // token (`HF_TOKEN`; the hub refuses writes without it).
    let fresh = tempfile::tempdir().unwrap();
    let p = promote::run(&plan, &promote_opts(fresh.path(), &url)).unwrap();
    assert!(!p.already_published);
    assert_eq!(p.candidate, c.candidate);
    // Before the branch moved, every unit's manifest was reopened and every unit file checked
    // against it, downloading only metadata and small regular files.
    let unit_files: usize = plan_units_files(w.path());
    assert_eq!(p.reread.units, plan.units.len());
    assert_eq!(p.reread.files, unit_files);
    assert_eq!(p.reread.index_shape, "singleSourceUnits");
    assert!(
        p.reread.bytes_downloaded * 4 < p.reread.bytes_vouched,
        "{:?}",
        p.reread
    );
    // (The token mattered: the same write without it is refused.)
    let anon = HubClient::new(&url, None).unwrap();
    let refused = rt().block_on(anon.create_branch(&repo(), "x", None, false));
    assert!(
        matches!(
            refused,
            Err(HubError::Http {
                status: 401 | 403,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(head(&url), p.commit);
    // The public tree is the staged release: LFS oids are the staged SHA-256s, regular files'
    // git SHA-1s are those of the staged bytes.
    let public = inventory(&url, &p.commit);
    let journal = ledger::Journal::load(&w.path().join("ledger"), "stage", "release")
        .unwrap()
        .unwrap();
    assert_eq!(public.len(), journal.outputs.len() + 1);
    for (rel, rec) in &journal.outputs {
        let e = &public[rel];
        assert_eq!(e.size, rec.size, "{rel}");
        if e.lfs {
            assert_eq!(e.oid, rec.sha256, "{rel}");
        } else {
            let bytes = std::fs::read(w.path().join("staging").join(rel)).unwrap();
            assert_eq!(e.oid, hub::protocol::git_blob_sha1(&bytes), "{rel}");
        }
    }
    assert!(public.contains_key(candidate::RECORD_PATH));
    // A promote re-run in the work dir finds the release already published...
    let p2 = promote::run(&plan, &promote_opts(w.path(), &url)).unwrap();
    assert!(p2.already_published);
    // ...then every finished stage re-run writes zero bytes locally and sends nothing that
    // writes; candidate-upload and promote still ask the hub what it holds (reads only).
    let before = snapshot(w.path());
    let log = h.request_log().len();
    let s2 = stage::run(&plan, &stage_opts(w.path())).unwrap();
    assert_eq!(s2.bytes_written, 0);
    assert!(!s2.journal_written && s2.linked.is_empty() && s2.rehashed.is_empty());
    assert!(s2.release_hashed.is_empty());
    assert_eq!(h.request_log().len(), log, "stage never talks to the hub");
    let c2 = candidate::run(&plan, &cand_opts(w.path(), &url)).unwrap();
    assert!(c2.from_journal);
    assert_eq!(
        (c2.candidate.as_str(), c2.commit.as_str()),
        (c.candidate.as_str(), c.commit.as_str())
    );
    let p3 = promote::run(&plan, &promote_opts(w.path(), &url)).unwrap();
    assert!(p3.already_published);
    assert_eq!(p3.commit, p.commit);
    let sent = &h.request_log()[log..];
    assert!(!sent.is_empty(), "remote state is asked, not remembered");
    assert!(
        sent.iter()
            .all(|l| l.starts_with("GET ") || l.starts_with("HEAD ")),
        "{sent:?}"
    );
    assert_eq!(snapshot(w.path()), before);
}

#[test]
fn a_journaled_candidate_the_hub_lacks_is_uploaded_again() {
    let plan = plan();
    let w = work();
    let (h, _root) = hub();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    let c = candidate::run(&plan, &cand_opts(w.path(), &h.url())).unwrap();
    // The journal says done, but this hub has never seen the repo.
    let (h2, _root2) = hub();
    let c2 = candidate::run(&plan, &cand_opts(w.path(), &h2.url())).unwrap();
    assert!(!c2.from_journal && c2.lfs_sent > 0, "{c2:?}");
    assert_eq!(c2.candidate, c.candidate);
    assert_eq!(
        inventory(&h2.url(), &c2.commit),
        inventory(&h.url(), &c.commit)
    );
}

#[test]
fn promote_asks_the_branch_release_a_then_b_then_a_again() {
    let plan = plan();
    let (h, _root) = hub();
    let url = h.url();
    let a = work();
    stage::run(&plan, &stage_opts(a.path())).unwrap();
    let ca = candidate::run(&plan, &cand_opts(a.path(), &url)).unwrap();
    let pa = promote::run(&plan, &promote_opts(a.path(), &url)).unwrap();
    assert!(!pa.already_published);
    // A second publisher (another work dir) promotes release B of the same plan: two candidates
    // now match the plan, and each work dir's own upload picks its own.
    let b = other_release();
    let cb = candidate::run(&plan, &cand_opts(b.path(), &url)).unwrap();
    assert_ne!(ca.candidate, cb.candidate);
    let pb = promote::run(&plan, &promote_opts(b.path(), &url)).unwrap();
    assert!(!pb.already_published);
    assert_eq!(pb.candidate, cb.candidate);
    assert_eq!(head(&url), pb.commit);
    // Promote re-run for A: main holds B, so A is published again, not reported as present.
    let pa2 = promote::run(&plan, &promote_opts(a.path(), &url)).unwrap();
    assert!(!pa2.already_published, "{pa2:?}");
    assert_eq!(pa2.candidate, ca.candidate);
    assert_eq!(pa2.observed_head, pb.commit);
    assert_eq!(head(&url), pa2.commit);
    assert_eq!(inventory(&url, &pa2.commit), inventory(&url, &pa.commit));
    // Now it is there, and says so; a directory that uploaded neither cannot choose.
    let pa3 = promote::run(&plan, &promote_opts(a.path(), &url)).unwrap();
    assert!(pa3.already_published && pa3.commit == pa2.commit);
    let fresh = tempfile::tempdir().unwrap();
    let err = promote::run(&plan, &promote_opts(fresh.path(), &url)).unwrap_err();
    assert!(matches!(err, PromoteError::Ambiguous(_)), "{err:?}");
    let mut named = promote_opts(fresh.path(), &url);
    named.candidate = Some(cb.candidate.clone());
    let pb2 = promote::run(&plan, &named).unwrap();
    assert!(!pb2.already_published);
    assert_eq!(inventory(&url, &pb2.commit), inventory(&url, &pb.commit));
}

#[test]
fn concurrent_commit_between_candidate_and_promote_is_refused() {
    let plan = plan();
    let w = work();
    let (h, _root) = hub();
    let url = h.url();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    candidate::run(&plan, &cand_opts(w.path(), &url)).unwrap();
    let theirs = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let t2 = theirs.clone();
    let u2 = url.clone();
    let mut opts = promote_opts(w.path(), &url);
    opts.before_commit = Some(Box::new(move || {
        let oid = foreign_commit(
            &u2,
            vec![CommitOperation::Regular {
                path: "concurrent.txt".into(),
                content: bytes::Bytes::from_static(b"theirs\n"),
            }],
        );
        *t2.lock().unwrap() = oid;
    }));
    let err = promote::run(&plan, &opts).unwrap_err();
    assert!(
        matches!(err, PromoteError::Hub(HubError::HeadMoved { .. })),
        "{err:?}"
    );
    // The public branch is exactly the concurrent commit: nothing overwritten.
    let theirs = theirs.lock().unwrap().clone();
    assert_eq!(head(&url), theirs);
    let public = inventory(&url, &theirs);
    assert_eq!(public.keys().collect::<Vec<_>>(), vec!["concurrent.txt"]);
    // The binary maps it to exit 1 the same way (`Exit::Failure` for every promote error).
    assert_eq!(pipeline::cli::Exit::Failure.code(), 1);
}

#[test]
fn more_than_25000_operations_are_refused_before_sending_anything() {
    let plan = plan();
    let w = work();
    let (h, _root) = hub();
    let url = h.url();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    let c = candidate::run(&plan, &cand_opts(w.path(), &url)).unwrap();
    // Someone filled main with 25,001 stale paths: promotion would need files + 25,001 deletes.
    let ops: Vec<CommitOperation> = (0..25_001)
        .map(|i| CommitOperation::Regular {
            path: format!("stale/d{}/f{i}.txt", i / 5000),
            content: bytes::Bytes::from(format!("{i}\n")),
        })
        .collect();
    foreign_commit(&url, ops);
    let before_head = head(&url);
    let log = h.request_log().len();
    let err = promote::run(
        &plan,
        &promote_opts(tempfile::tempdir().unwrap().path(), &url),
    )
    .unwrap_err();
    assert!(
        matches!(err, PromoteError::TooManyOperations(n) if n == c.files + 25_001),
        "{err:?}"
    );
    let sent = h.request_log()[log..].to_vec();
    assert!(
        !sent
            .iter()
            .any(|l| l.contains("/commit/") || l.contains("lfs")),
        "{sent:?}"
    );
    assert_eq!(head(&url), before_head);
}

#[test]
fn lost_commit_response_is_resolved_by_asking_the_branch() {
    let plan = plan();
    let w = work();
    let (h, _root) = hub();
    let url = h.url();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    candidate::run(&plan, &cand_opts(w.path(), &url)).unwrap();
    let commits = |h: &ServerHandle| {
        h.request_log()
            .iter()
            .filter(|l| l.starts_with("POST") && l.ends_with("/commit/main"))
            .count()
    };
    // Applied, answer lost: the branch head holds the release, so it is the answer (one POST).
    h.set_faults("drop-after-commit:x1".parse().unwrap());
    let p = promote::run(&plan, &promote_opts(w.path(), &url)).unwrap();
    assert!(!p.already_published);
    assert_eq!(head(&url), p.commit);
    assert_eq!(commits(&h), 1);
    assert_eq!(h.faults_fired(), 1);
    // Not applied (the request broke half-way, or the hub answered 503): the head is still the
    // parent, so the same guarded commit is sent again.
    for fault in ["reset-request:x1", "5xx:x1"] {
        let (h2, _root2) = hub();
        let h2 = std::sync::Arc::new(h2);
        let url2 = h2.url();
        let w2 = work();
        stage::run(&plan, &stage_opts(w2.path())).unwrap();
        candidate::run(&plan, &cand_opts(w2.path(), &url2)).unwrap();
        let before = h2.request_log().len();
        let mut opts = promote_opts(w2.path(), &url2);
        let armed = h2.clone();
        opts.before_commit = Some(Box::new(move || armed.set_faults(fault.parse().unwrap())));
        let p2 = promote::run(&plan, &opts).unwrap();
        assert!(!p2.already_published);
        assert_eq!(head(&url2), p2.commit);
        assert_eq!(h2.faults_fired(), 1, "{fault}");
        let posts = h2.request_log()[before..]
            .iter()
            .filter(|l| l.starts_with("POST") && l.ends_with("/commit/main"))
            .count();
        assert_eq!(posts, 2, "{fault}: the faulted send, then the one applied");
        assert_eq!(inventory(&url2, &p2.commit), inventory(&url, &p.commit));
    }
}

#[test]
fn candidate_resume_after_sigkill_resends_no_verified_object() {
    let plan = plan();
    let w = work();
    let (h, _root) = hub();
    let url = h.url();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_minirun-candidate-upload"))
        .arg("--plan")
        .arg(plan_path())
        .arg("--work-dir")
        .arg(w.path())
        .args(["--endpoint", &url])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let verified = |log: &[String]| -> Vec<String> {
        log.iter()
            .filter(|l| l.starts_with("POST /lfs-verify/"))
            .filter_map(|l| l.rsplit('/').next().map(String::from))
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while verified(&h.request_log()).len() < 300 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "finished before the kill"
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let log = h.request_log();
    let done = verified(&log);
    assert!(done.len() >= 300);
    let n = log.len();
    let c = candidate::run(&plan, &cand_opts(w.path(), &url)).unwrap();
    let after = h.request_log();
    let resent: Vec<&String> = after[n..]
        .iter()
        .filter(|l| l.starts_with("PUT /lfs-upload/"))
        .filter(|l| done.iter().any(|oid| l.contains(oid.as_str())))
        .collect();
    assert!(resent.is_empty(), "{resent:?}");
    assert!(c.lfs_sent > 0 && c.present > 0, "{c:?}");
}

#[test]
fn same_size_touch_r_replacement_is_noticed_and_changes_the_candidate() {
    let plan = plan();
    let w = work();
    let (h, _root) = hub();
    let url = h.url();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    let payload = "global00/plain.bin";
    // Staged copy replaced out of band: only it is re-hashed, and it is restored.
    let staged = w.path().join("staging").join(payload);
    replace_same_size(&staged);
    let s = stage::run(&plan, &stage_opts(w.path())).unwrap();
    assert_eq!(s.rehashed, vec![payload.to_string()]);
    assert_eq!(s.linked, vec![payload.to_string()]);
    // the release file lost a link (one inode, staged and released): its ctime moved, so it is
    // re-hashed too — it alone
    assert_eq!(s.release_hashed, vec![payload.to_string()]);
    assert_eq!(s.kept, s.files - 1);
    assert_eq!(
        std::fs::read(&staged).unwrap(),
        std::fs::read(w.path().join("release").join(payload)).unwrap()
    );
    // The release payload itself replaced: the candidate name changes.
    let c1 = candidate::run(&plan, &cand_opts(w.path(), &url)).unwrap();
    // (a rebuilt release: the payload and its manifest entry both change)
    rebuild_release_payload(w.path());
    let s = stage::run(&plan, &stage_opts(w.path())).unwrap();
    let both = vec![
        "global00/manifest.json".to_string(),
        "global00/plain.bin".to_string(),
    ];
    assert_eq!(s.release_hashed, both);
    assert_eq!(s.linked, both);
    let mut dry = cand_opts(w.path(), &url);
    dry.dry_run = true;
    let c2 = candidate::run(&plan, &dry).unwrap();
    assert_ne!(c1.candidate, c2.candidate);
}

#[test]
fn consumer_verify_detects_replacement_symlink_and_a_grown_tree() {
    use pipeline::verify::{self, Verdict};
    let (w, h, _root, p) = published();
    let url = h.url();
    // A local copy holding everything but the two hub-side files: pull fetches only those.
    let local = tempfile::tempdir().unwrap();
    let d = local.path().join("copy");
    run_ok(
        Command::new("cp")
            .arg("-a")
            .arg(w.path().join("staging"))
            .arg(&d),
    );
    let pull = |rev: &str, download: bool| {
        verify::pull(
            Some(&url),
            TARGET,
            rev,
            &d,
            download,
            &verify::PullOpts::default(),
        )
        .unwrap()
    };
    let r = pull("main", true);
    assert_eq!(r.verdict, Verdict::Verified, "{:?}", r.problems);
    assert_eq!((r.downloaded, r.hashed_on_write), (2, 2), "{r:?}");
    assert_eq!(r.commit.as_deref(), Some(p.commit.as_str()));
    assert!(r.sha256_checked > 0 && r.git_sha1_checked > 0);
    assert!(verify::evidence_path(&d, &p.commit).exists());
    // Evidence reused while every identity holds.
    let r = pull(&p.commit, false);
    assert_eq!(r.verdict, Verdict::Verified);
    assert_eq!(
        r.evidence_reused,
        r.sha256_checked + r.git_sha1_checked + r.evidence_reused
    );
    assert_eq!(r.sha256_checked + r.git_sha1_checked, 0);
    // Same-size replacement with the mtime restored: contradicted, and the file is named.
    let victim = d.join("global00/plain.bin");
    let original = std::fs::read(&victim).unwrap();
    replace_same_size(&victim);
    let r = pull(&p.commit, false);
    assert_eq!(r.verdict, Verdict::Contradicted);
    assert!(
        r.problems.iter().any(|x| x.contains("global00/plain.bin")),
        "{:?}",
        r.problems
    );
    assert_eq!(r.verdict.exit().code(), 1);
    // Repair by pull re-downloads only that file.
    let r = pull(&p.commit, true);
    assert_eq!(
        (r.verdict, r.downloaded, r.hashed_on_write),
        (Verdict::Verified, 1, 1)
    );
    assert_eq!(std::fs::read(&victim).unwrap(), original);
    // A symlink swapped into the tree (pointing at identical bytes) is refused.
    let elsewhere = local.path().join("elsewhere.bin");
    std::fs::copy(&victim, &elsewhere).unwrap();
    std::fs::remove_file(&victim).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &victim).unwrap();
    let r = pull(&p.commit, false);
    assert_eq!(r.verdict, Verdict::Contradicted, "{:?}", r.problems);
    std::fs::remove_file(&victim).unwrap();
    std::fs::copy(&elsewhere, &victim).unwrap();
    // The published tree gains a file: the local copy is incomplete at the new commit.
    foreign_commit(
        &url,
        vec![CommitOperation::Regular {
            path: "NOTES.md".into(),
            content: bytes::Bytes::from_static(b"more\n"),
        }],
    );
    let r = pull("main", false);
    assert_eq!(r.verdict, Verdict::NoEvidence, "{:?}", r.problems);
    assert_eq!(
        r.evidence_reused, 0,
        "evidence never carries over to another commit"
    );
    // Offline, from the unit manifests.
    let r = verify::verify_offline(&d).unwrap();
    assert_eq!(r.verdict, Verdict::Verified, "{:?}", r.problems);
}

#[test]
fn stage_refuses_a_malformed_manifest_a_bad_tile_and_an_ungated_release() {
    use stage::StageError;
    let plan = plan();
    let w = work();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    let unit = w.path().join("release/layers00");
    let mpath = unit.join("manifest.json");
    let manifest = std::fs::read(&mpath).unwrap();
    // A malformed public manifest aborts.
    std::fs::write(&mpath, b"{\"v\": 1, \"unit\": ").unwrap();
    let e = stage::run(&plan, &stage_opts(w.path())).unwrap_err();
    assert!(
        matches!(&e, StageError::RoundTrip(m) if m.contains("layers00")),
        "{e:?}"
    );
    std::fs::write(&mpath, &manifest).unwrap();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    // A container whose tile bytes no longer match its tile digest (the manifest updated to the
    // new file digest, so only the production reader can notice) aborts.
    let m = artifact::manifest::Manifest::read(&unit).unwrap();
    let til = m
        .files
        .iter()
        .find(|e| e.path.ends_with(".til"))
        .unwrap()
        .path
        .clone();
    let tpath = unit.join(&til);
    let original = std::fs::read(&tpath).unwrap();
    let mut bad = original.clone();
    let last = bad.len() - 100;
    bad[last] ^= 0x40;
    std::fs::remove_file(&tpath).unwrap();
    std::fs::write(&tpath, &bad).unwrap();
    let mut m2 = m.clone();
    for e in &mut m2.files {
        if e.path == til {
            e.sha256 = ledger::sha256_hex(&bad);
        }
    }
    std::fs::write(&mpath, m2.to_bytes()).unwrap();
    let e = stage::run(&plan, &stage_opts(w.path())).unwrap_err();
    assert!(
        matches!(&e, StageError::RoundTrip(msg) if msg.contains(&til)),
        "{e:?}"
    );
    std::fs::write(&tpath, &original).unwrap();
    std::fs::write(&mpath, &manifest).unwrap();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    // No passing gate report: refused.
    std::fs::remove_file(w.path().join("reports/gate.json")).unwrap();
    let e = stage::run(&plan, &stage_opts(w.path())).unwrap_err();
    assert!(matches!(e, StageError::NotGated(_)), "{e:?}");
}

#[test]
fn discovery_lists_every_minirun_repo_of_the_owner_across_pages() {
    let (h, _root) = hub_with(ServerOptions {
        list_page_size: 1,
        ..ServerOptions::default()
    });
    let c = client(&h.url());
    for id in [
        "minirun/a-minirun",
        "minirun/b",
        "minirun/c-minirun",
        "minirun/d-minirun-old",
        "other/e-minirun",
    ] {
        rt().block_on(c.create_repo(&RepoId::model(id).unwrap(), false, false))
            .unwrap();
    }
    let mut got = pipeline::verify::list(Some(&h.url()), "minirun").unwrap();
    got.sort();
    assert_eq!(got, vec!["minirun/a-minirun", "minirun/c-minirun"]);
    let pages = h
        .request_log()
        .iter()
        .filter(|l| l.starts_with("GET /api/models"))
        .count();
    assert!(pages >= 3, "one repo per page must be followed: {pages}");
    // the binary: plain lines, or JSON with its schema under --json
    let out = Command::new(env!("CARGO_BIN_EXE_minirun-verify"))
        .args(["--endpoint", &h.url(), "--list", "minirun", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "minirun.verify-list/2");
    let mut repos: Vec<&str> = v["repos"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["repo"].as_str())
        .collect();
    repos.sort_unstable();
    for r in v["repos"].as_array().unwrap() {
        // listed, so discoverable; never pulled (and empty), so neither verified nor chat-capable
        assert_eq!(r["discoverable"]["ok"], true, "{r}");
        assert_eq!(r["verified_here"]["ok"], false, "{r}");
        assert_eq!(r["chat_here"]["ok"], false, "{r}");
    }
    assert_eq!(repos, ["minirun/a-minirun", "minirun/c-minirun"]);
}

/// Runs a stage binary on the plan and work dir; returns (stdout, stderr).
fn stage_bin(bin: &str, work: &std::path::Path, url: Option<&str>, json: bool) -> (String, String) {
    let mut c = Command::new(bin);
    c.arg("--plan").arg(plan_path()).arg("--work-dir").arg(work);
    if let Some(u) = url {
        c.args(["--endpoint", u]);
    }
    if json {
        c.arg("--json");
    }
    let out = c.output().unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{bin}: {o}\n{e}");
    if json {
        // every --json report names its versioned schema: minirun.<stage>/<n> (stage/2: links)
        let v: serde_json::Value = serde_json::from_str(&o).unwrap();
        let stage = std::path::Path::new(bin)
            .file_name()
            .unwrap()
            .to_string_lossy();
        let stage = stage.trim_start_matches("minirun-");
        let n = if stage == "stage" { 2 } else { 1 };
        let want = format!("minirun.{stage}/{n}");
        assert_eq!(v["schema"], want.as_str(), "{bin}: {o}");
    }
    (o, e)
}

/// `(k, n)` of the last progress line of `label` counting `noun` ("(k of n noun, t s)").
fn last_count(err: &str, label: &str, noun: &str) -> (u64, u64) {
    let line = err
        .lines()
        .rfind(|l| l.starts_with(&format!("{label}: ")) && l.contains(&format!(" {noun}, ")))
        .unwrap_or_else(|| panic!("no `{label}` line counting {noun}: {err}"));
    let inner = line.rsplit_once('(').unwrap().1;
    let mut w = inner.split(' ');
    let k = w.next().unwrap().parse().unwrap();
    assert_eq!(w.next(), Some("of"), "{line}");
    (k, w.next().unwrap().parse().unwrap())
}

#[test]
fn stage_candidate_upload_and_promote_show_progress_in_a_log_and_none_with_json() {
    let plan = plan();
    let w = work();
    let (h, _root) = hub();
    let url = h.url();
    // stderr is a pipe here: plain lines, not bars.
    let (_, err) = stage_bin(env!("CARGO_BIN_EXE_minirun-stage"), w.path(), None, false);
    let (k, n) = last_count(&err, "stage", "files");
    assert!(
        k == n && n > 500,
        "the last file line counts them all: {err}"
    );
    assert!(err.contains(" linked ("), "{err}");
    for u in &plan.units {
        assert!(
            err.contains(&format!("stage: {} read back: ", u.name)),
            "{}: {err}",
            u.name
        );
    }
    assert_eq!(
        last_count(&err, "stage", "units"),
        (plan.units.len() as u64, plan.units.len() as u64)
    );
    let (_, err) = stage_bin(env!("CARGO_BIN_EXE_minirun-stage"), w.path(), None, true);
    assert!(!err.contains("stage: "), "--json prints no progress: {err}");

    let (_, err) = stage_bin(
        env!("CARGO_BIN_EXE_minirun-candidate-upload"),
        w.path(),
        Some(&url),
        false,
    );
    let last = err.lines().rfind(|l| l.starts_with("candidate-upload: "));
    assert!(last.is_some_and(|l| l.contains("(100%)")), "{err}");

    let (_, err) = stage_bin(
        env!("CARGO_BIN_EXE_minirun-promote"),
        w.path(),
        Some(&url),
        false,
    );
    for step in [
        "promote: candidate candidate-",
        "promote: branch `main` at ",
        " to copy, 0 to delete (",
        "promote: sending one commit of ",
        "promote: committed ",
    ] {
        assert!(err.contains(step), "{step}: {err}");
    }
    let (k, n) = last_count(&err, "promote", "regular files");
    assert!(k == n && n > 0, "{err}");
    let (_, err) = stage_bin(
        env!("CARGO_BIN_EXE_minirun-promote"),
        w.path(),
        Some(&url),
        true,
    );
    assert!(
        !err.contains("promote: "),
        "--json prints no progress: {err}"
    );
}

/// Files the staged units' manifests list (every unit file except the manifests).
fn plan_units_files(work: &std::path::Path) -> usize {
    let staging = work.join("staging");
    std::fs::read_dir(&staging)
        .unwrap()
        .flatten()
        .filter_map(|d| artifact::manifest::Manifest::read(&d.path()).ok())
        .map(|m| m.files.len())
        .sum()
}
