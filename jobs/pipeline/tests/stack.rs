//! Stacked containers in the plan (`stack = "experts.{E}"`, issue 46): the seed's byte count of a
//! real V4 stack, tile heights that divide the members, and each way a stack is refused — a
//! member missing, a member of another shape, a name without a member index, `stack` on a plain
//! rule, a malformed pattern.
#![allow(clippy::unwrap_used, clippy::panic)] // tests: a failed unwrap is a failed test

use crate::common;

use common::{k3_tensors, plans_dir};
use pipeline::plan::*;
use std::path::Path;

const PLAN: &str = r#"schema = 1
family = "deepseek-v4"
index_shape = "singleSourceUnits"

[source]
repo = "deepseek-ai/DeepSeek-V4-Flash"
revision = "60d8d70770c6776ff598c94bb586a859a38244f1"
weights = ["*.safetensors"]
license = "LICENSE"

[target]
repo = "minirun/Tiny-minirun"
branch = "main"

[[units]]
name = "layers00"
tensors = ["layers.0.*"]

[[rules]]
match = "*.ffn.experts.*.weight"
when_dtype = "I8"
container = { mode = "mxfp4", scale = "{stem}.scale", scale_dtype = "F8_E8M0", group = 32, nibble_order = "low-first", rows_per_tile = 2048 }
stack = "experts.{E}"

[[rules]]
match = "*"
plain = true

[identity.tokenizer]
file = "tokenizer.json"
license = "LICENSE"
"#;

fn plan(text: &str) -> Result<Plan, PlanError> {
    Plan::parse(text, Path::new("plans/stack.toml"))
}

/// `n` experts of one projection `[rows, cols/2]` with their `[rows, cols/32]` scales.
fn experts(n: u64, rows: u64, cols: u64) -> Vec<UpstreamTensor> {
    let f = "model-00001-of-00001.safetensors";
    let mut v = vec![UpstreamTensor::new(
        "layers.0.attn_norm.weight",
        "BF16",
        &[256],
        f,
    )];
    for e in 0..n {
        let stem = format!("layers.0.ffn.experts.{e}.w1");
        v.push(UpstreamTensor::new(
            &format!("{stem}.weight"),
            "I8",
            &[rows, cols / 2],
            f,
        ));
        v.push(UpstreamTensor::new(
            &format!("{stem}.scale"),
            "F8_E8M0",
            &[rows, cols / 32],
            f,
        ));
    }
    v
}

