//! Reconcile the staging tree with the release, by recorded identities (`docs/publish.md` §1).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ledger::{FileIdentity, FileRecord, Journal, Status};

use super::place::{self, Placement};
use super::{io_err, StageError, StageReport, STAGE, UNIT};
use crate::progress::{Counter, ProgressMode};
use crate::work::WorkDir;

/// Every regular file under `root`, by `/`-separated relative path. Anything else is refused when
/// `strict`, or listed in `others` (to be removed) otherwise. With `strict` (the release tree),
/// the temp files of unfinished atomic writes (a killed finalize leaves one) are not the
/// release's and are passed over; in the staging tree they are files like any other not in the
/// release, and removed.
pub(crate) fn walk(
    root: &Path,
    strict: bool,
    others: &mut Vec<PathBuf>,
) -> Result<BTreeMap<String, PathBuf>, StageError> {
    let mut out = BTreeMap::new();
    if !root.exists() {
        return Ok(out);
    }
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        for e in std::fs::read_dir(&dir).map_err(io_err("list", &dir))? {
            let e = e.map_err(io_err("list", &dir))?;
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let ft = e.file_type().map_err(io_err("stat", &p))?;
            if strict && ledger::is_temp_name(&e.file_name().to_string_lossy()) {
                continue;
            }
            if ft.is_dir() {
                stack.push((p, rel));
            } else if ft.is_file() {
                out.insert(rel, p);
            } else if strict {
                return Err(StageError::NotRegular(p));
            } else {
                others.push(p);
            }
        }
    }
    Ok(out)
}

/// The digest of a release file from the repack journal of its unit, if that journal's identity
/// for it still holds (no read).
fn repack_digest(work: &WorkDir, rel: &str, id: &FileIdentity) -> Option<String> {
    let (unit, file) = rel.split_once('/')?;
    let j = Journal::load(&work.ledger(), crate::repack::STAGE, unit).ok()??;
    let rec = j.outputs.get(file)?;
    (rec.identity.as_ref() == Some(id)).then(|| rec.sha256.clone())
}

/// Bring `<work>/staging` to the release's file set — with `slice`, to those units' directories
/// only (a worker stages exactly its slice, even when its repack finalized the release-wide
/// files because the slice is every unit) — and return the journal. When it differs from the
/// stored one it is stored in progress (`report.journal_written`), and said done only after the
/// round trip passed ([`super::run`]): a refused staged tree never looks staged.
pub(crate) fn reconcile(
    work: &WorkDir,
    slice: Option<&[String]>,
    dry_run: bool,
    mode: ProgressMode,
    report: &mut StageReport,
) -> Result<Journal, StageError> {
    let release = work.release();
    let staging = work.staging();
    let mut files = walk(&release, true, &mut Vec::new())?;
    if let Some(units) = slice {
        files.retain(|rel, _| {
            rel.split_once('/')
                .is_some_and(|(unit, _)| units.iter().any(|u| u == unit))
        });
    }
    if files.is_empty() {
        return Err(StageError::NotGated(format!(
            "the release tree `{}` is empty",
            release.display()
        )));
    }
    let prev = Journal::load(&work.ledger(), STAGE, UNIT)?;
    let mut next = Journal::new(STAGE, UNIT)?;
    let progress = Counter::new("stage", "files", files.len() as u64, mode);
    let cx = Reconcile {
        work,
        staging: &staging,
        prev: prev.as_ref(),
        dry_run,
        progress: &progress,
    };
    let predicted = Placement::predict(&release, &staging);
    predicted.expect_space(&files, &staging);
    let mut how = match dry_run {
        true => predicted,
        false => Placement::default(),
    };
    for (rel, src) in &files {
        reconcile_file(&cx, rel, src, &mut how, &mut next, report)?;
    }
    progress.finish();
    report.copy_reason = how.copy_reason.take();
    remove_unreleased(&staging, &files, dry_run, report)?;
    next.status = Status::Done;
    if dry_run {
        return Ok(next);
    }
    report.repack_refreshed = place::refresh_repack_journals(work, &how.hashed)?;
    if prev.as_ref() != Some(&next) {
        next.status = Status::InProgress;
        next.store(&work.ledger())?;
        next.status = Status::Done;
        report.journal_written = true;
    }
    Ok(next)
}

