//! Verified-only execution: evidence, load policy, identities, and `minirun-run --artifact`.

use std::path::Path;
use std::process::Command;

use runner::artifact::{ArtifactError, OpenOptions, TensorKind, VerifiedArtifact};

use super::{copy, discard, fixture, verified_copy, TARGET};

const WQ_B: &str = "layers.0.attn.wq_b.weight";
const WQ_A: &str = "layers.0.attn.wq_a.weight";
const NORM: &str = "layers.0.attn_norm.weight";

fn matrix(a: &VerifiedArtifact, name: &str) -> [u64; 2] {
    a.tensor(name).and_then(|t| t.matrix()).unwrap()
}

/// Loads `name` and reads every tile; returns the tile count.
fn read_all_tiles(a: &VerifiedArtifact, name: &str) -> Result<u64, ArtifactError> {
    let [r, c] = matrix(a, name);
    let mut l = a.load_container(name, r, c)?;
    let mut slot = l.slot();
    let tiles = l.tiles();
    for i in tiles.clone() {
        l.read_tile(i, &mut slot)?;
    }
    Ok(tiles.end - tiles.start)
}

fn unheld(revision: Option<&str>) -> OpenOptions {
    OpenOptions {
        revision: revision.map(String::from),
        require_evidence: false,
    }
}

#[test]
fn evidence_held_loads_every_tensor_without_rehashing() {
    let fx = fixture();
    let a = VerifiedArtifact::open(&fx.consumer, &OpenOptions::default()).unwrap();
    let auth = a.authority().unwrap();
    assert_eq!(
        (auth.repo.as_str(), auth.commit.as_str()),
        (TARGET, fx.commit.as_str())
    );
    assert_eq!(a.family(), "deepseek-v4");
    assert_eq!((a.vocab_size(), a.tokenizer_vocab()), (512, 512));
    let (mut containers, mut plains, mut tiles) = (0, 0, 0);
    let names: Vec<String> = a.tensor_names().map(String::from).collect();
    for n in &names {
        let info = a.tensor(n).unwrap();
        match &info.kind {
            TensorKind::Container { role } if role == "packed" => {
                tiles += read_all_tiles(&a, n).unwrap();
                containers += 1;
            }
            TensorKind::Container { .. } => {}
            TensorKind::Plain => {
                let p = a.load_plain(n).unwrap();
                assert_eq!(p.read().unwrap().len() as u64, p.range.end - p.range.start);
                plains += 1;
            }
        }
    }
    assert_eq!(containers, 903);
    assert!(
        plains > 500 && tiles > containers,
        "{plains} plain, {tiles} tiles"
    );
    // ADR 0013: authority for this repo and commit, so no tile or stream was hashed; every
    // load still did its rooted open and identity recheck.
    assert_eq!(a.digest_checks(), 0);
    assert!(a.loads() >= containers + plains);
    // The requested geometry is checked against the header before a byte is read.
    let e = a.load_container(WQ_B, 512, 64).err().unwrap();
    assert!(e.to_string().contains("requested a 512 × 64 matrix"), "{e}");
    assert!(a.load_container(NORM, 1, 1).is_err());
    assert!(a.load_plain(WQ_A).is_err());
}

fn flip_byte(path: &Path, at: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x5a], at).unwrap();
}

