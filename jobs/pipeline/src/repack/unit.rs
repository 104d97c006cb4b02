//! Repacking one unit: one tile container per quantized weight (its packed, scale and bias streams
//! cut into row tiles, bytes unchanged), one plain stream per other tensor (the upstream bytes
//! verbatim, copied with `copy_file_range` where the filesystem allows), then `tensors.json` (which
//! upstream tensor lives where) and `manifest.json` (every file, size, SHA-256).
//!
//! Resume: the journal is stored after every finished file; a re-run keeps a recorded file whose
//! size and filesystem identity still match and rewrites the rest from scratch.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::ops::Range;
use std::path::Path;

use artifact::container::{ContainerSpec, ContainerWriter, Layout};
use artifact::manifest::{FileKind, Manifest, ManifestEntry, SourceRef};
use artifact::safetensors::absolute_range;
use ledger::{FileIdentity, Journal, UnitLock};
use sha2::{Digest, Sha256};

use super::container::{
    container_file, container_spec, copy_tiles, write_assembled, Hashed, MemberShas, UpstreamFiles,
    Upstreams, WriteSeek,
};
use super::plain::{self, PlainMember, PLAIN_FILE};
use super::{io_err, RepackError, UnitReport, STAGE};
use crate::direct::AlignedBuf;
use crate::fetch::discover::Upstream;
use crate::plan::{
    ContainerPlacement, Geometry, Placement, ResolvedUnit, StackPlacement, UpstreamTensor,
};
use crate::units::{self, UnitStatus};
use crate::work::WorkDir;

pub use artifact::tensor_map::{TensorEntry, TensorMap, TENSORS_FILE};

/// Why the unit's repack journal does not prove it done (`None`: done). With `verify`, outputs
/// whose filesystem identity changed are re-hashed: same bytes → the identity is refreshed and
/// the journal stored (so later stages trust the new object); other bytes → not done.
pub fn done_reason(
    ledger_dir: &Path,
    work: &WorkDir,
    unit: &str,
    verify: bool,
) -> Result<Option<String>, RepackError> {
    let root = work.release().join(unit);
    if verify {
        // re-hash every file, accepting files that are other filesystem objects with the
        // journaled bytes (a copied or moved work directory)
        let Some(mut journal) = Journal::load(ledger_dir, STAGE, unit)? else {
            return Ok(Some(units::NO_JOURNAL.into()));
        };
        let by = journal.accept_by_content(&root)?;
        if by.check.is_done() && by.rehashed > 0 {
            journal.store(ledger_dir)?;
        }
        return Ok(match by.check {
            ledger::DoneCheck::Done | ledger::DoneCheck::Reclaimed => None,
            ledger::DoneCheck::NotDone(why) => Some(units::not_done_reason(&why)),
        });
    }
    Ok(
        match units::journal_done(ledger_dir, STAGE, unit, &root, false)? {
            units::JournalDone::NoJournal => Some(units::NO_JOURNAL.into()),
            units::JournalDone::Done | units::JournalDone::Reclaimed => None,
            units::JournalDone::NotDone(why) => Some(units::not_done_reason(&why)),
        },
    )
}

struct Ctx<'a> {
    unit: &'a str,
    src_root: std::path::PathBuf,
    out_root: std::path::PathBuf,
    upstream: &'a Upstream,
    journal: Journal,
    ledger_dir: std::path::PathBuf,
    report: UnitReport,
    entries: Vec<TensorEntry>,
    manifest_sources: BTreeMap<String, (FileKind, Vec<SourceRef>)>,
    unsynced: u64,
    last_commit: std::time::Instant,
    /// Upstream files opened by this unit, kept open (a unit's containers read the same shards).
    open_sources: BTreeMap<std::path::PathBuf, std::rc::Rc<File>>,
    /// Where in-memory containers are assembled: block-aligned for `O_DIRECT`, reused.
    assembly: AlignedBuf,
    /// The unit's plain streams, written together at the end ([`Ctx::plain_group`]).
    plains: Vec<PlainMember>,
    /// What the previous run journaled of its `plain.bin`.
    previous_plain: Option<serde_json::Value>,
}

