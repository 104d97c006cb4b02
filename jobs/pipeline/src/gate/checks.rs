//! The gate's checks, unit by unit and then release-wide.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use artifact::container::{ContainerReader, DigestCheck};
use artifact::index_json::IndexDocument;
use artifact::manifest::{FileKind, Manifest, MANIFEST_FILE_NAME};
use ledger::Journal;
use sha2::{Digest, Sha256};

use super::compare::{plain_spans, stack_rows, Chain, Compare};
use super::{Check, Verdict};
use crate::fetch::discover::load_offline;
use crate::plan::{Plan, Resolution};
use crate::repack::{TensorMap, TENSORS_FILE};
use crate::work::WorkDir;

pub(super) struct Gate<'a> {
    plan: &'a Plan,
    work: &'a WorkDir,
    no_upstream: bool,
    resolution: &'a Result<Resolution, String>,
    pub checks: Vec<Check>,
    pub bytes_read: u64,
}

/// Read a whole file from the drive, not from the page cache (its clean cached pages are dropped
/// first with `POSIX_FADV_DONTNEED`; every file the stages write is fsynced, so its pages are
/// clean), hashing as it goes.
fn read_back(path: &Path) -> std::io::Result<(u64, String)> {
    use std::os::fd::AsRawFd;
    let mut f = File::open(path)?;
    // SAFETY: the descriptor is open; the call only advises the kernel about cached pages.
    let _ = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let mut h = Sha256::new();
    // A buffer no larger than the file (most unit files are small containers): no 4 MiB
    // allocation, mapping and unmapping per file.
    let len = f.metadata()?.len().clamp(1, 4 << 20);
    let mut buf = vec![0u8; usize::try_from(len).unwrap_or(4 << 20)];
    let mut n_total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(buf.get(..n).unwrap_or(&[]));
        n_total += n as u64;
    }
    Ok((n_total, hex::encode(h.finalize())))
}

/// The files under `dir`, but the temp files of unfinished atomic writes (never a release's).
fn walk(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if ledger::is_temp_name(&name) {
            continue;
        }
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        if e.file_type()?.is_dir() {
            walk(&e.path(), &rel, out)?;
        } else {
            out.insert(rel);
        }
    }
    Ok(())
}

impl<'a> Gate<'a> {
    /// The plan bound to the fetched upstream tensors, or why it cannot be (offline).
    pub fn resolve(plan: &Plan, work: &WorkDir) -> Result<Resolution, String> {
        load_offline(plan, work)
            .map_err(|e| crate::cli::render_error(&e, crate::cli::Hint::hint(&e)))
            .and_then(|up| plan.resolve(&up.tensors).map_err(|e| e.to_string()))
    }

    pub fn new(
        plan: &'a Plan,
        work: &'a WorkDir,
        no_upstream: bool,
        resolution: &'a Result<Resolution, String>,
    ) -> Self {
        Gate {
            plan,
            work,
            no_upstream,
            resolution,
            checks: Vec::new(),
            bytes_read: 0,
        }
    }

    /// A unit whose bytes were reclaimed (a disk-budgeted run) is listed as `reclaimed` with the
    /// verdict the gate gave it before, read from its journal; nothing of it is read, so the
    /// check says so and adds no bytes. True when the unit was reclaimed (or its note is bad).
    fn reclaimed(&mut self, unit: &str) -> bool {
        match crate::distributed::reclaim::reclaimed(self.work, unit) {
            Ok(None) => false,
            Ok(Some(note)) => {
                let verdict = match note.gate.verdict.as_str() {
                    "PASS" => Verdict::Pass,
                    "SKIP" => Verdict::Skip,
                    "INCONCLUSIVE" => Verdict::Inconclusive,
                    _ => Verdict::Fail,
                };
                self.push(
                    "reclaimed",
                    Some(unit),
                    None,
                    verdict,
                    format!(
                        "{} (exit {}) before its bytes were reclaimed, not re-read: the hub confirmed its {} objects in `{}`",
                        note.gate.verdict, note.gate.exit_code, note.objects, note.repo
                    ),
                );
                true
            }
            Err(e) => {
                self.push("journal", Some(unit), None, Verdict::Fail, e.to_string());
                true
            }
        }
    }

    fn push(
        &mut self,
        check: &'static str,
        unit: Option<&str>,
        file: Option<String>,
        verdict: Verdict,
        detail: impl Into<String>,
    ) {
        self.checks.push(Check {
            check,
            unit: unit.map(Into::into),
            file,
            verdict,
            central: true,
            detail: detail.into(),
        });
    }