#[test]
fn without_evidence_or_for_another_revision_tile_digests_are_checked() {
    let d = copy("digests");
    let other = "1".repeat(40);
    // The CLI's options: evidence required, none for this revision → refused.
    let e = VerifiedArtifact::open(
        &d,
        &OpenOptions {
            revision: Some(other.clone()),
            require_evidence: true,
        },
    )
    .err()
    .unwrap();
    assert!(matches!(e, ArtifactError::NoEvidence { .. }), "{e}");
    assert!(e.to_string().contains(&fixture().commit), "{e}");
    // Evidence for another revision is no authority: every tile is hashed.
    let a = VerifiedArtifact::open(&d, &unheld(Some(&other))).unwrap();
    assert!(a.authority().is_none());
    let tiles = read_all_tiles(&a, WQ_B).unwrap();
    assert_eq!((tiles, a.digest_checks()), (2, 2));
    a.load_plain(NORM).unwrap().read().unwrap();
    assert_eq!(a.digest_checks(), 3);
    // The norm's bytes in the unit's file of plain streams.
    let norm_at = a.tensor(NORM).unwrap().span.map_or(0, |s| s[0]);
    drop(a);
    // A flipped payload byte in tile 1 of wq_b and in a plain stream: caught at load.
    let til = d.join("layers00/layers.0.attn.wq_b.til");
    let hb = 16_384;
    let tile_len = (std::fs::metadata(&til).unwrap().len() - hb) / 2;
    flip_byte(&til, hb + tile_len + 100);
    flip_byte(&d.join("layers00/plain.bin"), norm_at + 3);
    for opts in [unheld(Some(&other)), {
        std::fs::remove_dir_all(d.join(".minirun-evidence")).unwrap();
        unheld(None)
    }] {
        let a = VerifiedArtifact::open(&d, &opts).unwrap();
        let e = read_all_tiles(&a, WQ_B).err().unwrap();
        let msg = e.to_string();
        assert!(msg.contains("tile 1") || msg.contains("digest"), "{msg}");
        assert!(
            read_all_tiles(&a, "layers.0.attn.wq_a.weight").is_ok(),
            "other tiles still load"
        );
        let e = a.load_plain(NORM).unwrap().read().err().unwrap();
        assert!(matches!(e, ArtifactError::Digest { .. }), "{e}");
    }
    // Without authority the baseline is the identity at the first load: a change mid-run fails.
    let a = VerifiedArtifact::open(&d, &unheld(None)).unwrap();
    read_all_tiles(&a, WQ_A).unwrap();
    let st = Command::new("touch")
        .arg(d.join("layers00/layers.0.attn.wq_a.til"))
        .status()
        .unwrap();
    assert!(st.success());
    let e = read_all_tiles(&a, WQ_A).err().unwrap();
    assert!(e.to_string().contains("first loaded in this run"), "{e}");
    drop(a);
    // Without evidence the CLI refuses outright.
    let e = VerifiedArtifact::open(&d, &OpenOptions::default())
        .err()
        .unwrap();
    assert!(e.to_string().contains("no verification evidence"), "{e}");
    discard(&d);
}

#[test]
fn a_file_touched_or_replaced_during_a_streamed_run_fails_the_next_load() {
    let d = verified_copy("touch");
    let a = VerifiedArtifact::open(&d, &OpenOptions::default()).unwrap();
    assert!(a.authority().is_some());
    // A streamed matmul through the engine when there is one, else the same tile reads.
    let stream_once = |name: &str| -> Result<(), String> {
        let [r, c] = matrix(&a, name);
        let mut l = a.load_container(name, r, c).map_err(|e| e.to_string())?;
        match super::engine("touch") {
            Some(e) => {
                let g = e.gpu();
                let x = g.upload_f32("x", &vec![0.5; c as usize]).unwrap();
                let y = g.zeros("y", r * 4).unwrap();
                let mut s = runner::artifact::stream::ContainerStreamer::new();
                s.matmul(e, &mut l, &x, &y, 1).map_err(|e| e.to_string())?;
                assert_eq!(s.reads, l.header().layout.tile_count);
            }
            None => {
                let mut slot = l.slot();
                for i in 0..l.header().layout.tile_count {
                    l.read_tile(i, &mut slot).map_err(|e| e.to_string())?;
                }
            }
        }
        Ok(())
    };
    stream_once(WQ_B).unwrap();
    stream_once(WQ_A).unwrap();
    // `touch` (mtime and ctime change, same bytes): the next load of that file fails.
    let st = Command::new("touch")
        .arg(d.join("layers00/layers.0.attn.wq_b.til"))
        .status()
        .unwrap();
    assert!(st.success());
    let e = stream_once(WQ_B).unwrap_err();
    assert!(
        e.contains("layers00/layers.0.attn.wq_b.til") && e.contains("no longer matches"),
        "{e}"
    );
    stream_once(WQ_A).unwrap();
    // Replaced by identical bytes with the mtime restored (`touch -r`): new inode, caught.
    let victim = d.join("layers00/layers.0.attn.wq_a.til");
    let tmp = d.join("layers00/wq_a.tmp");
    std::fs::copy(&victim, &tmp).unwrap();
    let st = Command::new("touch")
        .arg("-r")
        .arg(&victim)
        .arg(&tmp)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::rename(&tmp, &victim).unwrap();
    let e = stream_once(WQ_A).unwrap_err();
    assert!(e.contains("replaced"), "{e}");
    // A plain stream likewise, and the whole artifact no longer opens.
    let plain = d.join("layers00/plain.bin");
    a.load_plain(NORM).unwrap();
    Command::new("touch").arg(&plain).status().unwrap();
    assert!(matches!(
        a.load_plain(NORM).err().unwrap(),
        ArtifactError::Modified { .. }
    ));
    let e = VerifiedArtifact::open(&d, &OpenOptions::default())
        .err()
        .unwrap();
    assert!(matches!(e, ArtifactError::Modified { .. }), "{e}");
    drop(a);
    discard(&d);
}

