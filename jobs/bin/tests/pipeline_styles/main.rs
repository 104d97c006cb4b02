//! fetch → repack → gate on the K3- and H3-style generated checkpoints (`minirun-synth kimi-k3`,
//! `minirun-synth minimax-h3`) served by `minirun-hub`, through the real binaries and the style
//! test plans `plans/tests/{kimi-k3,minimax-h3}-style.toml`: a whole run PASSes with `mxfp4`
//! (compressed-tensors) and `affine` (MLX, bf16 scales and biases) containers and the family's
//! index.json shape; a flipped byte in a tile sub-region, a manifest or a plain stream FAILs
//! naming the file; a deleted unit FAILs; an empty selection is INCONCLUSIVE; and
//! `--no-upstream-compare` is SKIP. Issue 5, "the same for the K3- and H3-style plans".

#![allow(clippy::unwrap_used, clippy::panic)]

use crate::fixture_dir;
mod plan_tool;
mod styles;
use crate::pipeline_v4::common as v4;

use std::path::Path;

use styles::*;
use v4::{stage, stage_ok, Hub};

fn flip(path: &Path, at: usize) {
    let mut b = std::fs::read(path).unwrap();
    let i = at.min(b.len() - 1);
    b[i] ^= 0x01;
    std::fs::write(path, b).unwrap();
}

/// Every container of the release, described by its header: (file, mode, scale dtype, bias dtype).
fn containers(release: &Path) -> Vec<(String, String, String, String)> {
    let mut out = Vec::new();
    for (rel, _) in v4::tree_state(release) {
        if !rel.ends_with(".til") {
            continue;
        }
        let r = artifact::container::ContainerReader::open(&release.join(&rel)).unwrap();
        let d = r.header().describe();
        let s = |k: &str| d[k].as_str().unwrap_or("").to_owned();
        out.push((rel, s("mode"), s("scale_dtype"), s("bias_dtype")));
    }
    out
}

/// Every negative control runs, and every one on a file its unit fetched whole is rejected (by
/// content or by the hub's digest); each journal records its verdict.
fn controls_decided(work: &Path) {
    let dir = work.join("ledger/fetch");
    let mut decided = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let j: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        let whole = &j["extra"]["files_verified_whole"];
        for c in j["extra"]["negative_controls"].as_array().unwrap() {
            // Every control runs: bytes outside the unit's ranges are read from the hub.
            assert_eq!(c["ran"], true, "{c}");
            if whole.as_array().unwrap().contains(&c["file"]) {
                assert_eq!(c["rejected"], true, "{c}");
                decided += 1;
            }
        }
    }
    assert!(decided > 0, "no control ran on a whole-fetched file");
}

