//! Where a front-end gets what it runs on: the process's one device ([`engine`]) and the model,
//! opened from a GGUF file or a verified artifact through one function ([`open`]) and put on the
//! device with one options type ([`Opened::load`]). Every front-end (`minirun-run`, its `-i`
//! chat, `minirun-serve`, the demo's run step through `minirun-run`) comes through here, and
//! every model family runs on a clone of the one [`Engine`]: no model backend opens a device of
//! its own (`runner/tests/engine_counters.rs` scans the sources for it, `minirun-run --json`
//! reports the count).

use std::io::Write;
use std::path::{Path, PathBuf};

use artifact::mega::kv::KvModel;
use kernels::gpu::{Backends, DeviceRequest, MatvecShape};

use crate::adapter::{GgufWeights, Model, ModelOptions};
use crate::artifact::{ArtifactError, OpenOptions, VerifiedArtifact};
use crate::chat::ChatFormat;
use crate::engine::{Engine, EngineError};
use crate::error::RunError;
use crate::registry::Entry;
use crate::tokenizer::{Detokenize, TextPipeline, Tokenizer};

pub use kernels::device::{quiet_headless, Adapter};

/// What a front-end's flags ask of the device: `--backend` (`None`: `WGPU_BACKEND`, else
/// Vulkan, Metal and DX12) and `--matvec-shape` (`None`: by the adapter's type).
#[derive(Debug, Clone, Default)]
pub struct DeviceFlags {
    pub backend: Option<String>,
    pub shape: Option<MatvecShape>,
}

/// Opens the process's one device as `flags` ask and says on stderr which adapter, type and
/// backend it runs on (with a warning where that is OpenGL). No usable adapter is an error
/// naming what to install (docs/runner.md "Device and backend").
pub fn engine(flags: &DeviceFlags) -> Result<Engine, RunError> {
    let backends = Backends::choose(flags.backend.as_deref()).map_err(EngineError::Open)?;
    let engine = Engine::open(DeviceRequest {
        backends,
        shape: flags.shape,
        subgroups: None,
    })?;
    if let Some(adapter) = engine.gpu().adapter() {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{adapter}");
        if let Some(w) = adapter.warning() {
            let _ = writeln!(err, "{w}");
        }
    }
    Ok(engine)
}

/// `--backend LIST` checked when the flags are parsed (a name wgpu does not have is a usage
/// error, exit 64).
pub fn parse_backend(list: &str) -> Result<String, String> {
    Backends::choose_from(Some(list), None)
        .map(|_| list.to_owned())
        .map_err(|e| e.to_string())
}

/// The adapter [`engine`] would open for `backend`, without opening a device (the demo checks
/// it before publishing anything).
pub fn probe(backend: Option<&str>) -> Result<Adapter, RunError> {
    let backends = Backends::choose(backend).map_err(EngineError::Open)?;
    Ok(kernels::device::probe(&backends).map_err(EngineError::Open)?)
}

/// Devices this process has opened (1 once a front-end has opened its engine).
pub fn devices_opened() -> u64 {
    kernels::gpu::devices_opened()
}

/// The flags that name what a front-end runs (`--model`, `--tokenizer`, `--artifact`, `--repo`,
/// `--revision`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SourceFlags<'a> {
    pub model: Option<&'a Path>,
    pub tokenizer: Option<&'a Path>,
    pub artifact: Option<&'a Path>,
    pub repo: Option<&'a str>,
    pub revision: Option<&'a str>,
}

/// What a front-end runs: a GGUF file (its own vocabulary, or a `tokenizer.json` given with
/// `--tokenizer`), or a verified artifact at a revision (`None`: the one its evidence names).
#[derive(Debug, Clone)]
pub enum Source {
    Gguf {
        path: PathBuf,
        tokenizer: Option<PathBuf>,
    },
    Artifact {
        dir: PathBuf,
        revision: Option<String>,
    },
    /// A published repository (`--repo OWNER/NAME`) at a revision (`None`: `main`), pulled and
    /// verified into the Hugging Face cache first ([`pipeline::verify::cache`]).
    Repo {
        repo: String,
        revision: Option<String>,
    },
}