/// Rewrites `config.json` and its identity in `index.json` consistently (no evidence is held,
/// so only the identity rules can object).
fn rewrite_config(d: &Path, f: impl Fn(&mut serde_json::Value)) {
    use sha2::Digest;
    let mut c: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("config.json")).unwrap()).unwrap();
    f(&mut c);
    let bytes = serde_json::to_vec_pretty(&c).unwrap();
    std::fs::write(d.join("config.json"), &bytes).unwrap();
    let mut idx: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("index.json")).unwrap()).unwrap();
    idx["configuration"]["bytes"] = bytes.len().into();
    idx["configuration"]["sha256"] = hex::encode(sha2::Sha256::digest(&bytes)).into();
    std::fs::write(d.join("index.json"), serde_json::to_vec(&idx).unwrap()).unwrap();
}

#[test]
fn tokenizer_and_configuration_identities_and_vocabulary_are_enforced() {
    let d = copy("identity");
    std::fs::remove_dir_all(d.join(".minirun-evidence")).unwrap();
    VerifiedArtifact::open(&d, &unheld(None)).unwrap();
    // Same length, other bytes: the recorded SHA-256 refuses it.
    let tok = d.join("tokenizer.json");
    let orig = std::fs::read(&tok).unwrap();
    let mut t = orig.clone();
    let at = t.iter().position(|&b| b == b'a').unwrap();
    t[at] = b'b';
    std::fs::write(&tok, &t).unwrap();
    let e = VerifiedArtifact::open(&d, &unheld(None)).err().unwrap();
    assert!(
        matches!(
            e,
            ArtifactError::IdentityMismatch {
                what: "tokenizer",
                ..
            }
        ),
        "{e}"
    );
    std::fs::write(&tok, &orig).unwrap();
    // A model vocabulary smaller than the tokenizer's ids.
    rewrite_config(&d, |c| c["vocab_size"] = 100.into());
    let e = VerifiedArtifact::open(&d, &unheld(None)).err().unwrap();
    assert!(matches!(e, ArtifactError::Vocabulary { .. }), "{e}");
    // The configuration from another upstream revision than the model's.
    rewrite_config(&d, |c| c["vocab_size"] = 512.into());
    VerifiedArtifact::open(&d, &unheld(None)).unwrap();
    let mut idx: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("index.json")).unwrap()).unwrap();
    idx["configuration"]["source_revision"] = "2".repeat(40).into();
    std::fs::write(d.join("index.json"), serde_json::to_vec(&idx).unwrap()).unwrap();
    let e = VerifiedArtifact::open(&d, &unheld(None)).err().unwrap();
    assert!(e.to_string().contains("comes from"), "{e}");
    // No licence file.
    idx["configuration"]["source_revision"] = idx["source_revision"].clone();
    std::fs::write(d.join("index.json"), serde_json::to_vec(&idx).unwrap()).unwrap();
    std::fs::remove_file(d.join("LICENSE")).unwrap();
    let e = VerifiedArtifact::open(&d, &unheld(None)).err().unwrap();
    assert!(e.to_string().contains("LICENSE"), "{e}");
    discard(&d);
}

