//! Plan model: every file in `plans/` loads; refusals name `file:line` and the key; resolution of
//! each family against synthetic tensor lists built from `models.md`; unit selection; a snapshot
//! of a fully resolved plan.
#![allow(clippy::unwrap_used, clippy::panic)] // tests: a failed unwrap is a failed test

use crate::common;

use common::*;
use pipeline::plan::*;
use std::path::Path;

const MINI: &str = r#"schema = 1
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
name = "layers{L:02}"
range = { L = [0, 1] }
tensors = ["layers.{L}.*"]

[[units]]
name = "global00"
tensors = ["embed.weight"]

[[rules]]
match = "*.weight"
when_dtype = "F8_E4M3"
container = { mode = "fp8-e4m3-block", scale = "{stem}.scale", scale_dtype = "F8_E8M0", block = [128, 128] }

[[rules]]
match = "*.ffn.experts.*.weight"
when_dtype = "I8"
container = { mode = "mxfp4", scale = "{stem}.scale", scale_dtype = "F8_E8M0", group = 32, nibble_order = "low-first" }

[[rules]]
match = "*"
plain = true

[identity.tokenizer]
file = "tokenizer.json"
license = "LICENSE"
"#;

fn parse(text: &str) -> Result<Plan, PlanError> {
    Plan::parse(text, Path::new("plans/bad.toml"))
}

