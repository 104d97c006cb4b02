//! Integration tests of the ledger: atomic replace under simulated crashes, chunk-log resume,
//! done-ness from journal + filesystem identity, and locking.

#![allow(clippy::unwrap_used, clippy::panic)]
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;

use ledger::{
    ChunkLog, DoneCheck, FileIdentity, FileRecord, Journal, LedgerError, NotDone, Status,
    CHUNK_LOG_HEADER, TEMP_MARKER,
};
use sha2::{Digest, Sha256};

fn done_journal(ledger_dir: &Path, root: &Path) -> Journal {
    fs::create_dir_all(root.join("layers00")).unwrap();
    fs::write(root.join("layers00/a.bin"), b"alpha bytes").unwrap();
    fs::write(root.join("layers00/b.bin"), vec![7u8; 4096]).unwrap();
    let mut j = Journal::new("repack", "layers00").unwrap();
    j.record_input(
        "model-00001-of-00046.safetensors",
        11,
        &ledger::sha256_hex(b"x"),
    )
    .unwrap();
    j.record_output(root, "layers00/a.bin").unwrap();
    j.record_output(root, "layers00/b.bin").unwrap();
    j.mark_done();
    j.store(ledger_dir).unwrap();
    j
}

#[test]
fn journal_round_trips_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger_dir, root) = (dir.path().join("ledger"), dir.path().join("release"));
    let j = done_journal(&ledger_dir, &root);
    let path = Journal::path(&ledger_dir, "repack", "layers00").unwrap();
    let bytes = fs::read(&path).unwrap();
    assert!(bytes.starts_with(b"{\n  \"v\": 1,\n  \"stage\": \"repack\",\n  \"unit\": \"layers00\",\n  \"status\": \"done\",\n"));
    assert!(bytes.ends_with(b"}\n"));
    let back = Journal::load(&ledger_dir, "repack", "layers00")
        .unwrap()
        .unwrap();
    assert_eq!(back, j);
    assert_eq!(back.to_bytes(), bytes);
}

#[test]
fn absent_journal_is_none() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        Journal::load(dir.path(), "fetch", "layers00").unwrap(),
        None
    );
}

/// A crash before the rename leaves a temp file next to the journal: truncated, garbage, or a
/// complete newer journal. None of them ever becomes the journal, and the next store still works.
#[test]
fn crash_leftover_temp_files_never_become_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger_dir, root) = (dir.path().join("ledger"), dir.path().join("release"));
    let j = done_journal(&ledger_dir, &root);
    let path = Journal::path(&ledger_dir, "repack", "layers00").unwrap();
    let good = fs::read(&path).unwrap();
    let stage_dir = ledger_dir.join("repack");
    let truncated = &good[..good.len() / 2];
    fs::write(
        stage_dir.join(format!(".layers00.json{TEMP_MARKER}1-0")),
        truncated,
    )
    .unwrap();
    fs::write(
        stage_dir.join(format!(
            ".layers00.json{TEMP_MARKER}{}-0",
            std::process::id()
        )),
        b"\x00\xffgarbage",
    )
    .unwrap();
    let mut failed = j.clone();
    failed.mark_failed("a newer state that was never renamed into place");
    fs::write(
        stage_dir.join(format!(".layers00.json{TEMP_MARKER}2-0")),
        failed.to_bytes(),
    )
    .unwrap();
    let loaded = Journal::load(&ledger_dir, "repack", "layers00")
        .unwrap()
        .unwrap();
    assert_eq!(loaded, j);
    assert!(loaded.is_done(&root, false).unwrap().is_done());
    // The next atomic store skips the occupied temp names and replaces the journal.
    let mut next = j.clone();
    next.extra
        .insert("note".into(), serde_json::json!("second write"));
    next.store(&ledger_dir).unwrap();
    assert_eq!(
        Journal::load(&ledger_dir, "repack", "layers00").unwrap(),
        Some(next)
    );
}

