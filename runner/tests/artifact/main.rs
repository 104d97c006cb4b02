//! Minirun artifacts in the runner: verified-only execution (`verify.rs`) and streamed ==
//! resident on every container of the artifacts built from the generated checkpoints
//! (`stream.rs`), and the DeepSeek V4 registry entry against the transformers fixture
//! (`deepseek.rs`). One published artifact per test binary: the generated DeepSeek V4 checkpoint
//! through fetch → repack → gate → stage → candidate-upload → promote on the in-process hub, then
//! pulled and verified as a consumer (`demo::run`, ~1 min); the hub is served again so a
//! test that mutates files verifies its own copy with `minirun-verify`'s code first. The K3- and
//! H3-style releases of `stream.rs` are small unpublished releases (fetch → repack) built per test.

#![allow(clippy::panic, clippy::unwrap_used)]

use crate::common;
mod deepseek;
use crate::deepseek_common;
mod experts256;
mod prompt_cache;
mod registry;
mod repo;
mod serve;
mod stream;
mod verify;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub const TARGET: &str = "minirun/DeepSeek-V4-Flash-minirun";

pub struct Fixture {
    /// The consumer's verified copy (never mutated by a test).
    pub consumer: PathBuf,
    /// The published commit.
    pub commit: String,
    /// The hub serving the published artifact.
    pub url: String,
    /// Scratch space for copies.
    pub scratch: PathBuf,
}

fn rt() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    })
}

pub fn fixture() -> &'static Fixture {
    static FX: OnceLock<Fixture> = OnceLock::new();
    FX.get_or_init(|| {
        // Statics are never dropped: a temp dir here would leak every run.
        let root = deepseek_common::fixture_dir("artifact");
        let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plans/deepseek-v4.toml");
        let work = root.join("work");
        let s = demo::run(&plan, &work, &mut |_| {}).unwrap();
        assert_eq!(s.verdict, pipeline::verify::Verdict::Verified);
        let server = rt()
            .block_on(hub::server::spawn(
                &s.hub_root,
                "127.0.0.1:0".parse().unwrap(),
                hub::server::ServerOptions::default(),
            ))
            .unwrap();
        let url = server.url();
        std::mem::forget(server);
        let scratch = root.join("scratch");
        std::fs::create_dir_all(&scratch).unwrap();
        Fixture {
            consumer: work.join("demo/consumer"),
            commit: s.commit,
            url,
            scratch,
        }
    })
}

/// Removes a test's copy (left behind when the test fails; cleared by the next run).
pub fn discard(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}

/// A copy of the consumer directory (`cp -a`: same bytes and mtimes, new inodes, so the copied
/// evidence no longer holds).
pub fn copy(name: &str) -> PathBuf {
    let fx = fixture();
    let d = fx.scratch.join(name);
    let st = Command::new("cp")
        .arg("-a")
        .arg(&fx.consumer)
        .arg(&d)
        .status()
        .unwrap();
    assert!(st.success());
    d
}

/// A copy verified afresh by `minirun-verify`'s code against the hub (its own evidence).
pub fn verified_copy(name: &str) -> PathBuf {
    let fx = fixture();
    let d = copy(name);
    std::fs::remove_dir_all(d.join(".minirun-evidence")).unwrap();
    let r = pipeline::verify::pull(
        Some(&fx.url),
        TARGET,
        &fx.commit,
        &d,
        false,
        &pipeline::verify::PullOpts::default(),
    )
    .unwrap();
    assert_eq!(
        r.verdict,
        pipeline::verify::Verdict::Verified,
        "{:?}",
        r.problems
    );
    d
}

/// The engine, or a visible skip (a failure under `MINIRUN_REQUIRE_ADAPTER=1`): the runner
/// tests' shared set-up.
pub use common::engine;
