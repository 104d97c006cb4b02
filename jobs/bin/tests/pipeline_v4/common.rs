//! Shared fixture: the generated V4 checkpoint imported once into a hub store, hub servers as
//! child processes, and helpers to run the stage binaries.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

pub const REPO: &str = "deepseek-ai/DeepSeek-V4-Flash";
pub const REV: &str = "60d8d70770c6776ff598c94bb586a859a38244f1";

pub struct Fixture {
    pub ckpt: PathBuf,
    pub hub_root: PathBuf,
    /// `plans/deepseek-v4.toml` as committed.
    pub plan: PathBuf,
    /// The same plan with 1 MiB chunks fetched one at a time (several chunks per shard, in
    /// sequence: a kill lands between proven chunks of one unit).
    pub plan_small_chunks: PathBuf,
}

pub fn cmd(bin: &str) -> Command {
    let path = match bin {
        "minirun-fetch" => env!("CARGO_BIN_EXE_minirun-fetch"),
        "minirun-repack" => env!("CARGO_BIN_EXE_minirun-repack"),
        "minirun-gate" => env!("CARGO_BIN_EXE_minirun-gate"),
        "minirun-hub" => env!("CARGO_BIN_EXE_minirun-hub"),
        "minirun-synth" => env!("CARGO_BIN_EXE_minirun-synth"),
        "minirun-plan" => env!("CARGO_BIN_EXE_minirun-plan"),
        "minirun-stage" => env!("CARGO_BIN_EXE_minirun-stage"),
        "minirun-candidate-upload" => env!("CARGO_BIN_EXE_minirun-candidate-upload"),
        "minirun-promote" => env!("CARGO_BIN_EXE_minirun-promote"),
        "minirun-verify" => env!("CARGO_BIN_EXE_minirun-verify"),
        other => panic!("unknown binary {other}"),
    };
    let mut c = Command::new(path);
    c.env_remove("HF_TOKEN").env_remove("HF_ENDPOINT");
    c
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fixture() -> &'static Fixture {
    static FX: OnceLock<Fixture> = OnceLock::new();
    FX.get_or_init(|| {
        let dir = crate::pipeline_v4::fixture_dir::fixture_dir("v4");
        let ckpt = dir.join("ckpt");
        let hub_root = dir.join("hub");
        let st = cmd("minirun-synth")
            .args(["deepseek-v4", "--out"])
            .arg(&ckpt)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        let st = cmd("minirun-hub")
            .args(["import", "--root"])
            .arg(&hub_root)
            .args(["--repo", REPO, "--revision", REV])
            .arg(&ckpt)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        let plan = repo_root().join("plans/deepseek-v4.toml");
        let text = std::fs::read_to_string(&plan)
            .unwrap()
            .replace("chunk_mib = 64", "chunk_mib = 1")
            .replace("concurrency = 8", "concurrency = 1");
        let small = dir.join("small/deepseek-v4.toml");
        std::fs::create_dir_all(small.parent().unwrap()).unwrap();
        std::fs::write(&small, text).unwrap();
        Fixture {
            ckpt,
            hub_root,
            plan,
            plan_small_chunks: small,
        }
    })
}

/// A `minirun-hub serve` child on a free loopback port.
pub struct Hub {
    child: Child,
    pub url: String,
    log: PathBuf,
    _logdir: tempfile::TempDir,
}