/// What every step of reconciling one release file reads.
struct Reconcile<'a> {
    work: &'a WorkDir,
    staging: &'a Path,
    prev: Option<&'a Journal>,
    dry_run: bool,
    progress: &'a Counter,
}

/// Per-file step: keep, re-hash, link or copy one release file into staging, and journal it.
fn reconcile_file(
    cx: &Reconcile<'_>,
    rel: &str,
    src: &Path,
    how: &mut Placement,
    next: &mut Journal,
    report: &mut StageReport,
) -> Result<(), StageError> {
    let before = (
        report.linked.len(),
        report.copied.len(),
        report.rehashed.len(),
    );
    let tick = |report: &StageReport| {
        cx.progress.done(rel, || {
            if report.linked.len() > before.0 {
                "linked".into()
            } else if report.copied.len() > before.1 {
                "copied".into()
            } else if report.rehashed.len() > before.2 {
                "re-hashed".into()
            } else {
                "kept".into()
            }
        })
    };
    let mut rel_id =
        FileIdentity::capture(src)?.ok_or_else(|| StageError::NotRegular(src.to_path_buf()))?;
    let mut rel_digest = release_digest(cx, rel, src, &rel_id, how, report)?;
    let dst = cx.staging.join(rel);
    let meta = std::fs::symlink_metadata(&dst).ok();
    clear_non_file(cx, rel, &dst, meta.as_ref(), report)?;
    let mut staged = staged_match(cx, rel, &dst, meta.as_ref(), &rel_id, &rel_digest, report)?;
    if staged.is_none() {
        if cx.dry_run {
            // what a real run would stage: the release file, at its size
            match how.copy_reason {
                None => report.linked.push(rel.to_owned()),
                Some(_) => report.copied.push(rel.to_owned()),
            }
            report.files += 1;
            report.bytes += rel_id.size;
            tick(report);
            return Ok(());
        }
        let (rec, linked) = place::place(src, &dst, rel, rel_digest.as_deref(), how, report)?;
        if linked {
            // one inode: the link moved the release file's ctime to the staged file's
            rel_id = rec.identity.unwrap_or(rel_id);
        }
        rel_digest = Some(rec.sha256.clone());
        staged = Some(rec);
    }
    tick(report);
    let (Some(staged), Some(d)) = (staged, rel_digest) else {
        return Ok(());
    };
    report.files += 1;
    report.bytes += staged.size;
    next.inputs.insert(
        rel.to_owned(),
        FileRecord {
            size: rel_id.size,
            sha256: d,
            identity: Some(rel_id),
        },
    );
    next.outputs.insert(rel.to_owned(), staged);
    Ok(())
}

/// Digest step: the release file's digest, from the journals, else hashed when staging has it.
fn release_digest(
    cx: &Reconcile<'_>,
    rel: &str,
    src: &Path,
    rel_id: &FileIdentity,
    how: &mut Placement,
    report: &mut StageReport,
) -> Result<Option<String>, StageError> {
    let mut rel_digest = cx
        .prev
        .and_then(|p| p.inputs.get(rel))
        .filter(|r| r.identity.as_ref() == Some(rel_id))
        .map(|r| r.sha256.clone())
        .or_else(|| repack_digest(cx.work, rel, rel_id));
    if rel_digest.is_none() && std::fs::symlink_metadata(cx.staging.join(rel)).is_ok() {
        // Unknown release digest and something staged to compare with: hash the release file.
        let rec = FileRecord::hash(src)?;
        how.note_hashed(rel, &rec);
        rel_digest = Some(rec.sha256);
        report.release_hashed.push(rel.to_owned());
    }
    Ok(rel_digest)
}

/// Clear step: a directory, symlink or special file where the staged file belongs is removed.
fn clear_non_file(
    cx: &Reconcile<'_>,
    rel: &str,
    dst: &Path,
    meta: Option<&std::fs::Metadata>,
    report: &mut StageReport,
) -> Result<(), StageError> {
    if let Some(m) = meta {
        if !m.file_type().is_file() && !cx.dry_run {
            // A directory, symlink or special file where a file belongs: remove it.
            let r = if m.is_dir() {
                std::fs::remove_dir_all(dst)
            } else {
                std::fs::remove_file(dst)
            };
            r.map_err(io_err("remove", dst))?;
            report.removed.push(rel.to_owned());
        }
    }
    Ok(())
}

