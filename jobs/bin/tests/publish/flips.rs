//! The bit-flip campaign (issue 47 item 4, docs/fetch.md "Bytes no digest covers"): runs of
//! fetch and pull against a hub that inverts bits in one request kind's answers, and of
//! candidate-upload + promote against a hub that inverts bits in one kind of upload body. A run
//! is repeated, the fault still armed, until it finishes or [`ATTEMPTS`] attempts failed (each
//! naming its reason); a finished run must equal a clean run's result. CI flips a few bits of
//! each kind; the documented campaign (`ci/bench/flip_campaign.sh`) flips many and writes the
//! table of docs/bench/flip-campaign.md.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use hub::server::{FlipKind, ServerHandle, ServerOptions};
use pipeline::candidate;
use pipeline::fetch::{self, FetchOpts};
use pipeline::promote;
use pipeline::stage;
use pipeline::verify::{self, PullOpts, Verdict};

use super::support::*;

/// Faults per kind in CI (`MINIRUN_FLIP_FAULTS` overrides: the campaign's count).
const CI_FAULTS: u64 = 2;
/// Attempts of one run before it counts as stuck.
const ATTEMPTS: usize = 6;
/// Units each fetch run fetches: three whole shards in 1 MiB chunks.
const UNITS: &str = "layers00..layers01,global00";

/// What one run ended as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    /// Finished on the first attempt (the client retried, or the flip changed nothing it uses).
    First,
    /// Failed naming the reason, then finished on a later attempt.
    Resumed,
    /// Finished with a result other than a clean run's.
    Corrupt,
    /// Still failing after [`ATTEMPTS`] attempts.
    Stuck,
}

/// The workloads that make requests of `kind`, each with the trigger that lands about one or
/// two flips in a run (the request counts differ by orders of magnitude).
fn workloads(kind: FlipKind) -> &'static [(&'static str, &'static str)] {
    match kind {
        FlipKind::Revision | FlipKind::Tree => &[("fetch", "x1"), ("pull", "x1")],
        FlipKind::Resolve => &[("fetch", "0.04"), ("pull", "0.002")],
        FlipKind::Root => &[("fetch", "0.3"), ("pull", "0.002")],
        FlipKind::Header => &[("fetch", "0.01")],
        FlipKind::Payload => &[("fetch", "0.3")],
        // Neither fetch nor pull asks paths-info (docs/fetch.md): nothing to flip.
        FlipKind::PathsInfo => &[],
        FlipKind::LfsBatch | FlipKind::Preupload => &[("upload", "x1")],
        FlipKind::Put | FlipKind::Verify => &[("upload", "0.002")],
        FlipKind::Commit => &[("upload", "0.1")],
    }
}

/// One kind's tally.
#[derive(Debug, Default)]
struct Tally {
    runs: usize,
    faults: u64,
    outcomes: BTreeMap<Outcome, usize>,
    /// One failure of each distinct kind of message, at most a few.
    reasons: Vec<String>,
}

impl Tally {
    fn note(&mut self, why: String) {
        let head: String = why.chars().take(60).collect();
        if self.reasons.len() < 4 && !self.reasons.iter().any(|r| r.starts_with(&head)) {
            self.reasons.push(why);
        }
    }
}

/// An error and its sources on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let _ = write!(s, ": {c}");
        src = c.source();
    }
    s
}

/// The fixtures every run compares with: clean results of each workload.
struct Campaign {
    _plan_dir: tempfile::TempDir,
    small: pipeline::plan::Plan,
    upstream: ServerHandle,
    target: ServerHandle,
    _target_root: tempfile::TempDir,
    commit: String,
    clean_fetch: BTreeMap<String, String>,
    clean_pull: BTreeMap<String, String>,
    clean_tree: candidate::Inventory,
}

impl Campaign {
    fn new() -> Campaign {
        let text = std::fs::read_to_string(plan_path())
            .unwrap()
            .replace("chunk_mib = 64", "chunk_mib = 1");
        let plan_dir = tempfile::tempdir().unwrap();
        let p = plan_dir.path().join("deepseek-v4.toml");
        std::fs::write(&p, text).unwrap();
        let small = pipeline::plan::Plan::load(&p).unwrap();
        let upstream = rt()
            .block_on(hub::server::spawn(
                upstream_root(),
                "127.0.0.1:0".parse().unwrap(),
                ServerOptions::default(),
            ))
            .unwrap();
        let (_w, target, target_root, published) = published();
        let mut c = Campaign {
            _plan_dir: plan_dir,
            small,
            upstream,
            clean_tree: inventory(&target.url(), &published.commit),
            target,
            _target_root: target_root,
            commit: published.commit,
            clean_fetch: BTreeMap::new(),
            clean_pull: BTreeMap::new(),
        };
        let w = tempfile::tempdir().unwrap();
        c.clean_fetch = c.fetch(w.path()).unwrap();
        let d = tempfile::tempdir().unwrap();
        c.clean_pull = c.pull(d.path()).unwrap();
        c
    }

