//! Streamed == resident on container matrices, to the bit, with the tile reads counted:
//! - every container of the V4 artifact (`fp8-e4m3-block` and `mxfp4`, 903 containers, read
//!   through the verified artifact's load policy);
//! - `mxfp4` over several tiles: the artifact's stacked routed experts (`w2` of a few layers),
//!   as one matrix and member by member through the verified artifact;
//! - every container of the releases built from the style plans' generated checkpoints, through
//!   the pipeline library in-process as `ci/styles/release.sh` does (`minirun-synth` → local hub
//!   import at the plan's pinned revisions → fetch → repack): all `affine` (MLX 8-bit, BF16
//!   scales and biases) containers of `plans/tests/minimax-h3-style.toml` and all `mxfp4`
//!   containers of `plans/tests/kimi-k3-style.toml`, opened with the container reader (a release
//!   before publication has no verification evidence).
//!
//! The negative control (tiling along K changes the bits) is `kernels::reference` test
//! `splitting_k_changes_the_bits`.

use std::path::{Path, PathBuf};

use artifact::container::{ContainerReader, Mode};
use pipeline::plan::Plan;
use runner::artifact::stream::{upload_resident, ContainerStreamer, TileSource};
use runner::artifact::{OpenOptions, TensorKind, VerifiedArtifact};
use runner::engine::Engine;
use synth::{minimax, Family};

use super::{engine, fixture, rt};

fn inputs(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (i as f32 * 0.37 + seed as f32).sin() * 0.5)
        .collect()
}

/// Resident upload once, then for 1 and 3 tokens: streamed matmul (tile by tile) vs resident
/// matmul (one dispatch); asserts equal bits and returns the streamed reads.
fn streamed_equals_resident(e: &Engine, src: &mut dyn TileSource) -> u64 {
    let layout = src.header().layout.clone();
    // The matrix's tiles and rows: the whole container's, or one stack member's.
    let (tiles, _, rows) = src.extent();
    let (rows, cols) = (rows as usize, layout.spec.cols as usize);
    let resident = upload_resident(e, src).unwrap();
    assert_eq!(resident.parts.len(), 1, "{}: one dispatch", src.name());
    let mut streamer = ContainerStreamer::new();
    let g = e.gpu();
    for tokens in [1usize, 3] {
        let x = g
            .upload_f32("x", &inputs(tokens * cols, tokens as u32))
            .unwrap();
        let ys = g.zeros("ys", (tokens * rows * 4) as u64).unwrap();
        let yr = g.zeros("yr", (tokens * rows * 4) as u64).unwrap();
        let before = streamer.reads;
        streamer.matmul(e, src, &x, &ys, tokens).unwrap();
        assert_eq!(streamer.reads - before, tiles.end - tiles.start);
        e.matmul(&resident, &x, &yr, tokens).unwrap();
        let a = g.read_f32(&ys, tokens * rows).unwrap();
        let b = g.read_f32(&yr, tokens * rows).unwrap();
        let differing = a
            .iter()
            .zip(&b)
            .filter(|(p, q)| p.to_bits() != q.to_bits())
            .count();
        assert_eq!(
            differing,
            0,
            "{} ({tokens} tokens): streamed and resident differ",
            src.name()
        );
        assert!(b.iter().any(|v| *v != 0.0), "{}: all zero", src.name());
    }
    streamer.reads
}

