//! One table of repository-id edge cases (`repo_ids.json`) through `check_repo_id`; the same
//! table goes through huggingface_hub's `validate_repo_id` in `ci/checks.d/41-repo-id-oracle.sh`.
//! The two verdicts may differ only where the row says why, and the only reason allowed is the
//! one documented rule Minirun adds: the `owner/` part is required.

use serde_json::Value;

fn cases() -> Vec<(String, bool, bool, String)> {
    let text = include_str!("repo_ids.json");
    let doc: Value = serde_json::from_str(text).expect("repo_ids.json parses");
    doc["cases"]
        .as_array()
        .expect("cases array")
        .iter()
        .map(|c| {
            (
                c["id"].as_str().expect("id").to_owned(),
                c["ours"].as_bool().expect("ours"),
                c["hub"].as_bool().expect("hub"),
                c["note"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[test]
fn table_matches_check_repo_id() {
    let cases = cases();
    assert!(cases.len() >= 40, "the table lost its cases");
    for (id, ours, _, _) in &cases {
        let got = names::check_repo_id(id);
        assert_eq!(got.is_ok(), *ours, "{id:?}: check_repo_id says {got:?}");
    }
}

#[test]
fn differences_from_the_hub_are_only_the_required_owner() {
    for (id, ours, hub, note) in cases() {
        if ours == hub {
            assert!(note.is_empty(), "{id:?}: a note on an agreeing row: {note}");
            continue;
        }
        assert_eq!(note, "owner-required", "{id:?}: an unexplained difference");
        assert!(
            hub && !ours && !id.contains('/'),
            "{id:?}: `owner-required` explains only a bare name the Hub accepts"
        );
    }
}