    /// Fetch [`UNITS`] into `work`: the digests of everything fetch wrote under `upstream/`.
    fn fetch(&self, work: &Path) -> Result<BTreeMap<String, String>, String> {
        let opts = FetchOpts {
            work_dir: Some(work.to_path_buf()),
            endpoint: Some(self.upstream.url()),
            units: Some(UNITS.into()),
            ..FetchOpts::default()
        };
        fetch::run(&self.small, &opts).map_err(|e| chain(&e))?;
        Ok(tree_digests(&work.join("upstream"), ""))
    }

    /// Pull the published commit into `dir`: the digests of the pulled files.
    fn pull(&self, dir: &Path) -> Result<BTreeMap<String, String>, String> {
        let url = self.target.url();
        let r = verify::pull(
            Some(&url),
            TARGET,
            &self.commit,
            dir,
            true,
            &PullOpts::default(),
        )
        .map_err(|e| chain(&e))?;
        if r.verdict != Verdict::Verified {
            return Err(format!("pull: {}: {:?}", r.verdict.name(), r.problems));
        }
        Ok(tree_digests(dir, artifact::evidence::EVIDENCE_DIR))
    }

    /// One run of `load` with `spec` armed; (faults fired, outcome, failure messages).
    fn run(&self, load: &str, spec: &str) -> (u64, Outcome, Vec<String>) {
        match load {
            "fetch" => {
                let w = tempfile::tempdir().unwrap();
                attempts(
                    &self.upstream,
                    spec,
                    || self.fetch(w.path()),
                    &self.clean_fetch,
                )
            }
            "pull" => {
                let d = tempfile::tempdir().unwrap();
                attempts(&self.target, spec, || self.pull(d.path()), &self.clean_pull)
            }
            _ => {
                let plan = plan();
                let w = work();
                stage::run(&plan, &stage_opts(w.path())).unwrap();
                let (h, _root) = hub();
                let url = h.url();
                let upload = || {
                    candidate::run(&plan, &cand_opts(w.path(), &url)).map_err(|e| chain(&e))?;
                    let p = promote::run(&plan, &promote_opts(w.path(), &url))
                        .map_err(|e| chain(&e))?;
                    Ok(inventory(&url, &p.commit))
                };
                attempts(&h, spec, upload, &self.clean_tree)
            }
        }
    }
}

/// Attempts of `work` on `hub` with `spec` armed until one finishes or [`ATTEMPTS`] failed.
fn attempts<T: PartialEq>(
    hub: &ServerHandle,
    spec: &str,
    mut work: impl FnMut() -> Result<T, String>,
    clean: &T,
) -> (u64, Outcome, Vec<String>) {
    let before = hub.faults_fired();
    hub.set_faults(spec.parse().unwrap());
    let mut failures = Vec::new();
    let mut outcome = Outcome::Stuck;
    for attempt in 0..ATTEMPTS {
        match work() {
            Ok(got) if got == *clean => {
                outcome = if attempt == 0 {
                    Outcome::First
                } else {
                    Outcome::Resumed
                };
                break;
            }
            Ok(_) => {
                outcome = Outcome::Corrupt;
                break;
            }
            Err(why) => failures.push(why),
        }
    }
    hub.set_faults(Default::default());
    (hub.faults_fired() - before, outcome, failures)
}

