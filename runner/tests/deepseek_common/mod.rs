//! Shared fixture of the DeepSeek V4 runner tests: the default tiny V4 checkpoint
//! (`minirun-synth deepseek-v4`, seed 0, scale 1) published to a local in-process hub and taken
//! through the real `fetch` → `repack` stages of `plans/deepseek-v4.toml`, once per test binary;
//! the tests read the resulting release directory.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[path = "../../../jobs/bin/tests/shared/fixture_dir.rs"]
mod fixture_dir;
pub use fixture_dir::fixture_dir;

pub struct Release {
    pub release: PathBuf,
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The release directory (built on first use).
/// A device of the test's own (as a front-end opens one), so a model's counters see only its work.
pub fn engine() -> runner::engine::Engine {
    runner::engine::Engine::new().expect("a wgpu adapter (lavapipe: mesa-vulkan-drivers)")
}

pub fn release() -> &'static Path {
    static R: OnceLock<Release> = OnceLock::new();
    &R.get_or_init(build).release
}

fn build() -> Release {
    let dir = fixture_dir("deepseek-v4-release");
    let plan_path = repo_root().join("plans/deepseek-v4.toml");
    let plan = pipeline::plan::Plan::load(&plan_path).expect("plan loads");
    let source = plan.sources.first().expect("plan has a source");
    let ckpt = dir.join("ckpt");
    synth::generate(synth::Family::DeepseekV4, &ckpt, 0, 1)
        .expect("synth writes the tiny V4 checkpoint");
    let hub_root = dir.join("hub");
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
    let work = dir.join("work");
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
        release: work.join("release"),
    }
}

/// The transformers fixture (`ci/oracles/deepseek_v4/`).
pub struct Fixture {
    pub prompt: Vec<u32>,
    pub greedy: Vec<u32>,
    pub vocab: usize,
    /// `[17][vocab]`.
    pub logits: Vec<Vec<f32>>,
    pub margins: Vec<f32>,
    /// transformers' own f32 − f64 max |Δ logit| on this run.
    pub noise: f32,
    /// The same graph in f64 (`logits_f64.npy`, `[17][vocab]`), rounded to f32 here.
    pub logits_f64: Vec<Vec<f32>>,
}

/// Parses a `.npy` v1 header: (dtype descr, rows, cols, data offset) of a C-order 2-D array.
fn npy_header(bytes: &[u8]) -> (String, usize, usize, usize) {
    assert_eq!(&bytes[..6], b"\x93NUMPY", "not an npy file");
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + hlen]).expect("ascii header");
    assert!(header.contains("'fortran_order': False"), "{header}");
    let descr = header
        .split("'descr': '")
        .nth(1)
        .and_then(|s| s.split('\'').next())
        .expect("descr")
        .to_owned();
    let shape = header
        .split("'shape': (")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .expect("shape");
    let dims: Vec<usize> = shape
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().expect("dim"))
        .collect();
    assert_eq!(dims.len(), 2, "{header}");
    (descr, dims[0], dims[1], 10 + hlen)
}

/// Reads a little-endian C-order `.npy` `[rows, cols]` of `<f4` or `<f8` as f32 rows.
pub fn read_npy_rows(bytes: &[u8]) -> Vec<Vec<f32>> {
    let (descr, rows, cols, at) = npy_header(bytes);
    assert!(descr == "<f4" || descr == "<f8", "npy dtype {descr}");
    let data: Vec<f32> = if descr == "<f4" {
        bytes[at..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    } else {
        bytes[at..]
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32)
            .collect()
    };
    assert_eq!(data.len(), rows * cols);
    data.chunks_exact(cols).map(<[f32]>::to_vec).collect()
}

