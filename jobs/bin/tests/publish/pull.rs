//! The consumer pull (docs/verify.md §5): parallel, hashed as written, resumable. A pull killed
//! (SIGKILL) at random instants resumes and ends byte-identical to the release, never
//! downloading again a file it had already verified and renamed into place.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pipeline::verify::{self, Verdict};

use super::support::*;

fn pull_cmd(url: &str, dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_minirun-verify"));
    c.args(["--endpoint", url, "pull", TARGET, "--dir"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// Every regular file under `dir` (relative paths), skipping the evidence directory.
fn files_under(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if rel.starts_with(".minirun-evidence") {
                continue;
            }
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => stack.push(p),
                Ok(m) if m.is_file() => {
                    out.insert(rel);
                }
                _ => {}
            }
        }
    }
    out
}

/// xorshift: the test's kill instants, reproducible from the seed it prints.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

#[test]
fn killed_pull_resumes_byte_identical_and_never_downloads_a_verified_file_again() {
    let (_w, h, _root, p) = published();
    let url = h.url();
    let resolve = format!("GET /{TARGET}/resolve/{}/", p.commit);
    // A clean pull: it hashes every file as it writes it.
    let clean = tempfile::tempdir().unwrap();
    let r = verify::pull(
        Some(&url),
        TARGET,
        "main",
        clean.path(),
        true,
        &verify::PullOpts::default(),
    )
    .unwrap();
    assert_eq!(r.verdict, Verdict::Verified, "{:?}", r.problems);
    assert_eq!(r.hashed_on_write, r.downloaded);
    assert_eq!(r.sha256_checked + r.git_sha1_checked, 0, "no second read");
    let n_files = r.downloaded;
    // Killed at random instants — after a random number (5 to 54) of file GETs of that run,
    // with up to 8 more in flight — then resumed. Instants counted in requests, not time, land
    // mid-pull however loaded the machine is (the release is ~650 files: 12 kills at most take
    // about half of them).
    let seed = 0x5eed_0000_0000_0000 ^ u64::from(std::process::id());
    eprintln!("kill instants seed {seed:#x}");
    let mut x = seed | 1;
    let d = tempfile::tempdir().unwrap();
    let mut kills = 0;
    let mut verified_at_kill: Vec<(usize, BTreeSet<String>)> = Vec::new();
    for _ in 0..12 {
        let target = 5 + usize::try_from(next(&mut x) % 50).unwrap();
        let start = h.request_log().len();
        let mut child = pull_cmd(&url, d.path()).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(300);
        let finished = loop {
            if child.try_wait().unwrap().is_some() {
                break true;
            }
            let gets = h.request_log()[start..]
                .iter()
                .filter(|l| l.starts_with(&resolve))
                .count();
            if gets >= target || Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        if finished {
            break;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
        // Files under their final names were renamed there only after their digest agreed.
        let done: BTreeSet<String> = files_under(d.path())
            .into_iter()
            .filter(|f| !f.ends_with(".part"))
            .collect();
        verified_at_kill.push((h.request_log().len(), done));
    }
    assert!(
        kills >= 8,
        "only {kills} kills landed before a pull finished"
    );
    let st = pull_cmd(&url, d.path()).status().unwrap();
    assert_eq!(st.code(), Some(0));
    // Byte-identical to the clean pull (and so to the release), no part file left.
    let got = files_under(d.path());
    assert_eq!(got, files_under(clean.path()));
    assert_eq!(got.len(), n_files);
    for f in &got {
        assert_eq!(
            std::fs::read(d.path().join(f)).unwrap(),
            std::fs::read(clean.path().join(f)).unwrap(),
            "{f}"
        );
    }
    assert!(!verify::pull_journal_path(d.path(), &p.commit).exists());
    // No file verified before a kill was requested again after it.
    let log = h.request_log();
    for (at, done) in &verified_at_kill {
        let again: Vec<&String> = log[*at..]
            .iter()
            .filter(|l| {
                l.strip_prefix(&resolve)
                    .is_some_and(|path| done.contains(path))
            })
            .collect();
        assert!(again.is_empty(), "downloaded again: {again:?}");
    }
    // And the evidence holds: a check reads nothing.
    let r = verify::pull(
        Some(&url),
        TARGET,
        &p.commit,
        d.path(),
        false,
        &verify::PullOpts::default(),
    )
    .unwrap();
    assert_eq!(r.verdict, Verdict::Verified);
    assert_eq!(r.evidence_reused, n_files);
}

/// `minirun-verify pull R` without `--dir` pulls into the Hugging Face cache, where
/// `minirun-run --repo` and `--list` look: `$HF_HOME/hub/models--O--N/snapshots/COMMIT`, as regular
/// files with evidence, and `refs/main`; `--list` then says verified and chat-capable here.
#[test]
fn pull_without_a_dir_fills_the_hugging_face_cache() {
    let (_w, h, _root, p) = published();
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_minirun-verify"))
        .args(["--endpoint", &h.url(), "pull", TARGET])
        .env("HF_HOME", home.path())
        .env_remove("HF_HUB_CACHE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let folder = home
        .path()
        .join("hub")
        .join(format!("models--{}", TARGET.replace('/', "--")));
    let snap = folder.join("snapshots").join(&p.commit);
    assert!(
        err.contains(&format!("pulled into `{}`", snap.display())),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(folder.join("refs/main")).unwrap(),
        p.commit
    );
    assert!(snap.join(".minirun-evidence").is_dir());
    assert!(!files_under(&snap).is_empty());
    let owner = TARGET.split('/').next().unwrap();
    let listed = Command::new(env!("CARGO_BIN_EXE_minirun-verify"))
        .args(["--endpoint", &h.url(), "--list", owner, "--json"])
        .env("HF_HOME", home.path())
        .env_remove("HF_HUB_CACHE")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let row = v["repos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["repo"] == TARGET)
        .unwrap();
    assert_eq!(row["verified_here"]["ok"], true, "{row}");
    assert_eq!(row["verified_here"]["detail"], p.commit.as_str(), "{row}");
    // the binary asks the runner's registry: the V4 family is registered
    assert_eq!(row["chat_here"]["ok"], true, "{row}");
    assert_eq!(row["chat_here"]["detail"], "deepseek-v4", "{row}");
}