impl Hub {
    pub fn start(root: &Path, faults: &str) -> Hub {
        let logdir = tempfile::tempdir().unwrap();
        let log = logdir.path().join("hub.log");
        let mut child = cmd("minirun-hub")
            .args(["serve", "--init", "--root"])
            .arg(root)
            .args(["--addr", "127.0.0.1:0", "--faults", faults])
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("hub said {line:?}"))
            .to_owned();
        Hub {
            child,
            url,
            log,
            _logdir: logdir,
        }
    }

    /// The server's log so far (requests and injected faults, at info level).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Requests served so far (the server logs one line per request at info level).
    pub fn requests(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("GET ") || l.contains("HEAD ") || l.contains("POST "))
            .count()
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run a stage binary; (exit code, stdout).
pub fn stage(bin: &str, plan: &Path, work: &Path, endpoint: &str, extra: &[&str]) -> (i32, String) {
    let out = cmd(bin)
        .args([
            "--plan",
            plan.to_str().unwrap(),
            "--work-dir",
            work.to_str().unwrap(),
        ])
        .args(if bin == "minirun-fetch" {
            vec!["--endpoint", endpoint]
        } else {
            vec![]
        })
        .args(extra)
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if code != 0 && code != 2 && code != 77 && bin != "minirun-gate" {
        eprintln!(
            "{bin} exited {code}\nstdout:\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (code, stdout)
}

pub fn stage_ok(bin: &str, plan: &Path, work: &Path, endpoint: &str, extra: &[&str]) -> String {
    let (code, out) = stage(bin, plan, work, endpoint, extra);
    assert_eq!(code, 0, "{bin} {extra:?} failed:\n{out}");
    out
}

pub fn sha256(p: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(p).unwrap()))
}

/// Every fetched sparse copy equals the upstream shard byte for byte (V4 units cover whole shards).
pub fn assert_fetched_bytes_equal_upstream(fx: &Fixture, work: &Path, units: Option<&[&str]>) {
    let up = work.join("upstream");
    let mut n = 0;
    for unit in std::fs::read_dir(&up).unwrap() {
        let unit = unit.unwrap();
        let name = unit.file_name().to_string_lossy().into_owned();
        if name.starts_with('_') || units.is_some_and(|u| !u.contains(&name.as_str())) {
            continue;
        }
        for f in std::fs::read_dir(unit.path().join("main")).unwrap() {
            let f = f.unwrap();
            let orig = fx.ckpt.join(f.file_name());
            assert_eq!(
                std::fs::read(f.path()).unwrap(),
                std::fs::read(&orig).unwrap(),
                "{name}/{:?}",
                f.file_name()
            );
            n += 1;
        }
    }
    assert!(n > 0, "nothing fetched");
}

/// (size, mtime ns, inode) of every file under `root`.
pub fn tree_state(root: &Path) -> BTreeMap<String, (u64, i64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else if !e.file_name().to_string_lossy().ends_with(".lock") {
                let rel = e
                    .path()
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(
                    rel,
                    (m.len(), m.mtime() * 1_000_000_000 + m.mtime_nsec(), m.ino()),
                );
            }
        }
    }
    out
}

/// SHA-256 of every file of the release tree.
pub fn release_digests(work: &Path) -> BTreeMap<String, String> {
    let root = work.join("release");
    tree_state(&root)
        .into_keys()
        .map(|rel| {
            let d = sha256(&root.join(&rel));
            (rel, d)
        })
        .collect()
}

/// Release digests of one full repack, and of disjoint `--units` repacks run as parallel
/// processes on a second work directory followed by `--finalize` (both fetched from `endpoint`
/// first): the tests assert they are equal.
pub fn one_run_and_parallel_finalize(
    plan: &Path,
    endpoint: &str,
    selections: &[&str],
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    for w in [a.path(), b.path()] {
        stage_ok("minirun-fetch", plan, w, endpoint, &[]);
    }
    stage_ok("minirun-repack", plan, a.path(), endpoint, &[]);
    let mut kids: Vec<_> = selections
        .iter()
        .map(|sel| {
            cmd("minirun-repack")
                .args(["--plan", plan.to_str().unwrap(), "--work-dir"])
                .arg(b.path())
                .args(["--units", sel])
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for k in &mut kids {
        assert!(k.wait().unwrap().success());
    }
    stage_ok("minirun-repack", plan, b.path(), endpoint, &["--finalize"]);
    (release_digests(a.path()), release_digests(b.path()))
}
