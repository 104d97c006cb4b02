//! The two style fixtures: each generated checkpoint written once (its digests checked against
//! the committed goldens, so the plans' pinned revisions always name these bytes), imported into
//! its own hub store at the plan's revision, and what its release must look like.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;

use crate::pipeline_styles::v4::{cmd, repo_root};

/// One style: its plan, hub store and release expectations.
pub struct Style {
    pub name: &'static str,
    pub hub_root: PathBuf,
    pub plan: PathBuf,
    /// Units the plan expands to.
    pub units: usize,
    /// Family-specific checks of a finished release (index shape, containers).
    pub check_release: fn(&Path),
}

/// `minirun-synth FAMILY` into `dir/ckpt`, checked against `tests/golden/synth-FAMILY.sha256`.
fn synth(family: &str, dir: &Path) -> PathBuf {
    let ckpt = dir.join("ckpt");
    let out = cmd("minirun-synth")
        .args([family, "--out"])
        .arg(&ckpt)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    let golden = repo_root().join(format!("jobs/synth/tests/golden/synth-{family}.sha256"));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        std::fs::read_to_string(&golden).unwrap(),
        "`minirun-synth {family}` no longer writes the bytes the style plan is pinned to \
         (regenerate {golden:?} only for an intended change)"
    );
    ckpt
}

fn import(hub_root: &Path, repo: &str, rev: &str, dir: &Path) {
    let st = cmd("minirun-hub")
        .args(["import", "--root"])
        .arg(hub_root)
        .args(["--repo", repo, "--revision", rev])
        .arg(dir)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "import {repo}");
}

/// The repository and revision of the plan's source `name` (`main` for a `[source]` plan).
fn pinned(plan: &Path, name: &str) -> (String, String) {
    let p = pipeline::plan::Plan::load(plan).unwrap();
    let s = p.source(name).unwrap();
    (s.repo.as_str().to_owned(), s.revision.as_str().to_owned())
}

pub fn kimi_k3() -> &'static Style {
    static S: OnceLock<Style> = OnceLock::new();
    S.get_or_init(|| {
        let dir = crate::pipeline_styles::fixture_dir::fixture_dir("kimi-k3");
        let ckpt = synth("kimi-k3", &dir);
        let hub_root = dir.join("hub");
        let plan = repo_root().join("plans/tests/kimi-k3-style.toml");
        let (repo, rev) = pinned(&plan, "main");
        import(&hub_root, &repo, &rev, &ckpt);
        Style {
            name: "kimi-k3-style",
            hub_root,
            plan,
            units: 5,
            check_release: check_k3,
        }
    })
}

pub fn minimax_h3() -> &'static Style {
    static S: OnceLock<Style> = OnceLock::new();
    S.get_or_init(|| {
        let dir = crate::pipeline_styles::fixture_dir::fixture_dir("minimax-h3");
        let ckpt = synth("minimax-h3", &dir);
        let hub_root = dir.join("hub");
        let plan = repo_root().join("plans/tests/minimax-h3-style.toml");
        for (source, sub) in [
            ("dit", "pipenetwork--MiniMax-H3-MLX-8bit"),
            ("text-encoder", "MiniMaxAI--MiniMax-H3"),
        ] {
            let (repo, rev) = pinned(&plan, source);
            import(&hub_root, &repo, &rev, &ckpt.join(sub));
        }
        Style {
            name: "minimax-h3-style",
            hub_root,
            plan,
            units: 12,
            check_release: check_h3,
        }
    })
}

fn index(release: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(release.join("index.json")).unwrap()).unwrap()
}

/// singleSourceTotals with 4 layers + 1 global; every routed expert an `mxfp4` container with
/// its U8 (E8M0) scales; the identity root files copied verbatim.
fn check_k3(release: &Path) {
    let ix = index(release);
    assert_eq!(ix["source_repo"], "minirun-synth/Kimi-K3-style");
    assert_eq!(ix["relationship"], "byte-preserving-repack");
    assert_eq!(
        (ix["layers"].as_u64(), ix["globals"].as_u64()),
        (Some(4), Some(1))
    );
    assert!(
        ix.get("units").is_none() && ix.get("sources").is_none(),
        "{ix}"
    );
    assert_eq!(ix["tokenizer"]["file"], "tiktoken.model");
    assert_eq!(ix["tokenizer"]["license"], "LICENSE");
    assert_eq!(ix["configuration"]["file"], "config.json");
    let c = crate::pipeline_styles::containers(release);
    // Layers 1–3 × w1/w2/w3, each a stack of the layer's 8 experts; layer 0 is dense.
    assert_eq!(c.len(), 9, "{c:?}");
    for (file, mode, scale, _) in &c {
        assert!(file.contains(".block_sparse_moe.experts."), "{file}");
        assert_eq!((mode.as_str(), scale.as_str()), ("mxfp4", "e8m0"), "{file}");
    }
    for f in ["tiktoken.model", "config.json", "LICENSE"] {
        assert!(release.join(f).is_file(), "{f}");
    }
}

/// multiSourceUnits with the four sources; every MLX-quantized linear an `affine` container with
/// bf16 scales and biases; both licences at the root.
fn check_h3(release: &Path) {
    let ix = index(release);
    let sources = ix["sources"].as_object().unwrap();
    let names: Vec<&str> = sources.keys().map(String::as_str).collect();
    assert_eq!(names, ["dit", "text-encoder", "vae-audio", "vae-video"]);
    assert_eq!(sources["dit"]["license"], "LICENSE-mlx-port");
    assert_eq!(ix["units"].as_array().unwrap().len(), 12);
    assert_eq!(ix["tokenizer"]["file"], "tokenizer.json");
    assert_eq!(ix["configuration"]["file"], "model_index.json");
    let c = crate::pipeline_styles::containers(release);
    // Per transformer / refiner block: to_q, to_k, to_v, to_out.0, ff ×2 (+ the block AdaLN);
    // and the BF16 context embedder.
    assert_eq!(c.len(), 2 * 7 + 2 * 6 + 1, "{c:?}");
    for (file, mode, scale, bias) in &c {
        assert!(file.starts_with("dit-"), "{file}");
        assert_eq!(
            (mode.as_str(), scale.as_str(), bias.as_str()),
            ("affine", "bf16", "bf16"),
            "{file}"
        );
    }
    for f in [
        "LICENSE",
        "LICENSE-mlx-port",
        "tokenizer.json",
        "model_index.json",
    ] {
        assert!(release.join(f).is_file(), "{f}");
    }
    // The omitted decoder layer and head are nowhere in the release.
    let all = crate::pipeline_styles::v4::tree_state(release);
    assert!(!all
        .keys()
        .any(|p| p.contains("layers.3.") || p.contains("lm_head")));
}
