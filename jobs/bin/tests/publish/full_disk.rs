//! A full disk (issue 52 item 4, docs/publish.md "A full disk"): on a real small filesystem (a
//! tmpfs, so CI needs root — it runs as root), fetch, repack, gate and stage each stopped by ENOSPC
//! exit 1 saying how much they need; once space is freed the next run resumes without losing
//! proven work or keeping a torn file, every journal stays readable, and the work directory ends
//! byte-identical to one that never ran out.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

/// Take all but `leave` bytes of the filesystem holding `dir` with one allocated file.
fn fill(dir: &Path, leave: u64) -> PathBuf {
    let filler = dir.join("filler");
    let free = pipeline::space::free_bytes(dir).unwrap();
    let len = free.saturating_sub(leave).max(4096);
    run_ok(
        Command::new("fallocate")
            .args(["-l", &len.to_string()])
            .arg(&filler),
    );
    filler
}

/// Run stage binary `bin` on the work dir `w`; (exit code, stderr).
fn step(bin: &str, w: &Path, endpoint: bool) -> (Option<i32>, String) {
    let mut c = Command::new(bin);
    c.arg("--plan").arg(plan_path()).arg("--work-dir").arg(w);
    if endpoint {
        c.args(["--endpoint", upstream_url()]);
    }
    let out = c.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every journal under `w/ledger` parses; no temporary file of an atomic write is left anywhere.
fn nothing_torn(w: &Path) {
    let mut stack = vec![w.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(
                !ledger::is_temp_name(&name),
                "torn temp file left: {}",
                p.display()
            );
            if p.is_dir() {
                stack.push(p);
            } else if name.ends_with(".json") && p.starts_with(w.join("ledger")) {
                ledger::Journal::load_file(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            }
        }
    }
}

/// One stage stopped by a full disk, then re-run with the space back.
fn full_then_resumed(bin: &str, w: &Path, endpoint: bool, leave: u64, says: &str) -> String {
    let filler = fill(w, leave);
    let (code, err) = step(bin, w, endpoint);
    assert_eq!(code, Some(1), "{bin} on a full disk: {err}");
    assert!(err.contains("No space left on device"), "{bin}: {err}");
    assert!(
        err.contains(&format!("hint: the disk holding `{}", w.display())) && err.contains(says),
        "{bin} does not say what it needs: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    std::fs::remove_file(filler).unwrap();
    nothing_torn(w);
    let (code, err) = step(bin, w, endpoint);
    assert_eq!(code, Some(0), "{bin} after space was freed: {err}");
    nothing_torn(w);
    err
}

#[test]
fn a_full_disk_stops_each_stage_cleanly_and_the_next_run_resumes() {
    let g = gated();
    let dir = tempfile::tempdir().unwrap();
    let Some(fs) = Tmpfs::at(dir.path(), "400m") else {
        return;
    };
    let w = fs.path();
    let plan = plan();
    // fetch: 71 MB to fetch, 20 MB free — the units done before the disk filled are kept.
    full_then_resumed(
        env!("CARGO_BIN_EXE_minirun-fetch"),
        w,
        true,
        20 << 20,
        &format!("fetch of {} pending unit(s) needs about ", plan.units.len()),
    );
    for u in &plan.units {
        let rel = Path::new("upstream").join(u.name.as_str());
        assert_eq!(
            tree_digests(&w.join(&rel), ""),
            tree_digests(&g.join(&rel), "")
        );
    }
    // repack: a 104 MB release, 30 MB free.
    full_then_resumed(
        env!("CARGO_BIN_EXE_minirun-repack"),
        w,
        false,
        30 << 20,
        &format!(
            "repack of {} pending unit(s) needs at least ",
            plan.units.len()
        ),
    );
    assert_eq!(
        tree_digests(&w.join("release"), ""),
        tree_digests(&g.join("release"), "")
    );
    // gate and stage write only reports, journals and links: nothing free at all.
    full_then_resumed(
        env!("CARGO_BIN_EXE_minirun-gate"),
        w,
        false,
        0,
        "writes only",
    );
    full_then_resumed(
        env!("CARGO_BIN_EXE_minirun-stage"),
        w,
        false,
        0,
        "stage writes only",
    );
    assert_eq!(
        tree_digests(&w.join("staging"), ""),
        tree_digests(&g.join("release"), "")
    );
}
