//! `Journal`: one versioned JSON document per (stage, unit), and the done-ness rule.
//!
//! Layout on disk: `<ledger dir>/<stage>/<unit>.json`, replaced only through
//! [`crate::write_atomic`]. Schema, field by field: `docs/ledger.md`. A unit is done only when its
//! journal says `"status": "done"` *and* every output still matches what was recorded: size and
//! [`FileIdentity`] on a normal re-run, size and SHA-256 on a full verification
//! (`ARCHITECTURE.md` §4, issue 2 item 3).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::atomic::{sync_dir, write_atomic};
use crate::hash::hash_reader;
use crate::names::{check_rel_path, check_stage_name, check_unit_name};
use crate::{FileIdentity, LedgerError, Result, Sha256Hex};
use names::is_sha256_lower;

/// The journal schema version this build reads and writes (`"v"`).
pub const JOURNAL_VERSION: u32 = 1;

/// Largest journal file accepted, in bytes. A unit has at most a few thousand files, each a few
/// hundred bytes of JSON; anything this large was not written by the ledger and is not read
/// into memory.
pub const JOURNAL_MAX_BYTES: u64 = 64 << 20;

/// Where a stage stands on a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Work has started; outputs recorded so far are individually complete.
    InProgress,
    /// Every output is written, durable and recorded. Written last, like cargo's `.cargo-ok`.
    Done,
    /// The stage gave up on the unit; `error` says why. A re-run starts the unit again.
    Failed,
    /// The unit was done, and then its outputs were removed on purpose once the hub confirmed it
    /// stores every object made from them (a disk-budgeted run, issue 52). The outputs stay
    /// recorded, `extra["reclaimed"]` says what vouched for the removal, and no stage redoes the
    /// unit: its outputs are not on disk to be checked, and they need not be.
    Reclaimed,
}

/// Size and SHA-256 of one file, and for outputs the filesystem object they were computed over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRecord {
    /// Length in bytes.
    pub size: u64,
    /// SHA-256 of the whole file, 64 lower-case hex characters.
    pub sha256: Sha256Hex,
    /// The file's identity when it was hashed (outputs); absent for inputs known only by digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<FileIdentity>,
}

impl FileRecord {
    /// Size, SHA-256 and identity of the file at `path`, hashed through one descriptor whose
    /// identity is captured before and after ([`LedgerError::ChangedWhileHashing`] when they
    /// differ: something wrote the file meanwhile).
    pub fn hash(path: &Path) -> Result<Self> {
        hash_with_identity(path)
    }
}

/// One stage's journal for one unit (schema: `docs/ledger.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Journal {
    /// Schema version, always [`JOURNAL_VERSION`] when written by this build.
    pub v: u32,
    /// The stage (`fetch`, `repack`, ...).
    pub stage: String,
    /// The unit (`layers00`, `global00`, ...).
    pub unit: String,
    /// Where the stage stands.
    pub status: Status,
    /// What the stage consumed, by path relative to the stage's input root.
    #[serde(default)]
    pub inputs: BTreeMap<String, FileRecord>,
    /// What the stage produced, by path relative to the stage's output root.
    #[serde(default)]
    pub outputs: BTreeMap<String, FileRecord>,
    /// Why the unit failed (`status = "failed"` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Stage-specific records (e.g. fetch's negative-control results), by key. Free-form JSON.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// Why a unit is not done. Every variant names the file (relative to the root) it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotDone {
    /// The journal does not say `done`.
    Status {
        /// What it says.
        status: Status,
    },
    /// A recorded output is gone.
    Missing {
        /// The output.
        path: String,
    },
    /// A recorded output is now a directory, a symbolic link or another non-regular file.
    NotRegularFile {
        /// The output.
        path: String,
    },
    /// A recorded output has another size.
    SizeChanged {
        /// The output.
        path: String,
        /// The recorded size.
        recorded: u64,
        /// The size on disk.
        found: u64,
    },
    /// A recorded output is another filesystem object or was modified (normal re-run). Re-hash
    /// just this file ([`Journal::rehash_output`]) to decide whether its content changed.
    IdentityChanged {
        /// The output.
        path: String,
        /// The first identity field that differs (`dev`, `ino`, `mtime_ns`, `ctime_ns`).
        field: &'static str,
    },
    /// The journal has no identity for this output, so a normal re-run cannot vouch for it.
    NoIdentity {
        /// The output.
        path: String,
    },
    /// The output's SHA-256 differs from the recorded one (full verification).
    DigestChanged {
        /// The output.
        path: String,
        /// The recorded digest.
        recorded: Sha256Hex,
        /// The digest of the bytes on disk.
        found: Sha256Hex,
    },
}

