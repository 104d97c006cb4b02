//! Shared set-up of the publication tests: the gated V4 release (built once per test binary),
//! fresh work directories and target hubs, and hub-side views.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use hub::client::{CommitOperation, CommitRequest, HubClient};
use hub::protocol::RepoId;
use hub::server::{ServerHandle, ServerOptions};
use pipeline::candidate::{self, CandidateOpts};
use pipeline::plan::Plan;
use pipeline::promote::PromoteOpts;
use pipeline::stage::{self, StageOpts};

pub const UPSTREAM: &str = "deepseek-ai/DeepSeek-V4-Flash";
pub const REVISION: &str = "60d8d70770c6776ff598c94bb586a859a38244f1";
pub const TARGET: &str = "minirun/DeepSeek-V4-Flash-minirun";
/// Every target hub requires this token for writes; the stages get it from `HF_TOKEN` only.
pub const TOKEN: &str = "hf_publish_test_token";

pub fn rt() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    })
}

pub fn plan_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plans/deepseek-v4.toml")
}

pub fn plan() -> Plan {
    Plan::load(&plan_path()).unwrap()
}

pub fn run_ok(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The gated work directory shared by every test (never staged itself).
pub fn gated() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // Set before any test reaches a hub client: every test thread is blocked on this
        // `OnceLock` (or has not started) while it runs.
        std::env::set_var("HF_TOKEN", TOKEN);
        let root = crate::fixture_dir::fixture_dir("gated");
        let ckpt = root.join("ckpt");
        let hub_root = root.join("upstream-hub");
        run_ok(
            Command::new(env!("CARGO_BIN_EXE_minirun-synth"))
                .args(["deepseek-v4", "--out"])
                .arg(&ckpt),
        );
        run_ok(
            Command::new(env!("CARGO_BIN_EXE_minirun-hub"))
                .args(["import", "--root"])
                .arg(&hub_root)
                .args(["--repo", UPSTREAM, "--revision", REVISION])
                .arg(&ckpt),
        );
        let server = rt()
            .block_on(hub::server::spawn(
                &hub_root,
                "127.0.0.1:0".parse().unwrap(),
                ServerOptions::default(),
            ))
            .unwrap();
        let work = root.join("gated");
        for bin in [
            env!("CARGO_BIN_EXE_minirun-fetch"),
            env!("CARGO_BIN_EXE_minirun-repack"),
            env!("CARGO_BIN_EXE_minirun-gate"),
        ] {
            let mut c = Command::new(bin);
            c.arg("--plan")
                .arg(plan_path())
                .arg("--work-dir")
                .arg(&work);
            // only the hub stages take an endpoint
            if bin.ends_with("minirun-fetch") {
                c.args(["--endpoint", &server.url()]);
            }
            run_ok(&mut c);
        }
        let _ = UPSTREAM_URL.set(server.url());
        let _ = UPSTREAM_ROOT.set(hub_root);
        std::mem::forget(server);
        work
    })
}

static UPSTREAM_URL: OnceLock<String> = OnceLock::new();
static UPSTREAM_ROOT: OnceLock<PathBuf> = OnceLock::new();

/// The store of the upstream hub (the generated checkpoint at the plan's pin), for a test that
/// serves it with its own faults.
pub fn upstream_root() -> &'static Path {
    gated();
    UPSTREAM_ROOT
        .get()
        .map(PathBuf::as_path)
        .unwrap_or(Path::new(""))
}

/// The upstream hub serving the generated checkpoint (alive for the whole test binary).
pub fn upstream_url() -> &'static str {
    gated();
    UPSTREAM_URL.get().map(String::as_str).unwrap_or("")
}

/// A fresh work directory holding a copy of the gated release.
pub fn work() -> tempfile::TempDir {
    let g = gated();
    let w = tempfile::tempdir().unwrap();
    run_ok(
        Command::new("cp")
            .arg("-a")
            .arg(g.join("release"))
            .arg(w.path().join("release")),
    );
    run_ok(
        Command::new("cp")
            .arg("-a")
            .arg(g.join("reports"))
            .arg(w.path().join("reports")),
    );
    std::fs::create_dir_all(w.path().join("ledger")).unwrap();
    w
}

/// A fresh, empty target hub that refuses writes without [`TOKEN`].
pub fn hub() -> (ServerHandle, tempfile::TempDir) {
    hub_with(ServerOptions {
        token: Some(TOKEN.into()),
        ..ServerOptions::default()
    })
}

/// A fresh, empty hub with `opts`.
pub fn hub_with(opts: ServerOptions) -> (ServerHandle, tempfile::TempDir) {
    let root = tempfile::tempdir().unwrap();
    let h = rt()
        .block_on(hub::server::spawn(
            root.path(),
            "127.0.0.1:0".parse().unwrap(),
            opts,
        ))
        .unwrap();
    (h, root)
}