#[test]
fn garbage_journal_is_a_clear_error_never_absent() {
    let dir = tempfile::tempdir().unwrap();
    let path = Journal::path(dir.path(), "fetch", "layers00").unwrap();
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let good = Journal::new("fetch", "layers00").unwrap().to_bytes();
    let cases: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"\x00\x01\x02".to_vec(),
        good[..good.len() - 5].to_vec(),
        br#"{"v":1}"#.to_vec(),
        br#"[1,2,3]"#.to_vec(),
        br#"{"v":"1","stage":"fetch","unit":"layers00","status":"done"}"#.to_vec(),
        br#"{"v":1,"stage":"fetch","unit":"layers00","status":"finished"}"#.to_vec(),
        br#"{"v":1,"stage":"fetch","unit":"layers00","status":"done","surprise":1}"#.to_vec(),
        br#"{"v":1,"stage":"fetch","unit":"layers00","status":"done","outputs":{"../x":{"size":1,"sha256":"00"}}}"#.to_vec(),
        format!(
            r#"{{"v":1,"stage":"fetch","unit":"layers00","status":"done","outputs":{{"a":{{"size":1,"sha256":"{}"}}}}}}"#,
            "A".repeat(64)
        )
        .into_bytes(),
    ];
    for bytes in cases {
        fs::write(&path, &bytes).unwrap();
        let err = Journal::load(dir.path(), "fetch", "layers00").unwrap_err();
        assert!(
            matches!(err, LedgerError::CorruptJournal { .. }),
            "{:?} -> {err:?}",
            String::from_utf8_lossy(&bytes)
        );
        let msg = err.to_string();
        assert!(
            msg.contains("layers00.json") && msg.contains("delete it"),
            "{msg}"
        );
    }
    fs::write(&path, br#"{"v":2,"stage":"fetch"}"#).unwrap();
    assert!(matches!(
        Journal::load(dir.path(), "fetch", "layers00").unwrap_err(),
        LedgerError::UnsupportedVersion { found: 2, .. }
    ));
    // A journal copied to another unit's name is refused, not silently adopted.
    fs::write(&path, Journal::new("fetch", "layers01").unwrap().to_bytes()).unwrap();
    assert!(matches!(
        Journal::load(dir.path(), "fetch", "layers00").unwrap_err(),
        LedgerError::WrongJournal { field: "unit", .. }
    ));
}

/// A reclaimed journal is done without a file on disk, keeps its records and says why, survives
/// a store and load byte for byte, and only a done journal can be reclaimed.
#[test]
fn a_reclaimed_journal_is_done_with_its_outputs_gone() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger_dir, root) = (dir.path().join("ledger"), dir.path().join("release"));
    let mut j = done_journal(&ledger_dir, &root);
    let mut fresh = Journal::new("repack", "layers00").unwrap();
    assert!(matches!(
        fresh.mark_reclaimed(serde_json::json!({})),
        Err(LedgerError::NotReclaimable { .. })
    ));
    let outputs = j.outputs.clone();
    j.mark_reclaimed(serde_json::json!({"hub": "objects confirmed"}))
        .unwrap();
    j.store(&ledger_dir).unwrap();
    fs::remove_dir_all(&root).unwrap();
    let back = Journal::load(&ledger_dir, "repack", "layers00")
        .unwrap()
        .unwrap();
    assert_eq!(back, j);
    assert_eq!(back.status, Status::Reclaimed);
    assert_eq!(back.outputs, outputs, "the records stay");
    assert_eq!(
        back.extra[ledger::RECLAIMED_KEY]["hub"],
        "objects confirmed"
    );
    for verify in [false, true] {
        let check = back.is_done(&root, verify).unwrap();
        assert_eq!(check, DoneCheck::Reclaimed);
        assert!(check.is_done());
    }
    let mut again = back.clone();
    assert_eq!(
        again.accept_by_content(&root).unwrap().check,
        DoneCheck::Reclaimed
    );
    assert!(
        again.mark_reclaimed(serde_json::json!({})).is_err(),
        "reclaimed twice"
    );
    let text = String::from_utf8(back.to_bytes()).unwrap();
    assert!(text.contains("\"status\": \"reclaimed\""), "{text}");
}