impl std::fmt::Display for NotDone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotDone::Status { status } => write!(f, "the journal's status is `{status:?}`"),
            NotDone::Missing { path } => write!(f, "`{path}` is missing"),
            NotDone::NotRegularFile { path } => write!(f, "`{path}` is not a regular file"),
            NotDone::SizeChanged {
                path,
                recorded,
                found,
            } => {
                write!(
                    f,
                    "`{path}` is {found} bytes, the journal recorded {recorded}"
                )
            }
            NotDone::IdentityChanged { path, field } => {
                write!(
                    f,
                    "`{path}` changed on disk since it was journaled ({field} differs)"
                )
            }
            NotDone::NoIdentity { path } => {
                write!(f, "`{path}` has no recorded filesystem identity")
            }
            NotDone::DigestChanged {
                path,
                recorded,
                found,
            } => write!(
                f,
                "`{path}` has sha256 {found}, the journal recorded {recorded}"
            ),
        }
    }
}

impl NotDone {
    /// True for a difference in filesystem identity only (`IdentityChanged`, `NoIdentity`): the
    /// bytes may well be the same (a copied or moved work directory, a `touch`), which only a
    /// re-hash can tell.
    pub fn identity_only(&self) -> bool {
        matches!(
            self,
            NotDone::IdentityChanged { .. } | NotDone::NoIdentity { .. }
        )
    }

    /// The output this reason is about (`None` for the journal's status).
    pub fn path(&self) -> Option<&str> {
        match self {
            NotDone::Status { .. } => None,
            NotDone::Missing { path }
            | NotDone::NotRegularFile { path }
            | NotDone::SizeChanged { path, .. }
            | NotDone::IdentityChanged { path, .. }
            | NotDone::NoIdentity { path }
            | NotDone::DigestChanged { path, .. } => Some(path),
        }
    }
}

/// The answer of [`Journal::accept_by_content`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByContent {
    /// Done (possibly after re-hashing), or why not.
    pub check: DoneCheck,
    /// Outputs re-hashed; when the check is `Done` and this is non-zero, their identities were
    /// refreshed and the journal must be stored.
    pub rehashed: usize,
    /// Bytes read to re-hash them.
    pub bytes: u64,
}

/// The answer of [`Journal::is_done`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DoneCheck {
    /// The journal says done and every output matches.
    Done,
    /// Not done, with every reason found (all differing outputs, not only the first).
    NotDone(Vec<NotDone>),
    /// The journal says [`Status::Reclaimed`]: the work was done and its outputs were removed on
    /// purpose; nothing on disk was checked.
    Reclaimed,
}

impl DoneCheck {
    /// True for [`DoneCheck::Done`] and [`DoneCheck::Reclaimed`]: the stage has nothing left to
    /// do for the unit (only `Done` vouches for bytes on disk).
    pub fn is_done(&self) -> bool {
        matches!(self, DoneCheck::Done | DoneCheck::Reclaimed)
    }
}

/// What [`Journal::mark_reclaimed`] records in `extra`.
pub const RECLAIMED_KEY: &str = "reclaimed";

