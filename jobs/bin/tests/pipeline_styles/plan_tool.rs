//! `minirun-plan pin` and `minirun-plan check` against the style checkpoints served by
//! `minirun-hub` (issue 23): pin resolves a branch to the imported commit and rewrites only the
//! revision (comments kept), re-confirms a pinned commit without writing, and refuses what it
//! cannot resolve; check passes the right K3- and H3-style plans and reports each way a plan can
//! be wrong with its own finding kind and exit 1.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::pipeline_styles::styles::{kimi_k3, minimax_h3};
use crate::pipeline_styles::v4::{cmd, Hub};

const NULL: &str = "0000000000000000000000000000000000000000";

fn run(args: &[&str], endpoint: &str) -> Output {
    cmd("minirun-plan")
        .args(args)
        .args(["--endpoint", endpoint])
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `plan` with each (from, to) replaced once, written into `dir` as `name`.
fn variant(plan: &Path, dir: &Path, name: &str, edits: &[(&str, &str)]) -> PathBuf {
    let mut s = std::fs::read_to_string(plan).unwrap();
    for (from, to) in edits {
        assert!(s.contains(from), "`{from}` is not in {plan:?}");
        s = s.replacen(from, to, 1);
    }
    let p = dir.join(name);
    std::fs::write(&p, s).unwrap();
    p
}

/// `plan` made a draft whose every revision is the null commit.
fn unpinned(plan: &Path, dir: &Path) -> (PathBuf, String) {
    let p = Plan::load(plan);
    let mut s = std::fs::read_to_string(plan).unwrap();
    for src in &p.sources {
        s = s.replace(src.revision.as_str(), NULL);
    }
    let s = s.replacen(
        "schema = 1\n",
        "schema = 1\nstatus = \"draft\"\ndraft_reason = \"the revision is not pinned yet\"\n",
        1,
    );
    let out = dir.join("unpinned.toml");
    std::fs::write(&out, &s).unwrap();
    (out, s)
}

struct Plan;
impl Plan {
    fn load(p: &Path) -> pipeline::plan::Plan {
        pipeline::plan::Plan::load(p).unwrap()
    }
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

#[test]
fn pin_resolves_a_branch_rewrites_only_the_revisions_and_refuses_the_unresolvable() {
    let st = minimax_h3();
    let hub = Hub::start(&st.hub_root, "");
    let dir = tempfile::tempdir().unwrap();
    let (plan, before) = unpinned(&st.plan, dir.path());
    let p = plan.to_str().unwrap();
    let want: Vec<String> = Plan::load(&st.plan)
        .sources
        .iter()
        .map(|s| s.revision.as_str().to_owned())
        .collect();

    // Nothing to resolve without --revision: usage (64), the file untouched.
    let o = run(&["pin", p], &hub.url);
    assert_eq!(o.status.code(), Some(64), "{}", text(&o));
    assert!(text(&o).contains("never guesses a branch"), "{}", text(&o));
    // A source the plan lacks: usage.
    let o = run(
        &["pin", p, "--revision", "main", "--source", "nope"],
        &hub.url,
    );
    assert_eq!(o.status.code(), Some(64), "{}", text(&o));
    // A dry run resolves and writes nothing.
    let o = run(&["pin", p, "--revision", "main", "--dry-run"], &hub.url);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("dry run"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&plan).unwrap(), before);

    // One source only, then the rest.
    let o = run(
        &["pin", p, "--revision", "main", "--source", "dit", "--json"],
        &hub.url,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = json(&o);
    assert_eq!(r["schema"], "minirun.plan-pin/1");
    assert_eq!(r["sources"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["sources"][0]["key"], "sources.dit.revision");
    assert_eq!(r["sources"][0]["from"], NULL);
    assert_eq!(r["sources"][0]["to"], want[0].as_str());
    assert_eq!(r["written"], true);
    let o = run(&["pin", p, "--revision", "main"], &hub.url);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let after = std::fs::read_to_string(&plan).unwrap();
    let got: Vec<String> = Plan::load(&plan)
        .sources
        .iter()
        .map(|s| s.revision.as_str().to_owned())
        .collect();
    assert_eq!(got, want);
    // Only revision lines changed; every comment and blank line is where it was.
    let (b, a): (Vec<&str>, Vec<&str>) = (before.lines().collect(), after.lines().collect());
    assert_eq!(b.len(), a.len());
    for (x, y) in b.iter().zip(&a) {
        if x != y {
            assert!(
                x.starts_with("revision = ") && x.contains(NULL),
                "{x} → {y}"
            );
            assert!(
                y.starts_with("revision = ") && !y.contains(NULL),
                "{x} → {y}"
            );
        }
    }
    assert!(b.iter().zip(&a).filter(|(x, y)| x != y).count() == want.len());

    // Re-confirming the pinned commits writes nothing.
    let o = run(&["pin", p, "--json"], &hub.url);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = json(&o);
    assert_eq!(r["written"], false, "{r}");
    assert!(r["sources"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["changed"] == false));
    assert_eq!(std::fs::read_to_string(&plan).unwrap(), after);

    // A branch, a repository or a commit the hub does not have is refused (exit 1), unwritten.
    for (edits, rev, says) in [
        (vec![], "no-such-branch", "no-such-branch"),
        (
            vec![(
                "minirun-synth/MiniMax-H3-MLX-8bit-style\"",
                "minirun-synth/Nope\"",
            )],
            "main",
            "minirun-synth/Nope",
        ),
        (
            vec![],
            "0123456789abcdef0123456789abcdef01234567",
            "0123456789abcdef",
        ),
    ] {
        let v = variant(&plan, dir.path(), "bad.toml", &edits);
        let before = std::fs::read_to_string(&v).unwrap();
        let o = run(&["pin", v.to_str().unwrap(), "--revision", rev], &hub.url);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(
            text(&o).contains(says) && text(&o).contains("HTTP 404"),
            "{}",
            text(&o)
        );
        assert_eq!(std::fs::read_to_string(&v).unwrap(), before);
    }
}

#[test]
fn check_passes_the_right_style_plans() {
    for st in [kimi_k3(), minimax_h3()] {
        let hub = Hub::start(&st.hub_root, "");
        let o = run(&["check", st.plan.to_str().unwrap(), "--json"], &hub.url);
        assert_eq!(o.status.code(), Some(0), "{}: {}", st.name, text(&o));
        let r = json(&o);
        assert_eq!(r["schema"], "minirun.plan-check/1");
        assert_eq!(
            (r["would_run"].as_bool(), r["draft"].as_bool()),
            (Some(true), Some(false))
        );
        assert_eq!(r["findings"].as_array().unwrap().len(), 0, "{r}");
        assert_eq!(r["units"].as_array().unwrap().len(), st.units);
        // Every tensor is decided by exactly one rule, claimed by one unit or omitted.
        let sum = |k: &str| -> u64 {
            r[k].as_array()
                .unwrap()
                .iter()
                .map(|x| x["tensors"].as_u64().unwrap())
                .sum()
        };
        let total: u64 = r["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["tensors"].as_u64().unwrap())
            .sum();
        assert_eq!(sum("units") + r["omitted"].as_u64().unwrap(), total, "{r}");
        assert_eq!(sum("rules"), sum("units"), "{r}");
        assert!(r["rules"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["tensors"].as_u64() > Some(0)));
        // The readable form says so.
        let o = run(&["check", st.plan.to_str().unwrap()], &hub.url);
        assert!(
            text(&o).contains("verdict: the plan would run"),
            "{}",
            text(&o)
        );
    }
}

/// Text edits to a plan: (what, replaced by).
type Edits<'a> = &'a [(&'a str, &'a str)];

/// Each way a K3-style plan can be wrong: (edits, finding kind, text every such finding names).
const WRONG: &[(Edits<'static>, &str, &str)] = &[
    (
        &[("    \"vision_tower.*\",\n", "")],
        "unclaimed",
        "vision_tower.",
    ),
    (
        &[(
            "\"mm_projector.*\",\n",
            "\"mm_projector.*\",\n    \"language_model.model.layers.0.*\",\n",
        )],
        "claimed-twice",
        "language_model.model.layers.0.",
    ),
    (
        &[("when_dtype = \"U8\"", "when_dtype = \"I8\"")],
        "unused-rule",
        "rules[0]",
    ),
    (
        &[
            ("when_dtype = \"U8\"\n", ""),
            (
            "mode = \"mxfp4\", scale = \"{stem}.weight_scale\", scale_dtype = \"U8\", group = 32, nibble_order = \"low-first\"",
            "mode = \"fp8-e4m3-block\", scale = \"{stem}.weight_scale\", scale_dtype = \"U8\", block = [128, 128]",
        )],
        "geometry",
        "has dtype `U8`",
    ),
    (
        &[("scale_dtype = \"U8\"", "scale_dtype = \"F8_E8M0\"")],
        "scale-dtype",
        "weight_scale",
    ),
    (
        &[(
            "scale = \"{stem}.weight_scale\"",
            "scale = \"{stem}.scales\"",
        )],
        "missing-companion",
        ".scales",
    ),
    (
        &[("expected_weight_files = 7", "expected_weight_files = 8")],
        "weight-file-count",
        "expected_weight_files",
    ),
    (
        &[(
            "license = \"LICENSE\"\nexpected",
            "license = \"LICENSE.txt\"\nexpected",
        ), (
            "license = \"LICENSE\"\n\n[identity.config]",
            "license = \"LICENSE.txt\"\n\n[identity.config]",
        )],
        "missing-file",
        "LICENSE.txt",
    ),
    (
        &[("file = \"tiktoken.model\"", "file = \"tokenizer.json\"")],
        "missing-file",
        "tokenizer.json",
    ),
    (
        &[(
            "weights = [\"model-*-of-000007.safetensors\"]",
            "weights = [\"weights/*.safetensors\"]",
        )],
        "no-weight-files",
        "weights/*.safetensors",
    ),
];

#[test]
fn check_reports_each_way_a_plan_is_wrong() {
    let st = kimi_k3();
    let hub = Hub::start(&st.hub_root, "");
    let dir = tempfile::tempdir().unwrap();
    for (i, (edits, kind, names)) in WRONG.iter().enumerate() {
        let v = variant(&st.plan, dir.path(), &format!("wrong{i}.toml"), edits);
        let o = run(&["check", v.to_str().unwrap(), "--json"], &hub.url);
        assert_eq!(o.status.code(), Some(1), "{kind}: {}", text(&o));
        let r = json(&o);
        assert_eq!(r["would_run"], false);
        let of: Vec<&serde_json::Value> = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["kind"] == *kind)
            .collect();
        assert!(!of.is_empty(), "{kind}: no such finding in {r}");
        for f in &of {
            assert!(
                f["message"].as_str().unwrap().contains(names),
                "{kind}: {f}"
            );
        }
        let o = run(&["check", v.to_str().unwrap()], &hub.url);
        assert_eq!(o.status.code(), Some(1));
        let t = text(&o);
        assert!(
            t.contains(&format!("finding {kind} ("))
                && t.contains("verdict: the plan would not run"),
            "{t}"
        );
    }
    // A draft whose layout binds is reported as such, exit 1; an unpinned plan is refused (64).
    let d = variant(
        &st.plan,
        dir.path(),
        "draft.toml",
        &[(
            "schema = 1\n",
            "schema = 1\nstatus = \"draft\"\ndraft_reason = \"not yet\"\n",
        )],
    );
    let o = run(&["check", d.to_str().unwrap(), "--json"], &hub.url);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let r = json(&o);
    assert_eq!(
        (r["layout_ok"].as_bool(), r["draft"].as_bool()),
        (Some(true), Some(true)),
        "{r}"
    );
    let (u, _) = unpinned(&st.plan, dir.path());
    let o = run(&["check", u.to_str().unwrap()], &hub.url);
    assert_eq!(o.status.code(), Some(64), "{}", text(&o));
    assert!(text(&o).contains("minirun-plan pin"), "{}", text(&o));
}
