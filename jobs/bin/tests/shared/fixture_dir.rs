//! A directory for data a test binary builds once and keeps in a `static`.
//!
//! Statics are never dropped, so a `tempfile::TempDir` held in one is never removed: every run
//! of the suite leaked its fixture (hundreds of MB each) into the system temp dir until the disk
//! filled. This gives a place under cargo's per-package temp dir instead, named by the test
//! binary, the fixture and this process; making it removes the copies left by earlier runs whose
//! process is gone, so the disk holds one copy per fixture however many runs, and two runs at
//! once do not share (or clear) each other's.

use std::path::{Path, PathBuf};

pub fn fixture_dir(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let stem = exe
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("tests")
        .to_owned();
    let parent = Path::new(env!("CARGO_TARGET_TMPDIR")).join(stem);
    std::fs::create_dir_all(&parent).expect("fixture parent dir");
    let prefix = format!("{name}.");
    for entry in std::fs::read_dir(&parent)
        .expect("read fixture parent dir")
        .flatten()
    {
        let file = entry.file_name();
        let Some(pid) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let dir = parent.join(format!("{name}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("fixture dir");
    dir
}