    pub fn unit(&mut self, unit: &str) {
        if self.reclaimed(unit) {
            return;
        }
        let dir = self.work.release().join(unit);
        let ledger_dir = self.work.ledger();
        let journal = match Journal::load(&ledger_dir, crate::repack::STAGE, unit) {
            Ok(Some(j)) => j,
            Ok(None) => {
                return self.push(
                    "journal",
                    Some(unit),
                    None,
                    Verdict::Fail,
                    format!("no repack journal: the unit's output is missing: run `minirun-repack --units {unit}`"),
                )
            }
            Err(e) => return self.push("journal", Some(unit), None, Verdict::Fail, e.to_string()),
        };
        // The gate re-reads every byte itself, so the journal must only say `done`; a file's
        // content is judged by the read-back below, against the digests journaled at write time.
        if journal.status == ledger::Status::Done {
            self.push(
                "journal",
                Some(unit),
                None,
                Verdict::Pass,
                "repack journal says done",
            );
        } else {
            self.push(
                "journal",
                Some(unit),
                None,
                Verdict::Fail,
                format!("repack journal says {:?}", journal.status),
            );
        }
        let manifest = match Manifest::read(&dir) {
            Ok(m) => {
                self.push(
                    "manifest",
                    Some(unit),
                    Some(format!("{unit}/{MANIFEST_FILE_NAME}")),
                    Verdict::Pass,
                    format!("{} files", m.files.len()),
                );
                m
            }
            Err(e) => {
                let detail = crate::cli::render_error(&e, None);
                return self.push(
                    "manifest",
                    Some(unit),
                    Some(format!("{unit}/{MANIFEST_FILE_NAME}")),
                    Verdict::Fail,
                    detail,
                );
            }
        };
        // The file set: exactly the manifest's files plus the manifest.
        let mut on_disk = BTreeSet::new();
        if let Err(e) = walk(&dir, "", &mut on_disk) {
            self.push(
                "file-set",
                Some(unit),
                None,
                Verdict::Fail,
                format!("cannot list `{}`: {e}", dir.display()),
            );
        }
        let listed: BTreeSet<String> = manifest
            .files
            .iter()
            .map(|e| e.path.clone())
            .chain([MANIFEST_FILE_NAME.to_owned()])
            .collect();
        let extra: Vec<_> = on_disk.difference(&listed).cloned().collect();
        let missing: Vec<_> = listed.difference(&on_disk).cloned().collect();
        if extra.is_empty() && missing.is_empty() {
            self.push(
                "file-set",
                Some(unit),
                None,
                Verdict::Pass,
                format!("{} files, none extra or missing", listed.len()),
            );
        } else {
            self.push(
                "file-set",
                Some(unit),
                None,
                Verdict::Fail,
                format!("missing {missing:?}, not in the manifest {extra:?}"),
            );
        }
        // Read-back off the drive against the manifest and the digests journaled at write time.
        let by_path: BTreeMap<&str, &artifact::manifest::ManifestEntry> = manifest
            .files
            .iter()
            .map(|e| (e.path.as_str(), e))
            .collect();
        for rel in listed.iter().filter(|r| on_disk.contains(*r)) {
            let path = dir.join(rel);
            let file = Some(format!("{unit}/{rel}"));
            match read_back(&path) {
                Err(e) => self.push(
                    "read-back",
                    Some(unit),
                    file,
                    Verdict::Fail,
                    format!("unreadable: {e}"),
                ),
                Ok((size, sha)) => {
                    self.bytes_read += size;
                    let journaled = journal.outputs.get(rel.as_str());
                    let mut bad = Vec::new();
                    if let Some(e) = by_path.get(rel.as_str()) {
                        if e.size != size || e.sha256 != sha {
                            bad.push(format!("manifest says {} B sha256 {}", e.size, e.sha256));
                        }
                    }
                    match journaled {
                        Some(r) if r.size != size || r.sha256 != sha => {
                            bad.push(format!("repack journaled {} B sha256 {}", r.size, r.sha256));
                        }
                        None => bad.push("not journaled by repack".into()),
                        _ => {}
                    }
                    if bad.is_empty() {
                        self.push(
                            "read-back",
                            Some(unit),
                            file,
                            Verdict::Pass,
                            format!("{size} B sha256 {sha}"),
                        );
                    } else {
                        self.push(
                            "read-back",
                            Some(unit),
                            file,
                            Verdict::Fail,
                            format!("read back {size} B sha256 {sha}; {}", bad.join("; ")),
                        );
                    }
                }
            }
        }
        self.containers(unit, &dir, &manifest);
        self.tensors(unit, &dir);
    }

