//! Verified-only execution of Minirun artifacts (issue 7 item 4; seed 000 "A result is bound to
//! filesystem objects", "Verified tiles are not re-hashed at decode", "Tokenizer and configuration
//! identity"; docs/runner.md "Verified-only execution" and docs/verify.md §4 for the evidence).
//!
//! [`VerifiedArtifact::open`] refuses a local copy unless `minirun-verify` left evidence for the
//! exact commit (`.minirun-evidence/<commit>.json`) and every file of that evidence still is the
//! object it was computed over (rooted `O_NOFOLLOW` open, `fsid::still_holds`, no hashing); then
//! it checks the tokenizer and configuration identities and the vocabulary ([`identity`]) and
//! indexes every upstream tensor from the units' `tensors.json` ([`tensors`]). Tensors are then
//! loaded by upstream name under the load policy of [`load`].
//!
//! [`OpenOptions::require_evidence`] `= false` is for tools and tests only (never the CLI): without
//! evidence for the requested commit the artifact has no [`Authority`] and every tile and plain
//! stream is checked against its recorded SHA-256 at load.

pub mod chat;
pub mod error;
pub mod identity;
pub mod load;
pub mod stream;
pub mod tensors;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use artifact::evidence::Evidence;
use artifact::index_json::{IndexDocument, Shape, INDEX_FILE_NAME};
use artifact::manifest::{Manifest, MANIFEST_FILE_NAME};

pub use error::ArtifactError;
pub use identity::{prompt_cache_identity, tokenizer_of};
pub use load::{Authority, ContainerLoad, PlainLoad};
pub use tensors::{TensorInfo, TensorKind};

use load::Rooted;

/// The release record `minirun-stage` publishes (`.minirun/release.json`, read by
/// `artifact::release_record`): the family and target are read from it.
pub const RELEASE_FILE: &str = artifact::release_record::RECORD_PATH;

/// Metadata files (index, manifests, `tensors.json`, release record) larger than this are refused.
const META_MAX_BYTES: u64 = 64 << 20;

/// How to open an artifact.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// The commit to run; `None`: the only commit with evidence in the directory.
    pub revision: Option<String>,
    /// Refuse without evidence for the commit (the CLI always sets this).
    pub require_evidence: bool,
}

impl OpenOptions {
    /// What every command that runs an artifact opens it with: evidence required, for
    /// `revision` or the only commit that has some.
    pub fn verified(revision: Option<String>) -> Self {
        Self {
            revision,
            require_evidence: true,
        }
    }
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self {
            revision: None,
            require_evidence: true,
        }
    }
}

/// A local artifact copy whose verification evidence holds (or, without
/// [`OpenOptions::require_evidence`], whose every load is digest-checked).
pub struct VerifiedArtifact {
    rooted: std::sync::Arc<Rooted>,
    family: String,
    index: IndexDocument,
    tensors: BTreeMap<String, TensorInfo>,
    root_files: identity::RootFiles,
}

fn malformed(path: &str, detail: impl std::fmt::Display) -> ArtifactError {
    ArtifactError::Malformed {
        path: path.to_owned(),
        detail: detail.to_string(),
    }
}

