//! The files a release will hold, from the plan and its resolution alone (no bytes): what
//! `docs/plans.md` counts for the real checkpoints and what a test holds against the Hub's
//! limits before anything is fetched (`tests/release_files.rs`).

use super::container::{container_file, container_spec};
use super::plain::PLAIN_FILE;
use crate::plan::{Placement, Plan, Resolution, ResolvedUnit, UpstreamTensor};
use artifact::container::Layout;

/// Every path of the release `plan` repacks from `res`, sorted: per unit its containers (one per
/// matrix or stack; a geometry the container refuses becomes plain), `plain.bin` when it keeps
/// any tensor verbatim, `tensors.json` and `manifest.json`; then the root files and `index.json`.
pub fn planned_files(plan: &Plan, res: &Resolution) -> Vec<String> {
    let mut out = Vec::new();
    for u in &res.units {
        let mut plain = false;
        for p in &u.placements {
            match container_layout(p) {
                Some((name, _)) => out.push(format!("{}/{}", u.name, container_file(name))),
                None => plain = true,
            }
        }
        if plain {
            out.push(format!("{}/{PLAIN_FILE}", u.name));
        }
        for meta in [
            artifact::tensor_map::TENSORS_FILE,
            artifact::manifest::MANIFEST_FILE_NAME,
        ] {
            out.push(format!("{}/{meta}", u.name));
        }
    }
    out.extend(super::finalize::root_files(plan).into_keys());
    out.push(artifact::index_json::INDEX_FILE_NAME.to_owned());
    out.sort();
    out
}

/// Bytes of `tensors.json` and `manifest.json` per tensor a unit holds, and per unit, as an
/// allowance: the generated V4 release takes 642 B a tensor (1,706,834 B for 2,659 tensors,
/// measured 2026-12-07; names, spans, digests), so this is about twice that.
const META_BYTES_PER_TENSOR: u64 = 1200;
const META_BYTES_PER_UNIT: u64 = 8 << 10;
/// What one file can take beyond its bytes on disk: the rest of its last 4 KiB block.
const BLOCK: u64 = 4096;

/// The bytes unit `ru` takes in the release, from the plan alone: each container's exact length
/// from its layout (alignment padding included), the plain streams (a container the geometry
/// refuses falls back to plain), and an allowance for the unit's metadata files; every file
/// rounded up to a 4 KiB block. `tensor_bytes` is an upstream tensor's byte length.
pub fn planned_unit_bytes(ru: &ResolvedUnit, tensor_bytes: impl Fn(&UpstreamTensor) -> u64) -> u64 {
    let mut total = 0u64;
    let mut plain = 0u64;
    for p in &ru.placements {
        match container_layout(p) {
            Some((_, l)) => total += round_block(l.total_bytes),
            None => plain += p.tensors().into_iter().map(&tensor_bytes).sum::<u64>(),
        }
    }
    total + round_block(plain) + round_block(planned_metadata_bytes(ru)) + BLOCK
}

/// The allowance for unit `ru`'s metadata files (its manifest and tensor map).
pub fn planned_metadata_bytes(ru: &ResolvedUnit) -> u64 {
    let tensors: u64 = ru.placements.iter().map(|p| p.tensors().len() as u64).sum();
    META_BYTES_PER_UNIT + META_BYTES_PER_TENSOR * tensors
}

/// The name and layout of placement `p`'s container (a weight's, or a stack's); `None` for a plain
/// tensor and for a geometry the container refuses (repack keeps those tensors plain).
fn container_layout(p: &Placement) -> Option<(&str, Layout)> {
    let (name, spec, g) = match p {
        Placement::Plain { .. } => return None,
        Placement::Container(c) => (&c.weight.name, &c.spec, &c.geometry),
        Placement::Stack(s) => s.members.first().map(|m| (&s.name, &m.spec, &s.geometry))?,
    };
    let layout = container_spec(&spec.mode, spec.scale_dtype.as_str(), g, name)
        .layout()
        .ok()?;
    Some((name.as_str(), layout))
}

fn round_block(n: u64) -> u64 {
    n.div_ceil(BLOCK) * BLOCK
}