#[test]
fn done_requires_status_and_matching_files() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger_dir, root) = (dir.path().join("ledger"), dir.path().join("release"));
    let mut j = done_journal(&ledger_dir, &root);
    assert_eq!(j.is_done(&root, false).unwrap(), DoneCheck::Done);
    assert_eq!(j.is_done(&root, true).unwrap(), DoneCheck::Done);

    let mut in_progress = j.clone();
    in_progress.status = Status::InProgress;
    assert_eq!(
        in_progress.is_done(&root, false).unwrap(),
        DoneCheck::NotDone(vec![NotDone::Status {
            status: Status::InProgress
        }])
    );

    // Same-size replacement with the mtime restored (`touch -r`): caught by identity, and a full
    // verification names the digest.
    let a = root.join("layers00/a.bin");
    let before = FileIdentity::capture(&a).unwrap().unwrap();
    let tmp = root.join("layers00/a.new");
    fs::write(&tmp, b"ALPHA BYTES").unwrap();
    fs::rename(&tmp, &a).unwrap();
    let f = fs::File::options().write(true).open(&a).unwrap();
    f.set_times(fs::FileTimes::new().set_modified(
        std::time::UNIX_EPOCH + std::time::Duration::from_nanos(before.mtime_ns as u64),
    ))
    .unwrap();
    drop(f);
    let normal = j.is_done(&root, false).unwrap();
    match &normal {
        DoneCheck::NotDone(r) => {
            assert_eq!(r.len(), 1);
            assert!(
                matches!(&r[0], NotDone::IdentityChanged { path, field: "ino" } if path == "layers00/a.bin"),
                "{r:?}"
            );
        }
        other => panic!("a replaced file must not be done: {other:?}"),
    }
    let full = j.is_done(&root, true).unwrap();
    assert!(
        matches!(&full, DoneCheck::NotDone(r) if matches!(&r[0], NotDone::DigestChanged { path, .. } if path == "layers00/a.bin")),
        "{full:?}"
    );
    assert!(matches!(
        j.rehash_output(&root, "layers00/a.bin").unwrap(),
        Some(NotDone::DigestChanged { .. })
    ));

    // Put the original content back as a new inode: identity differs, content is the same, and
    // rehash_output refreshes the identity so the next normal run is done again.
    fs::write(&tmp, b"alpha bytes").unwrap();
    fs::rename(&tmp, &a).unwrap();
    assert!(!j.is_done(&root, false).unwrap().is_done());
    assert!(j.is_done(&root, true).unwrap().is_done());
    assert_eq!(j.rehash_output(&root, "layers00/a.bin").unwrap(), None);
    assert!(j.is_done(&root, false).unwrap().is_done());

    // accept_by_content: a new object with the same bytes is re-hashed and accepted (its identity
    // refreshed); other bytes of the same size are not; a size change is answered unread.
    fs::write(&tmp, b"alpha bytes").unwrap();
    fs::rename(&tmp, &a).unwrap();
    let by = j.accept_by_content(&root).unwrap();
    assert_eq!(
        (by.check.is_done(), by.rehashed, by.bytes),
        (true, 1, 11),
        "{by:?}"
    );
    assert!(j.is_done(&root, false).unwrap().is_done());
    fs::write(&tmp, b"ALPHA BYTES").unwrap();
    fs::rename(&tmp, &a).unwrap();
    let by = j.accept_by_content(&root).unwrap();
    assert!(
        matches!(&by.check, DoneCheck::NotDone(r) if matches!(&r[0], NotDone::DigestChanged { .. })),
        "{by:?}"
    );
    fs::write(&a, b"alpha bytes!").unwrap();
    let by = j.accept_by_content(&root).unwrap();
    assert!(
        matches!(&by.check, DoneCheck::NotDone(r) if matches!(&r[0], NotDone::SizeChanged { .. })),
        "{by:?}"
    );
    assert_eq!((by.rehashed, by.bytes), (0, 0));
    fs::write(&a, b"alpha bytes").unwrap();
    assert!(j.accept_by_content(&root).unwrap().check.is_done());

    // Every differing file is reported, not only the first.
    fs::remove_file(root.join("layers00/a.bin")).unwrap();
    fs::write(root.join("layers00/b.bin"), vec![7u8; 4097]).unwrap();
    assert_eq!(
        j.is_done(&root, false).unwrap(),
        DoneCheck::NotDone(vec![
            NotDone::Missing {
                path: "layers00/a.bin".into()
            },
            NotDone::SizeChanged {
                path: "layers00/b.bin".into(),
                recorded: 4096,
                found: 4097
            },
        ])
    );
    // A symbolic link where a file was is not the file.
    fs::remove_file(root.join("layers00/b.bin")).unwrap();
    std::os::unix::fs::symlink("a.bin", root.join("layers00/b.bin")).unwrap();
    let r = j.is_done(&root, true).unwrap();
    assert!(
        matches!(&r, DoneCheck::NotDone(v) if v.contains(&NotDone::NotRegularFile { path: "layers00/b.bin".into() })),
        "{r:?}"
    );
}