/// The whole contract on one style: PASS, then each corruption FAILs naming its file and is
/// repaired, then a deleted unit FAILs, an empty selection is 2 and no upstream compare is 77.
fn exit_contract(st: &Style, corruptions: &[(&str, usize)], deleted_unit: &str) {
    let hub = Hub::start(&st.hub_root, "");
    let w = tempfile::tempdir().unwrap();
    let work = w.path();
    let out = stage_ok("minirun-fetch", &st.plan, work, &hub.url, &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["units"].as_array().unwrap().len(), st.units, "{out}");
    controls_decided(work);
    stage_ok("minirun-repack", &st.plan, work, &hub.url, &[]);
    let gate = |extra: &[&str]| stage("minirun-gate", &st.plan, work, "", extra);
    let (code, out) = gate(&[]);
    assert_eq!(code, 0, "a clean {} release must PASS:\n{out}", st.name);
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(work.join("reports/gate.json")).unwrap()).unwrap();
    assert_eq!(report["verdict"], "PASS");
    let compared = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["check"] == "upstream-compare" && c["verdict"] == "PASS")
        .count();
    assert!(compared > 0, "no upstream comparison in {report}");
    (st.check_release)(&work.join("release"));

    assert_eq!(
        gate(&["--units", ""]).0,
        2,
        "empty selection is INCONCLUSIVE"
    );
    assert_eq!(gate(&["--no-upstream-compare"]).0, 77);

    let rel = work.join("release");
    for &(file, at) in corruptions {
        let p = rel.join(file);
        let orig = std::fs::read(&p).unwrap();
        flip(&p, at);
        let (code, out) = gate(&[]);
        assert_eq!(code, 1, "flipping byte {at} of {file} must FAIL:\n{out}");
        assert!(out.contains(file), "the FAIL must name {file}:\n{out}");
        std::fs::write(&p, &orig).unwrap();
    }
    // index.json still valid JSON of the right shape, but claiming one byte more than the
    // manifests hold: recomputed independently, it FAILs.
    let ix = rel.join("index.json");
    let orig = std::fs::read(&ix).unwrap();
    let mut doc: serde_json::Value = serde_json::from_slice(&orig).unwrap();
    match doc.get_mut("units") {
        Some(units) => *units.get_mut(1).unwrap().get_mut("bytes").unwrap() = 1.into(),
        None => doc["bytes"] = (doc["bytes"].as_u64().unwrap() + 1).into(),
    }
    std::fs::write(&ix, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let (code, out) = gate(&[]);
    assert_eq!(code, 1, "a wrong index total must FAIL:\n{out}");
    assert!(out.contains("index-totals"), "{out}");
    std::fs::write(&ix, &orig).unwrap();
    // A file at the root that the plan does not put there.
    std::fs::write(rel.join("stray.bin"), b"x").unwrap();
    let (code, out) = gate(&[]);
    assert_eq!(code, 1, "a stray root file must FAIL:\n{out}");
    assert!(out.contains("stray.bin"), "{out}");
    std::fs::remove_file(rel.join("stray.bin")).unwrap();
    // Restored bytes, new filesystem objects: repack --verify re-hashes and re-journals them.
    stage_ok("minirun-repack", &st.plan, work, &hub.url, &["--verify"]);
    assert_eq!(gate(&[]).0, 0, "the restored release must PASS again");

    std::fs::remove_dir_all(rel.join(deleted_unit)).unwrap();
    let (code, out) = gate(&[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(deleted_unit), "{out}");
}

#[test]
fn kimi_k3_style_exit_contract() {
    let st = kimi_k3();
    let expert =
        "layer02/language_model.model.layers.2.block_sparse_moe.experts.w2.weight_packed.til";
    exit_contract(
        st,
        &[
            (expert, 16_384 + 7),          // the tile's packed e2m1 bytes
            (expert, 32_768 + 3),          // its e8m0 scale sub-region
            ("layer01/manifest.json", 40), // a manifest
            ("layer03/plain.bin", 5),      // the unit's plain streams
            ("global/plain.bin", 1000),    // plain
            ("LICENSE", 3), // a root file: compared with the upstream file, not only the index
        ],
        "layer01",
    );
}

#[test]
fn minimax_h3_style_exit_contract() {
    let st = minimax_h3();
    let q = "dit-block-01/transformer_blocks.1.attn.to_q.til";
    exit_contract(
        st,
        &[
            (q, 16_384 + 9),                      // packed u32 codes
            (q, 16_384 + 65_536 + 11),            // bf16 scales
            (q, 16_384 + 65_536 + 16_384 + 13),   // bf16 biases
            ("dit-refiner-00/manifest.json", 60), // a manifest
            ("vae-audio/plain.bin", 2),           // plain, F32 (`encoder.*`: names both VAEs use)
            ("te-layer-02/plain.bin", 100),
            ("LICENSE-mlx-port", 3), // the dit source's licence under its `license_as` name
            ("tokenizer.json", 50),  // the tokenizer identity's root file
        ],
        "te-layer-01",
    );
}

/// Multi-source finalize is a pure function of the units: disjoint `--units` repacks in parallel
/// processes, then `--finalize`, give the same release bytes as one run.
#[test]
fn minimax_h3_style_parallel_repacks_then_finalize_equal_one_run() {
    let st = minimax_h3();
    let hub = Hub::start(&st.hub_root, "");
    let (ra, rb) = v4::one_run_and_parallel_finalize(
        &st.plan,
        &hub.url,
        &["dit-block-00..dit-global", "te-embed..vae-audio"],
    );
    assert!(ra.contains_key("index.json") && ra.contains_key("LICENSE-mlx-port"));
    assert_eq!(ra, rb);
}

/// A plan item as JSON without its position in the file (`line`, `key`).
fn strip_pos(mut j: serde_json::Value) -> serde_json::Value {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("line");
                m.remove("key");
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut j);
    j
}

macro_rules! shape_of {
    ($e:expr) => {
        strip_pos(serde_json::to_value(&$e).unwrap())
    };
}

