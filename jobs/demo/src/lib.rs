//! `minirun-demo`: the whole publication on one machine with no internet (`docs/publish.md` §7).
//! It starts the hub in-process on `127.0.0.1:0`, generates the tiny DeepSeek V4 checkpoint,
//! imports it at `plans/deepseek-v4.toml`'s pinned revision, runs fetch → repack → gate → stage →
//! candidate-upload → promote against it through the library, then pulls and verifies the
//! published artifact as a consumer. The directory is the plan's work directory, so every stage
//! can be re-run on it with `--work-dir DIR`; the demo's own files live under `DIR/demo/`
//! (`checkpoint/`, `hub/`, `consumer/`).

use std::path::{Path, PathBuf};

use pipeline::candidate::CandidateReport;
use pipeline::plan::Plan;
use pipeline::promote::PromoteReport;

/// Where the demo keeps its own files inside the work directory.
pub const DEMO_SUBDIR: &str = "demo";

/// The demo's outcome.
#[derive(Debug, Clone)]
pub struct DemoSummary {
    /// The work directory.
    pub work_dir: PathBuf,
    /// The hub root (serve it again with `minirun-hub serve --root`).
    pub hub_root: PathBuf,
    /// The candidate branch.
    pub candidate: String,
    /// The public commit.
    pub commit: String,
    /// The consumer's verdict.
    pub verdict: pipeline::verify::Verdict,
    /// Files in the published tree.
    pub files: usize,
    /// The consumer's pulled and verified copy (`demo/consumer`).
    pub consumer: PathBuf,
}

/// Why the demo stopped.
#[derive(Debug, thiserror::Error)]
#[error("demo step `{step}` failed: {detail}")]
pub struct DemoError {
    /// The step.
    pub step: &'static str,
    /// What went wrong (the step's error chain).
    pub detail: String,
}

impl pipeline::cli::Hint for DemoError {
    fn hint(&self) -> Option<String> {
        Some("re-run `minirun-demo --work-dir DIR` on the same directory: every stage resumes from its journal".into())
    }
}

fn step<T, E: std::error::Error>(name: &'static str, r: Result<T, E>) -> Result<T, DemoError> {
    r.map_err(|e| DemoError {
        step: name,
        detail: pipeline::cli::render_error(&e, None)
            .trim_start_matches("error: ")
            .to_owned(),
    })
}

/// The default plan, `plans/deepseek-v4.toml`, compiled in: the demo runs from an installed
/// binary (the wheel, `cargo install`) with no checkout.
pub const DEFAULT_PLAN: &str = include_str!("../../../plans/deepseek-v4.toml");

/// Writes [`DEFAULT_PLAN`] to `WORK/demo/plan.toml` (where `--plan` finds it to re-run a stage on
/// the work directory) and returns that path.
pub fn write_default_plan(work: &Path) -> Result<PathBuf, DemoError> {
    let path = work.join(DEMO_SUBDIR).join("plan.toml");
    let io = |e: std::io::Error| DemoError {
        step: "plan",
        detail: format!("cannot write `{}`: {e}", path.display()),
    };
    std::fs::create_dir_all(work.join(DEMO_SUBDIR)).map_err(io)?;
    ledger::write_atomic(&path, DEFAULT_PLAN.as_bytes())
        .map_err(|e| io(std::io::Error::other(e.to_string())))?;
    Ok(path)
}