/// Match step: the staged file's record when it holds the release bytes (kept, or re-hashed).
fn staged_match(
    cx: &Reconcile<'_>,
    rel: &str,
    dst: &Path,
    meta: Option<&std::fs::Metadata>,
    rel_id: &FileIdentity,
    rel_digest: &Option<String>,
    report: &mut StageReport,
) -> Result<Option<FileRecord>, StageError> {
    let staged_id = match meta {
        Some(m) if m.file_type().is_file() => Some(FileIdentity::from_metadata(dst, m)?),
        _ => None,
    };
    let known = cx
        .prev
        .and_then(|p| p.outputs.get(rel))
        .filter(|r| staged_id.is_some() && r.identity == staged_id)
        .cloned();
    let mut staged: Option<FileRecord> = None;
    if let (Some(k), Some(d)) = (&known, rel_digest) {
        if &k.sha256 == d && k.size == rel_id.size {
            staged = Some(k.clone());
            report.kept += 1;
        }
    }
    if staged.is_none() {
        let moved = staged_id.filter(|s| s.size == rel_id.size && known.is_none());
        if let (Some(sid), Some(d)) = (moved, rel_digest.clone()) {
            // Identity moved but the size is right: re-hash this file alone.
            let (_, found) = ledger::sha256_file(dst)?;
            report.rehashed.push(rel.to_owned());
            if found == d {
                let id = FileIdentity::capture(dst)?.unwrap_or(sid);
                staged = Some(FileRecord {
                    size: rel_id.size,
                    sha256: found,
                    identity: Some(id),
                });
            }
        }
    }
    Ok(staged)
}

/// Removal step: anything in staging that is not in the release goes.
fn remove_unreleased(
    staging: &Path,
    files: &BTreeMap<String, PathBuf>,
    dry_run: bool,
    report: &mut StageReport,
) -> Result<(), StageError> {
    // Anything in staging that is not in the release goes.
    let mut others = Vec::new();
    let staged_now = walk(staging, false, &mut others)?;
    for (rel, p) in &staged_now {
        if !files.contains_key(rel) {
            report.removed.push(rel.clone());
            if !dry_run {
                std::fs::remove_file(p).map_err(io_err("remove", p))?;
            }
        }
    }
    for p in others {
        report
            .removed
            .push(p.strip_prefix(staging).unwrap_or(&p).display().to_string());
        if !dry_run {
            std::fs::remove_file(&p).map_err(io_err("remove", &p))?;
        }
    }
    if !dry_run {
        remove_empty_dirs(staging, staging)?;
    }
    Ok(())
}

fn remove_empty_dirs(dir: &Path, root: &Path) -> Result<bool, StageError> {
    let mut empty = true;
    for e in std::fs::read_dir(dir).map_err(io_err("list", dir))? {
        let e = e.map_err(io_err("list", dir))?;
        let p = e.path();
        if e.file_type().map_err(io_err("stat", &p))?.is_dir() {
            if !remove_empty_dirs(&p, root)? {
                empty = false;
            }
        } else {
            empty = false;
        }
    }
    if empty && dir != root {
        std::fs::remove_dir(dir).map_err(io_err("remove", dir))?;
    }
    Ok(empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A killed atomic write (a finalize killed between its temp file and the rename) leaves a
    /// temp file in the release: never staged (found by the distributed SIGKILL test).
    #[test]
    fn the_release_walk_passes_over_unfinished_atomic_writes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("u")).unwrap();
        for f in [
            "LICENSE",
            ".LICENSE.minirun-tmp-3394-0",
            "u/a.til",
            "u/.a.til.minirun-tmp-1-2",
        ] {
            std::fs::write(root.join(f), b"x").unwrap();
        }
        let release = walk(root, true, &mut Vec::new()).unwrap();
        let names: Vec<&str> = release.keys().map(String::as_str).collect();
        assert_eq!(names, ["LICENSE", "u/a.til"]);
        // in the staging tree they are files like any other (removed when not the release's)
        let staged = walk(root, false, &mut Vec::new()).unwrap();
        assert_eq!(staged.len(), 4);
    }
}