/// A hard link moves the inode's ctime: a reader that hashed the file since (staging) may hand
/// the journal the identity it proved; other bytes or another size are never accepted.
#[test]
fn refresh_identity_takes_only_a_proven_identity() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger_dir, root) = (dir.path().join("ledger"), dir.path().join("release"));
    let mut j = done_journal(&ledger_dir, &root);
    let a = root.join("layers00/a.bin");
    fs::hard_link(&a, dir.path().join("staged-a.bin")).unwrap();
    let reasons = match j.is_done(&root, false).unwrap() {
        DoneCheck::NotDone(r) => r,
        other => panic!("a link must move the identity (ctime): {other:?}"),
    };
    assert!(
        matches!(&reasons[..], [NotDone::IdentityChanged { path, field: "ctime_ns" }] if path == "layers00/a.bin"),
        "{reasons:?}"
    );
    let proven = FileRecord::hash(&a).unwrap();
    let mut other = proven.clone();
    other.sha256 = ledger::sha256_hex(b"other");
    assert!(!j.refresh_identity("layers00/a.bin", &other));
    assert!(!j.refresh_identity("layers00/missing.bin", &proven));
    assert!(!j.is_done(&root, false).unwrap().is_done());
    assert!(j.refresh_identity("layers00/a.bin", &proven));
    assert!(
        !j.refresh_identity("layers00/a.bin", &proven),
        "already current"
    );
    assert_eq!(j.is_done(&root, false).unwrap(), DoneCheck::Done);
}

#[test]
fn input_mismatch_names_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let j = done_journal(&dir.path().join("l"), &dir.path().join("r"));
    let mut expected = j.inputs.clone();
    assert_eq!(j.input_mismatch(&expected), None);
    expected
        .get_mut("model-00001-of-00046.safetensors")
        .unwrap()
        .size = 12;
    assert_eq!(
        j.input_mismatch(&expected).as_deref(),
        Some("model-00001-of-00046.safetensors")
    );
}

fn sha(b: &[u8]) -> [u8; 32] {
    Sha256::digest(b).into()
}

/// Chunks written concurrently and out of order; a crash leaves an unrecorded chunk, a torn log
/// record, and a corrupted recorded chunk. Resume keeps exactly the proven set and truncates to the
/// end of the last proven chunk.
#[test]
fn chunk_log_truncates_to_the_proven_set() {
    let dir = tempfile::tempdir().unwrap();
    let data_path = dir.path().join("model.safetensors.part");
    let log_path = dir.path().join("model.safetensors.chunks");
    let content: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let data = fs::File::options()
        .create(true)
        .read(true)
        .write(true)
        .truncate(false)
        .open(&data_path)
        .unwrap();
    {
        let log = std::sync::Arc::new(ChunkLog::open(&log_path).unwrap());
        std::thread::scope(|s| {
            for (off, len) in [(4000u64, 1000u64), (0, 1000), (1000, 1000), (6000, 1000)] {
                let (log, data, content, data_path) = (log.clone(), &data, &content, &data_path);
                s.spawn(move || {
                    let bytes = &content[off as usize..(off + len) as usize];
                    log.write_chunk(data, data_path, off, bytes).unwrap();
                });
            }
        });
        assert_eq!(log.proven_ranges(), vec![0..2000, 4000..5000, 6000..7000]);
        assert_eq!(
            log.missing(10_000),
            vec![2000..4000, 5000..6000, 7000..10_000]
        );
    }
    // Crash: chunk 8000..9000 written but never recorded; a torn record at the log's tail.
    data.write_all_at(&content[8000..9000], 8000).unwrap();
    let mut log_bytes = fs::read(&log_path).unwrap();
    log_bytes.extend_from_slice(b"0000000000001f40 00000000000003e8 deadbe");
    fs::write(&log_path, &log_bytes).unwrap();
    // Media corruption inside a recorded chunk.
    data.write_all_at(b"X", 1500).unwrap();

    let log = ChunkLog::open(&log_path).unwrap();
    assert_eq!(log.records().len(), 4, "the torn record is cut off");
    assert_eq!(
        fs::metadata(&log_path).unwrap().len(),
        (CHUNK_LOG_HEADER.len() + 4 * 108) as u64
    );
    let report = log.verify_and_truncate(&data_path).unwrap();
    assert_eq!(report.len_before, 9000);
    assert_eq!(report.len_after, 7000);
    assert_eq!(
        report.kept.iter().map(|r| r.range()).collect::<Vec<_>>(),
        vec![0..1000, 4000..5000, 6000..7000]
    );
    assert_eq!(report.dropped.len(), 1);
    assert_eq!(report.dropped[0].range(), 1000..2000);
    assert_eq!(fs::metadata(&data_path).unwrap().len(), 7000);
    assert_eq!(
        log.missing(10_000),
        vec![1000..4000, 5000..6000, 7000..10_000]
    );
    // The rewritten log holds exactly the kept records, and reopening agrees.
    drop(log);
    let log = ChunkLog::open(&log_path).unwrap();
    let mut recs = log.records();
    recs.sort();
    assert_eq!(recs, report.kept);
    // Finish the file; a second resume keeps everything and truncates nothing.
    for r in log.missing(10_000) {
        log.write_chunk(
            &data,
            &data_path,
            r.start,
            &content[r.start as usize..r.end as usize],
        )
        .unwrap();
    }
    let again = log.verify_and_truncate(&data_path).unwrap();
    assert!(again.dropped.is_empty());
    assert_eq!(again.len_after, 10_000);
    assert_eq!(fs::read(&data_path).unwrap(), content);
    assert_eq!(log.missing(10_000), vec![]);
}