/// The campaign: every kind until [`CI_FAULTS`] (or `MINIRUN_FLIP_FAULTS`) flips have fired;
/// no finished run differs from a clean one and none stays stuck. With `MINIRUN_FLIP_TABLE`
/// set, the table is written there.
#[test]
fn bit_flips_in_every_request_kind_end_clean_or_named() {
    let target: u64 = std::env::var("MINIRUN_FLIP_FAULTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CI_FAULTS);
    let c = Campaign::new();
    let mut tallies: BTreeMap<FlipKind, Tally> = BTreeMap::new();
    for kind in FlipKind::ALL {
        let loads = workloads(kind);
        let t = tallies.entry(kind).or_default();
        let mut i = 0;
        while !loads.is_empty() && t.faults < target && t.runs < 40 * target as usize {
            let (load, trigger) = loads[i % loads.len()];
            i += 1;
            let spec = format!("flip-{}:{trigger}", kind.name());
            let (fired, outcome, failures) = c.run(load, &spec);
            t.runs += 1;
            t.faults += fired;
            *t.outcomes.entry(outcome).or_default() += 1;
            for f in failures {
                t.note(format!("{load}: {f}"));
            }
            assert_ne!(
                outcome,
                Outcome::Corrupt,
                "flip-{}: {load} ended corrupt",
                kind.name()
            );
            assert_ne!(
                outcome,
                Outcome::Stuck,
                "flip-{}: {load} stuck: {:?}",
                kind.name(),
                t.reasons
            );
        }
        if !loads.is_empty() {
            assert!(
                t.faults >= target,
                "flip-{}: {} faults in {} runs",
                kind.name(),
                t.faults,
                t.runs
            );
        }
    }
    let table = render(&tallies, target);
    eprintln!("{table}");
    if let Ok(path) = std::env::var("MINIRUN_FLIP_TABLE") {
        std::fs::write(path, table).unwrap();
    }
}

/// The campaign's finding (`FAULTS=100`, `flip-preupload`): one flipped bit in a preupload
/// request's sample (so the hub saw no NUL byte in it) made the hub
/// answer "regular" for a binary file, and the release was promoted with that file stored inline
/// — its bytes right, the tree not the clean run's. The client now asks until two answers agree.
#[test]
fn a_flipped_preupload_sample_does_not_change_how_a_file_is_stored() {
    use base64::Engine as _;
    let (h, _root) = hub();
    let c = client(&h.url());
    let repo = repo();
    rt().block_on(c.create_repo(&repo, false, true)).unwrap();
    // binary (one NUL byte), small, and no `.gitattributes` pattern: LFS by its sample alone
    let sample = b"\0ABCDE".to_vec();
    let files = vec![("w.dat".to_string(), sample.len() as u64, sample.clone())];
    let pre = [hub::protocol::PreuploadFile {
        path: "w.dat".into(),
        sample: base64::engine::general_purpose::STANDARD.encode(&sample),
        size: sample.len() as u64,
    }];
    let body = hub::client::preupload_body(&pre).unwrap();
    let key = b"\"sample\":\"";
    let at = body.windows(key.len()).position(|w| w == key).unwrap() + key.len();
    assert_eq!(body[at], b'A', "the sample's first base64 character");
    // 'A' (0x41) → 'Q' (0x51): the first byte decodes as 0x40, and the sample holds no NUL
    let spec = format!("flip-preupload:x1@{}", at * 8 + 4);
    let ask = || {
        rt().block_on(c.preupload(&repo, "main", &pre, false))
            .unwrap()
    };
    assert_eq!(ask()[0].upload_mode, "lfs", "the clean answer");
    h.set_faults(spec.parse().unwrap());
    assert_eq!(
        ask()[0].upload_mode,
        "regular",
        "the flip alone changes the answer"
    );
    h.set_faults(spec.parse().unwrap());
    let fired = h.faults_fired();
    let modes = rt()
        .block_on(candidate::modes(&c, &repo, "main", &files))
        .unwrap();
    assert_eq!(h.faults_fired(), fired + 1, "the first ask was flipped");
    assert_eq!(
        modes.get("w.dat"),
        Some(&true),
        "stored as the clean answer says"
    );
}

fn render(tallies: &BTreeMap<FlipKind, Tally>, target: u64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| kind | workloads | runs | faults | finished on the first attempt | failed (reason named), then finished | silent corruptions | stuck |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|");
    let (mut runs, mut faults) = (0, 0);
    for (kind, t) in tallies {
        let loads: Vec<&str> = workloads(*kind).iter().map(|(l, _)| *l).collect();
        let n = |o| t.outcomes.get(&o).copied().unwrap_or(0);
        let _ = writeln!(
            s,
            "| `flip-{}` | {} | {} | {} | {} | {} | {} | {} |",
            kind.name(),
            if loads.is_empty() {
                "none sends it".into()
            } else {
                loads.join(", ")
            },
            t.runs,
            t.faults,
            n(Outcome::First),
            n(Outcome::Resumed),
            n(Outcome::Corrupt),
            n(Outcome::Stuck)
        );
        runs += t.runs;
        faults += t.faults;
    }
    let _ = writeln!(
        s,
        "\n{runs} runs, {faults} faults (target {target} per kind).\n"
    );
    let _ = writeln!(
        s,
        "Reasons the failed attempts named (one of each kind, per request kind):\n"
    );
    for (kind, t) in tallies {
        for r in &t.reasons {
            let short: String = r.chars().take(300).collect();
            let _ = writeln!(s, "- `flip-{}`: {}", kind.name(), short.replace('|', "\\|"));
        }
    }
    s
}