#[test]
fn every_v4_container_streamed_equals_resident() {
    let Some(e) = engine("every_v4_container_streamed_equals_resident") else {
        return;
    };
    let fx = fixture();
    let a = VerifiedArtifact::open(&fx.consumer, &OpenOptions::default()).unwrap();
    let names: Vec<String> = a
        .tensor_names()
        .filter(|n| {
            matches!(&a.tensor(n).unwrap().kind, TensorKind::Container { role } if role == "packed")
        })
        .map(String::from)
        .collect();
    let (mut fp8, mut mx, mut multi, mut reads) = (0, 0, 0, 0);
    for n in &names {
        let [r, c] = a.tensor(n).unwrap().matrix().unwrap();
        let mut l = a.load_container(n, r, c).unwrap();
        // A routed expert is one member of its layer's stack: its own tiles only.
        let tiles = l.tiles().end - l.tiles().start;
        match l.header().layout.spec.mode {
            Mode::Fp8E4m3Block => fp8 += 1,
            Mode::Mxfp4 => mx += 1,
            m => panic!("unexpected mode {m:?}"),
        }
        multi += u64::from(tiles > 1);
        let preads_before_resident = l.preads();
        reads += streamed_equals_resident(e, &mut l);
        // The resident matmuls read nothing: its preads were the one upload (tiles) + streaming.
        assert_eq!(l.preads() - preads_before_resident, tiles + 2 * tiles);
    }
    assert_eq!((fp8, mx), (375, 528));
    assert!(multi >= 44 + 21, "multi-tile containers: {multi}");
    assert_eq!(a.digest_checks(), 0);
    eprintln!(
        "{} containers ({fp8} fp8-e4m3-block, {mx} mxfp4; {multi} of several tiles): streamed == resident, {reads} streamed tile reads",
        names.len()
    );
}

#[test]
fn stacked_mxfp4_experts_over_several_tiles_streamed_equals_resident() {
    let Some(e) = engine("stacked_mxfp4_experts") else {
        return;
    };
    let fx = fixture();
    let a = VerifiedArtifact::open(&fx.consumer, &OpenOptions::default()).unwrap();
    for layer in [0, 21, 42] {
        // The artifact's own stack of the layer's routed experts (one tile each) as one matrix...
        let unit = format!("layers{layer:02}");
        let path = a.path_of(&format!("{unit}/layers.{layer}.ffn.experts.w2.til"));
        let mut r = ContainerReader::open(&path).unwrap();
        let n = r.layout().tile_count;
        assert!(n >= 4, "{path:?}: {n} tiles");
        assert_eq!(streamed_equals_resident(e, &mut r), 2 * n);
        // ...and each member alone, through the verified artifact: its one tile, its rows.
        for x in 0..n {
            let name = format!("layers.{layer}.ffn.experts.{x}.w2.weight");
            let [rows, c] = a.tensor(&name).unwrap().matrix().unwrap();
            let mut l = a.load_container(&name, rows, c).unwrap();
            assert_eq!(l.tiles(), x..x + 1, "{name}");
            assert_eq!(l.rows(), (x * rows, rows), "{name}");
            assert_eq!(streamed_equals_resident(e, &mut l), 2);
        }
    }
}

