//! The real-size test plans (`plans/tests/*-real-size.toml`, run by `ci/bench/real-size.sh`) bound
//! to the shapes `minirun-synth --shape real` generates, without writing their gigabytes.

use pipeline::plan::{Placement, Plan, UpstreamTensor};
use synth::{deepseek, kimi};

type ShardPlan = Vec<(String, Vec<synth::write::Planned>)>;

/// The upstream tensor list fetch would read from a generated checkpoint's headers.
fn upstream_of(plan: &ShardPlan) -> Vec<UpstreamTensor> {
    plan.iter()
        .flat_map(|(file, t)| {
            t.iter().map(move |p| {
                UpstreamTensor::new(&p.spec.name, p.spec.dtype.as_str(), &p.spec.shape, file)
            })
        })
        .collect()
}

#[test]
fn real_size_plans_bind_the_real_shapes() {
    // What `ci/bench/real-size.sh` runs, checked without writing its 7 GB: each real-size plan
    // claims every tensor of its generated shape, the routed experts as tile containers of the
    // real geometry.
    let plans = crate::common::plans_dir().join("tests");
    let cases = [
        (
            "deepseek-v4-real-size.toml",
            deepseek::shard_plan(&deepseek::V4Dims::real(256)),
            2 * 256 * 3,
            (2048, 4096),
        ),
        (
            "kimi-k3-real-size.toml",
            kimi::shard_plan(&kimi::KimiDims::real(252)),
            252 * 3,
            (3072, 3584),
        ),
    ];
    for (file, shards, experts, (rows, cols)) in cases {
        let plan = Plan::load(&plans.join(file)).unwrap();
        plan.ensure_runnable().unwrap();
        assert_eq!(
            plan.sources[0].expected_weight_files,
            Some(shards.len() as u64),
            "{file}"
        );
        let upstream = upstream_of(&shards);
        let r = plan
            .resolve(&upstream)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(r.tensor_count(), upstream.len(), "{file}");
        assert!(r.omitted.is_empty(), "{file}");
        // Every routed expert is a member of its layer's stack of one projection.
        let stacks: Vec<_> = r
            .units
            .iter()
            .flat_map(|u| &u.placements)
            .filter_map(|p| match p {
                Placement::Stack(s) => Some(s),
                _ => None,
            })
            .collect();
        let mx: Vec<_> = stacks
            .iter()
            .flat_map(|s| &s.members)
            .map(|c| c.geometry)
            .collect();
        assert_eq!(mx.len(), experts, "{file}");
        assert!(
            mx.iter().any(|g| (g.rows, g.cols) == (rows, cols)),
            "{file}: {:?}",
            mx.first()
        );
        for s in &stacks {
            let g = s.geometry;
            assert_eq!(g.rows, s.member_rows() * s.members.len() as u64, "{file}");
            assert_eq!(s.member_rows() % g.tile_rows, 0, "{file}: {}", s.name);
        }
    }
}