fn minirun_run(args: &[&str], dir: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_minirun-run"))
        .arg("--artifact")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn minirun_run_refuses_unverified_and_modified_artifacts() {
    let fx = fixture();
    let args = ["--prompt-ids", "0,5,9", "-n", "2"];
    // Unverified: no evidence at all.
    let d = copy("bin-unverified");
    std::fs::remove_dir_all(d.join(".minirun-evidence")).unwrap();
    let (code, err) = minirun_run(&args, &d);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no verification evidence"), "{err}");
    discard(&d);
    // Modified: the copy's evidence describes other filesystem objects.
    let d = copy("bin-modified");
    let (code, err) = minirun_run(&args, &d);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("no longer matches its verification evidence"),
        "{err}"
    );
    // Another revision than the evidence's.
    let other = "3".repeat(40);
    let mut a = args.to_vec();
    a.extend(["--revision", &other]);
    let (code, err) = minirun_run(&a, &fx.consumer);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("for commit `{other}`")), "{err}");
    // Verified: refused after verification only when the family has no runner.
    let (code, err) = minirun_run(&args, &fx.consumer);
    assert!(
        err.contains(&format!("verified `{TARGET}` at {}", fx.commit)),
        "{err}"
    );
    if runner::registry::lookup("deepseek-v4").is_none() {
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains("no runner is registered for its family `deepseek-v4`"),
            "{err}"
        );
    } else {
        assert!(code == 0 || err.contains("no wgpu adapter"), "{err}");
    }
}

/// A `cp -a` copy of a verified artifact: its evidence is void (new filesystem objects), the
/// refusal names `minirun-verify check`, and `check` re-establishes evidence by re-hashing the local
/// bytes without downloading any; offline verification says it grants no execution authority.
#[test]
fn a_copied_artifact_is_refused_until_check_rehashes_it() {
    let fx = fixture();
    let args = ["--prompt-ids", "0,5,9", "-n", "2"];
    let d = copy("bin-copied");
    let (code, err) = minirun_run(&args, &d);
    assert_eq!(code, 1, "{err}");
    let check = format!(
        "minirun-verify check {TARGET} --revision {} --dir {}",
        fx.commit,
        d.display()
    );
    assert!(err.contains(&check), "{err}");
    assert!(err.contains("copied or moved"), "{err}");
    // Offline verification agrees with the manifests but grants nothing.
    let off = pipeline::verify::verify_offline(&d).unwrap();
    assert_eq!(off.verdict, pipeline::verify::Verdict::Verified);
    assert!(!off.execution_authority && off.bytes_hashed > 0, "{off:?}");
    assert!(
        off.render().contains("grants no execution authority"),
        "{}",
        off.render()
    );
    let (code, err2) = minirun_run(&args, &d);
    assert_eq!((code, err2.contains(&check)), (1, true), "{err2}");
    // `check`: everything re-hashed, nothing downloaded, new evidence recorded.
    let r = pipeline::verify::pull(
        Some(&fx.url),
        TARGET,
        &fx.commit,
        &d,
        false,
        &pipeline::verify::PullOpts::default(),
    )
    .unwrap();
    assert_eq!(r.verdict, pipeline::verify::Verdict::Verified, "{r:?}");
    let ev: serde_json::Value = serde_json::from_slice(
        &std::fs::read(pipeline::verify::evidence_path(&d, &fx.commit)).unwrap(),
    )
    .unwrap();
    let files = ev["files"].as_array().unwrap();
    let total: u64 = files
        .iter()
        .map(|f| f["identity"]["size"].as_u64().unwrap())
        .sum();
    assert_eq!(
        (r.evidence_reused, r.downloaded, r.bytes_downloaded),
        (0, 0, 0),
        "{r:?}"
    );
    assert_eq!(r.sha256_checked + r.git_sha1_checked, files.len(), "{r:?}");
    assert_eq!(r.bytes_hashed, total, "{r:?}");
    assert!(r.execution_authority, "{r:?}");
    assert!(r.render().contains(&format!("{total} B re-hashed locally")));
    // The runner now accepts the copy.
    let (code, err) = minirun_run(&args, &d);
    assert!(
        err.contains(&format!("verified `{TARGET}` at {}", fx.commit)),
        "{code}: {err}"
    );
    discard(&d);
}
