//! `import`: a local directory served offline as a repo at an exact upstream revision.

use crate::common;

use common::*;
use hub::server::{import_dir, ServerOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_directory_is_served_at_the_exact_revision() {
    let src = tempfile::tempdir().unwrap();
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("config.json", b"{\"a\": 1}\n".to_vec()),
        ("model.safetensors", bytes(100_000, 11)),
        ("nested/dir/tokenizer.json", b"{}".to_vec()),
        ("blob.dat", vec![0u8, 1, 2, 3]),
    ];
    for (p, d) in &files {
        let full = src.path().join(p);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, d).unwrap();
    }
    std::fs::create_dir_all(src.path().join(".git")).unwrap();
    std::fs::write(src.path().join(".git/HEAD"), "ref: x").unwrap();
    let root = tempfile::tempdir().unwrap();
    let rev = "0123456789abcdef0123456789abcdef01234567";
    let r = repo("upstream/model");
    let s = import_dir(root.path(), &r, rev, src.path(), false).unwrap();
    assert_eq!((s.files, s.lfs_files, s.changed), (4, 2, true));
    assert!(
        !import_dir(root.path(), &r, rev, src.path(), false)
            .unwrap()
            .changed,
        "re-import is a no-op"
    );

    let handle = hub::server::spawn(root.path(), loopback(), ServerOptions::default())
        .await
        .unwrap();
    let h = Hub {
        handle,
        dir: tempfile::tempdir().unwrap(),
    };
    let c = client(&h, None);
    let info = c.revision_info(&r, rev, true).await.unwrap();
    assert_eq!(info.sha.as_deref(), Some(rev));
    assert_eq!(
        c.revision_info(&r, "main", false)
            .await
            .unwrap()
            .sha
            .as_deref(),
        Some(rev)
    );
    assert_eq!(
        info.siblings.len(),
        4,
        ".git is not imported and no .gitattributes is added"
    );
    for (p, d) in &files {
        let (meta, got) = c.download_bytes(&r, rev, p).await.unwrap();
        assert_eq!(&got, d, "{p}");
        assert_eq!(meta.commit, rev);
        assert_eq!(
            meta.lfs,
            *p == "model.safetensors" || *p == "blob.dat",
            "{p}"
        );
    }

    // an immutable commit is never rewritten; bad input is refused
    std::fs::write(src.path().join("config.json"), b"changed").unwrap();
    assert!(import_dir(root.path(), &r, rev, src.path(), false).is_err());
    assert!(import_dir(root.path(), &r, "main", src.path(), false).is_err());
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("/etc/passwd", src.path().join("link")).unwrap();
        let e =
            import_dir(root.path(), &repo("upstream/other"), rev, src.path(), false).unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");
    }
}
