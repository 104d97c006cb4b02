//! The plan: a TOML file (`plans/*.toml`, schema in `plans/README.md`) validated into a checked
//! [`Plan`] before any stage does work (ARCHITECTURE.md §3, STYLE.md §3.3).
//!
//! `raw.rs` mirrors the file; `validate.rs` turns it into a [`Plan`] (cross-field checks, unit
//! templates expanded); `resolve.rs` binds a plan to the upstream tensors the fetch stage read from
//! safetensors headers (every tensor to exactly one unit and one rule); `select.rs` parses
//! `--units SEL`. Errors are [`PlanError`]s naming file, line and key.

mod bind;
mod error;
mod identity;
mod names;
mod pattern;
mod raw;
mod resolve;
mod rules;
mod select;
mod stack;
mod validate;

pub use bind::{Finding, FindingKind, Survey};
pub use error::{key_path_at, Locator, PlanError};
pub use names::{BranchName, CommitSha, Dtype, RepoId, RepoPath, RootFileName, UnitName};
pub use pattern::{glob_match, stem, Template};
pub use resolve::{
    dtype_size, ContainerPlacement, Geometry, Omitted, Placement, Resolution, ResolvedUnit,
    UpstreamTensor, TILE_ALIGN,
};
pub use stack::{StackPattern, StackPlacement};

use serde::Serialize;
use std::path::{Path, PathBuf};

/// Largest plan file read (real plans are a few KiB).
pub const MAX_PLAN_BYTES: u64 = 1 << 20;
/// The plan schema version this build reads (`schema = 1`).
pub const SCHEMA_VERSION: u32 = 1;
/// Default `run.concurrency`: parallel range requests / units in flight.
pub const DEFAULT_CONCURRENCY: u32 = 8;
/// Default `run.chunk_mib`: the durable chunk of the fetch ledger.
pub const DEFAULT_CHUNK_MIB: u32 = 64;
/// Default `tiles.rows_per_tile`.
pub const DEFAULT_ROWS_PER_TILE: u32 = 256;
/// Default `tiles.memory_budget_mib`: the most one tile (all sub-regions) may occupy.
pub const DEFAULT_MEMORY_BUDGET_MIB: u32 = 1024;
/// The directory `run.work_dir` defaults to: `work/<plan file stem>`.
pub const DEFAULT_WORK_ROOT: &str = "work";
/// The name of the single source of a `[source]` plan.
pub const SINGLE_SOURCE_NAME: &str = "main";
/// The git null object id: a draft may write it for a revision nobody has pinned yet; a ready
/// plan may not.
pub const NULL_COMMIT: &str = "0000000000000000000000000000000000000000";
/// Suffix every target repository name must carry (seed 000: the discovery contract).
pub const TARGET_SUFFIX: &str = "-minirun";

/// The model family, which selects the repack builder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// DeepSeek V4 (Flash).
    DeepseekV4,
    /// Moonshot Kimi K3.
    KimiK3,
    /// MiniMax H3.
    MinimaxH3,
}

impl Family {
    /// The spelling used in plan files.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::DeepseekV4 => "deepseek-v4",
            Family::KimiK3 => "kimi-k3",
            Family::MinimaxH3 => "minimax-h3",
        }
    }
}

/// The index.json shape the artifact publishes (seed 000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum IndexShape {
    /// One upstream, totals at the top level (Kimi K3).
    #[serde(rename = "singleSourceTotals")]
    SingleSourceTotals,
    /// One upstream, `units[]` with per-unit files and bytes (DeepSeek V4 Flash).
    #[serde(rename = "singleSourceUnits")]
    SingleSourceUnits,
    /// A `sources` map with role and licence per upstream (MiniMax H3).
    #[serde(rename = "multiSourceUnits")]
    MultiSourceUnits,
}

impl IndexShape {
    /// The spelling used in plan files and index.json.
    pub fn as_str(self) -> &'static str {
        match self {
            IndexShape::SingleSourceTotals => "singleSourceTotals",
            IndexShape::SingleSourceUnits => "singleSourceUnits",
            IndexShape::MultiSourceUnits => "multiSourceUnits",
        }
    }
}