/// Where an opened model came from, as a front-end names it: `minirun-serve`'s model id and
/// origin, `minirun-run`'s provenance line.
#[derive(Debug, Clone)]
pub struct Origin {
    /// `gguf` or `artifact`.
    pub source: &'static str,
    /// A short name: the GGUF file's stem, or the artifact's repository (its directory when it
    /// names none).
    pub name: String,
    /// The GGUF file's path, or `repo@commit` of the artifact's evidence (empty when none).
    pub location: String,
    /// The artifact's family (`None` for a GGUF file).
    pub family: Option<String>,
    /// The commit the artifact's evidence names (its repository is `name`; `None`: a GGUF file,
    /// or an artifact with no authority).
    pub commit: Option<String>,
    /// With `--repo`: what the pull into the cache did.
    pub pulled: Option<Pulled>,
}

/// What a `--repo` pull did (`minirun-run --json`: `pulled`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Pulled {
    /// The snapshot directory in the Hugging Face cache.
    pub dir: String,
    pub files_downloaded: usize,
    pub bytes_downloaded: u64,
    /// Files kept from before (their evidence still held, or their bytes hashed again).
    pub files_kept: usize,
    /// Symbolic links (another tool's snapshot) replaced by regular copies first.
    pub links_rematerialised: usize,
}

impl Origin {
    /// The line a front-end prints once an artifact is verified (`None` for a GGUF file).
    pub fn provenance(&self) -> Option<String> {
        let family = self.family.as_deref()?;
        let commit = self.commit.as_deref()?;
        Some(format!(
            "verified `{}` at {commit} (evidence holds for every file); family `{family}`",
            self.name
        ))
    }
}

/// What [`survey`] found: a model it can run, or a verified artifact whose family has no row in
/// the registry (never run with a guessed adapter; `minirun-serve` lists it as not
/// chat-capable).
pub enum Opening<'e> {
    Ready(Box<Opened<'e>>),
    Unregistered(Box<Unregistered>),
}

/// A verified artifact no registry row runs.
pub struct Unregistered {
    pub origin: Origin,
    /// Positions the model was trained for.
    pub context: usize,
    /// The refusal naming the family and the registered ones.
    pub refusal: RunError,
}

impl<'e> Opening<'e> {
    /// The model, or the refusal that names the unregistered family.
    pub fn ready(self) -> Result<Opened<'e>, RunError> {
        match self {
            Opening::Ready(o) => Ok(*o),
            Opening::Unregistered(u) => Err(u.refusal),
        }
    }
}

impl Source {
    /// What a front-end's flags name: `--repo` or `--artifact` (with `--revision`), else
    /// `--model` (with `--tokenizer`); `None` when none is given.
    pub fn from_flags(flags: SourceFlags<'_>) -> Option<Self> {
        let revision = flags.revision.map(str::to_owned);
        match (flags.repo, flags.artifact, flags.model) {
            (Some(repo), _, _) => Some(Source::Repo {
                repo: repo.to_owned(),
                revision,
            }),
            (None, Some(dir), _) => Some(Source::Artifact {
                dir: dir.to_owned(),
                revision,
            }),
            (None, None, Some(path)) => Some(Source::Gguf {
                path: path.to_owned(),
                tokenizer: flags.tokenizer.map(Path::to_owned),
            }),
            (None, None, None) => None,
        }
    }
}

/// A model opened and checked but not yet on the device: its text pipeline, its chat format
/// and its context, so a front-end can size the positions it asks [`Opened::load`] for.
pub struct Opened<'e> {
    pub origin: Origin,
    pub tokenizer: Tokenizer,
    /// How conversations become prompt text, or why this model has none.
    pub chat: Result<ChatFormat, RunError>,
    /// Positions the model was trained for.
    pub context: usize,
    /// Ids the model's embedding holds; an encoded prompt past it is refused.
    pub vocab: u64,
    kind: Kind<'e>,
}

enum Kind<'e> {
    Gguf {
        model: Box<dyn GgufWeights>,
        path: PathBuf,
    },
    Artifact {
        artifact: Box<VerifiedArtifact>,
        entry: &'e Entry,
    },
}

/// Opens `source`: a GGUF file's model and vocabulary, or a verified artifact (refused when
/// unverified or modified) and its family's row in `entries` (refused, naming the family, when
/// none).
pub fn open<'e>(source: &Source, entries: &'e [Entry]) -> Result<Opened<'e>, RunError> {
    survey(source, entries)?.ready()
}