    /// Every container reopened through the production reader, every tile's digest checked.
    fn containers(&mut self, unit: &str, dir: &Path, manifest: &Manifest) {
        for e in manifest
            .files
            .iter()
            .filter(|e| e.kind == FileKind::Container)
        {
            let file = Some(format!("{unit}/{}", e.path));
            // With the upstream comparison on, every tile is read (digest checked) there; here
            // the header and geometry are validated. Without it, every tile is verified here.
            let no_upstream = self.no_upstream;
            let result = ContainerReader::open(&dir.join(&e.path)).and_then(|r| {
                if no_upstream {
                    r.verify().map(|()| r)
                } else {
                    Ok(r)
                }
            });
            match result {
                Ok(r) => {
                    let l = r.layout();
                    self.push(
                        "container",
                        Some(unit),
                        file,
                        Verdict::Pass,
                        format!(
                            "v{} {} {}x{}, {} tiles{}",
                            l.version,
                            l.spec.mode.name(),
                            l.spec.rows,
                            l.spec.cols,
                            l.tile_count,
                            if no_upstream {
                                ", every tile digest and padding verified"
                            } else {
                                "; tiles are read with their digests in upstream-compare"
                            }
                        ),
                    );
                }
                Err(err) => {
                    let detail = crate::cli::render_error(&err, None);
                    self.push("container", Some(unit), file, Verdict::Fail, detail);
                }
            }
        }
    }

    /// Coverage against the plan and the central byte comparison with the upstream bytes.
    fn tensors(&mut self, unit: &str, dir: &Path) {
        let file = Some(format!("{unit}/{TENSORS_FILE}"));
        let Some(map) = self.tensor_map(unit, dir, &file) else {
            return;
        };
        self.coverage(unit, &map, &file);
        if self.no_upstream {
            self.checks.push(Check {
                check: "upstream-compare",
                unit: Some(unit.into()),
                file: None,
                verdict: Verdict::Skip,
                central: true,
                detail: "disabled by --no-upstream-compare".into(),
            });
            return;
        }
        self.upstream_compare(unit, dir, &map);
    }

    /// The unit's tensor map, read and parsed; `None` (a failed check) when it cannot be.
    fn tensor_map(&mut self, unit: &str, dir: &Path, file: &Option<String>) -> Option<TensorMap> {
        let map_path = dir.join(TENSORS_FILE);
        match std::fs::read(&map_path)
            .map_err(|e| e.to_string())
            .and_then(|b| TensorMap::parse(&b).map_err(|e| e.to_string()))
        {
            Ok(m) => Some(m),
            Err(e) => {
                self.push(
                    "tensor-map",
                    Some(unit),
                    file.clone(),
                    Verdict::Fail,
                    format!("unreadable: {e}"),
                );
                None
            }
        }
    }

    /// Coverage: every upstream tensor the plan puts in this unit is in the map.
    fn coverage(&mut self, unit: &str, map: &TensorMap, file: &Option<String>) {
        let expected: Option<BTreeSet<String>> = match self.resolution {
            Ok(res) => res.unit(unit).map(|u| {
                u.placements
                    .iter()
                    .flat_map(|p| p.tensors())
                    .map(|t| t.name.clone())
                    .collect()
            }),
            Err(_) => None,
        };
        match (self.resolution, expected) {
            (Err(e), _) => {
                let e = e.clone();
                self.push(
                    "coverage",
                    Some(unit),
                    None,
                    Verdict::Inconclusive,
                    format!("cannot resolve the upstream tensors: {e}"),
                );
            }
            (Ok(_), None) => self.push(
                "coverage",
                Some(unit),
                None,
                Verdict::Fail,
                "the plan resolves no tensor into this unit",
            ),
            (Ok(_), Some(exp)) => {
                let have: BTreeSet<String> = map.tensors.iter().map(|t| t.name.clone()).collect();
                if have == exp {
                    self.push(
                        "coverage",
                        Some(unit),
                        file.clone(),
                        Verdict::Pass,
                        format!("all {} upstream tensors present", exp.len()),
                    );
                } else {
                    let lost: Vec<_> = exp.difference(&have).take(5).cloned().collect();
                    let foreign: Vec<_> = have.difference(&exp).take(5).cloned().collect();
                    self.push(
                        "coverage",
                        Some(unit),
                        file.clone(),
                        Verdict::Fail,
                        format!("missing tensors {lost:?}, unexpected {foreign:?}"),
                    );
                }
            }
        }
    }