/// Whether stages may run the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum PlanStatus {
    /// Every stage may run it.
    Ready,
    /// It validates, but every stage refuses it ([`Plan::ensure_runnable`]).
    Draft {
        /// What is unknown (`draft_reason`).
        reason: String,
    },
}

/// One pinned upstream repository.
#[derive(Debug, Clone, Serialize)]
pub struct Source {
    /// `main` for a `[source]` plan, the table name for `[sources.NAME]`.
    pub name: String,
    /// The hub repository.
    pub repo: RepoId,
    /// The pinned commit.
    pub revision: CommitSha,
    /// Globs over repository paths naming the safetensors files that hold weights.
    pub weights: Vec<String>,
    /// What this upstream contributes (required in multi-source plans; index.json `role`).
    pub role: Option<String>,
    /// The licence file: its path upstream and its root name in the artifact.
    pub license: Option<LicenseFile>,
    /// Further upstream files copied verbatim to the artifact root (under their base names).
    pub files: Vec<RepoPath>,
    /// Sanity check: the number of tensors the weight files must hold, if declared.
    pub expected_tensors: Option<u64>,
    /// Sanity check: the number of weight files, if declared.
    pub expected_weight_files: Option<u64>,
    /// 1-based line of its table (for messages).
    pub line: usize,
    /// Key path of its table (`source`, `sources.text-encoder`).
    pub key: String,
}

/// A licence file copied from an upstream repository to the artifact root.
#[derive(Debug, Clone, Serialize)]
pub struct LicenseFile {
    /// Path in the upstream repository.
    pub from: RepoPath,
    /// Root file name in the artifact.
    pub file: RootFileName,
}

/// The artifact repository and its public branch.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// Hub repository; its name ends in `-minirun`.
    pub repo: RepoId,
    /// The public branch promote commits to.
    pub branch: BranchName,
}

/// Where and how hard the stages work (`[run]`).
#[derive(Debug, Clone, Serialize)]
pub struct RunSettings {
    /// Work directory (`--work-dir` overrides it); relative paths are relative to the process's
    /// working directory.
    pub work_dir: PathBuf,
    /// Hub endpoint, if the plan names one (else `HF_ENDPOINT`, else the hub default).
    pub endpoint: Option<String>,
    /// Parallel transfers / units in flight.
    pub concurrency: u32,
    /// Durable chunk size of the fetch ledger, bytes.
    pub chunk_bytes: u64,
    /// The most bytes one machine's work directory may hold (`disk_budget = "100G"`), what
    /// `minirun-plan slices` cuts for when `--disk-budget` is not given.
    pub disk_budget: Option<u64>,
}

/// Tiling defaults (`[tiles]`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TileSettings {
    /// Rows per tile (a container may override it).
    pub rows_per_tile: u32,
    /// The most bytes one tile slot (packed + scale + bias, 16 KiB-aligned) may take.
    pub memory_budget_bytes: u64,
}

/// One unit: an artifact directory and the upstream tensors it holds.
#[derive(Debug, Clone, Serialize)]
pub struct Unit {
    /// Directory name.
    pub name: UnitName,
    /// The source its tensors come from.
    pub source: String,
    /// Globs over tensor names (template variables substituted).
    pub tensors: Vec<String>,
    /// 1-based line of its `[[units]]` entry (for messages).
    pub line: usize,
    /// Key path of its `[[units]]` entry (`units[3]`).
    pub key: String,
}

/// Upstream tensors deliberately left out of the artifact (`[[omit]]`), never silently.
#[derive(Debug, Clone, Serialize)]
pub struct Omission {
    /// The source the tensors come from.
    pub source: String,
    /// Globs over tensor names (template variables substituted).
    pub tensors: Vec<String>,
    /// Why they are left out (reports and index carry it).
    pub reason: String,
    /// 1-based line of its `[[omit]]` entry.
    pub line: usize,
    /// Key path (`omit[0]`).
    pub key: String,
}