impl Journal {
    /// A fresh, in-progress journal for `(stage, unit)`; both names are checked.
    pub fn new(stage: &str, unit: &str) -> Result<Self> {
        check_stage_name(stage)?;
        check_unit_name(unit)?;
        Ok(Journal {
            v: JOURNAL_VERSION,
            stage: stage.to_owned(),
            unit: unit.to_owned(),
            status: Status::InProgress,
            inputs: BTreeMap::new(),
            outputs: BTreeMap::new(),
            error: None,
            extra: BTreeMap::new(),
        })
    }

    /// `<ledger_dir>/<stage>/<unit>.json`, after checking both names.
    pub fn path(ledger_dir: &Path, stage: &str, unit: &str) -> Result<PathBuf> {
        check_stage_name(stage)?;
        check_unit_name(unit)?;
        Ok(ledger_dir.join(stage).join(format!("{unit}.json")))
    }

    /// Loads the journal of `(stage, unit)`. `Ok(None)` when there is none; an unreadable file is
    /// [`LedgerError::CorruptJournal`] (never treated as absent), and a journal naming another
    /// stage or unit is [`LedgerError::WrongJournal`].
    pub fn load(ledger_dir: &Path, stage: &str, unit: &str) -> Result<Option<Self>> {
        let path = Self::path(ledger_dir, stage, unit)?;
        let Some(journal) = Self::load_file(&path)? else {
            return Ok(None);
        };
        for (field, expected, found) in [
            ("stage", stage, journal.stage.as_str()),
            ("unit", unit, journal.unit.as_str()),
        ] {
            if expected != found {
                return Err(LedgerError::WrongJournal {
                    path,
                    field,
                    expected: expected.to_owned(),
                    found: found.to_owned(),
                });
            }
        }
        Ok(Some(journal))
    }

    /// Loads the journal of `(stage, unit)`, or a fresh in-progress one when there is none. Errors
    /// as [`Journal::load`] (an unreadable journal is never silently replaced).
    pub fn load_or_new(ledger_dir: &Path, stage: &str, unit: &str) -> Result<Self> {
        match Self::load(ledger_dir, stage, unit)? {
            Some(j) => Ok(j),
            None => Self::new(stage, unit),
        }
    }

