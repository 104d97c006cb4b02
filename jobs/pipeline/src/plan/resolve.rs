//! Binding a plan to the upstream tensors (`plans/README.md` §"Resolution"): every tensor the
//! fetch stage read from the pinned safetensors headers is claimed by exactly one unit and
//! exactly one rule — a container (whose companion scale/bias tensors are found, checked for
//! dtype and shape, and claimed by it) or a plain stream. Anything else is refused naming the
//! tensor: a weight is never silently dropped (ARCHITECTURE.md §3).
//!
//! Geometry follows seed 000 ("Quantization modes"): fp8-e4m3-block = F8_E4M3 `[rows, cols]` with
//! a `[ceil(rows/br), ceil(cols/bc)]` e8m0 grid; mxfp4 = two e2m1 per byte `[rows, cols/2]` with
//! `[rows, cols/32]` scales; affine = u32 words `[rows, cols·bits/32]` with `[rows, cols/group]`
//! scales and biases.

use super::{ContainerSpec, Plan, PlanError, StackPlacement, UnitName};
use serde::{Deserialize, Serialize};

/// The container format's alignment of tiles and sub-regions (seed 000: 16 KiB, a constant of
/// the format, never the host page size).
pub const TILE_ALIGN: u64 = 16 * 1024;

/// One tensor of an upstream safetensors header, as the fetch stage reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamTensor {
    /// The plan source it came from ([`super::SINGLE_SOURCE_NAME`] in a `[source]` plan).
    pub source: String,
    /// Tensor name as in the header.
    pub name: String,
    /// Safetensors dtype string (`F8_E4M3`).
    pub dtype: String,
    /// Shape as stored.
    pub shape: Vec<u64>,
    /// Repository path of the safetensors file holding it.
    pub file: String,
}

impl UpstreamTensor {
    /// A tensor of the single source of a `[source]` plan.
    pub fn new(name: &str, dtype: &str, shape: &[u64], file: &str) -> UpstreamTensor {
        UpstreamTensor {
            source: super::SINGLE_SOURCE_NAME.to_owned(),
            name: name.to_owned(),
            dtype: dtype.to_owned(),
            shape: shape.to_vec(),
            file: file.to_owned(),
        }
    }

    /// The same tensor attributed to source `source` (multi-source plans).
    pub fn in_source(mut self, source: &str) -> UpstreamTensor {
        self.source = source.to_owned();
        self
    }
}

/// Bytes per element of a safetensors dtype (`artifact::dtype`); `None` for sub-byte and unknown
/// dtypes.
pub fn dtype_size(dtype: &str) -> Option<u64> {
    let d: artifact::dtype::Dtype = dtype.parse().ok()?;
    (d.bits() % 8 == 0).then(|| d.bits() / 8)
}

/// The checked geometry of one container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Geometry {
    /// Output rows.
    pub rows: u64,
    /// Logical input columns (elements, not bytes).
    pub cols: u64,
    /// Bytes of one row of the packed tensor.
    pub packed_row_bytes: u64,
    /// Rows of the scale tensor.
    pub scale_rows: u64,
    /// Columns of the scale tensor.
    pub scale_cols: u64,
    /// Bytes of one row of the scale (and bias) tensor.
    pub scale_row_bytes: u64,
    /// Weight rows one scale row covers (128 for a 128×128 fp8 grid, else 1).
    pub rows_per_scale: u64,
    /// Input columns one scale covers.
    pub cols_per_scale: u64,
    /// Rows per tile after the plan's `rows_per_tile` and memory budget (last tile may be shorter).
    pub tile_rows: u64,
    /// Bytes of one full tile slot (16 KiB-aligned packed + scale [+ bias] sub-regions).
    pub tile_slot_bytes: u64,
}

/// One container: the weight and the companions it consumes.
#[derive(Debug, Clone, Serialize)]
pub struct ContainerPlacement {
    /// The packed weight.
    pub weight: UpstreamTensor,
    /// Its scale tensor.
    pub scale: UpstreamTensor,
    /// Its bias tensor (affine only).
    pub bias: Option<UpstreamTensor>,
    /// Mode and templates of the rule.
    pub spec: ContainerSpec,
    /// Checked geometry.
    pub geometry: Geometry,
    /// Index of the rule in `plan.rules`.
    pub rule: usize,
}

