//! `minirun-run --repo OWNER/NAME` (docs/runner.md "From a repo id"): one command from a
//! published repository to generated text — pulled into the Hugging Face cache layout under
//! `HF_HOME`, verified with `minirun-verify`'s rules, run through the one open path; a second call
//! downloads nothing; a snapshot whose entries are links (as huggingface_hub makes them) is
//! re-materialised as regular files rather than refused.

use super::{fixture, TARGET};
use std::process::Command;

fn run_repo(home: &std::path::Path, extra: &[&str]) -> (serde_json::Value, String) {
    let fx = fixture();
    let out = Command::new(env!("CARGO_BIN_EXE_minirun-run"))
        .args([
            "--repo",
            TARGET,
            "-p",
            "The model",
            "-n",
            "3",
            "--ignore-eos",
            "--json",
        ])
        .args(extra)
        .env("HF_HOME", home)
        .env("HF_ENDPOINT", &fx.url)
        .env_remove("HF_HUB_CACHE")
        .env_remove("HF_TOKEN")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    (serde_json::from_slice(&out.stdout).unwrap(), err)
}

#[test]
fn a_repo_id_runs_from_the_cache_and_a_second_call_downloads_nothing() {
    let fx = fixture();
    let home = fx.scratch.join("hf-home-repo");
    super::discard(&home);
    let (first, err) = run_repo(&home, &[]);
    let pulled = &first["pulled"];
    assert!(pulled["bytes_downloaded"].as_u64().unwrap() > 0, "{pulled}");
    assert!(
        err.contains(&format!("pulled `{TARGET}` at {}", fx.commit)),
        "{err}"
    );
    let folder = home.join("hub/models--minirun--DeepSeek-V4-Flash-minirun");
    let snap = folder.join("snapshots").join(&fx.commit);
    assert_eq!(pulled["dir"], snap.display().to_string());
    assert_eq!(
        std::fs::read_to_string(folder.join("refs/main")).unwrap(),
        fx.commit
    );
    // The same tokens as the consumer's verified copy run with --artifact.
    let out = Command::new(env!("CARGO_BIN_EXE_minirun-run"))
        .arg("--artifact")
        .arg(&fx.consumer)
        .args(["-p", "The model", "-n", "3", "--ignore-eos", "--json"])
        .output()
        .unwrap();
    let direct: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(first["tokens"], direct["tokens"]);

    let (second, _) = run_repo(&home, &["--revision", "main"]);
    assert_eq!(
        second["pulled"]["bytes_downloaded"], 0,
        "{}",
        second["pulled"]
    );
    assert_eq!(second["pulled"]["files_downloaded"], 0);
    assert_eq!(second["tokens"], first["tokens"]);

    // `minirun-verify --list`: discoverable, verified here (this snapshot, at the commit `main`
    // names now) and chat-capable here (the runner's registry has its family).
    let listed = |home: &std::path::Path| {
        let cache = home.join("hub");
        let rows = pipeline::verify::list::list_here(
            Some(&fx.url),
            "minirun",
            Some(&cache),
            &runner::open::chat_here,
        )
        .unwrap();
        rows.into_iter().find(|r| r.repo == TARGET).unwrap()
    };
    let row = listed(&home);
    assert!(row.discoverable.ok && row.verified_here.ok, "{row:?}");
    assert_eq!(row.verified_here.detail, fx.commit);
    assert_eq!(
        (row.chat_here.ok, row.chat_here.detail.as_str()),
        (true, "deepseek-v4")
    );
    let elsewhere = listed(&fx.scratch.join("hf-home-empty"));
    assert!(
        !elsewhere.verified_here.ok && !elsewhere.chat_here.ok,
        "{elsewhere:?}"
    );
    assert!(
        elsewhere.verified_here.detail.contains("no copy of"),
        "{elsewhere:?}"
    );

    // huggingface_hub's own layout links snapshot entries to blobs/: such a snapshot is made
    // regular again (the copy hashed like any kept file), not refused, and nothing is fetched.
    let blobs = folder.join("blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    let entry = snap.join("config.json");
    std::fs::rename(&entry, blobs.join("config-blob")).unwrap();
    std::os::unix::fs::symlink(blobs.join("config-blob"), &entry).unwrap();
    // a link is not a verified entry: the copy is listed, but neither verified nor chat-capable
    let linked = listed(&home);
    assert!(
        !linked.verified_here.ok && !linked.chat_here.ok,
        "{linked:?}"
    );
    assert!(
        linked.verified_here.detail.contains("CONTRADICTED"),
        "{linked:?}"
    );
    let (third, _) = run_repo(&home, &["--revision", &fx.commit]);
    assert_eq!(
        third["pulled"]["links_rematerialised"], 1,
        "{}",
        third["pulled"]
    );
    assert_eq!(
        third["pulled"]["bytes_downloaded"], 0,
        "{}",
        third["pulled"]
    );
    assert!(std::fs::symlink_metadata(&entry)
        .unwrap()
        .file_type()
        .is_file());
    assert_eq!(third["tokens"], first["tokens"]);
    super::discard(&home);
}

#[test]
fn a_repo_never_published_is_refused_with_the_next_step_and_serve_says_what_it_would_pull() {
    let fx = fixture();
    let home = fx.scratch.join("hf-home-missing");
    let out = Command::new(env!("CARGO_BIN_EXE_minirun-run"))
        .args(["--repo", "minirun/Never-published-minirun", "-p", "x"])
        .env("HF_HOME", &home)
        .env("HF_ENDPOINT", &fx.url)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("nothing is published under that id here"),
        "{err}"
    );
    super::discard(&home);
    // --revision names what to pull with --repo, and needs --repo or --artifact.
    let out = Command::new(env!("CARGO_BIN_EXE_minirun-run"))
        .args([
            "--model",
            "/nonexistent/m.gguf",
            "--revision",
            "main",
            "-p",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let out = Command::new(env!("CARGO_BIN_EXE_minirun-serve"))
        .args([
            "--repo",
            TARGET,
            "--revision",
            "v1",
            "--dry-run",
            "--port",
            "9",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains(&format!("would pull `{TARGET}` at `v1`")),
        "{said}"
    );
}