    /// Loads a journal from an explicit path; `Ok(None)` when the file does not exist.
    pub fn load_file(path: &Path) -> Result<Option<Self>> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(LedgerError::io("open journal", path)(e)),
        };
        let len = file
            .metadata()
            .map_err(LedgerError::io("stat journal", path))?
            .len();
        if len > JOURNAL_MAX_BYTES {
            return Err(LedgerError::JournalTooLarge {
                path: path.to_owned(),
                len,
                max: JOURNAL_MAX_BYTES,
            });
        }
        let mut bytes = Vec::new();
        file.take(JOURNAL_MAX_BYTES)
            .read_to_end(&mut bytes)
            .map_err(LedgerError::io("read journal", path))?;
        Self::parse(path, &bytes).map(Some)
    }

    /// Parses and validates journal bytes; `path` only names the file in errors.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Self> {
        let corrupt = |reason: String| LedgerError::CorruptJournal {
            path: path.to_owned(),
            reason,
        };
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| corrupt(format!("not JSON ({e})")))?;
        let v = value
            .get("v")
            .ok_or_else(|| corrupt("no `v` field".to_owned()))?;
        let v = v
            .as_u64()
            .ok_or_else(|| corrupt("`v` is not a non-negative integer".to_owned()))?;
        if v != u64::from(JOURNAL_VERSION) {
            return Err(LedgerError::UnsupportedVersion {
                path: path.to_owned(),
                found: v,
                supported: JOURNAL_VERSION,
            });
        }
        let journal: Journal =
            serde_json::from_value(value).map_err(|e| corrupt(format!("schema: {e}")))?;
        journal.validate().map_err(|e| corrupt(e.to_string()))?;
        Ok(journal)
    }

    fn validate(&self) -> Result<()> {
        check_stage_name(&self.stage)?;
        check_unit_name(&self.unit)?;
        for (rel, rec) in self.inputs.iter().chain(&self.outputs) {
            check_rel_path(rel)?;
            if !is_sha256_lower(&rec.sha256) {
                return Err(LedgerError::BadName {
                    what: "sha256 of a recorded file",
                    name: rec.sha256.chars().take(80).collect(),
                    reason: "a sha256 is exactly 64 lower-case hex characters",
                });
            }
        }
        Ok(())
    }

    /// The journal's bytes: pretty JSON (two-space indent, keys in schema order, maps sorted)
    /// and a trailing newline. The same journal always gives the same bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        // A derived Serialize over strings, integers, BTreeMaps and JSON values cannot fail.
        let mut out = serde_json::to_vec_pretty(self).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// Atomically replaces `<ledger_dir>/<stage>/<unit>.json` with this journal (creating the
    /// stage directory durably if needed). Returns the journal's path.
    pub fn store(&self, ledger_dir: &Path) -> Result<PathBuf> {
        self.validate()?;
        let path = Self::path(ledger_dir, &self.stage, &self.unit)?;
        let stage_dir = ledger_dir.join(&self.stage);
        if !stage_dir.is_dir() {
            std::fs::create_dir_all(&stage_dir)
                .map_err(LedgerError::io("create ledger directory", &stage_dir))?;
            sync_dir(ledger_dir)?;
        }
        write_atomic(&path, &self.to_bytes())?;
        Ok(path)
    }

    /// Records an input known by size and digest (e.g. an upstream file's LFS SHA-256).
    pub fn record_input(&mut self, rel: &str, size: u64, sha256: &str) -> Result<()> {
        check_rel_path(rel)?;
        if !is_sha256_lower(sha256) {
            return Err(LedgerError::BadName {
                what: "sha256 of a recorded file",
                name: sha256.chars().take(80).collect(),
                reason: "a sha256 is exactly 64 lower-case hex characters",
            });
        }
        self.inputs.insert(
            rel.to_owned(),
            FileRecord {
                size,
                sha256: sha256.to_owned(),
                identity: None,
            },
        );
        Ok(())
    }

    /// Hashes `root/rel` (after it is complete, durable and in its final place: a rename changes
    /// the ctime) and records its size, digest and identity as an output.
    pub fn record_output(&mut self, root: &Path, rel: &str) -> Result<&FileRecord> {
        check_rel_path(rel)?;
        let record = hash_with_identity(&root.join(rel))?;
        self.outputs.remove(rel);
        let slot = self.outputs.entry(rel.to_owned()).or_insert(record);
        Ok(slot)
    }

    /// Records `root/rel` as an output whose SHA-256 the caller has just computed over its final
    /// bytes (e.g. while verifying it against an upstream digest), so it is not read a second
    /// time: only its size is checked and its identity captured.
    pub fn record_output_hashed(
        &mut self,
        root: &Path,
        rel: &str,
        size: u64,
        sha256: &str,
    ) -> Result<&FileRecord> {
        check_rel_path(rel)?;
        let path = root.join(rel);
        let identity = FileIdentity::capture(&path)?;
        let found = identity.as_ref().map(|i| i.size);
        if found != Some(size) || !is_sha256_lower(sha256) {
            return Err(LedgerError::io("record output", &path)(std::io::Error::other(format!(
                "expected a regular file of {size} bytes with a sha256 digest, found {found:?} bytes"
            ))));
        }
        let record = FileRecord {
            size,
            sha256: sha256.to_owned(),
            identity,
        };
        self.outputs.remove(rel);
        Ok(self.outputs.entry(rel.to_owned()).or_insert(record))
    }

    /// Marks the journal done. Store it only after every output is recorded.
    pub fn mark_done(&mut self) {
        self.status = Status::Done;
        self.error = None;
    }

    /// Marks a done journal reclaimed: its outputs are about to be removed on purpose, and `why`
    /// (stored as `extra["reclaimed"]`) says what vouched for it. Store the journal before
    /// removing a single output, so a crash in between leaves a reclaimed unit whose leftovers a
    /// re-run removes, never a done journal over missing files. A journal that is not done (or
    /// already reclaimed) is refused.
    pub fn mark_reclaimed(&mut self, why: serde_json::Value) -> Result<()> {
        if self.status != Status::Done {
            return Err(LedgerError::NotReclaimable {
                stage: self.stage.clone(),
                unit: self.unit.clone(),
                status: format!("{:?}", self.status),
            });
        }
        self.status = Status::Reclaimed;
        self.extra.insert(RECLAIMED_KEY.to_owned(), why);
        Ok(())
    }

    /// Marks the journal failed with a reason.
    pub fn mark_failed(&mut self, reason: impl Into<String>) {
        self.status = Status::Failed;
        self.error = Some(reason.into());
    }

    /// Decides whether the unit is done: the journal says so and every output under `root`
    /// matches its record (size + identity, or size + SHA-256 when `full_verify`). Errors only for
    /// I/O failures other than a missing file.
    pub fn is_done(&self, root: &Path, full_verify: bool) -> Result<DoneCheck> {
        if self.status == Status::Reclaimed {
            return Ok(DoneCheck::Reclaimed);
        }
        if self.status != Status::Done {
            return Ok(DoneCheck::NotDone(vec![NotDone::Status {
                status: self.status,
            }]));
        }
        let mut reasons = Vec::new();
        for (rel, rec) in &self.outputs {
            if let Some(reason) = check_output(root, rel, rec, full_verify)? {
                reasons.push(reason);
            }
        }
        Ok(if reasons.is_empty() {
            DoneCheck::Done
        } else {
            DoneCheck::NotDone(reasons)
        })
    }

    /// Done-ness that accepts outputs by content: when the journal says done and the outputs
    /// differ from their records only in filesystem identity (a copied or moved work directory),
    /// exactly those outputs are re-hashed; if every one still has its recorded size and SHA-256,
    /// their identities are refreshed and the answer is `Done` (store the journal afterwards,
    /// under the unit's lock). Any other difference is answered without reading a byte.
    pub fn accept_by_content(&mut self, root: &Path) -> Result<ByContent> {
        let reasons = match self.is_done(root, false)? {
            check @ (DoneCheck::Done | DoneCheck::Reclaimed) => {
                return Ok(ByContent {
                    check,
                    rehashed: 0,
                    bytes: 0,
                })
            }
            DoneCheck::NotDone(v) => v,
        };
        if !reasons.iter().all(NotDone::identity_only) {
            return Ok(ByContent {
                check: DoneCheck::NotDone(reasons),
                rehashed: 0,
                bytes: 0,
            });
        }
        let (mut differ, mut bytes) = (Vec::new(), 0);
        for rel in reasons.iter().filter_map(NotDone::path) {
            bytes += self.outputs.get(rel).map_or(0, |r| r.size);
            if let Some(why) = self.rehash_output(root, rel)? {
                differ.push(why);
            }
        }
        Ok(ByContent {
            check: if differ.is_empty() {
                DoneCheck::Done
            } else {
                DoneCheck::NotDone(differ)
            },
            rehashed: reasons.len(),
            bytes,
        })
    }

    /// Re-hashes one recorded output whose identity changed. Same size and digest: the record's
    /// identity is refreshed and `Ok(None)` returned (store the journal). Otherwise the record is
    /// left alone and the difference returned.
    pub fn rehash_output(&mut self, root: &Path, rel: &str) -> Result<Option<NotDone>> {
        let Some(rec) = self.outputs.get_mut(rel) else {
            return Ok(Some(NotDone::Missing {
                path: rel.to_owned(),
            }));
        };
        let path = root.join(rel);
        if let Err(reason) = stat_regular(&path, rel)? {
            return Ok(Some(reason));
        }
        let found = hash_with_identity(&path)?;
        if let Some(reason) = compare_content(rel, rec, &found) {
            return Ok(Some(reason));
        }
        rec.identity = found.identity;
        Ok(None)
    }

    /// Refreshes the identity of output `rel` to `found`'s when `found` (hashed by the caller
    /// through [`FileRecord::hash`]) has the recorded size and SHA-256 — the same proof
    /// [`Journal::rehash_output`] makes, done by a reader that has just hashed the file anyway
    /// (staging hashes each release file it links, and the link moves the file's ctime). Returns
    /// whether the record changed (store the journal, under the unit's lock).
    pub fn refresh_identity(&mut self, rel: &str, found: &FileRecord) -> bool {
        match self.outputs.get_mut(rel) {
            Some(rec)
                if rec.size == found.size
                    && rec.sha256 == found.sha256
                    && found.identity.is_some()
                    && rec.identity != found.identity =>
            {
                rec.identity = found.identity;
                true
            }
            _ => false,
        }
    }

    /// The first recorded input whose size or digest differs from `expected` (or that is missing
    /// on either side): a done journal whose inputs moved is not done for these inputs.
    pub fn input_mismatch(&self, expected: &BTreeMap<String, FileRecord>) -> Option<String> {
        let keys: std::collections::BTreeSet<&String> =
            self.inputs.keys().chain(expected.keys()).collect();
        keys.into_iter()
            .find(|k| match (self.inputs.get(*k), expected.get(*k)) {
                (Some(a), Some(b)) => a.size != b.size || a.sha256 != b.sha256,
                _ => true,
            })
            .cloned()
    }
}

