//! Verification of a local copy against a pinned tree, the evidence file, and offline verification
//! from the unit manifests (`docs/verify.md` §2–§4).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use artifact::index_json::{IndexDocument, Shape, INDEX_FILE_NAME};
use artifact::manifest::Manifest;
use sha1::Digest as _;

pub use artifact::evidence::{evidence_path, Evidence, EvidenceFile};

use super::{Pinned, Verdict, VerifyError, VerifyReport};
use artifact::fsid;

/// How a file's digest came to agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// Read and hashed (`lfs`: by SHA-256, else by git blob SHA-1).
    Hashed {
        /// SHA-256 rather than git blob SHA-1.
        lfs: bool,
    },
    /// Earlier evidence (or a killed pull's journal) whose identity still held.
    Reused,
    /// Hashed as this pull wrote it.
    OnWrite,
}

/// Files already known to agree, with how: accepted without a read while their identity holds.
pub type Known = BTreeMap<String, (EvidenceFile, How)>;

/// The outcome of a local verification.
pub struct LocalOutcome {
    /// The report.
    pub report: VerifyReport,
    /// Files missing or contradicted (what `pull` re-downloads).
    pub failing: Vec<String>,
    /// Files that agreed, with how.
    pub verified: Known,
}

fn count(report: &mut VerifyReport, how: How, size: u64) {
    if matches!(how, How::Hashed { .. }) {
        report.bytes_hashed += size;
    }
    match how {
        How::Hashed { lfs: true } => report.sha256_checked += 1,
        How::Hashed { lfs: false } => report.git_sha1_checked += 1,
        How::Reused => report.evidence_reused += 1,
        How::OnWrite => report.hashed_on_write += 1,
    }
}

fn hash_file(f: &mut std::fs::File, lfs: bool, size: u64) -> std::io::Result<String> {
    let mut buf = vec![0u8; 1 << 20];
    if lfs {
        let mut h = sha2::Sha256::new();
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            h.update(buf.get(..n).unwrap_or(&[]));
        }
        Ok(hex::encode(h.finalize()))
    } else {
        let mut h = sha1::Sha1::new();
        h.update(format!("blob {size}\0").as_bytes());
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            h.update(buf.get(..n).unwrap_or(&[]));
        }
        Ok(hex::encode(h.finalize()))
    }
}

/// Whether a tree holds a layout this verifier recognizes, or at least one positive-size payload
/// file under a unit directory; an unrecognized root layout with no payload is refused.
fn layout_ok(dir: &Path, pinned: &Pinned) -> Result<(), String> {
    let doc = IndexDocument::read_file(&dir.join(INDEX_FILE_NAME));
    match doc.shape {
        Shape::Unreadable { .. } | Shape::Unrecognized { .. } => {
            let payload = pinned
                .files
                .iter()
                .any(|e| e.size > 0 && e.path.contains('/') && !e.path.starts_with('.'));
            if payload {
                Ok(())
            } else {
                Err("unrecognized root layout and no positive-size payload: refusing to treat a root file as a model".into())
            }
        }
        _ => Ok(()),
    }
}