/// Picks the evidence to hold: the requested commit's, or the only one present.
fn choose_evidence(dir: &Path, opts: &OpenOptions) -> Result<Option<Evidence>, ArtifactError> {
    let shown = dir.display().to_string();
    if !dir.is_dir() {
        return Err(ArtifactError::Io {
            what: "open the artifact directory",
            path: shown,
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
    }
    let commits = Evidence::commits(dir);
    let want = match (&opts.revision, commits.as_slice()) {
        (Some(r), _) if commits.contains(r) => Some(r.clone()),
        (None, [only]) => Some(only.clone()),
        (None, []) | (Some(_), _) => None,
        (None, many) => {
            return Err(ArtifactError::AmbiguousEvidence {
                dir: shown,
                commits: many.join(", "),
            })
        }
    };
    match want {
        Some(c) => Ok(Some(Evidence::read(dir, &c)?)),
        None if !opts.require_evidence => Ok(None),
        None => Err(ArtifactError::NoEvidence {
            dir: shown,
            which: match (&opts.revision, commits.is_empty()) {
                (Some(r), true) => format!("for commit `{r}` (none at all)"),
                (Some(r), false) => format!(
                    "for commit `{r}` (only for {}; evidence never carries over to another commit)",
                    commits.join(", ")
                ),
                (None, _) => "(no `.minirun-evidence/<commit>.json`)".to_owned(),
            },
        }),
    }
}

impl VerifiedArtifact {
    /// Opens the artifact at `dir` (see the module documentation for every check).
    pub fn open(dir: &Path, opts: &OpenOptions) -> Result<Self, ArtifactError> {
        let evidence = choose_evidence(dir, opts)?;
        let mut rooted = Rooted {
            root: dir.to_path_buf(),
            authority: evidence.as_ref().map(|e| Authority {
                repo: e.repo.clone(),
                commit: e.commit.clone(),
            }),
            evidence: BTreeMap::new(),
            first_seen: Mutex::new(BTreeMap::new()),
            manifest: BTreeMap::new(),
            digest_checks: Default::default(),
            loads: Default::default(),
        };
        if let Some(ev) = &evidence {
            rooted.evidence = ev
                .files
                .iter()
                .map(|f| (f.path.clone(), f.identity.clone()))
                .collect();
            // The evidence must still describe every file: rooted open + identity, no hashing.
            for f in &ev.files {
                rooted.open(&f.path)?;
            }
        }
        let release = artifact::release_record::ReleaseRecord::parse(
            &rooted.read_small(RELEASE_FILE, META_MAX_BYTES)?,
        )
        .map_err(|e| malformed(RELEASE_FILE, e))?;
        if let Some(a) = &rooted.authority {
            if a.repo != release.target_repo {
                return Err(malformed(
                    RELEASE_FILE,
                    format!(
                        "the release is `{}`, the evidence verifies `{}`",
                        release.target_repo, a.repo
                    ),
                ));
            }
        }
        let family = release.family;
        let index = IndexDocument::read(&rooted.read_small(INDEX_FILE_NAME, META_MAX_BYTES)?);
        let units: Vec<String> = match &index.shape {
            Shape::SingleSourceUnits(s) => s.units.iter().map(|u| u.name.clone()).collect(),
            Shape::MultiSourceUnits(m) => m.units.iter().map(|u| u.name.clone()).collect(),
            other => {
                return Err(malformed(
                    INDEX_FILE_NAME,
                    format!(
                        "shape `{}` lists no units: the runner finds tensors through the units",
                        other.name()
                    ),
                ))
            }
        };
        let mut maps = Vec::new();
        for unit in &units {
            let rel = format!("{unit}/{MANIFEST_FILE_NAME}");
            let m = Manifest::parse(&rooted.read_small(&rel, META_MAX_BYTES)?)
                .map_err(|e| malformed(&rel, e))?;
            for e in &m.files {
                rooted
                    .manifest
                    .insert(format!("{unit}/{}", e.path), (e.size, e.sha256.clone()));
            }
            let rel = format!("{unit}/tensors.json");
            let t: tensors::TensorMap =
                serde_json::from_slice(&rooted.read_small(&rel, META_MAX_BYTES)?)
                    .map_err(|e| malformed(&rel, e))?;
            if t.v != 1 || t.unit != *unit {
                return Err(malformed(
                    &rel,
                    format!(
                        "schema {} of unit `{}`, expected 1 of `{unit}`",
                        t.v, t.unit
                    ),
                ));
            }
            maps.push(t);
        }
        let tensors = tensors::index(&maps).map_err(|(p, d)| malformed(&p, d))?;
        let root_files = identity::check(&rooted, &index)?;
        Ok(Self {
            rooted: std::sync::Arc::new(rooted),
            family,
            index,
            tensors,
            root_files,
        })
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.rooted.root
    }
    /// The evidence held (`None`: opened without, every load digest-checked).
    pub fn authority(&self) -> Option<&Authority> {
        self.rooted.authority.as_ref()
    }
    /// The family (`.minirun/release.json` `family`, the plan's `family`).
    pub fn family(&self) -> &str {
        &self.family
    }
    /// The parsed `index.json`.
    pub fn index(&self) -> &IndexDocument {
        &self.index
    }
    /// The verified `config.json` (the configuration identity's file).
    pub fn config(&self) -> &serde_json::Value {
        &self.root_files.config
    }
    /// The configuration's `vocab_size`.
    /// The context in tokens its configuration allows (`max_position_embeddings`; unbounded
    /// when absent).
    pub fn context(&self) -> usize {
        self.config()
            .get("max_position_embeddings")
            .and_then(serde_json::Value::as_u64)
            .map_or(usize::MAX, |c| usize::try_from(c).unwrap_or(usize::MAX))
    }

    pub fn vocab_size(&self) -> u64 {
        self.root_files.vocab_size
    }
    /// The ids the tokenizer produces (≤ [`VerifiedArtifact::vocab_size`]).
    pub fn tokenizer_vocab(&self) -> u64 {
        self.root_files.tokenizer_vocab
    }
    /// The verified `tokenizer.json` bytes.
    pub fn tokenizer_json(&self) -> &[u8] {
        &self.root_files.tokenizer_json
    }
    /// Every upstream tensor name, sorted.
    pub fn tensor_names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }
    /// Where an upstream tensor lives (no I/O).
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.get(name)
    }
    /// Tile SHA-256 and plain-stream SHA-256 computations so far (0 while authority is held).
    pub fn digest_checks(&self) -> u64 {
        self.rooted.digest_checks.load(Ordering::Relaxed)
    }
    /// Rooted opens so far (each with its identity recheck).
    pub fn loads(&self) -> u64 {
        self.rooted.loads.load(Ordering::Relaxed)
    }

    fn info(&self, name: &str) -> Result<&TensorInfo, ArtifactError> {
        self.tensors.get(name).ok_or_else(|| ArtifactError::Tensor {
            name: name.to_owned(),
            detail: "not in any unit's `tensors.json`".into(),
        })
    }

    /// Loads the container holding upstream tensor `name` (its packed, scale or bias stream),
    /// which must be a `rows` × `cols` matrix; see [`load`] for the checks.
    pub fn load_container(
        &self,
        name: &str,
        rows: u64,
        cols: u64,
    ) -> Result<ContainerLoad<'_>, ArtifactError> {
        let info = self.info(name)?;
        if info.kind == TensorKind::Plain {
            return Err(ArtifactError::Tensor {
                name: name.to_owned(),
                detail: format!(
                    "stored as the plain stream `{}`, not a container",
                    info.path
                ),
            });
        }
        ContainerLoad::open(&self.rooted, &info.path, name, [rows, cols], info.rows)
    }

    /// Loads the plain stream of upstream tensor `name`; its length must be the manifest's and
    /// the dtype × shape's.
    pub fn load_plain(&self, name: &str) -> Result<PlainLoad<'_>, ArtifactError> {
        let info = self.info(name)?;
        if info.kind != TensorKind::Plain {
            return Err(ArtifactError::Tensor {
                name: name.to_owned(),
                detail: format!("stored in the container `{}`", info.path),
            });
        }
        plain_load(&self.rooted, info)
    }

    /// The rooted file access and the tensor table, shared with an adapter that must outlive
    /// this borrow (the DeepSeek V4 weight source); every load through it applies the same policy.
    pub(crate) fn shared(&self) -> (std::sync::Arc<Rooted>, BTreeMap<String, TensorInfo>) {
        (self.rooted.clone(), self.tensors.clone())
    }

    /// A small file of the verified tree (e.g. `tokenizer_config.json`), read under the same
    /// policy as every load (rooted open, identity against the evidence), or `None` when the
    /// verified tree has no such file.
    pub fn root_file(&self, rel: &str, max: u64) -> Result<Option<Vec<u8>>, ArtifactError> {
        match self.rooted.read_small(rel, max) {
            Ok(b) => Ok(Some(b)),
            Err(ArtifactError::NotInEvidence { .. }) => Ok(None),
            Err(ArtifactError::Open { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound && self.authority().is_none() =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The directory joined with an artifact path.
    pub fn path_of(&self, rel: &str) -> PathBuf {
        self.rooted.root.join(rel)
    }
}

/// The load of plain stream `info` (rooted open, identity, manifest length, dtype × shape length);
/// shared by [`VerifiedArtifact::load_plain`] and the V4 family's `VerifiedSource`.
pub(crate) fn plain_load<'a>(
    rooted: &'a Rooted,
    info: &TensorInfo,
) -> Result<PlainLoad<'a>, ArtifactError> {
    let name = info.name.as_str();
    let (file, id) = rooted.open(&info.path)?;
    rooted.check_manifest_len(&info.path, &id)?;
    let expected = info
        .dtype
        .parse::<artifact::dtype::Dtype>()
        .ok()
        .zip(info.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)))
        .and_then(|(d, n)| d.byte_len(n));
    // The whole file, or the tensor's span of a unit's file of plain streams.
    let [a, b] = info.span.unwrap_or([0, id.size]);
    if expected != b.checked_sub(a) || b > id.size {
        return Err(ArtifactError::Tensor {
            name: name.to_owned(),
            detail: format!(
                "bytes [{a}, {b}) of `{}` ({} bytes) for {} {:?}, which needs {expected:?}",
                info.path, id.size, info.dtype, info.shape
            ),
        });
    }
    Ok(PlainLoad {
        rooted,
        file,
        path: info.path.clone(),
        name: name.to_owned(),
        dtype: info.dtype.clone(),
        shape: info.shape.clone(),
        range: a..b,
        sha256: info.sha256.clone(),
    })
}