pub fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = repo_root().join("ci/oracles/deepseek_v4");
        let json: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.join("reference.json")).expect("reference.json"),
        )
        .expect("json");
        let ids = |v: &serde_json::Value| -> Vec<u32> {
            v.as_array()
                .expect("array")
                .iter()
                .map(|x| x.as_u64().expect("id") as u32)
                .collect()
        };
        let logits = read_npy_rows(&std::fs::read(dir.join("logits.npy")).expect("logits.npy"));
        Fixture {
            prompt: ids(&json["prompt"]["ids"]),
            greedy: ids(&json["greedy_tokens"]),
            vocab: logits.first().map_or(0, Vec::len),
            logits,
            margins: json["top2_margin_per_row"]
                .as_array()
                .expect("margins")
                .iter()
                .map(|x| x.as_f64().expect("margin") as f32)
                .collect(),
            logits_f64: read_npy_rows(
                &std::fs::read(dir.join("logits_f64.npy")).expect("logits_f64.npy"),
            ),
            noise: json["noise"]["f64"]["max_abs_f32_minus_f64"]
                .as_f64()
                .expect("noise.f64.max_abs_f32_minus_f64") as f32,
        }
    })
}

/// Largest allowed |Δ logit| against transformers' f32 logits, derived from the reference's own
/// noise (docs/runner-deepseek-v4.md "Tolerance"): transformers in f32 differs from the same model
/// in f64 by `noise` (`reference.json` `noise.f64.max_abs_f32_minus_f64`); our reference sums in
/// f64, so |ours − f32 ref| ≤ |ours − exact| + |exact − f32 ref| ≲ 2 · noise. Floor 1e-4.
pub fn tolerance(fx: &Fixture) -> f32 {
    (2.0 * fx.noise).max(1e-4)
}

/// Writes `rows` as `[rows, vocab]` f32 `.npy` to `$MINIRUN_V4_DUMP_DIR/<name>.npy` when that is
/// set (for comparing with other references by hand).
pub fn dump(name: &str, rows: &[Vec<f32>]) {
    if let Some(dir) = std::env::var_os("MINIRUN_V4_DUMP_DIR") {
        let flat: Vec<f32> = rows.iter().flatten().copied().collect();
        let cols = rows.first().map_or(0, Vec::len);
        let path = Path::new(&dir).join(format!("{name}.npy"));
        std::fs::write(&path, runner::npy::npy_f32(&[rows.len(), cols], &flat)).expect("dump");
    }
}

/// How a run's rows compare with the fixture.
pub struct Report {
    pub max_abs: f32,
    pub per_row: Vec<f32>,
    /// Rows whose reference top-2 margin exceeds 2 · tolerance, and whether our argmax agrees.
    pub argmax_checked: Vec<(usize, bool)>,
    pub tolerance: f32,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "max |Δ| = {:e} (tolerance {:e}); per row {:?}; argmax checked (margin > 2·tol) {:?}",
            self.max_abs, self.tolerance, self.per_row, self.argmax_checked
        )
    }
}

impl Report {
    pub fn assert_within(&self) {
        let tol = self.tolerance;
        assert!(
            self.max_abs <= tol,
            "max |Δ| {} > tolerance {tol}: {self}",
            self.max_abs
        );
        assert!(
            self.argmax_checked.iter().all(|&(_, ok)| ok),
            "argmax differs where the reference margin exceeds the bound: {self}"
        );
    }
}

pub fn compare(rows: &[Vec<f32>], fx: &Fixture) -> Report {
    assert_eq!(rows.len(), fx.logits.len());
    let tol = tolerance(fx);
    let per_row: Vec<f32> = rows
        .iter()
        .zip(&fx.logits)
        .map(|(a, b)| {
            assert_eq!(a.len(), b.len());
            a.iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max)
        })
        .collect();
    let argmax_checked = rows
        .iter()
        .zip(&fx.logits)
        .enumerate()
        .filter(|(i, _)| fx.margins.get(*i).copied().unwrap_or(0.0) > 2.0 * tol)
        .map(|(i, (a, b))| {
            (
                i,
                runner::deepseek::argmax(a) == runner::deepseek::argmax(b),
            )
        })
        .collect();
    Report {
        max_abs: per_row.iter().copied().fold(0f32, f32::max),
        per_row,
        argmax_checked,
        tolerance: tol,
    }
}

/// Max |Δ| of `rows` against transformers' f64 logits.
pub fn max_abs_vs_f64(rows: &[Vec<f32>], fx: &Fixture) -> f32 {
    assert_eq!(rows.len(), fx.logits_f64.len());
    rows.iter()
        .zip(&fx.logits_f64)
        .flat_map(|(a, b)| a.iter().zip(b).map(|(x, y)| (x - y).abs()))
        .fold(0f32, f32::max)
}