/// Containers up to this size are assembled in memory (hashed from the CPU cache, one write).
const IN_MEMORY_CONTAINER_BYTES: u64 = 16 << 20;

/// Commit the journal at least every this many written bytes …
const GROUP_COMMIT_BYTES: u64 = 512 << 20;
/// … or this often, whichever comes first.
const GROUP_COMMIT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(2);

/// `syncfs(2)` on the filesystem holding `dir`: every dirty page and inode of it made durable.
fn sync_filesystem(dir: &Path) -> Result<(), RepackError> {
    use std::os::fd::AsRawFd;
    let d = File::open(dir).map_err(io_err("open", dir))?;
    // SAFETY: `d` is an open descriptor for the duration of the call.
    if unsafe { libc::syncfs(d.as_raw_fd()) } != 0 {
        return Err(io_err("syncfs", dir)(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Repack one unit (its fetch must be done) and journal it. With `recheck`, a unit whose
/// journal says done once the lock is held (another process finished it after this run listed
/// it as pending) is reported done, not repacked again.
pub fn repack_unit(
    work: &WorkDir,
    upstream: &Upstream,
    ru: &ResolvedUnit,
    recheck: bool,
) -> Result<UnitReport, RepackError> {
    let unit = ru.name.as_str();
    let ledger_dir = work.ledger();
    let _lock = UnitLock::acquire(&ledger_dir, STAGE, unit)?;
    if recheck && done_reason(&ledger_dir, work, unit, false)?.is_none() {
        return Ok(UnitReport::new(
            unit,
            UnitStatus::AlreadyDone,
            Some(crate::fetch::DONE_BY_OTHER.into()),
        ));
    }
    if let Some(reason) = fetch_not_done(&ledger_dir, work, unit)? {
        return Err(RepackError::NotFetched {
            unit: unit.into(),
            reason,
        });
    }
    let out_root = work.release().join(unit);
    std::fs::create_dir_all(&out_root).map_err(io_err("create", &out_root))?;
    // Keep what an interrupted run finished; forget the rest.
    let previous = Journal::load(&ledger_dir, STAGE, unit)?;
    let mut journal = Journal::new(STAGE, unit)?;
    let mut previous_plain = None;
    if let Some(mut prev) = previous {
        previous_plain = prev.extra.remove(plain::JOURNAL_KEY);
        for (rel, rec) in prev.outputs {
            if file_still_matches(&out_root.join(&rel), &rec) {
                journal.outputs.insert(rel, rec);
            }
        }
    }
    let mut cx = Ctx {
        unit,
        src_root: work.upstream_unit(unit),
        out_root,
        upstream,
        journal,
        ledger_dir,
        report: UnitReport::new(unit, UnitStatus::Repacked, None),
        entries: Vec::new(),
        manifest_sources: BTreeMap::new(),
        unsynced: 0,
        last_commit: std::time::Instant::now(),
        open_sources: BTreeMap::new(),
        assembly: AlignedBuf::default(),
        plains: Vec::new(),
        previous_plain,
    };
    for p in &ru.placements {
        match p {
            Placement::Plain { tensor, .. } => cx.plain(tensor, None)?,
            Placement::Container(c) => cx.container(c)?,
            Placement::Stack(s) => cx.stack(s)?,
        }
    }
    cx.plain_group()?;
    cx.entries.sort_by(|a, b| a.name.cmp(&b.name));
    let map = TensorMap {
        v: 1,
        unit: unit.to_owned(),
        tensors: cx.entries.clone(),
    };
    let map_bytes = artifact::manifest::canonical_json_bytes(
        &serde_json::to_value(&map)
            .map_err(|e| io_err("encode", Path::new(TENSORS_FILE))(std::io::Error::other(e)))?,
    );
    cx.write_small(TENSORS_FILE, &map_bytes)?;
    // A file no placement wrote (left by an older plan) is not part of the release: removed,
    // and forgotten by the journal.
    let wanted = |rel: &str| rel == TENSORS_FILE || cx.manifest_sources.contains_key(rel);
    for rel in list_files(&cx.out_root)? {
        if !wanted(&rel) {
            let p = cx.out_root.join(&rel);
            std::fs::remove_file(&p).map_err(io_err("remove stale", &p))?;
        }
    }
    cx.journal
        .outputs
        .retain(|rel, _| wanted(rel) || rel == artifact::manifest::MANIFEST_FILE_NAME);
    // The manifest lists every file of the unit, tensors.json included (not itself), with the
    // size and SHA-256 journaled when the file was written (hashed once, after it was complete;
    // the gate reads every byte back off the drive against both).
    let manifest_err = |source| RepackError::Manifest {
        unit: unit.into(),
        source,
    };
    let mut manifest = Manifest::new(unit).map_err(manifest_err)?;
    for (rel, rec) in cx.journal.outputs.iter().filter(|(rel, _)| wanted(rel)) {
        let (kind, sources) = cx
            .manifest_sources
            .get(rel)
            .cloned()
            .unwrap_or((FileKind::Plain, Vec::new()));
        manifest
            .insert(ManifestEntry {
                path: rel.clone(),
                size: rec.size,
                sha256: rec.sha256.to_string(),
                kind,
                sources,
            })
            .map_err(manifest_err)?;
    }
    cx.write_small(artifact::manifest::MANIFEST_FILE_NAME, &manifest.to_bytes())?;
    cx.journal.mark_done();
    cx.commit()?;
    Ok(cx.report)
}

/// Every regular file under `dir` (relative `/`-separated paths) except the manifest, without
/// reading them. Anything that is not a regular file or directory (a symbolic link) is refused,
/// as `Manifest::scan` refuses it.
fn list_files(dir: &Path) -> Result<Vec<String>, RepackError> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_owned(), String::new())];
    while let Some((abs, rel)) = stack.pop() {
        for entry in std::fs::read_dir(&abs).map_err(io_err("list", &abs))? {
            let entry = entry.map_err(io_err("list", &abs))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let ft = entry.file_type().map_err(io_err("stat", &entry.path()))?;
            if ft.is_dir() {
                stack.push((entry.path(), child));
            } else if ft.is_file() {
                if child != artifact::manifest::MANIFEST_FILE_NAME {
                    out.push(child);
                }
            } else {
                return Err(io_err("repack into", &entry.path())(std::io::Error::other(
                    "only regular files and directories may be in a unit directory (no symbolic links)",
                )));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn fetch_not_done(
    ledger_dir: &Path,
    work: &WorkDir,
    unit: &str,
) -> Result<Option<String>, RepackError> {
    let Some(j) = Journal::load(ledger_dir, crate::fetch::STAGE, unit)? else {
        return Ok(Some("no fetch journal".into()));
    };
    Ok(match j.is_done(&work.upstream_unit(unit), false)? {
        ledger::DoneCheck::Done => None,
        ledger::DoneCheck::Reclaimed => Some("its fetched bytes were reclaimed".into()),
        ledger::DoneCheck::NotDone(v) => Some(crate::cli::join_limited(&v, 5)),
    })
}

fn file_still_matches(path: &Path, rec: &ledger::FileRecord) -> bool {
    match (FileIdentity::capture(path), &rec.identity) {
        (Ok(Some(now)), Some(then)) => now.size == rec.size && now.first_difference(then).is_none(),
        _ => false,
    }
}

impl Ctx<'_> {
    fn upstream_range(
        &self,
        t: &UpstreamTensor,
    ) -> Result<(std::path::PathBuf, std::ops::Range<u64>), RepackError> {
        let uf = self
            .upstream
            .file(&t.source, &t.file)
            .ok_or_else(|| RepackError::NotFetched {
                unit: self.unit.into(),
                reason: format!("`{}` is not among the fetched files", t.file),
            })?;
        let ti = uf
            .header
            .tensor(&t.name)
            .ok_or_else(|| RepackError::NotFetched {
                unit: self.unit.into(),
                reason: format!("`{}` is not in the header of `{}`", t.name, t.file),
            })?;
        Ok((
            self.src_root.join(&t.source).join(&t.file),
            absolute_range(uf.header.data_start, ti),
        ))
    }

    /// The upstream file at `path`, opened once per unit.
    fn source(&mut self, path: &Path) -> Result<std::rc::Rc<File>, RepackError> {
        if let Some(f) = self.open_sources.get(path) {
            return Ok(f.clone());
        }
        let f = std::rc::Rc::new(File::open(path).map_err(io_err("open", path))?);
        self.open_sources.insert(path.to_owned(), f.clone());
        Ok(f)
    }

    fn done_already(&mut self, rel: &str) -> bool {
        let kept = self.journal.outputs.contains_key(rel);
        if kept {
            self.report.files_kept += 1;
        }
        kept
    }

    fn finish_file(&mut self, rel: &str) -> Result<(), RepackError> {
        self.finish_file_hashed(rel, None)
    }

    /// As [`Ctx::finish_file`]; `hashed` is the size and SHA-256 of the bytes just written when
    /// the caller hashed them itself (the file is then not read again).
    fn finish_file_hashed(
        &mut self,
        rel: &str,
        hashed: Option<(u64, String)>,
    ) -> Result<(), RepackError> {
        let rec = match hashed {
            Some((size, sha)) => {
                self.journal
                    .record_output_hashed(&self.out_root, rel, size, &sha)?
            }
            None => self.journal.record_output(&self.out_root, rel)?,
        };
        self.report.files_written += 1;
        self.report.bytes_written += rec.size;
        self.unsynced += rec.size;
        if self.unsynced >= GROUP_COMMIT_BYTES
            || self.last_commit.elapsed() >= GROUP_COMMIT_INTERVAL
        {
            self.commit()?;
        }
        Ok(())
    }

    /// Group commit: make every file written since the last commit durable with one `syncfs`,
    /// then store the journal that records them. A file is in a stored journal only after its
    /// bytes are durable; files written after the last commit are simply rewritten on resume.
    fn commit(&mut self) -> Result<(), RepackError> {
        sync_filesystem(&self.out_root)?;
        self.journal.store(&self.ledger_dir)?;
        self.unsynced = 0;
        self.last_commit = std::time::Instant::now();
        Ok(())
    }

    fn write_small(&mut self, rel: &str, bytes: &[u8]) -> Result<(), RepackError> {
        let path = self.out_root.join(rel);
        if std::fs::read(&path).ok().as_deref() == Some(bytes)
            && self.journal.outputs.contains_key(rel)
        {
            self.report.files_kept += 1;
            return Ok(());
        }
        ledger::write_atomic(&path, bytes)?;
        self.finish_file(rel)
    }

    fn entry(
        &self,
        t: &UpstreamTensor,
        file: &str,
        role: &str,
        range: &std::ops::Range<u64>,
        sha: String,
        fallback: Option<String>,
    ) -> TensorEntry {
        TensorEntry {
            name: t.name.clone(),
            dtype: t.dtype.clone(),
            shape: t.shape.clone(),
            file: file.to_owned(),
            role: role.to_owned(),
            source: t.source.clone(),
            upstream_file: t.file.clone(),
            upstream_range: [range.start, range.end],
            sha256: sha,
            fallback,
            rows: None,
            span: None,
        }
    }

    fn source_ref(&self, t: &UpstreamTensor) -> SourceRef {
        SourceRef {
            repo: None,
            file: t.file.clone(),
            tensor: Some(t.name.clone()),
        }
    }

    /// One plain stream: the tensor's upstream bytes verbatim, written with the unit's others
    /// into `plain.bin` once every placement is done ([`Ctx::plain_group`]).
    fn plain(&mut self, t: &UpstreamTensor, fallback: Option<String>) -> Result<(), RepackError> {
        let (src, range) = self.upstream_range(t)?;
        self.plains.push(PlainMember {
            tensor: t.clone(),
            src,
            range,
            fallback,
        });
        Ok(())
    }

    /// The unit's plain streams in one file, in tensor-name order, each with its span; kept when
    /// the previous run wrote exactly these members.
    fn plain_group(&mut self) -> Result<(), RepackError> {
        if self.plains.is_empty() {
            return Ok(());
        }
        let mut members = std::mem::take(&mut self.plains);
        members.sort_by(|a, b| a.tensor.name.cmp(&b.tensor.name));
        let rel = PLAIN_FILE;
        let journaled = self.previous_plain.take();
        let reuse = self
            .journal
            .outputs
            .contains_key(rel)
            .then(|| plain::kept(journaled.as_ref(), &members))
            .flatten();
        let written = match reuse {
            Some(w) => {
                self.report.files_kept += 1;
                w
            }
            None => {
                let (size, sha, w) = plain::write_group(&members, &self.out_root.join(rel))?;
                self.finish_file_hashed(rel, Some((size, sha)))?;
                w
            }
        };
        self.journal.extra.insert(
            plain::JOURNAL_KEY.into(),
            serde_json::to_value(&written).unwrap_or_default(),
        );
        let mut sources = Vec::with_capacity(members.len());
        for (m, w) in members.into_iter().zip(written) {
            let mut e = self.entry(&m.tensor, rel, "plain", &m.range, w.sha256, m.fallback);
            e.span = Some(w.span);
            self.entries.push(e);
            sources.push(self.source_ref(&m.tensor));
        }
        self.manifest_sources
            .insert(rel.to_owned(), (FileKind::Plain, sources));
        Ok(())
    }

    /// One tile container of one matrix.
    fn container(&mut self, c: &ContainerPlacement) -> Result<(), RepackError> {
        self.write_container(&c.weight.name, &c.geometry, std::slice::from_ref(c), false)
    }

    /// One stacked container: the members' matrices one after the other, each from a tile
    /// boundary (`plan::stack`).
    fn stack(&mut self, s: &StackPlacement) -> Result<(), RepackError> {
        self.write_container(&s.name, &s.geometry, &s.members, true)
    }

    /// A container named `name` of geometry `g` holding `members` in order (one, or a stack's).
    fn write_container(
        &mut self,
        name: &str,
        g: &Geometry,
        members: &[ContainerPlacement],
        stacked: bool,
    ) -> Result<(), RepackError> {
        let Some(lead) = members.first() else {
            return Ok(());
        };
        let spec = container_spec(&lead.spec.mode, lead.spec.scale_dtype.as_str(), g, name);
        let layout = match spec.layout() {
            Ok(l) => l,
            Err(e) => return self.container_refused(members, e),
        };
        let rel = container_file(name);
        let up = members
            .iter()
            .map(|c| self.container_upstreams(c))
            .collect::<Result<Vec<_>, _>>()?;
        let kept = self.done_already(&rel);
        let (shas, hashed) = self.assemble(&spec, &layout, name, &rel, up.as_slice(), kept)?;
        if !kept {
            self.finish_file_hashed(&rel, hashed)?;
        }
        let mut sources = Vec::new();
        for (m, ((c, up), sha)) in members.iter().zip(&up).zip(shas).enumerate() {
            let rows = stacked.then(|| {
                let r = c.geometry.rows;
                [m as u64 * r, (m as u64 + 1) * r]
            });
            sources.extend(self.container_entries(c, &rel, up, sha, rows));
        }
        self.manifest_sources
            .insert(rel, (FileKind::Container, sources));
        Ok(())
    }

    /// Refused step: a geometry the container rules refuse keeps its tensors as plain streams.
    fn container_refused(
        &mut self,
        members: &[ContainerPlacement],
        e: impl std::fmt::Display,
    ) -> Result<(), RepackError> {
        // The geometry cannot satisfy the 16 KiB rules (seed: refused at construction,
        // never padded into something that looks valid): keep the bytes as plain streams.
        let why = format!("container geometry refused: {e}");
        for c in members {
            for t in c.tensors() {
                self.plain(t, Some(why.clone()))?;
            }
        }
        Ok(())
    }

    /// Upstream step: where the container's weight, scale and bias bytes lie upstream.
    fn container_upstreams(&self, c: &ContainerPlacement) -> Result<Upstreams, RepackError> {
        let weight = self.upstream_range(&c.weight)?;
        let scale = self.upstream_range(&c.scale)?;
        let bias = match &c.bias {
            Some(b) => Some(self.upstream_range(b)?),
            None => None,
        };
        Ok(Upstreams {
            weight,
            scale,
            bias,
        })
    }

    /// Open step: one member's upstream files, opened once per unit.
    fn upstream_files(&mut self, up: &Upstreams) -> Result<UpstreamFiles, RepackError> {
        let (weight, scale) = (self.source(&up.weight.0)?, self.source(&up.scale.0)?);
        let bias = match &up.bias {
            Some((p, _)) => Some(self.source(p)?),
            None => None,
        };
        Ok(UpstreamFiles {
            weight,
            scale,
            bias,
        })
    }

    /// Assembly step: write the container's tiles (unless kept), hashing each member's upstream
    /// streams.
    fn assemble(
        &mut self,
        spec: &ContainerSpec,
        layout: &Layout,
        name: &str,
        rel: &str,
        up: &[Upstreams],
        kept: bool,
    ) -> Result<(MemberShas, Hashed), RepackError> {
        let mut shas: MemberShas = up
            .iter()
            .map(|_| [Sha256::new(), Sha256::new(), Sha256::new()])
            .collect();
        let mut hashed = None;
        let mut members = Vec::with_capacity(up.len());
        for u in up {
            let files = self.upstream_files(u)?;
            members.push((u.clone(), files));
        }
        let out_path = self.out_root.join(rel);
        // A container that fits in IN_MEMORY_CONTAINER_BYTES is assembled in a block-aligned
        // buffer: its bytes are hashed for the journal while still in the CPU cache and
        // written with one O_DIRECT call (crate::direct), instead of being copied into the page
        // cache and read back. Larger ones stream to the file through the page cache.
        let in_memory = layout.total_bytes <= IN_MEMORY_CONTAINER_BYTES;
        let mem_len = if in_memory && !kept {
            layout.total_bytes as usize
        } else {
            0
        };
        let mut mem = std::io::Cursor::new(self.assembly.slice_mut(mem_len));
        let mut file_out = None;
        let mut writer = if kept {
            None
        } else {
            let sink: &mut dyn WriteSeek = if in_memory {
                &mut mem
            } else {
                file_out.insert(
                    OpenOptions::new()
                        .write(true)
                        .create(true)
                        .truncate(true)
                        .open(&out_path)
                        .map_err(io_err("create", &out_path))?,
                )
            };
            Some(
                ContainerWriter::with_path(sink, spec, &out_path).map_err(|source| {
                    RepackError::Container {
                        unit: self.unit.into(),
                        tensor: name.to_owned(),
                        source,
                    }
                })?,
            )
        };
        copy_tiles(
            (self.unit, name),
            layout,
            &members,
            writer.as_mut(),
            &mut shas,
        )?;
        if let Some(w) = writer {
            w.finish().map_err(|source| RepackError::Container {
                unit: self.unit.into(),
                tensor: name.to_owned(),
                source,
            })?;
        }
        if !kept && in_memory {
            hashed = Some(write_assembled(mem, &out_path)?);
        }
        Ok((shas, hashed))
    }

    /// Entries step: one member's packed, scale and bias entries (with the container rows it
    /// occupies, in a stack); returns its manifest sources.
    fn container_entries(
        &mut self,
        c: &ContainerPlacement,
        rel: &str,
        up: &Upstreams,
        shas: [Sha256; 3],
        rows: Option<[u64; 2]>,
    ) -> Vec<SourceRef> {
        let [pw, ps, pb] = shas;
        let mut sources = vec![self.source_ref(&c.weight), self.source_ref(&c.scale)];
        let push = |cx: &mut Self, t: &UpstreamTensor, role: &str, r: &Range<u64>, sha: Sha256| {
            let mut e = cx.entry(t, rel, role, r, hex::encode(sha.finalize()), None);
            e.rows = rows;
            cx.entries.push(e);
        };
        push(self, &c.weight, "packed", &up.weight.1, pw);
        push(self, &c.scale, "scale", &up.scale.1, ps);
        if let (Some(bt), Some((_, br))) = (&c.bias, &up.bias) {
            sources.push(self.source_ref(bt));
            push(self, bt, "bias", br, pb);
        }
        sources
    }
}