/// The style plans apply the drafts' layout rules (docs/plans.md, "Style test plans"): the same
/// family, index shape, rules, tiles and identities; every style unit is a draft unit with the
/// same source and tensor globs; the same sources (weights, licences); the same non-layer
/// omissions. Only repositories, revisions, counts and the layer ranges differ.
#[test]
fn style_plans_follow_the_drafts() {
    use pipeline::plan::Plan;
    // The real-size plans (ci/bench/real-size.sh) follow their base plans the same way.
    for (draft, style) in [
        ("plans/kimi-k3.toml", "plans/tests/kimi-k3-style.toml"),
        ("plans/minimax-h3.toml", "plans/tests/minimax-h3-style.toml"),
        ("plans/kimi-k3.toml", "plans/tests/kimi-k3-real-size.toml"),
        (
            "plans/deepseek-v4.toml",
            "plans/tests/deepseek-v4-real-size.toml",
        ),
        (
            "plans/deepseek-v4.toml",
            "plans/tests/deepseek-v4-256-experts.toml",
        ),
    ] {
        let d = Plan::load(&v4::repo_root().join(draft)).unwrap();
        let s = Plan::load(&v4::repo_root().join(style)).unwrap();
        let draft_ready = draft.ends_with("deepseek-v4.toml");
        assert!(
            s.ensure_runnable().is_ok() && d.ensure_runnable().is_ok() == draft_ready,
            "{style}"
        );
        assert_eq!(shape_of!(&d.family), shape_of!(&s.family), "{style}");
        assert_eq!(
            shape_of!(&d.index_shape),
            shape_of!(&s.index_shape),
            "{style}"
        );
        assert_eq!(shape_of!(&d.rules), shape_of!(&s.rules), "{style}: rules");
        assert_eq!(shape_of!(&d.tiles), shape_of!(&s.tiles), "{style}: tiles");
        assert_eq!(shape_of!(&d.tokenizer), shape_of!(&s.tokenizer), "{style}");
        assert_eq!(shape_of!(&d.config), shape_of!(&s.config), "{style}");
        for u in &s.units {
            let du = d
                .units
                .iter()
                .find(|x| x.name.as_str() == u.name.as_str())
                .unwrap_or_else(|| panic!("{style}: unit {} is not a draft unit", u.name.as_str()));
            assert_eq!(
                shape_of!(du),
                shape_of!(u),
                "{style}: unit {}",
                u.name.as_str()
            );
        }
        assert_eq!(d.sources.len(), s.sources.len(), "{style}");
        for (ds, ss) in d.sources.iter().zip(&s.sources) {
            assert_eq!(ds.name, ss.name);
            assert_eq!(shape_of!(&ds.license), shape_of!(&ss.license), "{style}");
            assert_eq!(ds.files.len(), ss.files.len(), "{style}");
            if d.multi_source {
                assert_eq!(ds.weights, ss.weights, "{style}: {}", ds.name);
            }
            assert_ne!(
                ds.repo.as_str(),
                ss.repo.as_str(),
                "a style plan never names a real repo"
            );
        }
        assert!(s.target.repo.as_str().starts_with("minirun-synth/"));
        let non_layer = |p: &Plan| -> Vec<serde_json::Value> {
            p.omit
                .iter()
                .filter(|o| !o.tensors.iter().any(|t| t.contains(".layers.")))
                .map(|o| {
                    let mut v = shape_of!(o);
                    v.as_object_mut().unwrap().remove("reason");
                    v
                })
                .collect()
        };
        assert_eq!(non_layer(&d), non_layer(&s), "{style}: omissions");
    }
}

/// The H3-style units share shards, so no hub digest covers a unit's bytes of them: every chunk
/// is read until two reads agree. Through a hub that flips a bit in a fifth of the payload
/// answers, fetch (re-run until it finishes) writes exactly what a clean fetch writes, and the
/// journals say which files were proven by agreeing reads.
#[test]
fn minimax_h3_style_shared_shards_through_a_corrupting_link_fetch_as_a_clean_run_does() {
    let st = minimax_h3();
    let clean_hub = Hub::start(&st.hub_root, "");
    let a = tempfile::tempdir().unwrap();
    stage_ok("minirun-fetch", &st.plan, a.path(), &clean_hub.url, &[]);
    let hub = Hub::start(&st.hub_root, "flip-payload:0.2");
    let b = tempfile::tempdir().unwrap();
    let finished =
        (0..10).any(|_| stage("minirun-fetch", &st.plan, b.path(), &hub.url, &[]).0 == 0);
    assert!(finished, "fetch never finished through the corrupting link");
    assert!(
        hub.log_text().contains("injected fault: flip-payload"),
        "no flip fired"
    );
    let files = |w: &Path| {
        v4::tree_state(&w.join("upstream"))
            .into_keys()
            .map(|rel| {
                let bytes = std::fs::read(w.join("upstream").join(&rel)).unwrap();
                (rel, ledger::sha256_hex(&bytes))
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(files(a.path()), files(b.path()));
    let mut agreed = 0;
    for e in std::fs::read_dir(b.path().join("ledger/fetch")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            let j: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
            for f in j["extra"]["upstream"].as_object().unwrap().values() {
                agreed += usize::from(f["proven_by"] == "two-agreeing-reads");
            }
        }
    }
    assert!(agreed > 0, "no shared shard in the H3-style plan");
}
