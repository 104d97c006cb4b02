//! The plan file exactly as written: serde structs that mirror `plans/*.toml` key for key
//! (`plans/README.md` is the schema). No IO, no environment, no cross-field checks — those are in
//! `validate.rs`, which turns a [`RawPlan`] into a [`super::Plan`].
//!
//! `deny_unknown_fields` on every struct and no `flatten`, no internally tagged or untagged enums
//! (those buffer the input and lose toml's spans). Values that a cross-field check may have to
//! point at are `Spanned`, so the error can name their line.

use super::names::{BranchName, CommitSha, Dtype, RepoId, RepoPath, RootFileName};
use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

/// The whole plan file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPlan {
    pub schema: Spanned<u32>,
    pub family: Spanned<RawFamily>,
    #[serde(default)]
    pub status: Option<Spanned<RawStatus>>,
    #[serde(default)]
    pub draft_reason: Option<Spanned<String>>,
    pub index_shape: Spanned<RawIndexShape>,
    #[serde(default)]
    pub source: Option<Spanned<RawSource>>,
    #[serde(default)]
    pub sources: Option<Spanned<BTreeMap<String, Spanned<RawSource>>>>,
    pub target: Spanned<RawTarget>,
    #[serde(default)]
    pub run: Option<Spanned<RawRun>>,
    #[serde(default)]
    pub tiles: Option<Spanned<RawTiles>>,
    pub units: Spanned<Vec<Spanned<RawUnit>>>,
    pub rules: Spanned<Vec<Spanned<RawRule>>>,
    #[serde(default)]
    pub omit: Option<Spanned<Vec<Spanned<RawOmit>>>>,
    #[serde(default)]
    pub identity: Option<Spanned<RawIdentity>>,
}

/// `family`.
#[derive(Debug, Clone, Copy, Deserialize)]
pub enum RawFamily {
    #[serde(rename = "deepseek-v4")]
    DeepseekV4,
    #[serde(rename = "kimi-k3")]
    KimiK3,
    #[serde(rename = "minimax-h3")]
    MinimaxH3,
}

/// `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RawStatus {
    Ready,
    Draft,
}

/// `index_shape`: the three shapes of seed 000.
#[derive(Debug, Clone, Copy, Deserialize)]
pub enum RawIndexShape {
    #[serde(rename = "singleSourceTotals")]
    SingleSourceTotals,
    #[serde(rename = "singleSourceUnits")]
    SingleSourceUnits,
    #[serde(rename = "multiSourceUnits")]
    MultiSourceUnits,
}

/// `[source]` or one `[sources.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSource {
    pub repo: Spanned<RepoId>,
    pub revision: Spanned<CommitSha>,
    pub weights: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    pub role: Option<Spanned<String>>,
    #[serde(default)]
    pub license: Option<Spanned<RepoPath>>,
    #[serde(default)]
    pub license_as: Option<Spanned<RootFileName>>,
    #[serde(default)]
    pub files: Option<Spanned<Vec<Spanned<RepoPath>>>>,
    #[serde(default)]
    pub expected_tensors: Option<Spanned<u64>>,
    #[serde(default)]
    pub expected_weight_files: Option<Spanned<u64>>,
}

/// `[target]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTarget {
    pub repo: Spanned<RepoId>,
    pub branch: Spanned<BranchName>,
}

/// `[run]`: where and how hard the stages work.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRun {
    #[serde(default)]
    pub work_dir: Option<Spanned<String>>,
    #[serde(default)]
    pub endpoint: Option<Spanned<String>>,
    #[serde(default)]
    pub concurrency: Option<Spanned<u32>>,
    #[serde(default)]
    pub chunk_mib: Option<Spanned<u32>>,
    #[serde(default)]
    pub disk_budget: Option<Spanned<String>>,
}

/// `[tiles]`: container tiling defaults.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTiles {
    #[serde(default)]
    pub rows_per_tile: Option<Spanned<u32>>,
    #[serde(default)]
    pub memory_budget_mib: Option<Spanned<u32>>,
}

/// `range = { VAR = [first, last], … }`.
pub type RawRange = Spanned<BTreeMap<String, Spanned<[i64; 2]>>>;

/// One `[[units]]` entry (a single unit, or a template expanded over `range`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUnit {
    pub name: Spanned<String>,
    #[serde(default)]
    pub range: Option<RawRange>,
    #[serde(default)]
    pub source: Option<Spanned<String>>,
    pub tensors: Spanned<Vec<Spanned<String>>>,
}

/// One `[[omit]]` entry: upstream tensors deliberately left out of the artifact, with the reason.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOmit {
    #[serde(default)]
    pub range: Option<RawRange>,
    #[serde(default)]
    pub source: Option<Spanned<String>>,
    pub tensors: Spanned<Vec<Spanned<String>>>,
    pub reason: Spanned<String>,
}

/// One `[[rules]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    #[serde(rename = "match")]
    pub pattern: Spanned<String>,
    #[serde(default)]
    pub source: Option<Spanned<String>>,
    #[serde(default)]
    pub when_dtype: Option<Spanned<Dtype>>,
    #[serde(default)]
    pub container: Option<Spanned<RawContainer>>,
    #[serde(default)]
    pub plain: Option<Spanned<bool>>,
    #[serde(default)]
    pub stack: Option<Spanned<String>>,
}

/// `container = { mode = …, … }`. One flat struct for every mode (a tagged enum would lose
/// spans); `validate.rs` refuses the fields a mode does not take.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawContainer {
    pub mode: Spanned<RawMode>,
    pub scale_dtype: Spanned<Dtype>,
    #[serde(default)]
    pub scale: Option<Spanned<String>>,
    #[serde(default)]
    pub scales: Option<Spanned<String>>,
    #[serde(default)]
    pub biases: Option<Spanned<String>>,
    #[serde(default)]
    pub block: Option<Spanned<[u32; 2]>>,
    #[serde(default)]
    pub group: Option<Spanned<u32>>,
    #[serde(default)]
    pub bits: Option<Spanned<u32>>,
    #[serde(default)]
    pub nibble_order: Option<Spanned<RawNibbleOrder>>,
    #[serde(default)]
    pub rows_per_tile: Option<Spanned<u32>>,
}

/// `container.mode`.
#[derive(Debug, Clone, Copy, Deserialize)]
pub enum RawMode {
    #[serde(rename = "fp8-e4m3-block")]
    Fp8E4m3Block,
    #[serde(rename = "mxfp4")]
    Mxfp4,
    #[serde(rename = "affine")]
    Affine,
}

/// `container.nibble_order` (mxfp4).
#[derive(Debug, Clone, Copy, Deserialize)]
pub enum RawNibbleOrder {
    #[serde(rename = "low-first")]
    LowFirst,
    #[serde(rename = "high-first")]
    HighFirst,
}

/// `[identity]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawIdentity {
    #[serde(default)]
    pub tokenizer: Option<Spanned<RawTokenizerIdentity>>,
    #[serde(default)]
    pub config: Option<Spanned<RawConfigIdentity>>,
}

/// `[identity.tokenizer]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTokenizerIdentity {
    #[serde(default)]
    pub source: Option<Spanned<String>>,
    pub file: Spanned<RootFileName>,
    #[serde(default)]
    pub from: Option<Spanned<RepoPath>>,
    pub license: Spanned<RootFileName>,
}

/// `[identity.config]` (no `license`: seed 000 gives the configuration object none).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfigIdentity {
    #[serde(default)]
    pub source: Option<Spanned<String>>,
    pub file: Spanned<RootFileName>,
    #[serde(default)]
    pub from: Option<Spanned<RepoPath>>,
}