/// A release of a style test plan built in-process as `ci/styles/release.sh` does (without the
/// gate, which `pipeline_styles` covers): `minirun-synth FAMILY` → each upstream repository of
/// `plans/tests/PLAN` imported into a local hub at its pinned revision → the hub served on
/// loopback → fetch → repack. Returns `dir/work/release`.
fn style_release(family: Family, plan: &str, dir: &Path) -> PathBuf {
    let plan = Plan::load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../plans/tests")
            .join(plan),
    )
    .unwrap();
    let ckpt = dir.join("ckpt");
    synth::generate(family, &ckpt, 0, 1).unwrap();
    let hub_root = dir.join("hub");
    let mut imported = Vec::new();
    for s in &plan.sources {
        let (repo, rev) = (s.repo.as_str(), s.revision.as_str());
        if imported.contains(&(repo, rev)) {
            continue;
        }
        imported.push((repo, rev));
        let src = match family {
            Family::MinimaxH3 if repo.contains("MLX") => ckpt.join(minimax::MLX_DIR),
            Family::MinimaxH3 => ckpt.join(minimax::UPSTREAM_DIR),
            _ => ckpt.clone(),
        };
        let id = hub::RepoId::model(repo).unwrap();
        hub::server::import_dir(&hub_root, &id, rev, &src, false).unwrap();
    }
    let server = rt()
        .block_on(hub::server::spawn(
            &hub_root,
            "127.0.0.1:0".parse().unwrap(),
            hub::server::ServerOptions::default(),
        ))
        .unwrap();
    let work = dir.join("work");
    let fetched = pipeline::fetch::run(
        &plan,
        &pipeline::fetch::FetchOpts {
            work_dir: Some(work.clone()),
            endpoint: Some(server.url()),
            ..Default::default()
        },
    );
    rt().block_on(server.shutdown());
    fetched.unwrap();
    pipeline::repack::run(
        &plan,
        &pipeline::repack::RepackOpts {
            work_dir: Some(work.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    work.join("release")
}

/// Every tile container (`*.til`) under `dir`, sorted.
fn containers(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(containers(&p));
        } else if p.extension().is_some_and(|x| x == "til") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Streamed == resident on every container of a style release, each of `mode` with the given
/// scale and bias dtypes; returns (containers, of several tiles, tiles, streamed tile reads).
fn every_container(
    e: &Engine,
    release: &Path,
    mode: Mode,
    dtypes: (&str, Option<&str>),
) -> (usize, u64, u64, u64) {
    let paths = containers(release);
    let (mut multi, mut tiles, mut reads) = (0, 0, 0);
    for p in &paths {
        let mut r = ContainerReader::open(p).unwrap();
        let s = &r.layout().spec;
        assert_eq!(s.mode, mode, "{p:?}");
        let got = (s.scale_dtype.name(), s.bias_dtype.map(|d| d.name()));
        assert_eq!(got, dtypes, "{p:?}");
        let n = r.layout().tile_count;
        let got = streamed_equals_resident(e, &mut r);
        assert_eq!(got, 2 * n, "{p:?}: one read per tile per matmul");
        multi += u64::from(n > 1);
        tiles += n;
        reads += got;
    }
    (paths.len(), multi, tiles, reads)
}

#[test]
fn h3_affine_containers_streamed_equals_resident() {
    let Some(e) = engine("h3_affine_containers_streamed_equals_resident") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let t = std::time::Instant::now();
    let release = style_release(Family::MinimaxH3, "minimax-h3-style.toml", dir.path());
    let built = t.elapsed();
    let (n, multi, tiles, reads) =
        every_container(e, &release, Mode::Affine, ("bf16", Some("bf16")));
    // Per transformer / refiner block: to_q, to_k, to_v, to_out.0, ff ×2 (+ the block AdaLN);
    // and the context embedder (as `pipeline_styles` checks the release).
    assert_eq!(n, 2 * 7 + 2 * 6 + 1);
    // At the plan's 256 rows per tile: `ff.net.0.proj` of each of the 4 blocks (4 tiles) and the
    // AdaLN `norm1.linear` of each transformer block (18 tiles); the rest are one tile each.
    assert_eq!((multi, tiles), (6, 4 * 4 + 2 * 18 + 21), "tiles");
    eprintln!(
        "H3-style release (built in {built:.1?}): {n} affine containers ({multi} of several tiles, {tiles} tiles): streamed == resident, {reads} streamed tile reads, {:.1?} in all",
        t.elapsed()
    );
}

#[test]
fn k3_mxfp4_containers_streamed_equals_resident() {
    let Some(e) = engine("k3_mxfp4_containers_streamed_equals_resident") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let t = std::time::Instant::now();
    let release = style_release(Family::KimiK3, "kimi-k3-style.toml", dir.path());
    let built = t.elapsed();
    let (n, multi, tiles, reads) = every_container(e, &release, Mode::Mxfp4, ("e8m0", None));
    // Layers 1–3 × w1/w2/w3, each a stack of the layer's 8 routed experts; layer 0 is dense.
    assert_eq!(n, 9);
    // The generated experts fit one tile each: 8 tiles a stack.
    assert_eq!((multi, tiles), (9, 72));
    eprintln!(
        "K3-style release (built in {built:.1?}): {n} mxfp4 containers ({multi} of several tiles, {tiles} tiles): streamed == resident, {reads} streamed tile reads, {:.1?} in all",
        t.elapsed()
    );
}