#[test]
fn chunk_log_refuses_bad_chunks_and_foreign_files() {
    let dir = tempfile::tempdir().unwrap();
    let log = ChunkLog::open(&dir.path().join("c")).unwrap();
    assert!(matches!(
        log.record(0, 0, sha(b"")),
        Err(LedgerError::BadChunk { .. })
    ));
    assert!(log.record(u64::MAX, 2, sha(b"")).is_err());
    fs::write(dir.path().join("foreign"), b"not a chunk log\n").unwrap();
    let err = ChunkLog::open(&dir.path().join("foreign")).unwrap_err();
    assert!(matches!(err, LedgerError::BadChunkLog { .. }), "{err:?}");
    // A missing data file drops every record.
    log.record(0, 3, sha(b"abc")).unwrap();
    let r = log.verify_and_truncate(&dir.path().join("absent")).unwrap();
    assert_eq!((r.kept.len(), r.dropped.len()), (0, 1));
    assert!(log.records().is_empty());
}

/// A record with a valid CRC but non-canonical spelling, or flipped bits, ends the proven log.
#[test]
fn chunk_log_stops_at_the_first_bad_record() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c");
    let log = ChunkLog::open(&p).unwrap();
    for i in 0..3u64 {
        log.record(i * 10, 10, sha(&[i as u8])).unwrap();
    }
    drop(log);
    let mut bytes = fs::read(&p).unwrap();
    let second = CHUNK_LOG_HEADER.len() + 108 + 40;
    bytes[second] ^= 1;
    fs::write(&p, &bytes).unwrap();
    let log = ChunkLog::open(&p).unwrap();
    assert_eq!(log.records().len(), 1);
}

/// Real crash simulation: a child process (this test binary, re-executed) replaces the journal
/// in a tight loop and is killed with SIGKILL at varying moments. After every kill the journal
/// is a complete journal (some version the child stored), never torn, never garbage.
#[test]
fn sigkill_during_atomic_replace_never_tears_the_journal() {
    if let Some(dir) = std::env::var_os("MINIRUN_LEDGER_CRASH_CHILD") {
        let dir = std::path::PathBuf::from(dir);
        let mut j = Journal::new("fetch", "layers00").unwrap();
        for n in 0u64.. {
            // Grow the document so a write spans several pages.
            j.extra.insert(
                format!("k{:06}", n % 2000),
                serde_json::json!("x".repeat(64)),
            );
            j.extra.insert("n".into(), serde_json::json!(n));
            j.store(&dir).unwrap();
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut last_n = None;
    for round in 0..8u64 {
        let mut child = std::process::Command::new(&exe)
            .args([
                "--exact",
                "it::sigkill_during_atomic_replace_never_tears_the_journal",
                "--nocapture",
            ])
            .env("MINIRUN_LEDGER_CRASH_CHILD", dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30 + round * 17));
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        match Journal::load(dir.path(), "fetch", "layers00") {
            Ok(Some(j)) => last_n = Some(j.extra["n"].clone()),
            Ok(None) => {} // killed before the first rename
            Err(e) => panic!("round {round}: torn journal: {e}"),
        }
    }
    assert!(last_n.is_some(), "the child never stored a journal");
}
