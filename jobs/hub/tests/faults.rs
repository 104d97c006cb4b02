//! Every fault mode: the client either recovers with identical bytes or fails with a clear error —
//! never a short or wrong file.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common;

use bytes::Bytes;
use common::*;
use hub::client::{CommitOperation, CommitRequest, RetryPolicy, UploadFile, UploadSource};
use hub::server::ServerOptions;
use hub::HubError;

async fn setup() -> (Hub, hub::HubClient, hub::RepoId, Vec<u8>) {
    let h = start(ServerOptions::default()).await;
    let c = client(&h, None);
    let r = repo("o/faults");
    c.create_repo(&r, false, false).await.unwrap();
    let data = bytes(700_001, 5);
    c.upload_files(
        &r,
        "main",
        &[UploadFile {
            path: "w.bin".into(),
            source: UploadSource::Bytes(Bytes::from(data.clone())),
        }],
        "w",
        None,
    )
    .await
    .unwrap();
    (h, c, r, data)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_faults_are_recovered_with_identical_bytes() {
    let (h, c, r, data) = setup().await;
    for spec in [
        "5xx:x2",
        "ratelimit:x1@1",
        "reset:x1",
        "truncate:x1",
        "delay:x1@300",
        "ignore-range:x1",
        "whole-206:x1",
    ] {
        h.handle.set_faults(spec.parse().unwrap());
        let meta = c.file_metadata(&r, "main", "w.bin").await.unwrap();
        let part = c
            .get_range(&meta, 1000, Some(200_999))
            .await
            .unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(part, data[1000..201_000].to_vec(), "{spec}");
        // A recycled buffer holding other bytes (and a retry after a failed attempt) still ends
        // with exactly the requested range.
        h.handle.set_faults(spec.parse().unwrap());
        let mut buf = vec![0xAB; 300_000];
        c.get_range_into(&meta, 5, Some(70_004), &mut buf)
            .await
            .unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(buf, data[5..70_005].to_vec(), "{spec}: recycled buffer");
        h.handle.set_faults(spec.parse().unwrap());
        let dest = h.dir.path().join("w.bin");
        c.download_to_file(&r, "main", "w.bin", &dest)
            .await
            .unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(std::fs::read(&dest).unwrap(), data, "{spec}");
        h.handle.set_faults(spec.parse().unwrap());
        let (_, all) = c
            .download_bytes(&r, "main", "w.bin")
            .await
            .unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(all, data, "{spec}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_faults_fail_with_clear_errors() {
    let (h, c, r, _) = setup().await;
    let c = c.with_retry(RetryPolicy {
        max_attempts: 2,
        base_delay: std::time::Duration::from_millis(5),
        max_delay: std::time::Duration::from_millis(20),
    });
    let meta = c.file_metadata(&r, "main", "w.bin").await.unwrap();
    let dest = h.dir.path().join("never.bin");
    for (spec, check) in [
        (
            "truncate:1",
            (|e: &HubError| matches!(e, HubError::BodyLength { .. })) as fn(&HubError) -> bool,
        ),
        ("reset:1", |e| matches!(e, HubError::Transport { .. })),
        ("whole-206:1", |e| {
            matches!(e, HubError::BodyLength { .. } | HubError::BadRange { .. })
        }),
        ("5xx:1", |e| e.status() == Some(503)),
    ] {
        h.handle.set_faults(spec.parse().unwrap());
        let e = c.get_range(&meta, 10, Some(99_999)).await.unwrap_err();
        assert!(check(&e), "{spec}: {e}");
        assert!(
            e.to_string().contains("/cdn/") || e.to_string().contains("/resolve/"),
            "error names the URL: {e}"
        );
        if spec != "whole-206:1" {
            let e = c
                .download_to_file(&r, "main", "w.bin", &dest)
                .await
                .unwrap_err();
            assert!(check(&e), "{spec}: {e}");
            assert!(
                !dest.exists(),
                "{spec}: no file is left under the final name"
            );
        }
    }
    h.handle.set_faults(Default::default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_commit_response_is_reported_not_retried() {
    let (h, c, r, _) = setup().await;
    let head = c
        .revision_info(&r, "main", false)
        .await
        .unwrap()
        .sha
        .unwrap();
    let before = h
        .handle
        .request_log()
        .iter()
        .filter(|l| l.contains("/commit/"))
        .count();
    h.handle.set_faults("drop-after-commit:x1".parse().unwrap());
    let req = CommitRequest {
        summary: "x".into(),
        parent_commit: Some(head.clone()),
        operations: vec![CommitOperation::Regular {
            path: "x.txt".into(),
            content: Bytes::from_static(b"x"),
        }],
        ..Default::default()
    };
    let e = c.commit(&r, "main", &req).await.unwrap_err();
    assert!(matches!(e, HubError::CommitOutcomeUnknown { .. }), "{e}");
    let commits = h
        .handle
        .request_log()
        .iter()
        .filter(|l| l.contains("/commit/"))
        .count();
    assert_eq!(commits - before, 1, "the commit POST was sent exactly once");
    // it was applied: the head moved, and re-sending with the same parent is a 412
    assert_ne!(
        c.revision_info(&r, "main", false)
            .await
            .unwrap()
            .sha
            .unwrap(),
        head
    );
    assert!(matches!(
        c.commit(&r, "main", &req).await,
        Err(HubError::HeadMoved { .. })
    ));
    // a 5xx on the commit is not retried either
    h.handle.set_faults("5xx:x1".parse().unwrap());
    let req2 = CommitRequest {
        summary: "y".into(),
        operations: vec![CommitOperation::Regular {
            path: "y.txt".into(),
            content: Bytes::from_static(b"y"),
        }],
        ..Default::default()
    };
    assert_eq!(
        c.commit(&r, "main", &req2).await.unwrap_err().status(),
        Some(503)
    );
}

/// What a lossy link does to requests (bodies corrupted or cut, connections reset mid-request, a
/// hub busy or losing a commit's answer): `upload_files` finishes with the right tree each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_side_faults_are_recovered_by_upload_files() {
    for chunk in [16 * 1024 * 1024, 64 * 1024] {
        let h = start(ServerOptions {
            lfs_chunk_size: chunk,
            ..ServerOptions::default()
        })
        .await;
        let c = client(&h, None);
        let r = repo("o/lossy");
        c.create_repo(&r, false, false).await.unwrap();
        let specs = [
            "corrupt-upload:x1",
            "truncate-upload:x1",
            "reset-request:x1",
            "reset-request:x3",
            "5xx:x2",
            "ratelimit:x1@1",
            "drop-after-commit:x1",
        ];
        for (i, spec) in specs.iter().enumerate() {
            let head = c.branch_head(&r, "main").await.unwrap();
            let data = bytes(200_001, 100 + i as u64);
            let name = format!("w{i}.bin");
            let fired = h.handle.faults_fired();
            h.handle.set_faults(spec.parse().unwrap());
            let ans = c
                .upload_files(
                    &r,
                    "main",
                    &[
                        UploadFile {
                            path: name.clone(),
                            source: UploadSource::Bytes(Bytes::from(data.clone())),
                        },
                        UploadFile {
                            path: format!("n{i}.txt"),
                            source: UploadSource::Bytes(Bytes::from(format!("{spec}\n"))),
                        },
                    ],
                    spec,
                    head.as_deref(),
                )
                .await
                .unwrap_or_else(|e| panic!("{spec} (chunk {chunk}): {e}"));
            assert!(h.handle.faults_fired() > fired, "{spec}: the fault fired");
            h.handle.set_faults(Default::default());
            assert_eq!(
                c.branch_head(&r, "main").await.unwrap(),
                Some(ans.commit_oid.clone())
            );
            let (_, got) = c.download_bytes(&r, &ans.commit_oid, &name).await.unwrap();
            assert_eq!(got, data, "{spec} (chunk {chunk})");
            let (_, note) = c
                .download_bytes(&r, &ans.commit_oid, &format!("n{i}.txt"))
                .await
                .unwrap();
            assert_eq!(note, format!("{spec}\n").into_bytes());
        }
    }
}

/// A guarded commit whose outcome is unknown asks the branch: applied → its head; still the
/// parent → sent again; moved elsewhere → `HeadMoved`, nothing overwritten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_commit_resolves_an_unknown_outcome_from_the_branch() {
    let (h, c, r, _) = setup().await;
    let op = |p: &str| CommitOperation::Regular {
        path: p.into(),
        content: Bytes::from(p.to_owned()),
    };
    let commits = |h: &Hub| {
        h.handle
            .request_log()
            .iter()
            .filter(|l| l.starts_with("POST") && l.contains("/commit/"))
            .count()
    };
    for (spec, posts) in [
        ("drop-after-commit:x1", 1),
        ("reset-request:x1", 2),
        ("5xx:x1", 2),
    ] {
        let head = c.branch_head(&r, "main").await.unwrap();
        let req = CommitRequest {
            summary: spec.into(),
            parent_commit: head.clone(),
            operations: vec![op(spec)],
            ..Default::default()
        };
        let before = commits(&h);
        h.handle.set_faults(spec.parse().unwrap());
        let ans = c.commit_guarded(&r, "main", &req).await.unwrap();
        assert_eq!(commits(&h) - before, posts, "{spec}");
        assert_eq!(
            c.branch_head(&r, "main").await.unwrap(),
            Some(ans.commit_oid)
        );
    }
    // Applied by someone else meanwhile: the lost answer cannot be claimed.
    let head = c.branch_head(&r, "main").await.unwrap();
    c.commit(
        &r,
        "main",
        &CommitRequest {
            summary: "theirs".into(),
            operations: vec![op("theirs.txt")],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let theirs = c.branch_head(&r, "main").await.unwrap();
    h.handle.set_faults("5xx:x1".parse().unwrap());
    let req = CommitRequest {
        summary: "mine".into(),
        parent_commit: head,
        operations: vec![op("mine.txt")],
        ..Default::default()
    };
    let e = c.commit_guarded(&r, "main", &req).await.unwrap_err();
    assert!(matches!(e, HubError::HeadMoved { .. }), "{e}");
    assert_eq!(c.branch_head(&r, "main").await.unwrap(), theirs);
}

/// `binary-inline` and `preupload-256` (the Hub's own rules, docs/hub.md §5): a binary file sent
/// inline is refused (400) and a text one is not; a preupload of 257 paths is refused, and the
/// client, which asks at most 256 paths a call, is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_refuses_inline_binary_and_a_preupload_of_257_paths() {
    let h = start(ServerOptions {
        faults: "binary-inline:1,preupload-256:1".parse().unwrap(),
        ..ServerOptions::default()
    })
    .await;
    let c = client(&h, None);
    let r = repo("o/quirks");
    c.create_repo(&r, false, false).await.unwrap();
    let commit = |content: &'static [u8]| CommitRequest {
        summary: "inline".into(),
        operations: vec![CommitOperation::Regular {
            path: "w.bin".into(),
            content: Bytes::from_static(content),
        }],
        ..CommitRequest::default()
    };
    let e = c
        .commit(&r, "main", &commit(b"\x00\x01binary"))
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(400), "{e}");
    c.commit(&r, "main", &commit(b"text\n")).await.unwrap();
    let files: Vec<String> = (0..257)
        .map(|i| format!("{{\"path\":\"f{i}.txt\",\"sample\":\"\",\"size\":1}}"))
        .collect();
    let body = format!("{{\"files\":[{}]}}", files.join(","));
    let u = format!("{}/api/models/o/quirks/preupload/main", h.handle.url());
    let status = reqwest::Client::new()
        .post(&u)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 400);
    let pre: Vec<hub::protocol::PreuploadFile> = (0..257)
        .map(|i| hub::protocol::PreuploadFile {
            path: format!("f{i}.txt"),
            sample: String::new(),
            size: 1,
        })
        .collect();
    assert_eq!(
        c.preupload(&r, "main", &pre, false).await.unwrap().len(),
        257
    );
    assert_eq!(h.handle.faults_fired(), 2);
}
