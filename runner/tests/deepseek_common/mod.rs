//! Shared fixture of the DeepSeek V4 runner tests: the default tiny V4 checkpoint
//! (`minirun-synth deepseek-v4`, seed 0, scale 1) published to a local in-process hub and taken
//! through the real `fetch` → `repack` stages of `plans/deepseek-v4.toml`, once per test binary;
//! the tests read the resulting release directory.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub struct Release {
    _dir: tempfile::TempDir,
    pub release: PathBuf,
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The release directory (built on first use).
pub fn release() -> &'static Path {
    static R: OnceLock<Release> = OnceLock::new();
    &R.get_or_init(build).release
}

fn build() -> Release {
    let dir = tempfile::tempdir().expect("temp dir");
    let plan_path = repo_root().join("plans/deepseek-v4.toml");
    let plan = pipeline::plan::Plan::load(&plan_path).expect("plan loads");
    let source = plan.sources.first().expect("plan has a source");
    let ckpt = dir.path().join("ckpt");
    pipeline::synth::generate(pipeline::synth::Family::DeepseekV4, &ckpt, 0, 1)
        .expect("synth writes the tiny V4 checkpoint");
    let hub_root = dir.path().join("hub");
    let repo = hub::protocol::RepoId::model(source.repo.as_str()).expect("repo id");
    hub::server::import_dir(&hub_root, &repo, source.revision.as_str(), &ckpt, false)
        .expect("hub import");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let server = rt
        .block_on(hub::server::spawn(
            &hub_root,
            std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            hub::server::ServerOptions::default(),
        ))
        .expect("hub serves");
    let work = dir.path().join("work");
    pipeline::fetch::run(
        &plan,
        &pipeline::fetch::FetchOpts {
            work_dir: Some(work.clone()),
            endpoint: Some(server.url()),
            ..Default::default()
        },
    )
    .expect("fetch");
    pipeline::repack::run(
        &plan,
        &pipeline::repack::RepackOpts {
            work_dir: Some(work.clone()),
            ..Default::default()
        },
    )
    .expect("repack");
    drop(server);
    Release {
        _dir: dir,
        release: work.join("release"),
    }
}

/// A deterministic prompt of `n` token ids in `2..vocab` (xorshift).
pub fn prompt(n: usize, vocab: u32) -> Vec<u32> {
    let mut s = 0x9e37_79b9_u32;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            2 + s % (vocab - 2)
        })
        .collect()
}