/// The release staged, uploaded and promoted to a fresh target hub: the work directory, the hub
/// (and its root, kept alive) and the promotion.
pub fn published() -> (
    tempfile::TempDir,
    ServerHandle,
    tempfile::TempDir,
    pipeline::promote::PromoteReport,
) {
    let plan = plan();
    let w = work();
    let (h, root) = hub();
    let url = h.url();
    stage::run(&plan, &stage_opts(w.path())).unwrap();
    candidate::run(&plan, &cand_opts(w.path(), &url)).unwrap();
    let p = pipeline::promote::run(&plan, &promote_opts(w.path(), &url)).unwrap();
    (w, h, root, p)
}

pub fn stage_opts(w: &Path) -> StageOpts {
    StageOpts {
        work_dir: Some(w.to_path_buf()),
        ..StageOpts::default()
    }
}

pub fn cand_opts(w: &Path, url: &str) -> CandidateOpts {
    CandidateOpts {
        work_dir: Some(w.to_path_buf()),
        endpoint: Some(url.to_owned()),
        ..CandidateOpts::default()
    }
}

pub fn promote_opts(w: &Path, url: &str) -> PromoteOpts {
    PromoteOpts {
        work_dir: Some(w.to_path_buf()),
        endpoint: Some(url.to_owned()),
        ..PromoteOpts::default()
    }
}

pub fn client(url: &str) -> HubClient {
    HubClient::new(url, Some(hub::client::Token::new(TOKEN))).unwrap()
}

pub fn repo() -> RepoId {
    RepoId::model(TARGET).unwrap()
}

pub fn head(url: &str) -> String {
    let refs = rt()
        .block_on(client(url).list_refs(&repo(), false))
        .unwrap();
    refs.branches
        .iter()
        .find(|b| b.name == "main")
        .unwrap()
        .target_commit
        .clone()
}

pub fn inventory(url: &str, rev: &str) -> candidate::Inventory {
    let tree = rt()
        .block_on(client(url).list_tree(&repo(), rev, None, true))
        .unwrap();
    candidate::record::tree_inventory(&tree)
}

/// Commit `ops` to main from outside the pipeline (another publisher).
pub fn foreign_commit(url: &str, ops: Vec<CommitOperation>) -> String {
    let url = url.to_owned();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let req = CommitRequest {
            summary: "someone else".into(),
            operations: ops,
            ..CommitRequest::default()
        };
        rt.block_on(client(&url).commit(&repo(), "main", &req))
            .unwrap()
            .commit_oid
    })
    .join()
    .unwrap()
}

/// Every file under `dir` with its size and ns mtime (to prove nothing was written).
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, u64, i128)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                let t = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
                out.push((e.path(), m.len(), t));
            }
        }
    }
    out.sort();
    out
}

/// Rebuild the release in `w` with other bytes: `global00/plain.bin` (the embedding, head and
/// norms) replaced by a same-size file and its manifest entry updated to match.
pub fn rebuild_release_payload(w: &Path) {
    let payload = "global00/plain.bin";
    let unit_dir = w.join("release/global00");
    replace_same_size(&w.join("release").join(payload));
    let (_, sha) = ledger::sha256_file(&w.join("release").join(payload)).unwrap();
    let mut m = artifact::manifest::Manifest::read(&unit_dir).unwrap();
    for e in &mut m.files {
        if e.path == "plain.bin" {
            e.sha256 = sha.clone();
        }
    }
    let mpath = unit_dir.join("manifest.json");
    std::fs::remove_file(&mpath).unwrap();
    std::fs::write(&mpath, m.to_bytes()).unwrap();
}

/// A work directory holding a different release of the same plan
/// ([`rebuild_release_payload`]), staged.
pub fn other_release() -> tempfile::TempDir {
    let w = work();
    rebuild_release_payload(w.path());
    stage::run(&plan(), &stage_opts(w.path())).unwrap();
    w
}

/// Replace `path` by a same-size file of other bytes, its mtime restored (`touch -r`).
pub fn replace_same_size(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let b = bytes.first_mut().unwrap();
    *b = b.wrapping_add(1);
    let tmp = path.with_extension("swap");
    std::fs::write(&tmp, &bytes).unwrap();
    run_ok(Command::new("touch").arg("-r").arg(path).arg(&tmp));
    std::fs::rename(&tmp, path).unwrap();
}

/// The files under `dir` with their SHA-256, by relative path (`skip`: a top folder left out).
pub fn tree_digests(dir: &Path, skip: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if rel == skip {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(rel, ledger::sha256_hex(&std::fs::read(&p).unwrap()));
            }
        }
    }
    out
}

/// A tmpfs mounted at a directory (created if missing), unmounted when dropped. CI runs as root
/// (docs/testing.md): there a refused mount fails the test; elsewhere `None` (skip it).
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    pub fn at(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            assert!(
                std::env::var_os("CI").is_none(),
                "cannot mount a tmpfs under CI"
            );
            eprintln!("skipped: mounting a tmpfs needs root");
            return None;
        }
        Some(Tmpfs(dir.to_path_buf()))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}