/// What becomes of one upstream tensor (or weight + companions).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[allow(clippy::large_enum_variant)] // few per unit; boxing would only cost the stages a deref
pub enum Placement {
    /// The upstream bytes verbatim.
    Plain {
        /// The tensor.
        tensor: UpstreamTensor,
        /// Index of the rule in `plan.rules`.
        rule: usize,
    },
    /// A tile container.
    Container(ContainerPlacement),
    /// A stacked tile container: several same-shaped matrices, one after the other.
    Stack(StackPlacement),
}

impl ContainerPlacement {
    /// The weight and its companions.
    pub fn tensors(&self) -> Vec<&UpstreamTensor> {
        let mut v = vec![&self.weight, &self.scale];
        v.extend(self.bias.as_ref());
        v
    }
}

impl Placement {
    /// The tensor that names this placement (the weight of a container, a stack's first member).
    pub fn primary(&self) -> &UpstreamTensor {
        match self {
            Placement::Plain { tensor, .. } => tensor,
            Placement::Container(c) => &c.weight,
            Placement::Stack(s) => &s.lead,
        }
    }

    /// The name placements sort by: the primary tensor's, or the stack's.
    pub fn sort_name(&self) -> &str {
        match self {
            Placement::Stack(s) => &s.name,
            other => &other.primary().name,
        }
    }

    /// Every upstream tensor this placement consumes.
    pub fn tensors(&self) -> Vec<&UpstreamTensor> {
        match self {
            Placement::Plain { tensor, .. } => vec![tensor],
            Placement::Container(c) => c.tensors(),
            Placement::Stack(s) => s.members.iter().flat_map(|m| m.tensors()).collect(),
        }
    }

    /// The containers of this placement: one, a stack's members, or none (plain).
    pub fn containers(&self) -> Vec<&ContainerPlacement> {
        match self {
            Placement::Plain { .. } => Vec::new(),
            Placement::Container(c) => vec![c],
            Placement::Stack(s) => s.members.iter().collect(),
        }
    }
}

/// One unit with everything it holds, sorted by tensor name.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedUnit {
    /// Unit name.
    pub name: UnitName,
    /// Source its tensors come from.
    pub source: String,
    /// Placements sorted by primary tensor name.
    pub placements: Vec<Placement>,
}

/// An upstream tensor left out by an `[[omit]]` entry.
#[derive(Debug, Clone, Serialize)]
pub struct Omitted {
    /// The tensor.
    pub tensor: UpstreamTensor,
    /// The entry's reason.
    pub reason: String,
}

impl ResolvedUnit {
    /// Every upstream tensor the unit needs (weights, companions, plain streams): what fetch
    /// must bring in for it.
    pub fn tensors(&self) -> impl Iterator<Item = &UpstreamTensor> {
        self.placements.iter().flat_map(|p| p.tensors())
    }
}

/// The plan bound to the upstream tensors: every unit in plan order, and what was deliberately
/// left out.
#[derive(Debug, Clone, Serialize)]
pub struct Resolution {
    /// Units in plan order.
    pub units: Vec<ResolvedUnit>,
    /// Tensors left out by `[[omit]]`, sorted by name.
    pub omitted: Vec<Omitted>,
}

impl Resolution {
    /// The unit named `name`.
    pub fn unit(&self, name: &str) -> Option<&ResolvedUnit> {
        self.units.iter().find(|u| u.name.as_str() == name)
    }

    /// How many upstream tensors the resolution accounts for (all of them, by construction).
    pub fn tensor_count(&self) -> usize {
        self.units
            .iter()
            .flat_map(|u| &u.placements)
            .map(|p| p.tensors().len())
            .sum::<usize>()
            + self.omitted.len()
    }
}

/// Bind `plan` to `tensors`: the resolution, or the first finding (in binding order).
pub(super) fn resolve(plan: &Plan, tensors: &[UpstreamTensor]) -> Result<Resolution, PlanError> {
    let survey = super::bind::survey(plan, tensors);
    match survey.findings.into_iter().next() {
        Some(f) => Err(f.error),
        None => survey.resolution.ok_or_else(|| PlanError::Invalid {
            path: plan.locator().path().to_owned(),
            line: 1,
            key: String::new(),
            reason: "internal: a survey with no finding has no resolution".into(),
        }),
    }
}
