//! Streamed == resident on container matrices, to the bit, with the tile reads counted:
//! - every container of the V4 artifact (`fp8-e4m3-block` and `mxfp4`, 903 containers, read
//!   through the verified artifact's load policy);
//! - `mxfp4` over several tiles: the generated V4 experts are 128–256 rows, one tile each, so the
//!   four routed experts' `w2` of each of a few layers are stacked into one [1024, 128] container
//!   (4 tiles) from the artifact's own bytes;
//! - `affine`: every MLX affine 8-bit linear of `minirun-synth minimax-h3` (BF16 scales and
//!   biases), written as containers of 64 rows per tile straight through the container writer
//!   (`artifact::container::write_container`), since the H3 plan is still a draft.
//!
//! The negative control (tiling along K changes the bits) is `kernels::reference` test
//! `splitting_k_changes_the_bits`.

use std::path::Path;

use artifact::container::{write_container, ContainerReader, ContainerSpec, Dtype as CDtype};
use runner::artifact::stream::{upload_resident, ContainerStreamer, TileSource};
use runner::artifact::{OpenOptions, TensorKind, VerifiedArtifact};
use runner::engine::Engine;

use super::{engine, fixture};

fn inputs(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (i as f32 * 0.37 + seed as f32).sin() * 0.5)
        .collect()
}

/// Resident upload once, then for 1 and 3 tokens: streamed matmul (tile by tile) vs resident
/// matmul (one dispatch); asserts equal bits and returns the streamed reads.
fn streamed_equals_resident(e: &Engine, src: &mut dyn TileSource) -> u64 {
    let layout = src.header().layout.clone();
    let (rows, cols) = (layout.spec.rows as usize, layout.spec.cols as usize);
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
        assert_eq!(streamer.reads - before, layout.tile_count);
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
        let tiles = l.header().layout.tile_count;
        match l.header().layout.spec.mode {
            artifact::container::Mode::Fp8E4m3Block => fp8 += 1,
            artifact::container::Mode::Mxfp4 => mx += 1,
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
    let dir = tempfile::tempdir().unwrap();
    for layer in [0, 21, 42] {
        let (mut packed, mut scale) = (Vec::new(), Vec::new());
        for x in 0..4 {
            let name = format!("layers.{layer}.ffn.experts.{x}.w2.weight");
            let [r, c] = a.tensor(&name).unwrap().matrix().unwrap();
            let mut l = a.load_container(&name, r, c).unwrap();
            let mut slot = l.slot();
            let v = l.read_tile(0, &mut slot).unwrap();
            assert_eq!(l.header().layout.tile_count, 1);
            packed.extend_from_slice(v.packed);
            scale.extend_from_slice(v.scale);
        }
        let name = format!("layers.{layer}.ffn.experts.0-3.w2 (stacked)");
        let spec = ContainerSpec::mxfp4(&name, 1024, 128, 256);
        let path = dir.path().join(format!("stacked{layer}.til"));
        write_container(&path, &spec, &packed, &scale, None).unwrap();
        let mut r = ContainerReader::open(&path).unwrap();
        assert_eq!(streamed_equals_resident(e, &mut r), 2 * 4);
    }
}

/// One MLX affine 8-bit linear: (name, rows, cols, q, scales, biases).
type AffineLinear = (String, u64, u64, Vec<u8>, Vec<u8>, Vec<u8>);

/// The MLX affine 8-bit linears of the generated H3 port.
fn h3_affine_linears(dir: &Path) -> Vec<AffineLinear> {
    pipeline::synth::generate(pipeline::synth::Family::MinimaxH3, dir, 0, 1).unwrap();
    let port = dir
        .join(pipeline::synth::minimax::MLX_DIR)
        .join("transformer");
    let mut out = Vec::new();
    let mut shards: Vec<_> = std::fs::read_dir(&port)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    shards.sort();
    for shard in shards {
        let bytes = std::fs::read(&shard).unwrap();
        let h = artifact::safetensors::parse_header(&bytes).unwrap();
        let get = |name: &str| {
            let r = h.file_range(name)?;
            Some(bytes[r.start as usize..r.end as usize].to_vec())
        };
        for t in &h.tensors {
            let Some(stem) = t.name.strip_suffix(".weight") else {
                continue;
            };
            if t.dtype.as_str() != "U32" {
                continue;
            }
            let (Some(q), Some(s), Some(b)) = (
                get(&t.name),
                get(&format!("{stem}.scales")),
                get(&format!("{stem}.biases")),
            ) else {
                continue;
            };
            out.push((t.name.clone(), t.shape[0], t.shape[1] * 4, q, s, b));
        }
    }
    out
}

#[test]
fn h3_affine_containers_streamed_equals_resident() {
    let Some(e) = engine("h3_affine_containers_streamed_equals_resident") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let linears = h3_affine_linears(&dir.path().join("h3"));
    assert!(linears.len() >= 8, "{} affine linears", linears.len());
    let mut tiles = 0;
    for (name, rows, cols, q, s, b) in &linears {
        let spec = ContainerSpec::affine(name, *rows, *cols, 64, 8, 64, CDtype::Bf16);
        let path = dir.path().join("c.til");
        write_container(&path, &spec, q, s, Some(b)).unwrap();
        let mut r = ContainerReader::open(&path).unwrap();
        let n = r.layout().tile_count;
        assert!(n >= 2, "{name}: {n} tiles");
        assert_eq!(streamed_equals_resident(e, &mut r), 2 * n);
        tiles += n;
    }
    eprintln!(
        "{} H3 affine 8-bit containers ({tiles} tiles): streamed == resident",
        linears.len()
    );
}
