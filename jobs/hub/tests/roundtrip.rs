//! The publishing and download flow through our client against our server: repo create, upload
//! (regular, LFS basic, LFS multipart), revision info with blobs, resolve with Range, tree paging,
//! refs and branches, commits with parentCommit (412), copies, deletes, PRs, listing, the CDN
//! redirect (token dropped), and concurrent commits.

use crate::common;

use bytes::Bytes;
use common::*;
use hub::client::{CommitOperation, CommitRequest, UploadFile, UploadSource};
use hub::protocol::sha256_hex;
use hub::server::ServerOptions;
use hub::HubError;

fn up(path: &str, data: &[u8]) -> UploadFile {
    UploadFile {
        path: path.into(),
        source: UploadSource::Bytes(Bytes::copy_from_slice(data)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_download_and_guarded_commits() {
    let h = start(ServerOptions {
        lfs_chunk_size: 1 << 20,
        ..ServerOptions::default()
    })
    .await;
    let c = client(&h, None);
    let r = repo("alice/tiny-minirun");
    let url = c.create_repo(&r, false, false).await.unwrap();
    assert_eq!(url, format!("{}/alice/tiny-minirun", h.handle.url()));
    assert!(matches!(
        c.create_repo(&r, false, false).await,
        Err(HubError::Http { status: 409, .. })
    ));
    c.create_repo(&r, false, true).await.unwrap();

    let readme = b"# tiny\n".to_vec();
    let small_lfs = bytes(300_000, 1);
    let big_lfs = bytes((2 << 20) + 12_345, 2); // 3 parts of 1 MiB
    let files = vec![
        up("README.md", &readme),
        up("weights/a.safetensors", &small_lfs),
        up("weights/big.bin", &big_lfs),
        up("cfg/x.json", b"{}"),
    ];
    let ci = c
        .upload_files(&r, "main", &files, "add files", None)
        .await
        .unwrap();
    assert_eq!(ci.commit_oid.len(), 40);
    let log = h.handle.request_log();
    assert_eq!(
        log.iter().filter(|l| l.contains("/part/")).count(),
        3,
        "multipart parts: {log:?}"
    );
    assert!(log
        .iter()
        .any(|l| l.starts_with("POST /lfs-upload/") && l.ends_with("/complete")));

    // re-publishing identical files sends no commit and no LFS bytes
    let posts = |h: &Hub| {
        h.handle
            .request_log()
            .iter()
            .filter(|l| l.contains("/commit/") || l.contains("/lfs-upload/"))
            .count()
    };
    let before = posts(&h);
    let again = c
        .upload_files(&r, "main", &files, "add files", None)
        .await
        .unwrap();
    assert_eq!(again.commit_oid, ci.commit_oid);
    assert_eq!(posts(&h), before);

    // revision info with blobs
    let info = c.revision_info(&r, "main", true).await.unwrap();
    assert_eq!(info.sha.as_deref(), Some(ci.commit_oid.as_str()));
    let big = info
        .siblings
        .iter()
        .find(|s| s.rfilename == "weights/big.bin")
        .unwrap();
    assert_eq!(big.size, Some(big_lfs.len() as u64));
    assert_eq!(big.lfs.as_ref().unwrap().sha256, sha256_hex(&big_lfs));
    let rd = info
        .siblings
        .iter()
        .find(|s| s.rfilename == "README.md")
        .unwrap();
    assert!(rd.lfs.is_none());
    assert_eq!(
        rd.blob_id.as_deref(),
        Some(hub::protocol::git_blob_sha1(&readme).as_str())
    );

    // downloads: every byte compared
    for (p, want) in [
        ("README.md", &readme),
        ("weights/a.safetensors", &small_lfs),
        ("weights/big.bin", &big_lfs),
    ] {
        let (meta, got) = c.download_bytes(&r, &ci.commit_oid, p).await.unwrap();
        assert_eq!(&got, want, "{p}");
        assert_eq!(meta.commit, ci.commit_oid);
    }
    let dest = h.dir.path().join("big.bin");
    c.download_to_file(&r, "main", "weights/big.bin", &dest)
        .await
        .unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), big_lfs);

    // single ranges, 416
    let meta = c
        .file_metadata(&r, "main", "weights/big.bin")
        .await
        .unwrap();
    assert!(meta.lfs);
    assert_eq!(meta.etag, sha256_hex(&big_lfs));
    assert_eq!(
        c.get_range(&meta, 1000, Some(1999)).await.unwrap(),
        big_lfs[1000..2000].to_vec()
    );
    assert_eq!(
        c.get_range(&meta, big_lfs.len() as u64 - 5, None)
            .await
            .unwrap(),
        big_lfs[big_lfs.len() - 5..].to_vec()
    );
    let mut m2 = meta.clone();
    m2.size += 10; // ask beyond the end
    let e = c
        .get_range(&m2, big_lfs.len() as u64 + 1, None)
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(416), "{e}");
    let e = c.file_metadata(&r, "main", "nope.txt").await.unwrap_err();
    assert_eq!(e.error_code(), Some("EntryNotFound"));
    let e = c
        .file_metadata(&r, "no-such-branch", "README.md")
        .await
        .unwrap_err();
    assert_eq!(e.error_code(), Some("RevisionNotFound"));

    // parentCommit: good parent works, stale parent is HeadMoved (412), head untouched
    let add = |p: &str, d: &[u8]| CommitOperation::Regular {
        path: p.into(),
        content: Bytes::copy_from_slice(d),
    };
    let second = c
        .commit(
            &r,
            "main",
            &CommitRequest {
                summary: "s2".into(),
                parent_commit: Some(ci.commit_oid.clone()),
                operations: vec![add("n.txt", b"1")],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let stale = c
        .commit(
            &r,
            "main",
            &CommitRequest {
                summary: "s3".into(),
                parent_commit: Some(ci.commit_oid.clone()),
                operations: vec![add("m.txt", b"2")],
                ..Default::default()
            },
        )
        .await;
    assert!(
        matches!(stale, Err(HubError::HeadMoved { .. })),
        "{stale:?}"
    );
    assert_eq!(
        c.revision_info(&r, "main", false)
            .await
            .unwrap()
            .sha
            .as_deref(),
        Some(second.commit_oid.as_str())
    );

    // copy (lfsFile without size), delete a file and a folder
    let sha = sha256_hex(&big_lfs);
    let third = c
        .commit(
            &r,
            "main",
            &CommitRequest {
                summary: "copy + deletes".into(),
                parent_commit: Some(second.commit_oid.clone()),
                operations: vec![
                    CommitOperation::Lfs {
                        path: "copy/big-copy.bin".into(),
                        sha256: sha.clone(),
                        size: None,
                    },
                    CommitOperation::DeleteFile {
                        path: "README.md".into(),
                    },
                    CommitOperation::DeleteFolder { path: "cfg".into() },
                ],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let tree = c
        .list_tree(&r, &third.commit_oid, None, true)
        .await
        .unwrap();
    let paths: Vec<&str> = tree
        .iter()
        .filter(|e| e.is_file())
        .map(|e| e.path.as_str())
        .collect();
    assert!(
        paths.contains(&"copy/big-copy.bin")
            && !paths.contains(&"README.md")
            && !paths.iter().any(|p| p.starts_with("cfg/")),
        "{paths:?}"
    );
    let copy = tree.iter().find(|e| e.path == "copy/big-copy.bin").unwrap();
    assert_eq!(copy.size, big_lfs.len() as u64);
    assert_eq!(copy.lfs.as_ref().unwrap().oid, sha);
    // the platform-managed .gitattributes covers the copy (matched by `*.bin`)
    let e = c
        .commit(
            &r,
            "main",
            &CommitRequest {
                summary: "x".into(),
                operations: vec![CommitOperation::DeleteFile {
                    path: "nope".into(),
                }],
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(404));

    // an LFS path no pattern covers is added to the platform-managed .gitattributes
    c.commit(
        &r,
        "main",
        &CommitRequest {
            summary: "raw".into(),
            operations: vec![CommitOperation::Lfs {
                path: "raw/data.dat".into(),
                sha256: sha.clone(),
                size: Some(big_lfs.len() as u64),
            }],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let (_, attrs) = c
        .download_bytes(&r, "main", ".gitattributes")
        .await
        .unwrap();
    let attrs = String::from_utf8(attrs).unwrap();
    assert!(
        attrs.contains("*.safetensors filter=lfs")
            && attrs.ends_with("raw/data.dat filter=lfs diff=lfs merge=lfs -text\n"),
        "{attrs}"
    );

    // branches and refs
    c.create_branch(&r, "candidate-1", Some(&second.commit_oid), false)
        .await
        .unwrap();
    assert_eq!(
        c.create_branch(&r, "candidate-1", None, false)
            .await
            .unwrap_err()
            .status(),
        Some(409)
    );
    c.create_branch(&r, "candidate-1", None, true)
        .await
        .unwrap();
    assert_eq!(
        c.create_branch(&r, "refs/pr/5", None, false)
            .await
            .unwrap_err()
            .status(),
        Some(400)
    );
    let refs = c.list_refs(&r, false).await.unwrap();
    let cand = refs
        .branches
        .iter()
        .find(|b| b.name == "candidate-1")
        .unwrap();
    assert_eq!(cand.target_commit, second.commit_oid);
    assert_eq!(cand.full_ref, "refs/heads/candidate-1");
    c.delete_branch(&r, "candidate-1").await.unwrap();
    assert!(c
        .revision_info(&r, "candidate-1", false)
        .await
        .unwrap_err()
        .is_not_found());
    assert!(c.delete_branch(&r, "main").await.is_err());

    // pull request
    let pr = c
        .commit(
            &r,
            "main",
            &CommitRequest {
                summary: "pr".into(),
                operations: vec![add("pr.txt", b"pr")],
                create_pr: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(pr
        .pull_request_url
        .as_deref()
        .unwrap()
        .ends_with("/alice/tiny-minirun/discussions/1"));
    let (_, got) = c.download_bytes(&r, "refs/pr/1", "pr.txt").await.unwrap();
    assert_eq!(got, b"pr");
    assert!(c.file_metadata(&r, "main", "pr.txt").await.is_err());
    let refs = c.list_refs(&r, true).await.unwrap();
    assert_eq!(refs.pull_requests.unwrap()[0].full_ref, "refs/pr/1");
    h.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_ids_are_deterministic() {
    let mut ids = Vec::new();
    for _ in 0..2 {
        let h = start(ServerOptions::default()).await;
        let c = client(&h, None);
        let r = repo("o/det");
        c.create_repo(&r, false, false).await.unwrap();
        let ci = c
            .upload_files(
                &r,
                "main",
                &[up("a.txt", b"a"), up("b.bin", &bytes(1000, 3))],
                "same",
                None,
            )
            .await
            .unwrap();
        ids.push(ci.commit_oid);
    }
    assert_eq!(ids[0], ids[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tree_paging_over_1000_files_and_model_listing() {
    let h = start(ServerOptions {
        list_page_size: 2,
        ..ServerOptions::default()
    })
    .await;
    let c = client(&h, None);
    let r = repo("bob/many-minirun");
    c.create_repo(&r, false, false).await.unwrap();
    let ops: Vec<CommitOperation> = (0..1205)
        .map(|i| CommitOperation::Regular {
            path: format!("d{}/f{i:04}.txt", i % 3),
            content: Bytes::from(format!("file {i}")),
        })
        .collect();
    c.commit(
        &r,
        "main",
        &CommitRequest {
            summary: "many".into(),
            operations: ops,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let tree = c.list_tree(&r, "main", None, true).await.unwrap();
    assert_eq!(tree.iter().filter(|e| e.is_file()).count(), 1206); // + .gitattributes
    assert_eq!(tree.iter().filter(|e| !e.is_file()).count(), 3);
    assert!(
        h.handle
            .request_log()
            .iter()
            .filter(|l| l.contains("/tree/"))
            .count()
            >= 2
    );
    let sub = c.list_tree(&r, "main", Some("d1"), false).await.unwrap();
    assert_eq!(sub.len(), 402);
    let info = c
        .paths_info(
            &r,
            "main",
            &["d0/f0000.txt".into(), "d2".into(), "missing".into()],
        )
        .await
        .unwrap();
    assert_eq!(info.len(), 2);

    for name in [
        "bob/a-minirun",
        "bob/b-minirun",
        "bob/other",
        "carol/c-minirun",
    ] {
        c.create_repo(&repo(name), false, false).await.unwrap();
    }
    let mut ids: Vec<String> = c
        .list_models(Some("bob"), Some("-minirun"))
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    ids.sort();
    assert_eq!(ids, ["bob/a-minirun", "bob/b-minirun", "bob/many-minirun"]);
    assert!(
        h.handle
            .request_log()
            .iter()
            .filter(|l| l == &"GET /api/models")
            .count()
            >= 2,
        "paged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_redirect_drops_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ServerOptions {
        token: Some("hf_secret_cdn_token".into()),
        cdn_addr: Some(loopback()),
        ..ServerOptions::default()
    };
    let handle = hub::server::spawn(dir.path(), loopback(), opts)
        .await
        .unwrap();
    let h = Hub { handle, dir };
    let c = client(&h, Some("hf_secret_cdn_token"));
    let r = repo("o/cdn");
    c.create_repo(&r, true, false).await.unwrap();
    let data = bytes(500_000, 9);
    c.upload_files(&r, "main", &[up("w.bin", &data)], "w", None)
        .await
        .unwrap();
    let meta = c.file_metadata(&r, "main", "w.bin").await.unwrap();
    assert_ne!(
        meta.location.port(),
        Some(h.handle.addr.port()),
        "LFS bytes come from the CDN origin"
    );
    assert_eq!(meta.size, data.len() as u64);
    let (_, got) = c.download_bytes(&r, "main", "w.bin").await.unwrap();
    assert_eq!(got, data);
    let log = h.handle.request_log();
    assert!(log.iter().any(|l| l.starts_with("CDN GET")), "{log:?}");
    assert!(
        log.iter()
            .filter(|l| l.starts_with("CDN"))
            .all(|l| l.ends_with("auth=no")),
        "token sent cross-origin: {log:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_commits_serialise() {
    let h = start(ServerOptions::default()).await;
    let c = client(&h, None);
    let r = repo("o/conc");
    c.create_repo(&r, false, false).await.unwrap();
    let head = c
        .revision_info(&r, "main", false)
        .await
        .unwrap()
        .sha
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (c, r, head) = (c.clone(), r.clone(), head.clone());
        tasks.push(tokio::spawn(async move {
            let parent = (i % 2 == 0).then_some(head);
            let op = CommitOperation::Regular {
                path: format!("f{i}.txt"),
                content: Bytes::from(vec![b'x'; i + 1]),
            };
            c.commit(
                &r,
                "main",
                &CommitRequest {
                    summary: format!("c{i}"),
                    parent_commit: parent,
                    operations: vec![op],
                    ..Default::default()
                },
            )
            .await
        }));
    }
    let mut ok_guarded = 0;
    let mut ok_free = 0;
    for (i, t) in tasks.into_iter().enumerate() {
        match t.await.unwrap() {
            Ok(_) if i % 2 == 0 => ok_guarded += 1,
            Ok(_) => ok_free += 1,
            Err(HubError::HeadMoved { .. }) => assert_eq!(i % 2, 0),
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        ok_guarded <= 1,
        "at most one commit guarded by the same parent may land"
    );
    assert_eq!(ok_free, 4);
    let tree = c.list_tree(&r, "main", None, false).await.unwrap();
    assert_eq!(tree.len(), 1 + 4 + ok_guarded);
}
