//! The files a release will hold, from the plan and its resolution alone (no bytes): what
//! `docs/plans.md` counts for the real checkpoints and what a test holds against the Hub's
//! limits before anything is fetched (`tests/release_files.rs`).

use super::container::{container_file, container_spec};
use super::plain::PLAIN_FILE;
use crate::plan::{Placement, Plan, Resolution};

/// Every path of the release `plan` repacks from `res`, sorted: per unit its containers (one per
/// matrix or stack; a geometry the container refuses becomes plain), `plain.bin` when it keeps
/// any tensor verbatim, `tensors.json` and `manifest.json`; then the root files and `index.json`.
pub fn planned_files(plan: &Plan, res: &Resolution) -> Vec<String> {
    let mut out = Vec::new();
    for u in &res.units {
        let mut plain = false;
        for p in &u.placements {
            let container = match p {
                Placement::Plain { .. } => None,
                Placement::Container(c) => Some((&c.weight.name, &c.spec, &c.geometry)),
                Placement::Stack(s) => s.members.first().map(|m| (&s.name, &m.spec, &s.geometry)),
            };
            match container {
                Some((name, spec, g))
                    if container_spec(&spec.mode, spec.scale_dtype.as_str(), g, name)
                        .layout()
                        .is_ok() =>
                {
                    out.push(format!("{}/{}", u.name, container_file(name)));
                }
                _ => plain = true,
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