/// Verify `dir` against `pinned`; when `record` and everything agreed, write the evidence.
/// `known` holds files this run already found to agree (`pull`: its first pass, and what it
/// hashed as it wrote): they are accepted without another read while their identity holds, like
/// earlier evidence and a killed pull's journal, and counted by how they agreed.
pub fn verify_local(
    dir: &Path,
    pinned: &Pinned,
    record: bool,
    known: &Known,
) -> Result<LocalOutcome, VerifyError> {
    let mut report = VerifyReport::new(Some(pinned.repo.id()), Some(pinned.commit.clone()));
    let mut failing = Vec::new();
    let mut contradicted = false;
    let mut missing = false;
    if let Some(m) = &pinned.mismatch {
        report.problems.push(m.clone());
        contradicted = true;
    }
    let ev_path = evidence_path(dir, &pinned.commit);
    let complete: BTreeMap<String, EvidenceFile> = std::fs::read(&ev_path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Evidence>(&b).ok())
        .filter(|e| e.v == 1 && e.commit == pinned.commit && e.repo == pinned.repo.id())
        .map(|e| e.files.into_iter().map(|f| (f.path.clone(), f)).collect())
        .unwrap_or_default();
    let mut previous = super::pull::read_journal(dir, pinned);
    previous.extend(complete.iter().map(|(k, v)| (k.clone(), v.clone())));
    let mut files = Vec::new();
    let mut verified = Known::new();
    for e in &pinned.files {
        let (lfs, want) = match &e.lfs {
            Some(l) => (true, l.oid.clone()),
            None => (false, e.oid.clone()),
        };
        let check = if lfs { "sha256" } else { "git-sha1" };
        let mut f = match fsid::open_nofollow(dir, &e.path) {
            Ok(f) => f,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                report
                    .problems
                    .push(format!("`{}` is missing (incomplete copy)", e.path));
                missing = true;
                failing.push(e.path.clone());
                continue;
            }
            Err(err) => {
                report.problems.push(format!(
                    "`{}` cannot be opened without following links: {err}",
                    e.path
                ));
                contradicted = true;
                failing.push(e.path.clone());
                continue;
            }
        };
        let io = |source| VerifyError::Io {
            what: "read",
            path: dir.join(&e.path),
            source,
        };
        let before = fsid::identity(&f).map_err(io)?;
        let holds = |p: &EvidenceFile| {
            p.check == check && p.digest == want && fsid::still_holds(&p.identity, &before)
        };
        let held = known
            .get(&e.path)
            .filter(|(p, _)| holds(p))
            .map(|(p, how)| (p, *how))
            .or_else(|| {
                previous
                    .get(&e.path)
                    .filter(|p| holds(p))
                    .map(|p| (p, How::Reused))
            });
        if let Some((p, how)) = held {
            count(&mut report, how, p.identity.size);
            files.push(p.clone());
            verified.insert(e.path.clone(), (p.clone(), how));
            continue;
        }
        let got = hash_file(&mut f, lfs, before.size).map_err(io)?;
        let after = fsid::identity(&f).map_err(io)?;
        count(&mut report, How::Hashed { lfs }, before.size);
        if got != want || before.size != e.size || before != after {
            report.problems.push(format!(
                "`{}`: {check} {got} ({} bytes), the tree says {want} ({} bytes)",
                e.path, before.size, e.size
            ));
            contradicted = true;
            failing.push(e.path.clone());
            continue;
        }
        let ev = EvidenceFile {
            path: e.path.clone(),
            check: check.into(),
            digest: got,
            identity: before,
        };
        verified.insert(e.path.clone(), (ev.clone(), How::Hashed { lfs }));
        files.push(ev);
    }
    if !contradicted && !missing {
        if let Err(why) = layout_ok(dir, pinned) {
            report.problems.push(why);
            missing = true;
        }
    }
    report.verdict = if contradicted {
        Verdict::Contradicted
    } else if missing || pinned.files.is_empty() {
        Verdict::NoEvidence
    } else {
        Verdict::Verified
    };
    if record {
        if report.verdict == Verdict::Verified {
            let ev = Evidence {
                v: 1,
                repo: pinned.repo.id(),
                commit: pinned.commit.clone(),
                files,
            };
            let bytes = serde_json::to_vec_pretty(&ev).unwrap_or_default();
            if let Some(p) = ev_path.parent() {
                std::fs::create_dir_all(p).map_err(|source| VerifyError::Io {
                    what: "create",
                    path: p.to_path_buf(),
                    source,
                })?;
            }
            if complete.is_empty() || report.evidence_reused != pinned.files.len() {
                ledger::write_atomic(&ev_path, &bytes).map_err(|e| VerifyError::Io {
                    what: "write",
                    path: ev_path.clone(),
                    source: std::io::Error::other(e.to_string()),
                })?;
            }
            // The complete evidence supersedes a pull's per-file journal.
            let _ = std::fs::remove_file(super::pull::pull_journal_path(dir, &pinned.commit));
            report.execution_authority = true;
        } else if ev_path.exists() {
            // Failed evidence is never left behind to be reused.
            let _ = std::fs::remove_file(&ev_path);
        }
    }
    Ok(LocalOutcome {
        report,
        failing,
        verified,
    })
}

/// Offline verification: every file of every unit listed by the local `index.json` against its
/// manifest's size and SHA-256 (every path opened without following links).
pub fn verify_offline(dir: &Path) -> Result<VerifyReport, VerifyError> {
    let mut report = VerifyReport::new(None, None);
    let index = dir.join(INDEX_FILE_NAME);
    if !index.is_file() {
        report.problems.push(format!(
            "`{}` is missing: `{}` is not a copy of a publication; `minirun-verify pull OWNER/NAME-minirun --dir {}` makes one",
            index.display(),
            dir.display(),
            dir.display()
        ));
        report.verdict = Verdict::NoEvidence;
        return Ok(report);
    }
    let doc = IndexDocument::read_file(&index);
    let units: Vec<String> = match &doc.shape {
        Shape::SingleSourceUnits(s) => s.units.iter().map(|u| u.name.clone()).collect(),
        Shape::MultiSourceUnits(m) => m.units.iter().map(|u| u.name.clone()).collect(),
        other => {
            report.problems.push(format!(
                "`{INDEX_FILE_NAME}` lists no units ({}): no manifest to verify from",
                other.name()
            ));
            report.verdict = Verdict::NoEvidence;
            return Ok(report);
        }
    };
    let mut contradicted = false;
    for unit in &units {
        let m = match Manifest::read(&dir.join(unit)) {
            Ok(m) => m,
            Err(e) => {
                report.problems.push(format!("unit `{unit}`: {e}"));
                contradicted = true;
                continue;
            }
        };
        for e in &m.files {
            let rel = format!("{unit}/{}", e.path);
            let ok = fsid::open_nofollow(dir, &rel)
                .and_then(|mut f| hash_file(&mut f, true, e.size))
                .map_err(|err| err.to_string());
            report.sha256_checked += 1;
            if ok.is_ok() {
                report.bytes_hashed += e.size;
            }
            match ok {
                Ok(d) if d == e.sha256 => {}
                Ok(d) => {
                    report.problems.push(format!(
                        "`{rel}`: sha256 {d}, the manifest says {}",
                        e.sha256
                    ));
                    contradicted = true;
                }
                Err(err) => {
                    report.problems.push(format!("`{rel}`: {err}"));
                    contradicted = true;
                }
            }
        }
    }
    report.verdict = if contradicted {
        Verdict::Contradicted
    } else if report.sha256_checked == 0 {
        Verdict::NoEvidence
    } else {
        Verdict::Verified
    };
    Ok(report)
}