/// Hashes a file through one descriptor and captures that descriptor's identity before and after;
/// a difference means something wrote the file meanwhile.
fn hash_with_identity(path: &Path) -> Result<FileRecord> {
    let mut file = File::open(path).map_err(LedgerError::io("open for hashing", path))?;
    let before = FileIdentity::of_file(path, &file)?;
    let (size, sha256) = hash_reader(&mut file, path)?;
    let after = FileIdentity::of_file(path, &file)?;
    if before != after || size != after.size {
        return Err(LedgerError::ChangedWhileHashing {
            path: path.to_owned(),
        });
    }
    Ok(FileRecord {
        size,
        sha256,
        identity: Some(after),
    })
}

/// `Ok(Err(reason))` when the path is missing or not a regular file (symbolic links are not
/// followed).
fn stat_regular(path: &Path, rel: &str) -> Result<Result<std::fs::Metadata, NotDone>> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => Ok(Ok(m)),
        Ok(_) => Ok(Err(NotDone::NotRegularFile {
            path: rel.to_owned(),
        })),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Err(NotDone::Missing {
            path: rel.to_owned(),
        })),
        Err(e) => Err(LedgerError::io("stat", path)(e)),
    }
}

fn compare_content(rel: &str, rec: &FileRecord, found: &FileRecord) -> Option<NotDone> {
    if found.size != rec.size {
        Some(NotDone::SizeChanged {
            path: rel.to_owned(),
            recorded: rec.size,
            found: found.size,
        })
    } else if found.sha256 != rec.sha256 {
        Some(NotDone::DigestChanged {
            path: rel.to_owned(),
            recorded: rec.sha256.clone(),
            found: found.sha256.clone(),
        })
    } else {
        None
    }
}

fn check_output(
    root: &Path,
    rel: &str,
    rec: &FileRecord,
    full_verify: bool,
) -> Result<Option<NotDone>> {
    let path = root.join(rel);
    let meta = match stat_regular(&path, rel)? {
        Ok(m) => m,
        Err(reason) => return Ok(Some(reason)),
    };
    if meta.len() != rec.size {
        return Ok(Some(NotDone::SizeChanged {
            path: rel.to_owned(),
            recorded: rec.size,
            found: meta.len(),
        }));
    }
    if full_verify {
        let found = hash_with_identity(&path)?;
        return Ok(compare_content(rel, rec, &found));
    }
    let Some(recorded) = rec.identity else {
        return Ok(Some(NotDone::NoIdentity {
            path: rel.to_owned(),
        }));
    };
    let found = FileIdentity::from_metadata(&path, &meta)?;
    Ok(recorded
        .first_difference(&found)
        .map(|field| NotDone::IdentityChanged {
            path: rel.to_owned(),
            field,
        }))
}