/// Run the demo in `work` with the plan at `plan_path`; `progress` receives one line per step.
pub fn run(
    plan_path: &Path,
    work: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<DemoSummary, DemoError> {
    run_shaped(plan_path, work, (1, synth::Shape::Tiny), progress)
}

/// [`run`] on the DeepSeek V4 checkpoint `minirun-synth deepseek-v4 --scale S --shape SHAPE`
/// (`(scale, shape)`), which the plan must be written for (its pinned revision is what the
/// local mirror is given).
pub fn run_shaped(
    plan_path: &Path,
    work: &Path,
    checkpoint: (u64, synth::Shape),
    progress: &mut dyn FnMut(&str),
) -> Result<DemoSummary, DemoError> {
    let plan = step("plan", Plan::load(plan_path))?;
    let demo = work.join(DEMO_SUBDIR);
    let hub_root = demo.join("hub");
    let (rt, server) = upstream_hub(&plan, &demo, &hub_root, checkpoint, progress)?;
    let url = server.url();
    progress(&format!("hub listening on {url}"));
    let (c, p) = publish(&plan, work, &url, progress)?;
    progress("verify as a consumer (pull into demo/consumer)");
    let consumer = demo.join("consumer");
    let v = step(
        "verify",
        pipeline::verify::pull(
            Some(&url),
            plan.target.repo.as_str(),
            plan.target.branch.as_str(),
            &consumer,
            true,
            &pipeline::verify::PullOpts::default(),
        ),
    )?;
    progress(v.render().trim_end());
    let files = v.sha256_checked + v.git_sha1_checked + v.evidence_reused + v.hashed_on_write;
    rt.block_on(server.shutdown());
    Ok(DemoSummary {
        work_dir: work.to_path_buf(),
        hub_root,
        candidate: c.candidate,
        commit: p.commit,
        verdict: v.verdict,
        files,
        consumer,
    })
}

/// The upstream side: the generated checkpoint (kept between runs), mirrored into a local hub at
/// the plan's pinned revision, served on loopback.
fn upstream_hub(
    plan: &Plan,
    demo: &Path,
    hub_root: &Path,
    (scale, shape): (u64, synth::Shape),
    progress: &mut dyn FnMut(&str),
) -> Result<(&'static tokio::runtime::Runtime, hub::server::ServerHandle), DemoError> {
    let ckpt = demo.join("checkpoint");
    let io = |e: std::io::Error| e;
    step("create", std::fs::create_dir_all(demo).map_err(io))?;
    let source = plan.sources.first().ok_or_else(|| DemoError {
        step: "plan",
        detail: "the plan has no source".into(),
    })?;
    let upstream = step(
        "plan",
        hub::protocol::RepoId::model(source.repo.as_str())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e)),
    )?;
    if !ckpt.join("config.json").exists() {
        progress("generating the tiny DeepSeek V4 checkpoint");
        let _ = std::fs::remove_dir_all(&ckpt);
        step(
            "synth",
            synth::generate_shaped(synth::Family::DeepseekV4, &ckpt, 0, scale, shape),
        )?;
    }
    progress(&format!(
        "mirroring it as `{}` at {}",
        upstream.id(),
        source.revision.as_str()
    ));
    step(
        "import",
        hub::server::import_dir(hub_root, &upstream, source.revision.as_str(), &ckpt, false),
    )?;
    // the process's one runtime, which the stages block on too
    let rt = step("hub", pipeline::runtime())?;
    let server = step(
        "hub",
        rt.block_on(hub::server::spawn(
            hub_root,
            std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            hub::server::ServerOptions::default(),
        )),
    )?;
    Ok((rt, server))
}

/// The publisher's side: fetch → repack → gate (PASS required) → stage → candidate-upload →
/// promote against the hub at `url`.
fn publish(
    plan: &Plan,
    work: &Path,
    url: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<(CandidateReport, PromoteReport), DemoError> {
    let wd = Some(work.to_path_buf());
    let ep = Some(url.to_owned());
    progress("fetch");
    let f = step(
        "fetch",
        pipeline::fetch::run(
            plan,
            &pipeline::fetch::FetchOpts {
                work_dir: wd.clone(),
                endpoint: ep.clone(),
                ..Default::default()
            },
        ),
    )?;
    progress(f.render().trim_end());
    progress("repack");
    let r = step(
        "repack",
        pipeline::repack::run(
            plan,
            &pipeline::repack::RepackOpts {
                work_dir: wd.clone(),
                ..Default::default()
            },
        ),
    )?;
    progress(r.render().trim_end());
    progress("gate");
    let g = step(
        "gate",
        pipeline::gate::run(
            plan,
            &pipeline::gate::GateOpts {
                work_dir: wd.clone(),
                ..Default::default()
            },
        ),
    )?;
    progress(g.render().trim_end());
    if g.exit() != pipeline::cli::Exit::Ok {
        return Err(DemoError {
            step: "gate",
            detail: format!("verdict {}", g.verdict),
        });
    }
    progress("stage");
    let s = step(
        "stage",
        pipeline::stage::run(
            plan,
            &pipeline::stage::StageOpts {
                work_dir: wd.clone(),
                ..Default::default()
            },
        ),
    )?;
    progress(s.render().trim_end());
    progress("candidate-upload");
    let c = step(
        "candidate-upload",
        pipeline::candidate::run(
            plan,
            &pipeline::candidate::CandidateOpts {
                work_dir: wd.clone(),
                endpoint: ep.clone(),
                ..Default::default()
            },
        ),
    )?;
    progress(c.render().trim_end());
    progress("promote");
    let p = step(
        "promote",
        pipeline::promote::run(
            plan,
            &pipeline::promote::PromoteOpts {
                work_dir: wd.clone(),
                endpoint: ep.clone(),
                ..Default::default()
            },
        ),
    )?;
    progress(p.render().trim_end());
    Ok((c, p))
}