    /// The central byte comparison with the upstream bytes, one pass per artifact file.
    fn upstream_compare(&mut self, unit: &str, dir: &Path, map: &TensorMap) {
        let upstream_root = self.work.upstream_unit(unit);
        // One pass per artifact file: a container is reassembled once, its packed / scale / bias
        // streams compared at the same time with their upstream ranges (tile digests checked as
        // the tiles are read); a plain stream is compared as it is read.
        let mut by_file: BTreeMap<&str, Vec<&crate::repack::TensorEntry>> = BTreeMap::new();
        for t in &map.tensors {
            by_file.entry(t.file.as_str()).or_default().push(t);
        }
        for (art_rel, entries) in by_file {
            let file = Some(format!("{unit}/{art_rel}"));
            let mut cmps = self.open_upstream(unit, &upstream_root, entries, &file);
            if cmps.is_empty() {
                continue;
            }
            let result = Self::compare_artifact(&dir.join(art_rel), &mut cmps);
            self.push_compared(unit, &file, cmps, &result);
        }
    }

    /// One artifact file's upstream ranges opened for comparison (a missing one: inconclusive).
    fn open_upstream<'t>(
        &mut self,
        unit: &str,
        upstream_root: &Path,
        entries: Vec<&'t crate::repack::TensorEntry>,
        file: &Option<String>,
    ) -> Vec<(&'t crate::repack::TensorEntry, Compare)> {
        let mut cmps: Vec<(&crate::repack::TensorEntry, Compare)> = Vec::new();
        let mut open: BTreeMap<PathBuf, Option<(Arc<File>, u64)>> = BTreeMap::new();
        for t in entries {
            let src = upstream_root.join(&t.source).join(&t.upstream_file);
            let [start, end] = t.upstream_range;
            let opened = open.entry(src.clone()).or_insert_with(|| {
                let f = File::open(&src).ok()?;
                let len = f.metadata().ok()?.len();
                Some((Arc::new(f), len))
            });
            match opened {
                Some((f, len)) if *len >= end => {
                    cmps.push((t, Compare::new(Arc::clone(f), start, end)));
                }
                _ => self.push(
                    "upstream-compare",
                    Some(unit),
                    file.clone(),
                    Verdict::Inconclusive,
                    format!(
                        "upstream bytes of `{}` are not on disk (`{}`)",
                        t.name,
                        src.display()
                    ),
                ),
            }
        }
        cmps
    }

    /// One read of the artifact `art` through the comparisons (copied, or reassembled).
    fn compare_artifact(
        art: &Path,
        cmps: &mut [(&crate::repack::TensorEntry, Compare)],
    ) -> Result<(), String> {
        if cmps.iter().all(|(t, _)| t.role == "plain") {
            // A unit's plain streams in span order: the file is their bytes one after the other.
            cmps.sort_by_key(|(t, _)| t.span.map_or(0, |s| s[0]));
            let len = std::fs::metadata(art).map_err(|e| e.to_string())?.len();
            plain_spans(cmps, len)?;
            let mut chain = Chain {
                parts: cmps.iter_mut().map(|(_, c)| c).collect(),
            };
            File::open(art)
                .and_then(|mut f| std::io::copy(&mut f, &mut chain).map(|_| ()))
                .map_err(|e| e.to_string())
        } else {
            // A stack's members in row order (a lone matrix has no `rows`).
            cmps.sort_by_key(|(t, _)| t.rows.map_or(0, |r| r[0]));
            ContainerReader::open(art)
                .map_err(|e| crate::cli::render_error(&e, None))
                .and_then(|r| {
                    stack_rows(cmps, &r.layout().spec)?;
                    let mut packed = Chain { parts: Vec::new() };
                    let mut scale = Chain { parts: Vec::new() };
                    let mut bias = Chain { parts: Vec::new() };
                    for (t, cmp) in cmps.iter_mut() {
                        match t.role.as_str() {
                            "packed" => packed.parts.push(cmp),
                            "scale" => scale.parts.push(cmp),
                            _ => bias.parts.push(cmp),
                        }
                    }
                    r.reassemble_into(DigestCheck::Require, &mut packed, &mut scale, &mut bias)
                        .map_err(|e| crate::cli::render_error(&e, None))
                })
        }
    }

    /// One upstream-compare check per compared tensor, from the read's `result`.
    fn push_compared(
        &mut self,
        unit: &str,
        file: &Option<String>,
        cmps: Vec<(&crate::repack::TensorEntry, Compare)>,
        result: &Result<(), String>,
    ) {
        for (t, cmp) in cmps {
            let [start, end] = t.upstream_range;
            let detail = format!(
                "`{}` ({}) vs upstream `{}` [{start}, {end})",
                t.name, t.role, t.upstream_file
            );
            let (verdict, what) = match (result, cmp.mismatch, cmp.at == end) {
                (Err(e), _, _) => (Verdict::Fail, e.clone()),
                (Ok(()), Some(at), _) => (
                    Verdict::Fail,
                    format!("first differing byte at upstream offset {at}"),
                ),
                (Ok(()), None, false) => (
                    Verdict::Fail,
                    format!(
                        "the artifact holds {} bytes, upstream {}",
                        cmp.at - start,
                        end - start
                    ),
                ),
                (Ok(()), None, true) => (Verdict::Pass, "byte-identical".to_owned()),
            };
            self.push(
                "upstream-compare",
                Some(unit),
                file.clone(),
                verdict,
                format!("{detail}: {what}"),
            );
        }
    }

    /// Release-wide: index.json (shape, unit totals, identities) and the root files. Required
    /// when the whole release is gated; otherwise checked if present, else a listed non-central
    /// skip (a partial selection before finalize).
    pub fn index(&mut self, whole_release: bool) {
        let release = self.work.release();
        let path = release.join(artifact::index_json::INDEX_FILE_NAME);
        if !path.exists() {
            if whole_release {
                self.push(
                    "index",
                    None,
                    Some("index.json".into()),
                    Verdict::Fail,
                    "index.json is missing: run `minirun-repack --finalize`",
                );
            } else {
                self.checks.push(Check {
                    check: "index",
                    unit: None,
                    file: Some("index.json".into()),
                    verdict: Verdict::Skip,
                    central: false,
                    detail: "not finalized yet (partial selection)".into(),
                });
            }
            return;
        }
        if let Ok((size, _)) = read_back(&path) {
            self.bytes_read += size;
        }
        let doc = IndexDocument::read_file(&path);
        let shape = doc.shape.name();
        if shape != self.plan.index_shape.as_str() {
            let detail = format!(
                "shape {shape} ({:?}), the plan says {}",
                doc.shape,
                self.plan.index_shape.as_str()
            );
            return self.push(
                "index",
                None,
                Some("index.json".into()),
                Verdict::Fail,
                detail,
            );
        }
        self.push(
            "index",
            None,
            Some("index.json".into()),
            Verdict::Pass,
            format!("shape {shape}"),
        );
        let idents: [(&str, Option<artifact::identity::RootFile>, bool); 2] = [
            (
                "tokenizer",
                doc.tokenizer.present().map(|t| t.root.clone()),
                self.plan.tokenizer.is_some(),
            ),
            (
                "configuration",
                doc.configuration.present().map(|c| c.root.clone()),
                self.plan.config.is_some(),
            ),
        ];
        for (name, root, declared) in idents {
            match (root, declared) {
                (None, false) => {}
                (None, true) => self.push(
                    "identity",
                    None,
                    Some("index.json".into()),
                    Verdict::Fail,
                    format!("{name} identity absent"),
                ),
                (Some(r), _) => {
                    let p: PathBuf = release.join(&r.file);
                    match read_back(&p) {
                        Ok((size, sha)) if size == r.bytes && sha == r.sha256 => {
                            self.bytes_read += size;
                            self.push(
                                "identity",
                                None,
                                Some(r.file.clone()),
                                Verdict::Pass,
                                format!(
                                    "{name}: {size} B sha256 {sha} from {}@{}",
                                    r.source_repo, r.source_revision
                                ),
                            );
                        }
                        Ok((size, sha)) => self.push(
                            "identity",
                            None,
                            Some(r.file.clone()),
                            Verdict::Fail,
                            format!(
                                "{name}: file is {size} B sha256 {sha}, the index records {} B {}",
                                r.bytes, r.sha256
                            ),
                        ),
                        Err(e) => self.push(
                            "identity",
                            None,
                            Some(r.file.clone()),
                            Verdict::Fail,
                            format!("{name}: `{}` unreadable: {e}", r.file),
                        ),
                    }
                }
            }
        }
    }
}
