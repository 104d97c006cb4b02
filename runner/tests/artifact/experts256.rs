//! Upstream's 256 routed experts a layer, stacked (issue 46): `minirun-synth deepseek-v4 --shape
//! experts --scale 256` published by `plans/tests/deepseek-v4-256-experts.toml` through fetch →
//! repack → gate → stage → candidate-upload → promote on the in-process hub, pulled and verified
//! (`demo::run_shaped`); the promoted tree is the release; each layer's experts of a projection
//! are one container; and `minirun-run --artifact` on it stays within the stated tolerance of the
//! f64 CPU reference, streamed bit for bit as resident.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use runner::deepseek::{argmax, Mode, V4Model};

use super::deepseek::run;
use super::deepseek_common;

struct Fx {
    work: PathBuf,
    consumer: PathBuf,
}

fn fixture() -> &'static Fx {
    static FX: OnceLock<Fx> = OnceLock::new();
    FX.get_or_init(|| {
        let root = deepseek_common::fixture_dir("experts256");
        let plan = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../plans/tests/deepseek-v4-256-experts.toml");
        let work = root.join("work");
        let s = demo::run_shaped(&plan, &work, (256, synth::Shape::Experts), &mut |_| {}).unwrap();
        assert_eq!(s.verdict, pipeline::verify::Verdict::Verified);
        Fx {
            consumer: s.consumer,
            work,
        }
    })
}

/// Every file under `dir` with its SHA-256 (`skip`: top-level names left out).
fn digests(dir: &Path, skip: &[&str]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if skip.iter().any(|s| rel == *s) {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                use sha2::Digest as _;
                out.insert(
                    rel,
                    hex::encode(sha2::Sha256::digest(std::fs::read(&p).unwrap())),
                );
            }
        }
    }
    out
}

#[test]
fn a_256_expert_publication_is_its_release_with_one_container_per_layer_and_projection() {
    let fx = fixture();
    let release = digests(&fx.work.join("release"), &[]);
    // The consumer's verified pull of the promoted commit is the release, plus the release record.
    let pulled = digests(
        &fx.consumer,
        &[".minirun-evidence", ".minirun", ".gitattributes"],
    );
    assert_eq!(pulled, release);
    for l in 0..4 {
        for w in ["w1", "w2", "w3"] {
            let p = fx
                .consumer
                .join(format!("layers{l:02}/layers.{l}.ffn.experts.{w}.til"));
            let r = artifact::container::ContainerReader::open(&p).unwrap();
            assert_eq!(r.layout().tile_count, 256, "{p:?}: one tile an expert");
        }
    }
    // 6 units of 3 stacks, the FP8 containers, plain.bin, tensors.json, manifest.json; the root.
    assert!(release.len() < 110, "{} files", release.len());
    let map: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx.consumer.join("layers03/tensors.json")).unwrap())
            .unwrap();
    let last = map["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "layers.3.ffn.experts.255.w2.weight")
        .unwrap();
    assert_eq!(last["file"], "layers.3.ffn.experts.w2.til");
    assert_eq!(last["rows"], serde_json::json!([255 * 256, 256 * 256]));
}

#[test]
fn the_256_expert_artifact_runs_as_the_reference_and_streams_as_it_runs_resident() {
    if super::engine("the_256_expert_artifact_runs_as_the_reference").is_none() {
        return;
    }
    let fx = fixture();
    let refx = deepseek_common::fixture();
    let prompt = &refx.prompt[..24];
    let steps = 4;
    let scratch = fx.work.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let (res, str_) = (scratch.join("resident.npy"), scratch.join("streamed.npy"));
    run(&fx.consumer, prompt, steps, &[], &res);
    let (_, err) = run(
        &fx.consumer,
        prompt,
        steps,
        &["--stream", "--expert-cache-mib", "1"],
        &str_,
    );
    assert!(err.contains("tile reads"), "{err}");
    assert_eq!(
        std::fs::read(&res).unwrap(),
        std::fs::read(&str_).unwrap(),
        "streamed logits differ from resident"
    );
    // `-n N` dumps N rows: after the prompt, then after each of N - 1 greedy tokens.
    let rows = deepseek_common::read_npy_rows(&std::fs::read(&res).unwrap());
    assert_eq!(rows.len(), steps);
    // The f64 reference, teacher-forced on the tokens the device chose.
    let forced: Vec<u32> = rows[..steps - 1].iter().map(|r| argmax(r) as u32).collect();
    let mut m = V4Model::open_dir(
        &fx.work.join("release"),
        Mode::Reference { expert_cache: 64 },
    )
    .unwrap();
    assert_eq!(m.config.experts, 256);
    let want = m.teacher_forced(prompt, &forced).unwrap();
    let tol = deepseek_common::tolerance(refx);
    let max = rows
        .iter()
        .zip(&want)
        .flat_map(|(a, b)| a.iter().zip(b).map(|(x, y)| (x - y).abs()))
        .fold(0f32, f32::max);
    eprintln!("256 experts: max |Δ| device vs f64 reference {max:e} (tolerance {tol:e})");
    assert!(max <= tol, "max |Δ| {max:e} > {tol:e}");
    for (a, b) in rows.iter().zip(&want) {
        let mut sorted = b.clone();
        sorted.sort_by(|x, y| y.total_cmp(x));
        if sorted[0] - sorted[1] > 2.0 * tol {
            assert_eq!(argmax(a), argmax(b));
        }
    }
}