/// A tensor rule: first match wins.
#[derive(Debug, Clone, Serialize)]
pub struct Rule {
    /// Glob over tensor names.
    pub pattern: String,
    /// Only tensors of this source, if given.
    pub source: Option<String>,
    /// Only tensors of this dtype, if given.
    pub when_dtype: Option<Dtype>,
    /// Container or plain stream.
    pub action: RuleAction,
    /// `stack = "PREFIX.{VAR}"`: the container rule gathers the matrices that differ only in the
    /// member index into one stacked container.
    pub stack: Option<StackPattern>,
    /// 1-based line of its `[[rules]]` entry.
    pub line: usize,
    /// Key path (`rules[2]`).
    pub key: String,
}

/// What a rule does with the tensors it matches.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuleAction {
    /// The upstream bytes verbatim.
    Plain,
    /// A tile container.
    Container(ContainerSpec),
}

/// A tile container's mode, geometry and companion tensors.
#[derive(Debug, Clone, Serialize)]
pub struct ContainerSpec {
    /// Mode and its geometry.
    pub mode: ContainerMode,
    /// The dtype every companion scale (and bias) tensor must have.
    pub scale_dtype: Dtype,
    /// Rows per tile for this rule, if it overrides `[tiles]`.
    pub rows_per_tile: Option<u32>,
}

/// MXFP4 element order within a byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NibbleOrder {
    /// Element 2i in the low nibble (DeepSeek V4).
    LowFirst,
    /// Element 2i in the high nibble.
    HighFirst,
}

/// Container modes (seed 000) with their geometry and companion name templates.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum ContainerMode {
    /// FP8 e4m3 weight with a 2-D grid of e8m0 block scales.
    Fp8E4m3Block {
        /// Companion scale tensor template (`{stem}.scale`).
        scale: String,
        /// Block `[rows, cols]` one scale covers.
        block: [u32; 2],
    },
    /// OCP MX FP4: packed e2m1 pairs, one e8m0 scale per `group` inputs of a row.
    Mxfp4 {
        /// Companion scale tensor template.
        scale: String,
        /// Inputs per scale (32 by the OCP MX spec).
        group: u32,
        /// Element order within a byte.
        nibble_order: NibbleOrder,
    },
    /// MLX affine `w = scale·q + bias`, codes packed in u32 words.
    Affine {
        /// Companion scales template (`{stem}.scales`).
        scales: String,
        /// Companion biases template (`{stem}.biases`).
        biases: String,
        /// Inputs per scale/bias (a power of two).
        group: u32,
        /// Bits per code (2..=8).
        bits: u32,
    },
}

impl ContainerMode {
    /// The seed's mode name.
    pub fn name(&self) -> &'static str {
        match self {
            ContainerMode::Fp8E4m3Block { .. } => "fp8-e4m3-block",
            ContainerMode::Mxfp4 { .. } => "mxfp4",
            ContainerMode::Affine { .. } => "affine",
        }
    }
}

/// Where the tokenizer / config identity files come from.
#[derive(Debug, Clone, Serialize)]
pub struct IdentitySource {
    /// The source holding the file.
    pub source: String,
    /// Root file name in the artifact.
    pub file: RootFileName,
    /// Path in the upstream repository.
    pub from: RepoPath,
    /// Root name of the licence file (tokenizer only).
    pub license: Option<RootFileName>,
}

/// A validated plan. Build it with [`Plan::load`] or [`Plan::parse`]; there is no other way.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// The plan file as given.
    pub path: PathBuf,
    /// The plan's name: its file stem (`deepseek-v4`).
    pub name: String,
    /// `schema`.
    pub schema: u32,
    /// `family`.
    pub family: Family,
    /// `status` + `draft_reason`.
    pub status: PlanStatus,
    /// `index_shape`.
    pub index_shape: IndexShape,
    /// Whether the plan declared `[sources.NAME]` tables (multi-source).
    pub multi_source: bool,
    /// The upstream sources (one for `[source]`), by name.
    pub sources: Vec<Source>,
    /// `[target]`.
    pub target: Target,
    /// `[run]` with defaults applied.
    pub run: RunSettings,
    /// `[tiles]` with defaults applied.
    pub tiles: TileSettings,
    /// Units in declaration order, templates expanded in ascending order.
    pub units: Vec<Unit>,
    /// Rules in file order.
    pub rules: Vec<Rule>,
    /// Deliberate omissions (`[[omit]]`), templates expanded.
    pub omit: Vec<Omission>,
    /// `[identity.tokenizer]`.
    pub tokenizer: Option<IdentitySource>,
    /// `[identity.config]`.
    pub config: Option<IdentitySource>,
    #[serde(skip)]
    locator: Locator,
    #[serde(skip)]
    status_line: usize,
    /// Lines of the first `[[units]]` / `[[rules]]` (for tensors no unit / rule claims).
    #[serde(skip)]
    list_lines: (usize, usize),
}