/// As [`open`], with an artifact of an unregistered family told apart from a failure.
pub fn survey<'e>(source: &Source, entries: &'e [Entry]) -> Result<Opening<'e>, RunError> {
    match source {
        Source::Gguf { path, tokenizer } => survey_gguf(path, tokenizer.as_deref()),
        Source::Artifact { dir, revision } => survey_artifact(dir, revision.clone(), entries),
        Source::Repo { repo, revision } => survey_repo(repo, revision.as_deref(), entries),
    }
}

/// `minirun-verify --list`'s chat check ([`pipeline::verify::list::ChatProbe`]): the verified
/// copy in `dir` at `commit` surveyed through the one open path — the family a registered runner
/// runs it as, or why it cannot be used for chat here (no runner for its family in this build, or
/// the copy does not open as verified).
pub fn chat_here(dir: &Path, commit: &str) -> Result<String, String> {
    let source = Source::Artifact {
        dir: dir.to_path_buf(),
        revision: Some(commit.to_owned()),
    };
    match survey(&source, crate::registry::ENTRIES) {
        Ok(Opening::Ready(o)) => Ok(o.origin.family.clone().unwrap_or_default()),
        Ok(Opening::Unregistered(u)) => Err(u.refusal.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// `--repo`: pulls the repository at `revision` into the Hugging Face cache (what is there and
/// still verifies is kept: a second call downloads nothing), refuses it unless verified, then
/// opens the snapshot as an artifact at that commit.
fn survey_repo<'e>(
    repo: &str,
    revision: Option<&str>,
    entries: &'e [Entry],
) -> Result<Opening<'e>, RunError> {
    let opts = pipeline::verify::PullOpts {
        progress: pipeline::cli::progress_mode(false),
        ..Default::default()
    };
    let pull_err = |source: pipeline::verify::VerifyError| {
        let hint = pipeline::cli::Hint::hint(&source);
        RunError::Pull {
            repo: repo.to_owned(),
            source: Box::new(source),
            hint,
        }
    };
    let cached =
        pipeline::verify::cache::pull_cached(None, repo, revision.unwrap_or("main"), &opts)
            .map_err(pull_err)?;
    let r = &cached.report;
    let dir = cached.dir.display().to_string();
    if r.verdict != pipeline::verify::Verdict::Verified {
        return Err(RunError::NotVerified {
            repo: repo.to_owned(),
            commit: cached.commit,
            dir,
            verdict: r.verdict.name(),
            problems: r.problems.join("; "),
        });
    }
    let pulled = Pulled {
        dir,
        files_downloaded: r.downloaded,
        bytes_downloaded: r.bytes_downloaded,
        files_kept: (r.sha256_checked + r.git_sha1_checked + r.evidence_reused)
            .saturating_sub(r.downloaded),
        links_rematerialised: cached.rematerialised,
    };
    let _ = writeln!(
        std::io::stderr(),
        "pulled `{repo}` at {} into `{}`: {} files downloaded ({} bytes), {} kept",
        cached.commit,
        pulled.dir,
        pulled.files_downloaded,
        pulled.bytes_downloaded,
        pulled.files_kept
    );
    let mut opening = survey_artifact(&cached.dir, Some(cached.commit), entries)?;
    match &mut opening {
        Opening::Ready(o) => o.origin.pulled = Some(pulled),
        Opening::Unregistered(u) => u.origin.pulled = Some(pulled),
    }
    Ok(opening)
}

fn survey_gguf<'e>(path: &Path, tokenizer: Option<&Path>) -> Result<Opening<'e>, RunError> {
    let gguf = crate::model::read_gguf(path)?;
    let entry = crate::registry::gguf_entry(crate::model::architecture(&gguf, path)?, path)?;
    let model = (entry.open)(gguf, path)?;
    let meta = model.metadata();
    let mut tok = match tokenizer {
        Some(p) => Tokenizer::from_file(p, meta)?,
        None => Tokenizer::from_gguf(meta)?,
    };
    let chat = tok.template().map(|t| ChatFormat::Template(Box::new(t)));
    reading(&mut tok, &chat);
    let origin = Origin {
        source: "gguf",
        name: path
            .file_stem()
            .map_or_else(|| "model".to_owned(), |s| s.to_string_lossy().into_owned()),
        location: path.display().to_string(),
        family: None,
        commit: None,
        pulled: None,
    };
    Ok(Opening::Ready(Box::new(Opened {
        origin,
        tokenizer: tok,
        chat,
        context: model.context(),
        vocab: model.vocab() as u64,
        kind: Kind::Gguf {
            model,
            path: path.to_owned(),
        },
    })))
}

fn survey_artifact<'e>(
    dir: &Path,
    revision: Option<String>,
    entries: &'e [Entry],
) -> Result<Opening<'e>, RunError> {
    let artifact = VerifiedArtifact::open(dir, &OpenOptions::verified(revision))?;
    let authority = artifact.authority();
    let origin = Origin {
        source: "artifact",
        name: authority.map_or_else(|| dir.display().to_string(), |a| a.repo.clone()),
        location: authority.map_or_else(String::new, |a| format!("{}@{}", a.repo, a.commit)),
        family: Some(artifact.family().to_owned()),
        commit: authority.map(|a| a.commit.clone()),
        pulled: None,
    };
    let entry = match crate::registry::entry_in(entries, &artifact) {
        Ok(e) => e,
        Err(e @ ArtifactError::UnknownFamily { .. }) => {
            return Ok(Opening::Unregistered(Box::new(Unregistered {
                origin,
                context: artifact.context(),
                refusal: e.into(),
            })))
        }
        Err(e) => return Err(e.into()),
    };
    let chat = (entry.chat)(&artifact);
    let mut tokenizer = (entry.tokenizer)(&artifact)?;
    reading(&mut tokenizer, &chat);
    Ok(Opening::Ready(Box::new(Opened {
        origin,
        tokenizer,
        chat,
        context: artifact.context(),
        vocab: artifact.vocab_size(),
        kind: Kind::Artifact {
            artifact: Box::new(artifact),
            entry,
        },
    })))
}

