//! Linked staging (issue 52 item 1, docs/publish.md §1): on one filesystem staging holds hard
//! links to the gated release — nothing written, every byte still read once against its digest —
//! the repack journals stay proven done, a later in-place change to a release file is caught
//! before upload, and across filesystems staging copies and says why.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::process::Command;

use pipeline::candidate::{self, CandidateError};
use pipeline::repack::{self, RepackOpts};
use pipeline::stage::{self, StageError};
use pipeline::units::UnitStatus;

use crate::support::*;

fn ino(p: &Path) -> (u64, u64) {
    let m = std::fs::metadata(p).unwrap();
    (m.dev(), m.ino())
}

/// The whole gated work directory (journals included) copied: new inodes, journaled bytes.
fn gated_copy() -> tempfile::TempDir {
    let w = tempfile::tempdir().unwrap();
    for d in ["upstream", "release", "ledger", "reports"] {
        run_ok(
            Command::new("cp")
                .arg("-a")
                .arg(gated().join(d))
                .arg(w.path().join(d)),
        );
    }
    w
}

#[test]
fn linked_staging_writes_nothing_and_repack_stays_done() {
    let plan = plan();
    let w = gated_copy();
    let s = stage::run(&plan, &stage_opts(w.path())).unwrap();
    assert_eq!(s.bytes_written, 0, "{s:?}");
    assert!(s.copied.is_empty() && s.copy_reason.is_none(), "{s:?}");
    assert_eq!(s.linked.len(), s.files);
    for rel in &s.linked {
        let (staged, release) = (
            w.path().join("staging").join(rel),
            w.path().join("release").join(rel),
        );
        assert_eq!(
            ino(&staged),
            ino(&release),
            "{rel} is not a link to its release file"
        );
    }
    // The copied journals named other inodes; every unit file was hashed while linking and its
    // repack record refreshed (root files have no unit journal).
    let unit_files = s.linked.iter().filter(|r| r.contains('/')).count();
    assert_eq!(s.repack_refreshed, unit_files);
    // A repack re-run finds every unit done without reading or writing a byte of it.
    let r = repack::run(
        &plan,
        &RepackOpts {
            work_dir: Some(w.path().to_path_buf()),
            ..RepackOpts::default()
        },
    )
    .unwrap();
    assert!(!r.units.is_empty());
    for u in &r.units {
        assert_eq!(u.status, UnitStatus::AlreadyDone, "{u:?}");
        assert_eq!(u.bytes_written, 0, "{u:?}");
    }
    // A stage re-run keeps every link unread and writes nothing, the journal included.
    let s2 = stage::run(&plan, &stage_opts(w.path())).unwrap();
    assert_eq!(s2.kept, s2.files, "{s2:?}");
    assert!(s2.release_hashed.is_empty() && s2.linked.is_empty() && !s2.journal_written);
}

/// Write one byte of `path` in place (same inode, same size) and put its mtime back, as a tool
/// that edits files and restores timestamps would.
fn edit_in_place(path: &Path) {
    use std::io::{Read, Seek, Write};
    let stamp = path.with_extension("stamp");
    run_ok(Command::new("touch").arg("-r").arg(path).arg(&stamp));
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact(&mut b).unwrap();
    f.rewind().unwrap();
    f.write_all(&[b[0].wrapping_add(1)]).unwrap();
    drop(f);
    run_ok(Command::new("touch").arg("-r").arg(&stamp).arg(path));
    std::fs::remove_file(&stamp).unwrap();
}

#[test]
fn an_in_place_change_to_a_linked_release_file_is_caught_before_upload() {
    let plan = plan();
    let w = work();
    let (h, _root) = hub();
    let url = h.url();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    // One inode: the edit is in the staged file too, and moves its ctime.
    edit_in_place(&w.path().join("release/global00/plain.bin"));
    match candidate::run(&plan, &cand_opts(w.path(), &url)) {
        Err(CandidateError::NotStaged) => {}
        other => panic!("candidate-upload accepted a changed staged file: {other:?}"),
    }
    // Staging again re-hashes the file and its round trip refuses it against the manifest entry
    // the gate checked; the journal it stored stays in progress, so upload still refuses.
    match stage::run(&plan, &stage_opts(w.path())) {
        Err(StageError::RoundTrip(why)) => assert!(why.contains("plain.bin"), "{why}"),
        other => panic!("stage accepted an edited release file: {other:?}"),
    }
    assert!(matches!(
        candidate::run(&plan, &cand_opts(w.path(), &url)),
        Err(CandidateError::NotStaged)
    ));
    assert!(h.request_log().iter().all(|l| !l.starts_with("PUT ")));
}

#[test]
fn across_filesystems_staging_copies_and_says_why() {
    let plan = plan();
    let w = work();
    let staging = w.path().join("staging");
    let Some(_mount) = Tmpfs::at(&staging, "256m") else {
        return;
    };
    let s = stage::run(&plan, &stage_opts(w.path())).unwrap();
    assert!(s.linked.is_empty(), "{s:?}");
    assert_eq!(s.copied.len(), s.files);
    assert_eq!(s.bytes_written, s.bytes);
    let why = s.copy_reason.as_deref().unwrap_or("");
    assert!(why.contains("different filesystems"), "{why}");
    assert!(s
        .render()
        .contains("copies, not links: the release and staging are on different filesystems"));
    assert_eq!(
        tree_digests(&staging, ""),
        tree_digests(&w.path().join("release"), "")
    );
}