fn the_stack(r: &Resolution) -> StackPlacement {
    let stacks: Vec<_> = r.units[0]
        .placements
        .iter()
        .filter_map(|p| match p {
            Placement::Stack(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(stacks.len(), 1, "{stacks:?}");
    stacks.into_iter().next().unwrap()
}

#[test]
fn a_real_v4_layers_experts_stack_into_the_seeds_container_with_no_padding() {
    let r = plan(PLAN)
        .unwrap()
        .resolve(&experts(256, 2048, 4096))
        .unwrap();
    let s = the_stack(&r);
    assert_eq!(s.name, "layers.0.ffn.experts.w1.weight");
    assert_eq!(s.members.len(), 256);
    assert_eq!(s.rows_of(17), [17 * 2048, 18 * 2048]);
    let g = s.geometry;
    assert_eq!((g.rows, g.cols, g.tile_rows), (256 * 2048, 4096, 2048));
    // The container repack writes for it: the seed's largest V4 payload, byte for byte in size.
    let spec = artifact::container::ContainerSpec::mxfp4(&s.name, g.rows, g.cols, g.tile_rows);
    let layout = spec.layout().unwrap();
    assert_eq!(layout.tile_count, 256);
    assert_eq!(layout.header_bytes, 16_384);
    assert_eq!(layout.total_bytes, 1_140_867_072);
    assert_eq!(g.tile_slot_bytes, 2048 * 2048 + 2048 * 128);
}

#[test]
fn the_tile_height_is_lowered_to_divide_the_members() {
    let r = plan(PLAN).unwrap().resolve(&experts(8, 512, 256)).unwrap();
    let s = the_stack(&r);
    assert_eq!((s.geometry.rows, s.geometry.tile_rows), (8 * 512, 512));
    let r = plan(PLAN).unwrap().resolve(&experts(4, 3000, 256)).unwrap();
    assert_eq!(the_stack(&r).geometry.tile_rows, 1500);
    // Each member alone keeps the rule's tile height (capped at its rows).
    assert!(the_stack(&r)
        .members
        .iter()
        .all(|m| m.geometry.tile_rows == 2048));
}

fn refusal(tensors: &[UpstreamTensor]) -> String {
    plan(PLAN)
        .unwrap()
        .resolve(tensors)
        .unwrap_err()
        .to_string()
}

#[test]
fn a_stack_with_a_gap_or_another_shape_is_refused_naming_the_member() {
    let mut t = experts(4, 512, 256);
    t.retain(|x| !x.name.contains("experts.2."));
    let e = refusal(&t);
    assert!(e.contains("layers.0.ffn.experts.3.w1.weight"), "{e}");
    assert!(e.contains("member 2 is missing"), "{e}");
    let mut t = experts(3, 512, 256);
    for x in t.iter_mut().filter(|x| x.name.contains("experts.1.")) {
        x.shape[0] = 256;
    }
    let e = refusal(&t);
    assert!(
        e.contains("layers.0.ffn.experts.1.w1.weight") && e.contains("one shape"),
        "{e}"
    );
}

#[test]
fn a_matrix_of_a_stacking_rule_without_a_member_index_is_refused() {
    let mut t = experts(2, 512, 256);
    let f = "model-00001-of-00001.safetensors";
    t.push(UpstreamTensor::new(
        "layers.0.ffn.experts.x.w1.weight",
        "I8",
        &[512, 128],
        f,
    ));
    t.push(UpstreamTensor::new(
        "layers.0.ffn.experts.x.w1.scale",
        "F8_E8M0",
        &[512, 8],
        f,
    ));
    let e = refusal(&t);
    assert!(e.contains("layers.0.ffn.experts.x.w1.weight"), "{e}");
    assert!(e.contains("no `experts.{E}` segment"), "{e}");
    // `minirun-plan check` reports it as a stack finding.
    let survey = plan(PLAN).unwrap().survey(&t);
    assert!(survey.findings.iter().any(|f| f.kind == FindingKind::Stack));
}

#[test]
fn stack_is_refused_on_a_plain_rule_and_when_malformed() {
    let text = PLAN.replace(
        "match = \"*\"\nplain = true",
        "match = \"*\"\nplain = true\nstack = \"experts.{E}\"",
    );
    let e = plan(&text).unwrap_err().to_string();
    assert!(
        e.contains("rules[1].stack") && e.contains("only a `container` rule"),
        "{e}"
    );
    for bad in ["experts", "experts.{E}.w1", "{E}", "ex*.{E}"] {
        let text = PLAN.replace("stack = \"experts.{E}\"", &format!("stack = \"{bad}\""));
        let e = plan(&text).unwrap_err().to_string();
        assert!(
            e.contains("rules[0].stack") && e.contains("PREFIX.{VAR}"),
            "{bad}: {e}"
        );
    }
}

#[test]
fn kimi_k3_resolves_mxfp4_experts() {
    let plan = Plan::load(&plans_dir().join("kimi-k3.toml")).unwrap();
    let tensors = k3_tensors(3);
    let r = plan.resolve(&tensors).unwrap();
    assert_eq!(r.tensor_count(), tensors.len());
    assert_eq!(r.units.len(), 94);
    let l5 = r.unit("layer05").unwrap();
    let stacks: Vec<_> = l5
        .placements
        .iter()
        .filter_map(|p| match p {
            Placement::Stack(s) => Some(s),
            _ => None,
        })
        .collect();
    // w1, w2, w3: one stack each of the 3 experts.
    assert_eq!(stacks.len(), 3);
    assert!(stacks.iter().all(|s| s.members.len() == 3));
    let w2s = stacks
        .iter()
        .find(|s| s.name.ends_with("experts.w2.weight_packed"))
        .unwrap();
    // One tile an expert (4096 lowered to the expert's rows): whole 16 KiB multiples.
    assert_eq!(
        (w2s.geometry.rows, w2s.geometry.tile_rows),
        (3 * 3584, 3584)
    );
    assert_eq!(w2s.geometry.tile_slot_bytes, 3584 * 1536 + 3584 * 96);
    let w2 = &w2s.members[2];
    assert!(w2.weight.name.ends_with("experts.2.w2.weight_packed"));
    assert_eq!(
        w2.scale.name,
        "language_model.model.layers.5.block_sparse_moe.experts.2.w2.weight_scale"
    );
    assert_eq!(
        (w2.geometry.rows, w2.geometry.cols, w2.geometry.scale_cols),
        (3584, 3072, 96)
    );
    assert!(r
        .unit("layer00")
        .unwrap()
        .placements
        .iter()
        .all(|p| matches!(p, Placement::Plain { .. })));
    assert_eq!(r.unit("global").unwrap().placements.len(), 11);
}