/// Has `tok` decode as text the markers an answer in the `chat` format is read back by.
fn reading(tok: &mut Tokenizer, chat: &Result<ChatFormat, RunError>) {
    if let Some(syntax) = chat.as_ref().ok().and_then(ChatFormat::answer_syntax) {
        tok.show_markers(syntax);
    }
}

impl Opened<'_> {
    /// Conversations rendered with the Jinja template `source` instead of the model's own chat
    /// format (llama-server's `--chat-template-file`).
    pub fn use_template(&mut self, source: &str) -> Result<(), RunError> {
        let chat = Ok(ChatFormat::Template(Box::new(
            self.tokenizer.template_from(source)?,
        )));
        reading(&mut self.tokenizer, &chat);
        self.chat = chat;
        Ok(())
    }

    /// The model on `opts.engine` with `opts.capacity` positions, resident or streamed.
    pub fn load<'s>(&'s self, opts: &ModelOptions<'s>) -> Result<Box<dyn Model + 's>, RunError> {
        match &self.kind {
            Kind::Gguf { model, .. } => model.load(opts),
            Kind::Artifact { artifact, entry } => (entry.open)(artifact, opts),
        }
    }

    /// What a `--prompt-cache` file is bound to: the GGUF file's SHA-256 and length, or the
    /// artifact's repository, verified commit and tokenizer.
    pub fn prompt_cache_identity(&self) -> Result<KvModel, RunError> {
        match &self.kind {
            Kind::Gguf { path, .. } => crate::prompt_cache::gguf_identity(path),
            Kind::Artifact { artifact, .. } => crate::artifact::prompt_cache_identity(artifact),
        }
    }

    /// The chat format, taken out (a session owns it), or why the model has none.
    pub fn take_chat(&mut self) -> Result<ChatFormat, RunError> {
        std::mem::replace(
            &mut self.chat,
            Err(RunError::Usage("the chat format was taken already".into())),
        )
    }

    /// Ids of `text`, refused where one is past the model's vocabulary (a tokenizer that does not
    /// belong to the weights).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, RunError> {
        let ids = self.tokenizer.encode(text)?;
        crate::tokenizer::check_vocab(&ids, self.vocab)?;
        Ok(ids)
    }
}

impl Detokenize for Opened<'_> {
    fn detokenize(&self, ids: &[u32]) -> Result<String, RunError> {
        self.tokenizer.decode(ids)
    }
    fn eos(&self) -> Option<u32> {
        self.tokenizer.eos
    }
}

impl TextPipeline for Opened<'_> {
    fn encode_text(&self, text: &str) -> Result<Vec<u32>, RunError> {
        self.encode(text)
    }
}