impl Plan {
    /// Read and validate the plan at `path`.
    pub fn load(path: &Path) -> Result<Plan, PlanError> {
        // A plan is a few KiB; refuse before reading something that is not one.
        if let Ok(meta) = std::fs::metadata(path) {
            if meta.len() > MAX_PLAN_BYTES {
                return Err(PlanError::TooLarge {
                    path: path.to_path_buf(),
                    len: meta.len(),
                    max: MAX_PLAN_BYTES,
                });
            }
        }
        let text = std::fs::read_to_string(path).map_err(|source| PlanError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Plan::parse(&text, path)
    }

    /// Validate plan `text`; `path` names it in errors and gives the plan its name.
    pub fn parse(text: &str, path: &Path) -> Result<Plan, PlanError> {
        validate::parse(text, path)
    }

    /// Refuse a draft plan, naming what is unknown. Every stage calls this before working.
    pub fn ensure_runnable(&self) -> Result<(), PlanError> {
        match &self.status {
            PlanStatus::Ready => Ok(()),
            PlanStatus::Draft { reason } => Err(PlanError::Draft {
                path: self.locator.path().to_owned(),
                line: self.status_line,
                plan: self.name.clone(),
                reason: reason.clone(),
            }),
        }
    }

    /// The source named `name`.
    pub fn source(&self, name: &str) -> Option<&Source> {
        self.sources.iter().find(|s| s.name == name)
    }

    /// The source whose `weights` globs name repository path `file` (first in plan order).
    pub fn source_for_file(&self, file: &str) -> Option<&Source> {
        self.sources
            .iter()
            .find(|s| s.weights.iter().any(|w| glob_match(w, file)))
    }

    /// The work directory: `--work-dir` if given, else the plan's `run.work_dir`.
    pub fn work_dir(&self, cli: Option<&Path>) -> PathBuf {
        cli.map_or_else(|| self.run.work_dir.clone(), Path::to_path_buf)
    }

    /// The hub endpoint: `--endpoint` if given, else the plan's `run.endpoint`, else `env` (the
    /// caller passes `HF_ENDPOINT`), else `None` (the client's default). Empty values are skipped.
    pub fn endpoint(&self, cli: Option<&str>, env: Option<&str>) -> Option<String> {
        [cli, self.run.endpoint.as_deref(), env]
            .into_iter()
            .flatten()
            .map(|e| e.trim().trim_end_matches('/'))
            .find(|e| !e.is_empty())
            .map(str::to_owned)
    }

    /// The unit named `name`.
    pub fn unit(&self, name: &str) -> Option<&Unit> {
        self.units.iter().find(|u| u.name.as_str() == name)
    }

    /// Parse a `--units` selection (`layers00..layers09,global00`) into unit names in plan
    /// order; `None` selects every unit.
    pub fn select_units(&self, sel: Option<&str>) -> Result<Vec<UnitName>, PlanError> {
        select::select(self, sel)
    }

    /// Bind the plan to the upstream tensors: see [`Resolution`].
    pub fn resolve(&self, tensors: &[UpstreamTensor]) -> Result<Resolution, PlanError> {
        resolve::resolve(self, tensors)
    }

    /// Bind the plan to the upstream tensors collecting every finding, with what each unit and
    /// rule took (`minirun-plan check`).
    pub fn survey(&self, tensors: &[UpstreamTensor]) -> Survey {
        bind::survey(self, tensors)
    }

    pub(crate) fn locator(&self) -> &Locator {
        &self.locator
    }

    pub(crate) fn list_lines(&self) -> (usize, usize) {
        self.list_lines
    }
}