fn line_of(text: &str, needle: &str) -> usize {
    let at = text
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` not in text"));
    text[..at].matches('\n').count() + 1
}

/// Refused, and the message names `plans/bad.toml`:LINE and the key.
fn assert_refused(text: &str, line_needle: &str, key: &str, msg_contains: &str) -> String {
    let err = parse(text).expect_err("plan should be refused").to_string();
    let line = line_of(text, line_needle);
    assert!(
        err.starts_with(&format!("`plans/bad.toml`:{line}")),
        "line {line} missing: {err}"
    );
    assert!(
        err.contains(&format!("key `{key}`")),
        "key `{key}` missing: {err}"
    );
    assert!(
        err.contains(msg_contains),
        "`{msg_contains}` missing: {err}"
    );
    err
}

fn tiny_tensors() -> Vec<UpstreamTensor> {
    let f = "model-00001-of-00001.safetensors";
    let mut v = vec![UpstreamTensor::new("embed.weight", "BF16", &[1024, 256], f)];
    for l in 0..2 {
        v.push(UpstreamTensor::new(
            &format!("layers.{l}.attn_norm.weight"),
            "BF16",
            &[256],
            f,
        ));
        v.push(UpstreamTensor::new(
            &format!("layers.{l}.attn.wq_a.weight"),
            "F8_E4M3",
            &[300, 256],
            f,
        ));
        v.push(UpstreamTensor::new(
            &format!("layers.{l}.attn.wq_a.scale"),
            "F8_E8M0",
            &[3, 2],
            f,
        ));
        v.push(UpstreamTensor::new(
            &format!("layers.{l}.ffn.experts.0.w1.weight"),
            "I8",
            &[64, 128],
            f,
        ));
        v.push(UpstreamTensor::new(
            &format!("layers.{l}.ffn.experts.0.w1.scale"),
            "F8_E8M0",
            &[64, 8],
            f,
        ));
    }
    v
}

#[test]
fn every_plan_in_plans_dir_loads() {
    let mut n = 0;
    for entry in std::fs::read_dir(plans_dir()).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "toml") {
            let plan = Plan::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert!(plan.target.repo.as_str().ends_with("-minirun"));
            n += 1;
        }
    }
    assert!(n >= 3, "expected the three real plans, found {n}");
}

#[test]
fn real_plans_declare_what_the_issue_pins() {
    let v4 = Plan::load(&plans_dir().join("deepseek-v4.toml")).unwrap();
    assert_eq!(v4.family, Family::DeepseekV4);
    assert_eq!(v4.status, PlanStatus::Ready);
    assert_eq!(v4.index_shape, IndexShape::SingleSourceUnits);
    assert_eq!(v4.sources[0].repo.as_str(), "deepseek-ai/DeepSeek-V4-Flash");
    assert_eq!(
        v4.sources[0].revision.as_str(),
        "60d8d70770c6776ff598c94bb586a859a38244f1"
    );
    let names: Vec<&str> = v4.units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names.len(), 45);
    assert_eq!(
        (names[0], names[42], names[43], names[44]),
        ("layers00", "layers42", "mtp00", "global00")
    );
    v4.ensure_runnable().unwrap();

    let k3 = Plan::load(&plans_dir().join("kimi-k3.toml")).unwrap();
    assert_eq!(k3.units.len(), 94);
    assert_eq!(k3.units[92].name.as_str(), "layer92");
    assert_eq!(k3.units[93].name.as_str(), "global");
    assert_eq!(k3.index_shape, IndexShape::SingleSourceTotals);

    let h3 = Plan::load(&plans_dir().join("minimax-h3.toml")).unwrap();
    assert!(h3.multi_source);
    assert_eq!(h3.index_shape, IndexShape::MultiSourceUnits);
    assert!(h3.units.iter().all(|u| u.name.as_str() != "adaln-cache"));
    for p in [&k3, &h3] {
        let e = p.ensure_runnable().unwrap_err().to_string();
        assert!(
            e.contains("is a draft") && e.contains("key `status`"),
            "{e}"
        );
    }
}

#[test]
fn mini_plan_is_valid_with_explicit_defaults() {
    let p = parse(MINI).unwrap();
    assert_eq!(p.run.concurrency, DEFAULT_CONCURRENCY);
    assert_eq!(p.run.chunk_bytes, u64::from(DEFAULT_CHUNK_MIB) << 20);
    assert_eq!(p.run.work_dir, Path::new("work/bad"));
    assert_eq!(p.tiles.rows_per_tile, DEFAULT_ROWS_PER_TILE);
    assert_eq!(
        p.tiles.memory_budget_bytes,
        u64::from(DEFAULT_MEMORY_BUDGET_MIB) << 20
    );
    assert!(p.run.endpoint.is_none());
    assert!(p.run.disk_budget.is_none());
}

#[test]
fn disk_budget_is_a_size_or_a_refusal_at_its_line() {
    let with = |v: &str| {
        MINI.replacen(
            "[target]",
            &format!("[run]\ndisk_budget = \"{v}\"\n\n[target]"),
            1,
        )
    };
    let p = parse(&with("100G")).unwrap();
    assert_eq!(p.run.disk_budget, Some(100 << 30));
    assert_eq!(parse(&with("4096")).unwrap().run.disk_budget, Some(4096));
    assert_refused(
        &with("lots"),
        "disk_budget",
        "run.disk_budget",
        "is not a number of bytes",
    );
    assert_refused(
        &with("0G"),
        "disk_budget",
        "run.disk_budget",
        "at least 1 byte",
    );
}

#[test]
fn unknown_key_names_file_line_key() {
    let text = MINI.replace("branch = \"main\"", "branch = \"main\"\ncolour = \"red\"");
    assert_refused(&text, "colour", "target.colour", "unknown field `colour`");
    let text = MINI.replace("plain = true", "plain = true\nplian = true");
    assert_refused(&text, "plian", "rules[2].plian", "unknown field");
}

#[test]
fn branch_name_as_revision_is_refused() {
    let text = MINI.replace("60d8d70770c6776ff598c94bb586a859a38244f1", "main");
    let e = assert_refused(
        &text,
        "\"main\"\nweights",
        "source.revision",
        "branch or tag name",
    );
    assert!(e.contains("pin the full commit"), "{e}");
}

#[test]
fn uppercase_and_short_revisions_are_refused() {
    let up = "60D8D70770C6776FF598C94BB586A859A38244F1";
    let text = MINI.replace("60d8d70770c6776ff598c94bb586a859a38244f1", up);
    assert_refused(&text, up, "source.revision", "uppercase");
    let short = "60d8d70770c6776ff598c94bb586a859a38244f";
    let text = MINI.replace("60d8d70770c6776ff598c94bb586a859a38244f1", short);
    assert_refused(&text, short, "source.revision", "39 hex digits");
}

#[test]
fn null_revision_only_in_a_draft() {
    let null = NULL_COMMIT;
    let text = MINI.replace("60d8d70770c6776ff598c94bb586a859a38244f1", null);
    assert_refused(&text, null, "source.revision", "null commit");
    let draft = text.replace(
        "index_shape",
        "status = \"draft\"\ndraft_reason = \"revision unknown\"\nindex_shape",
    );
    assert!(parse(&draft).is_ok());
}

#[test]
fn target_without_minirun_suffix_is_refused() {
    let text = MINI.replace("minirun/Tiny-minirun", "minirun/Tiny");
    assert_refused(
        &text,
        "minirun/Tiny\"",
        "target.repo",
        "does not end in `-minirun`",
    );
}

#[test]
fn bad_repo_ids_are_refused() {
    for bad in ["deepseek-ai", "a/b/c", "-x/y", "x/y.git", "a--b/c"] {
        let text = MINI.replace("deepseek-ai/DeepSeek-V4-Flash", bad);
        assert_refused(&text, &format!("\"{bad}\""), "source.repo", bad);
    }
}

#[test]
fn candidate_branch_is_reserved() {
    let text = MINI.replace("branch = \"main\"", "branch = \"candidate-abc\"");
    assert_refused(&text, "candidate-abc", "target.branch", "reserved");
}

#[test]
fn duplicate_unit_names_are_refused() {
    let text = MINI.replace("name = \"global00\"", "name = \"layers01\"");
    assert_refused(
        &text,
        "name = \"layers01\"",
        "units[1].name",
        "declared twice",
    );
}

#[test]
fn container_fields_are_checked_per_mode() {
    let text = MINI.replace("block = [128, 128] }", "block = [128, 128], bits = 8 }");
    assert_refused(
        &text,
        "bits = 8",
        "rules[0].container.bits",
        "takes no `bits`",
    );
    let text = MINI.replace("group = 32, nibble_order", "group = 16, nibble_order");
    assert_refused(&text, "group = 16", "rules[1].container.group", "32");
    let text = MINI.replace(", nibble_order = \"low-first\"", "");
    assert_refused(
        &text,
        "mode = \"mxfp4\"",
        "rules[1].container",
        "needs `nibble_order`",
    );
    let text = MINI.replace("when_dtype = \"I8\"", "when_dtype = \"BF16\"");
    assert_refused(&text, "\"BF16\"", "rules[1].when_dtype", "holds I8 or U8");
    let text = MINI.replace(
        "[[rules]]\nmatch = \"*\"\nplain = true",
        "[[rules]]\nmatch = \"*\"\nplain = true\n\n[tiles]\nrows_per_tile = 100",
    );
    assert_refused(
        &text,
        "mode = \"fp8-e4m3-block\"",
        "rules[0].container.rows_per_tile",
        "multiple of 128",
    );
}

#[test]
fn other_cross_field_refusals() {
    let text = MINI.replace(
        "index_shape = \"singleSourceUnits\"",
        "index_shape = \"multiSourceUnits\"",
    );
    assert_refused(&text, "multiSourceUnits", "index_shape", "[sources.NAME]");
    let text = MINI.replace("index_shape", "draft_reason = \"x\"\nindex_shape");
    assert_refused(&text, "draft_reason", "draft_reason", "only allowed");
    let text = MINI.replace("range = { L = [0, 1] }", "range = { L = [3, 1] }");
    assert_refused(&text, "[3, 1]", "units[0].range.L", "first <= last");
    let text = MINI.replace("license = \"LICENSE\"\n\n[target]", "\n[target]");
    assert_refused(
        &text,
        "license = \"LICENSE\"",
        "identity.tokenizer.license",
        "not the licence file",
    );
    let text = MINI.replace(
        "[target]",
        "[run]\nendpoint = \"https://u:tok@h\"\n\n[target]",
    );
    assert!(!assert_refused(&text, "u:tok", "run.endpoint", "credentials").contains("u:tok"));
    let text = MINI.replace(
        "scale = \"{stem}.scale\", scale_dtype = \"F8_E8M0\", block",
        "scale = \"x.scale\", scale_dtype = \"F8_E8M0\", block",
    );
    assert_refused(&text, "\"x.scale\"", "rules[0].container.scale", "{stem}");
}

#[test]
fn syntax_error_names_file_and_line() {
    let text = MINI.replace("branch = \"main\"", "branch = \"main");
    let e = parse(&text).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("`plans/bad.toml`:{}:", line_of(&text, "branch"))),
        "{e}"
    );
}

#[test]
fn draft_plan_validates_but_is_not_runnable() {
    let text = MINI.replace(
        "index_shape",
        "status = \"draft\"\ndraft_reason = \"nibble order unconfirmed\"\nindex_shape",
    );
    let p = parse(&text).unwrap();
    let e = p.ensure_runnable().unwrap_err();
    assert!(matches!(e, PlanError::Draft { .. }));
    let s = e.to_string();
    assert!(
        s.starts_with(&format!(
            "`plans/bad.toml`:{}: key `status`",
            line_of(&text, "status")
        )),
        "{s}"
    );
    assert!(s.contains("nibble order unconfirmed"), "{s}");
    let missing = MINI.replace("index_shape", "status = \"draft\"\nindex_shape");
    assert_refused(&missing, "status", "status", "draft_reason");
}

#[test]
fn resolution_claims_every_tensor_once() {
    let p = parse(MINI).unwrap();
    let tensors = tiny_tensors();
    let r = p.resolve(&tensors).unwrap();
    assert_eq!(r.tensor_count(), tensors.len());
    let l0 = r.unit("layers00").unwrap();
    assert_eq!(l0.placements.len(), 3);
    let fp8 = l0.placements.iter().find_map(|p| match p {
        Placement::Container(c) if c.spec.mode.name() == "fp8-e4m3-block" => Some(c),
        _ => None,
    });
    let g = fp8.unwrap().geometry;
    assert_eq!(
        (g.rows, g.cols, g.scale_rows, g.scale_cols, g.rows_per_scale),
        (300, 256, 3, 2, 128)
    );
}

#[test]
fn overlapping_claims_are_refused() {
    let text = MINI.replace(
        "tensors = [\"embed.weight\"]",
        "tensors = [\"embed.weight\", \"layers.0.attn_norm.weight\"]",
    );
    let e = parse(&text)
        .unwrap()
        .resolve(&tiny_tensors())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tensor `layers.0.attn_norm.weight`")
            && e.contains("`layers00`")
            && e.contains("`global00`"),
        "{e}"
    );
    assert!(
        e.starts_with(&format!(
            "`plans/bad.toml`:{}",
            line_of(&text, "name = \"global00\"")
        )),
        "{e}"
    );
}

#[test]
fn unclaimed_tensor_is_refused() {
    let mut t = tiny_tensors();
    t.push(UpstreamTensor::new(
        "stray.weight",
        "BF16",
        &[4],
        "model-00001-of-00001.safetensors",
    ));
    let e = parse(MINI).unwrap().resolve(&t).unwrap_err().to_string();
    assert!(
        e.contains("tensor `stray.weight`") && e.contains("claimed by no unit"),
        "{e}"
    );
}

#[test]
fn companion_problems_are_refused() {
    let p = parse(MINI).unwrap();
    let mut t = tiny_tensors();
    t.retain(|x| x.name != "layers.1.attn.wq_a.scale");
    let e = p.resolve(&t).unwrap_err().to_string();
    assert!(
        e.contains("tensor `layers.1.attn.wq_a.weight`")
            && e.contains("companion `layers.1.attn.wq_a.scale`"),
        "{e}"
    );
    let mut t = tiny_tensors();
    for x in t
        .iter_mut()
        .filter(|x| x.name == "layers.0.attn.wq_a.scale")
    {
        x.shape = vec![2, 2];
    }
    let e = p.resolve(&t).unwrap_err().to_string();
    assert!(e.contains("of shape [3, 2]"), "{e}");
    let mut t = tiny_tensors();
    for x in t
        .iter_mut()
        .filter(|x| x.name == "layers.0.ffn.experts.0.w1.scale")
    {
        x.dtype = "U8".into();
    }
    let e = p.resolve(&t).unwrap_err().to_string();
    assert!(
        e.contains("tensor `layers.0.ffn.experts.0.w1.scale`") && e.contains("scale_dtype"),
        "{e}"
    );
}

#[test]
fn empty_unit_and_foreign_file_are_refused() {
    let p = parse(MINI).unwrap();
    let t: Vec<_> = tiny_tensors()
        .into_iter()
        .filter(|x| x.name != "embed.weight")
        .collect();
    let e = p.resolve(&t).unwrap_err();
    assert!(matches!(e, PlanError::EmptyUnit { .. }), "{e}");
    assert!(e
        .to_string()
        .contains("unit `global00` matches no upstream tensor"));
    let text = MINI.replace(
        "weights = [\"*.safetensors\"]",
        "weights = [\"model-*.safetensors\"]",
    );
    let mut t = tiny_tensors();
    t[0].file = "other.safetensors".into();
    let e = parse(&text).unwrap().resolve(&t).unwrap_err().to_string();
    assert!(e.contains("no `weights` glob"), "{e}");
}

#[test]
fn deepseek_v4_resolves_every_layer_kind() {
    let plan = Plan::load(&plans_dir().join("deepseek-v4.toml")).unwrap();
    let tensors = v4_tensors(256);
    assert_eq!(tensors.len(), 69187, "models.md §1.4 tensor count");
    let r = plan.resolve(&tensors).unwrap();
    assert_eq!(r.tensor_count(), 69187);
    let count = |u: &str, mode: Option<&str>| {
        r.unit(u)
            .unwrap()
            .placements
            .iter()
            .filter(|p| match (p, mode) {
                (Placement::Plain { .. }, None) => true,
                (Placement::Container(c), Some(m)) => c.spec.mode.name() == m,
                (Placement::Stack(s), Some("stack")) => s.members.len() == 256,
                _ => false,
            })
            .count()
    };
    // (fp8 containers, stacks of 256 mxfp4 experts, plain streams) per layer kind.
    for (unit, fp8, mx, plain) in [
        ("layers00", 8, 3, 13), // SWA, hash gate (tid2eid)
        ("layers02", 9, 3, 22), // CSA: compressor + indexer
        ("layers03", 8, 3, 17), // HCA: compressor
        ("layers42", 9, 3, 22),
        ("mtp00", 10, 3, 19),
        ("global00", 0, 0, 6),
    ] {
        assert_eq!(
            (
                count(unit, Some("fp8-e4m3-block")),
                count(unit, Some("stack")),
                count(unit, None)
            ),
            (fp8, mx, plain),
            "{unit}"
        );
    }
    let find = |u: &str, name: &str| {
        r.unit(u)
            .unwrap()
            .placements
            .iter()
            .find(|p| p.primary().name == name)
            .cloned()
            .unwrap()
    };
    match find("layers00", "layers.0.ffn.gate.tid2eid") {
        Placement::Plain { tensor, .. } => assert_eq!(tensor.dtype, "I64"),
        p => panic!("{p:?}"),
    }
    match find("layers02", "layers.2.attn.indexer.wq_b.weight") {
        Placement::Container(c) => assert_eq!(c.scale.shape, vec![64, 8]),
        p => panic!("{p:?}"),
    }
    match find("layers02", "layers.2.attn.wq_b.weight") {
        Placement::Container(c) => {
            let g = c.geometry;
            assert_eq!(
                (
                    g.rows,
                    g.cols,
                    g.tile_rows,
                    g.rows_per_scale,
                    g.cols_per_scale
                ),
                (32768, 1024, 256, 128, 128)
            );
            assert_eq!(g.tile_slot_bytes, 256 * 1024 + TILE_ALIGN);
        }
        p => panic!("{p:?}"),
    }
    match find("layers05", "layers.5.ffn.experts.0.w2.weight") {
        Placement::Stack(s) => {
            // 256 experts of 4096 rows, two tiles of 2048 rows each; member 255 is the last.
            assert_eq!(s.name, "layers.5.ffn.experts.w2.weight");
            let g = s.geometry;
            assert_eq!((g.rows, g.cols, g.tile_rows), (256 * 4096, 2048, 2048));
            assert_eq!(g.tile_slot_bytes, 2048 * 1024 + 128 * 1024);
            assert_eq!(s.rows_of(255), [255 * 4096, 256 * 4096]);
            let c = s.members.last().unwrap();
            assert_eq!(c.weight.name, "layers.5.ffn.experts.255.w2.weight");
            assert_eq!(
                (c.geometry.rows, c.geometry.cols, c.geometry.cols_per_scale),
                (4096, 2048, 32)
            );
            assert!(matches!(
                c.spec.mode,
                ContainerMode::Mxfp4 {
                    nibble_order: NibbleOrder::LowFirst,
                    ..
                }
            ));
        }
        p => panic!("{p:?}"),
    }
    for plain in [
        "layers.3.hc_attn_fn",
        "layers.3.attn.compressor.ape",
        "layers.4.ffn.gate.bias",
        "layers.4.attn.attn_sink",
    ] {
        let unit = format!(
            "layers{:02}",
            plain.split('.').nth(1).unwrap().parse::<u32>().unwrap()
        );
        assert!(
            matches!(find(&unit, plain), Placement::Plain { .. }),
            "{plain}"
        );
    }
    assert!(matches!(
        find("mtp00", "mtp.0.e_proj.weight"),
        Placement::Container(_)
    ));
    assert!(matches!(
        find("global00", "hc_head_fn"),
        Placement::Plain { .. }
    ));
    // The committed plan also runs the generated checkpoint (fewer routed experts, same layout),
    // so it declares no tensor count; a plan that pins the documented count refuses anything else.
    plan.resolve(&v4_tensors(2)).unwrap();
    let path = plans_dir().join("deepseek-v4.toml");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "expected_weight_files = 46",
        "expected_weight_files = 46\nexpected_tensors = 69187",
    );
    let pinned = Plan::parse(&text, &path).unwrap();
    let e = pinned.resolve(&v4_tensors(2)).unwrap_err().to_string();
    assert!(e.contains("expected_tensors") && e.contains("69187"), "{e}");
    pinned.resolve(&v4_tensors(256)).unwrap();
}

#[test]
fn minimax_h3_resolves_sources_affine_and_omissions() {
    let plan = Plan::load(&plans_dir().join("minimax-h3.toml")).unwrap();
    let tensors = h3_tensors();
    let r = plan.resolve(&tensors).unwrap();
    assert_eq!(r.tensor_count(), tensors.len());
    assert_eq!(r.omitted.len(), 14 * 3 + 2);
    assert!(r
        .omitted
        .iter()
        .all(|o| o.reason.contains("hidden_states[50]")));
    let b = r.unit("dit-block-07").unwrap();
    let aff = b
        .placements
        .iter()
        .find_map(|p| match p {
            Placement::Container(c) if c.weight.name == "transformer_blocks.7.ff.net.2.weight" => {
                Some(c)
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(
        aff.bias.as_ref().unwrap().name,
        "transformer_blocks.7.ff.net.2.biases"
    );
    assert_eq!(
        (
            aff.geometry.rows,
            aff.geometry.cols,
            aff.geometry.cols_per_scale
        ),
        (5376, 14336, 64)
    );
    // The two VAEs hold tensors of the same name; each source's unit gets its own.
    for u in ["vae-video", "vae-audio"] {
        let unit = r.unit(u).unwrap();
        assert_eq!(unit.placements.len(), 2);
        assert!(unit.placements.iter().all(|p| p.primary().source == u));
    }
    assert_eq!(r.unit("te-layer-49").unwrap().placements.len(), 3);
    assert!(r.unit("te-layer-50").is_none());
}

#[test]
fn unit_selection() {
    let p = Plan::load(&plans_dir().join("deepseek-v4.toml")).unwrap();
    let s = |sel: &str| {
        p.select_units(Some(sel))
            .map(|v| v.iter().map(|u| u.to_string()).collect::<Vec<_>>())
    };
    assert_eq!(p.select_units(None).unwrap().len(), 45);
    assert_eq!(
        s("layers00..layers02").unwrap(),
        ["layers00", "layers01", "layers02"]
    );
    assert_eq!(
        s("global00, layers41..mtp00,layers41").unwrap(),
        ["layers41", "layers42", "mtp00", "global00"]
    );
    for (bad, want) in [
        ("layers43", "not a unit"),
        ("layers05..layers02", "backwards"),
        ("layers00,,mtp00", "empty item"),
        ("", "empty item"),
        ("layers00..nope", "`nope`"),
    ] {
        let e = s(bad).unwrap_err();
        assert!(matches!(e, PlanError::Selection { .. }));
        assert!(e.to_string().contains(want), "{bad}: {e}");
    }
}

#[test]
fn resolved_plan_snapshot() {
    let p = parse(MINI).unwrap();
    let r = p.resolve(&tiny_tensors()).unwrap();
    let got = format!(
        "{}\n{}",
        pipeline::inspect::render_plan(&p),
        pipeline::inspect::render_resolution(&p, &r, false)
    );
    let snap = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/plan_resolved.txt");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&snap, &got).unwrap();
    }
    let want =
        std::fs::read_to_string(&snap).expect("snapshot missing: run with UPDATE_SNAPSHOTS=1");
    assert_eq!(
        got, want,
        "printed outputs differ; re-run with UPDATE_SNAPSHOTS=1 after checking the diff"
    );
}

#[test]
fn inspect_plan_table_and_json() {
    let path = plans_dir().join("kimi-k3.toml");
    let table = pipeline::inspect::inspect_plan(&path, false).unwrap();
    assert!(
        table.contains("DRAFT") && table.contains("layer92") && table.contains("mxfp4"),
        "{table}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&pipeline::inspect::inspect_plan(&path, true).unwrap()).unwrap();
    assert_eq!(json["family"], "kimi-k3");
    assert_eq!(json["status"]["status"], "draft");
    assert_eq!(json["units"].as_array().unwrap().len(), 94);
}

#[test]
fn overrides_and_file_sources() {
    let text = MINI.replace(
        "[target]",
        "[run]\nendpoint = \"http://127.0.0.1:9/\"\nwork_dir = \"w\"\n\n[target]",
    );
    let p = parse(&text).unwrap();
    assert_eq!(
        p.endpoint(None, Some("https://env")).as_deref(),
        Some("http://127.0.0.1:9")
    );
    assert_eq!(
        p.endpoint(Some("http://cli"), Some("https://env"))
            .as_deref(),
        Some("http://cli")
    );
    let bare = parse(MINI).unwrap();
    assert_eq!(
        bare.endpoint(None, Some("https://env/")).as_deref(),
        Some("https://env")
    );
    assert_eq!(bare.endpoint(None, None), None);
    assert_eq!(p.work_dir(None), Path::new("w"));
    assert_eq!(p.work_dir(Some(Path::new("/x"))), Path::new("/x"));
    let h3 = Plan::load(&plans_dir().join("minimax-h3.toml")).unwrap();
    assert_eq!(
        h3.source_for_file("vae/diffusion_pytorch_model.safetensors")
            .unwrap()
            .name,
        "vae-video"
    );
    assert_eq!(
        h3.source_for_file("audio_vae/x.safetensors").unwrap().name,
        "vae-audio"
    );
    assert!(h3.source_for_file("README.md").is_none());
    let r = p.resolve(&tiny_tensors()).unwrap();
    assert_eq!(r.unit("layers00").unwrap().tensors().count(), 5);
}

#[test]
fn oversized_or_missing_plan_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.toml");
    std::fs::write(&big, vec![b'#'; (MAX_PLAN_BYTES + 1) as usize]).unwrap();
    assert!(matches!(Plan::load(&big), Err(PlanError::TooLarge { .. })));
    let e = Plan::load(&dir.path().join("none.toml")).unwrap_err();
    assert!(
        matches!(e, PlanError::Read { .. }) && e.to_string().contains("none.toml"),
        "{e}"
    );
}
