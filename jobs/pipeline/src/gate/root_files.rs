//! The release root against upstream. Every file the plan copies to the artifact root — each
//! source's licence (several for a multi-source plan, under their `license_as` names), its
//! `files`, the tokenizer and configuration identity files — is read back off the drive (cached
//! pages dropped first), hashed the way the hub records that path (LFS SHA-256, else git-blob
//! SHA-1) and compared with the size and digest discovery recorded for it at the pinned revision:
//! a root file is proven to be the upstream file, not only to agree with `index.json` (which
//! repack wrote itself). And the root holds nothing else: only the plan's unit directories,
//! `index.json` and those files (seed 000: the only bytes a builder adds are container headers
//! and padding). See `docs/gate.md`.

use std::collections::BTreeSet;
use std::path::Path;

use super::{Check, Verdict};
use crate::fetch::discover::Discovery;
use crate::plan::Plan;
use crate::work::WorkDir;

fn check(file: &str, verdict: Verdict, detail: String) -> Check {
    Check {
        check: "root-file",
        unit: None,
        file: Some(file.to_owned()),
        verdict,
        central: true,
        detail,
    }
}

/// Drop the file's clean cached pages so the next read comes off the drive.
fn drop_cached(path: &Path) {
    use std::os::fd::AsRawFd;
    if let Ok(f) = std::fs::File::open(path) {
        // SAFETY: the descriptor is open; the call only advises the kernel about cached pages.
        let _ = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
}

/// The root-file checks and the bytes they read. With a partial selection before finalize (no
/// `index.json`), there is no root to check yet: nothing is returned (the index check already
/// lists that skip).
pub(super) fn root_files(plan: &Plan, work: &WorkDir, whole_release: bool) -> (Vec<Check>, u64) {
    let release = work.release();
    if !whole_release && !release.join(artifact::index_json::INDEX_FILE_NAME).exists() {
        return (Vec::new(), 0);
    }
    let mut out = Vec::new();
    let mut bytes = 0;
    let discovery = match Discovery::load(work) {
        Ok(Some(d)) => d,
        Ok(None) => {
            let why = "no discovery record: run `minirun-fetch` first".to_owned();
            return (vec![check(".", Verdict::Fail, why)], 0);
        }
        Err(e) => {
            let why = crate::cli::render_error(&e, None);
            return (vec![check(".", Verdict::Fail, why)], 0);
        }
    };
    let planned = crate::repack::root_files(plan);
    for (name, (source, from)) in &planned {
        let Some(remote) = discovery
            .sources
            .get(source)
            .and_then(|s| s.files.get(from))
        else {
            out.push(check(
                name,
                Verdict::Fail,
                format!("discovery has no record of `{from}` in source `{source}`"),
            ));
            continue;
        };
        let path = release.join(name);
        drop_cached(&path);
        match crate::fetch::root::hash_file(&path, &remote.digest, remote.size) {
            Ok((alg, digest)) => {
                let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                bytes += size;
                let (verdict, detail) = if size == remote.size && digest == remote.digest {
                    (
                        Verdict::Pass,
                        format!("equals upstream `{from}` of source `{source}` ({size} B, {alg} {digest})"),
                    )
                } else {
                    (
                        Verdict::Fail,
                        format!(
                            "is {size} B {alg} {digest}; upstream `{from}` of source `{source}` is {} B {}",
                            remote.size, remote.digest
                        ),
                    )
                };
                out.push(check(name, verdict, detail));
            }
            Err(e) => out.push(check(
                name,
                Verdict::Fail,
                format!("missing or unreadable: {e}"),
            )),
        }
    }
    // Nothing at the root that the plan does not put there.
    let units: BTreeSet<&str> = plan.units.iter().map(|u| u.name.as_str()).collect();
    match std::fs::read_dir(&release) {
        Ok(entries) => {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if ledger::is_temp_name(&name) {
                    continue; // an unfinished atomic write's temp file: never the release's
                }
                let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
                let expected = if is_dir {
                    units.contains(name.as_str())
                } else {
                    name == artifact::index_json::INDEX_FILE_NAME || planned.contains_key(&name)
                };
                if !expected {
                    out.push(check(
                        &name,
                        Verdict::Fail,
                        "is not part of the plan's release (no unit, root file or index of the plan)"
                            .into(),
                    ));
                }
            }
        }
        Err(e) => out.push(check(
            ".",
            Verdict::Fail,
            format!("release root unreadable: {e}"),
        )),
    }
    (out, bytes)
}
