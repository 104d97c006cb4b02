//! The `minirun-gguf` operations as library code: `split`, `quantize` (with its per-tensor plan
//! and printed lists), `info`, and the size parser. `convert` lives in [`super::convert`]. The
//! argument parser is in [`super::cli`]; every refusal text is produced here, so the
//! "required" refusals are ours, never the parser's.
//!
//! Spec: seed 003 §2 (subcommands) and §3 (refusal texts, with `minfer` → `minirun-gguf`).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use super::mixture::{self, FileType, Hparams};
use super::pure;
use artifact::gguf::quant::{self, FmaContract, QuantTarget};
use artifact::gguf::reader::{GgufModel, TensorInfo};
use artifact::gguf::split::{self, write_split};
use artifact::gguf::types::{GgmlType, Value};
use artifact::gguf::writer::{write_file, TensorSpec};
use artifact::gguf::{GgufError, Metadata};

/// The program name used in refusal texts.
pub const PROG: &str = "minirun-gguf";

/// A tooling failure: a refusal (exit 1) or a usage error the seed does not define (exit 64).
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// A refusal with the seed's text (already prefixed with the program and subcommand).
    #[error("{0}")]
    Refused(String),
    /// A reader/writer failure (exit 1).
    #[error("{PROG} {cmd}: {err}")]
    Gguf {
        /// The subcommand.
        cmd: &'static str,
        /// The underlying error (rendered inline, one line).
        err: GgufError,
    },
    /// A malformed argument value (exit 64).
    #[error("{PROG}: {0}")]
    Usage(String),
}

impl ToolError {
    /// The process exit code: 64 for usage, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            ToolError::Usage(_) => 64,
            _ => 1,
        }
    }
}

fn gg(cmd: &'static str) -> impl Fn(GgufError) -> ToolError {
    move |err| ToolError::Gguf { cmd, err }
}

/// Parse a size (`contract::parse_size`) as a usage error of this tool.
pub fn parse_size(s: &str) -> Result<u64, ToolError> {
    contract::parse_size(s).map_err(ToolError::Usage)
}

fn stem_of(path: &Path) -> String {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    match name.strip_suffix(".gguf") {
        Some(s) if !s.is_empty() => s.to_string(),
        _ if name.is_empty() || name.ends_with(".gguf") => "model".to_string(),
        _ => name.to_string(),
    }
}

/// `split.count` of a model's entry part (1 when absent).
fn split_count(model: &GgufModel) -> u64 {
    model
        .metadata()
        .get(split::KEY_COUNT)
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .max(model.n_parts() as u64)
}

/// Options of `split`.
#[derive(Debug, Clone)]
pub struct SplitOpts {
    /// The single-file GGUF.
    pub input: PathBuf,
    /// The output directory.
    pub out_dir: PathBuf,
    /// `--max-size` as given (required; parsed here so the refusal is ours).
    pub max_size: Option<String>,
    /// `--stem`.
    pub stem: Option<String>,
}

/// `minirun-gguf split`: verbatim tensor copy into parts (seed 003 §2.3). Returns the paths.
pub fn run_split(o: &SplitOpts) -> Result<Vec<PathBuf>, ToolError> {
    let max = match &o.max_size {
        None => {
            return Err(ToolError::Refused(format!(
                "{PROG} split: --max-size is required (no silent default part size)"
            )))
        }
        Some(s) => parse_size(s)?,
    };
    let shown = o.input.display();
    let name = o
        .input
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if let Some((_, _, m)) = split::parse_part_name(name) {
        return Err(ToolError::Refused(format!(
            "{PROG} split: {shown} is already a multi-part split ({m} parts); point at a single-file GGUF"
        )));
    }
    let model = GgufModel::open(&o.input).map_err(gg("split"))?;
    let n = split_count(&model);
    if n > 1 {
        return Err(ToolError::Refused(format!(
            "{PROG} split: {shown} is already a multi-part split ({n} parts); point at a single-file GGUF"
        )));
    }
    if model.tensors.is_empty() {
        return Err(ToolError::Refused(format!(
            "{PROG} split: {shown} has no tensors; there is nothing to split"
        )));
    }
    let part = &model.parts[0];
    let specs: Vec<TensorSpec> = part.header.tensors.iter().map(TensorSpec::from).collect();
    let stem = o.stem.clone().unwrap_or_else(|| stem_of(&o.input));
    std::fs::create_dir_all(&o.out_dir).map_err(|e| ToolError::Gguf {
        cmd: "split",
        err: GgufError::io("create", &o.out_dir, e),
    })?;
    write_split(
        &o.out_dir,
        &stem,
        &part.header.metadata,
        &specs,
        part.header.alignment,
        max,
        "--max-size",
        |i| {
            let t = &part.header.tensors[i];
            part.tensor_bytes(t).map(Cow::Borrowed)
        },
    )
    .map_err(gg("split"))
}

/// What `quantize` does with one tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Copy the source bytes verbatim (type unchanged).
    Copy,
    /// Decode to f32 and encode as this type.
    Encode(GgmlType),
}

/// Why a tensor did not get the requested type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// 1-D (norm, bias): keeps its source type.
    OneD,
    /// Row not a multiple of the target block: keeps its source type.
    Row,
    /// Not a float tensor (integer types): copied.
    NotFloat,
    /// K-quant row fallback to this type.
    Demoted(GgmlType),
    /// Tied embedding at q8_0.
    Tied,
    /// `--pure`: a 2-D tensor llama.cpp's `tensor_allows_quantization` name rules exclude.
    Excluded,
    /// A llama-quantize mixture put this tensor at another type than the file type's default.
    Mixture(GgmlType),
    /// A mixture's choice `from` fell back to `to` (`tensor_type_fallback`: the row is not a
    /// multiple of `from`'s block).
    Fallback {
        /// The type the mixture chose.
        from: GgmlType,
        /// The type written.
        to: GgmlType,
    },
}

/// The per-tensor plan of `quantize`.
#[derive(Debug, Clone)]
pub struct PlanEntry {
    /// Tensor name.
    pub name: String,
    /// Source type.
    pub from: GgmlType,
    /// What to do.
    pub action: Action,
    /// Why (when the requested type is not what is written).
    pub note: Option<Note>,
}

impl PlanEntry {
    /// The type written.
    pub fn out_type(&self) -> GgmlType {
        match self.action {
            Action::Copy => self.from,
            Action::Encode(t) => t,
        }
    }
}

/// The refusal of a tensor whose type has no decoder here (it cannot be re-encoded).
pub(crate) fn undecodable(t: &TensorInfo) -> ToolError {
    ToolError::Refused(format!(
        "{PROG} quantize: tensor '{}' has type {}, which {PROG} cannot decode (no dequantizer for it); re-quantizing a K-quant/I-quant source is unsupported — start from an f16 or f32 GGUF",
        t.name, t.ggml_type
    ))
}

/// The plan entry that writes `t` as `ty`: a verbatim copy when the type is unchanged, else a
/// decode-and-encode — refused when `t` cannot be decoded or `ty` has no encoder here.
pub(crate) fn entry(
    t: &TensorInfo,
    ty: GgmlType,
    note: Option<Note>,
) -> Result<PlanEntry, ToolError> {
    let action = if ty == t.ggml_type {
        Action::Copy
    } else if !quant::is_decodable(t.ggml_type) {
        return Err(undecodable(t));
    } else if !quant::is_encodable(ty) {
        return Err(ToolError::Refused(format!(
            "{PROG} quantize: tensor '{}' would be written as {ty}, which {PROG} has no encoder for (encoders: q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, f16, bf16, f32)",
            t.name
        )));
    } else {
        Action::Encode(ty)
    };
    Ok(PlanEntry {
        name: t.name.clone(),
        from: t.ggml_type,
        action,
        note,
    })
}

/// Plan `target` over `tensors` (seed 003 §2.2). Refuses undecodable sources.
pub fn plan_quantize(
    tensors: &[TensorInfo],
    target: QuantTarget,
) -> Result<Vec<PlanEntry>, ToolError> {
    use GgmlType as G;
    let tied = !tensors.iter().any(|t| t.name == "output.weight");
    let mut plan = Vec::with_capacity(tensors.len());
    for t in tensors {
        let int_type = matches!(t.ggml_type, G::I8 | G::I16 | G::I32 | G::I64);
        if !int_type && !quant::is_decodable(t.ggml_type) {
            return Err(undecodable(t));
        }
        let want = target.ggml_type();
        let row = t.row_len();
        let (mut ty, note) = if int_type {
            (t.ggml_type, Some(Note::NotFloat))
        } else if target == QuantTarget::F32 {
            (G::F32, None)
        } else if t.n_dims() < 2 {
            (t.ggml_type, Some(Note::OneD))
        } else if let Some(fb) = target.k_fallback() {
            if row % 256 == 0 {
                (want, None)
            } else if row % 32 == 0 {
                (fb, Some(Note::Demoted(fb)))
            } else {
                (G::F16, Some(Note::Demoted(G::F16)))
            }
        } else if row % want.block_size() != 0 {
            (t.ggml_type, Some(Note::Row))
        } else {
            (want, None)
        };
        let mut note = note;
        if tied
            && t.name == "token_embd.weight"
            && matches!(
                target,
                QuantTarget::Q4_0 | QuantTarget::Q4_1 | QuantTarget::Q5_0 | QuantTarget::Q5_1
            )
            && note.is_none()
        {
            ty = G::Q8_0;
            note = Some(Note::Tied);
        }
        plan.push(entry(t, ty, note)?);
    }
    Ok(plan)
}

/// The printed lists of a plan (one line per non-empty list).
pub fn plan_lines(plan: &[PlanEntry], want: GgmlType) -> Vec<String> {
    let names = |f: &dyn Fn(&PlanEntry) -> bool| -> Vec<String> {
        plan.iter()
            .filter(|e| f(e))
            .map(|e| e.name.clone())
            .collect()
    };
    let mut out = Vec::new();
    let one_d = names(&|e| e.note == Some(Note::OneD));
    if !one_d.is_empty() {
        out.push(format!(
            "quantize: {} 1-D tensor(s) keep their source type (norms/biases; llama.cpp's \"except 1d tensors\" rule): {}",
            one_d.len(),
            one_d.join(", ")
        ));
    }
    let row = names(&|e| e.note == Some(Note::Row));
    if !row.is_empty() {
        out.push(format!(
            "quantize: {} tensor(s) keep their source type (row length not a multiple of the {} block size {}): {}",
            row.len(),
            want,
            want.block_size(),
            row.join(", ")
        ));
    }
    let ex = names(&|e| e.note == Some(Note::Excluded));
    if !ex.is_empty() {
        out.push(format!(
            "quantize: {} tensor(s) keep their source type (llama.cpp's tensor_allows_quantization name rules): {}",
            ex.len(),
            ex.join(", ")
        ));
    }
    let nf = names(&|e| e.note == Some(Note::NotFloat));
    if !nf.is_empty() {
        out.push(format!(
            "quantize: {} integer tensor(s) copied unchanged: {}",
            nf.len(),
            nf.join(", ")
        ));
    }
    let dem: Vec<String> = plan
        .iter()
        .filter_map(|e| match e.note {
            Some(Note::Demoted(t)) => Some(format!("{} → {t}", e.name)),
            _ => None,
        })
        .collect();
    if !dem.is_empty() {
        out.push(format!(
            "quantize: {} tensor(s) demoted from {} (row length not a multiple of 256; llama.cpp's tensor_type_fallback): {}",
            dem.len(),
            want,
            dem.join(", ")
        ));
    }
    let listed = |f: &dyn Fn(&Note) -> Option<String>| -> Vec<String> {
        plan.iter()
            .filter_map(|e| {
                e.note
                    .as_ref()
                    .and_then(f)
                    .map(|t| format!("{} → {t}", e.name))
            })
            .collect()
    };
    let mixed = listed(&|n| match n {
        Note::Mixture(t) => Some(t.to_string()),
        _ => None,
    });
    if !mixed.is_empty() {
        out.push(format!(
            "quantize: {} tensor(s) at another type than {want} (llama-quantize's mixture): {}",
            mixed.len(),
            mixed.join(", ")
        ));
    }
    let fell = listed(&|n| match n {
        Note::Fallback { from, to } => Some(format!("{to} (not {from})")),
        _ => None,
    });
    if !fell.is_empty() {
        out.push(format!(
            "quantize: {} tensor(s) fell back (row length not a multiple of the block; llama.cpp's tensor_type_fallback): {}",
            fell.len(),
            fell.join(", ")
        ));
    }
    for e in plan.iter().filter(|e| e.note == Some(Note::Tied)) {
        out.push(format!(
            "quantize: tied embedding {} (no output.weight) written at q8_0 (llama.cpp's tied-embedding policy for sub-8-bit legacy targets)",
            e.name
        ));
    }
    let mut counts: Vec<(GgmlType, usize)> = Vec::new();
    for e in plan {
        match counts.iter_mut().find(|(t, _)| *t == e.out_type()) {
            Some(c) => c.1 += 1,
            None => counts.push((e.out_type(), 1)),
        }
    }
    counts.sort();
    out.push(format!(
        "quantize: {} tensors written as {}",
        plan.len(),
        counts
            .iter()
            .map(|(t, n)| format!("{t}: {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    out
}

/// Options of `quantize`.
#[derive(Debug, Clone)]
pub struct QuantizeOpts {
    /// Single-file source GGUF.
    pub input: PathBuf,
    /// Output path (with a split: the parts are written beside it, using its stem).
    pub output: PathBuf,
    /// `--type` as given (required; checked here).
    pub target: Option<String>,
    /// `--split-max-size` as given.
    pub split_max_size: Option<String>,
    /// Arithmetic of the encoders.
    pub fma: FmaContract,
    /// `--pure`: llama-quantize --pure's whole-file rules ([`super::pure`]).
    pub pure: bool,
    /// `--llama-mixture`: llama-quantize's whole-file rules with its per-tensor mixture
    /// ([`super::mixture`]); implied by a mixture name such as `Q4_K_M`.
    pub mixture: bool,
    /// `--allow-requantize`: re-encode tensors that are already quantized.
    pub allow_requantize: bool,
}

/// How `quantize` chooses each tensor's type and lays out the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The seed's rules (tied embedding at q8_0 for 4/5-bit legacy targets; source order).
    Seed(QuantTarget),
    /// `llama-quantize --pure IN OUT TYPE`: one type, llama.cpp's file layout.
    Pure(FileType),
    /// `llama-quantize IN OUT TYPE`: its mixture and file layout.
    Mixture(FileType),
}

impl Mode {
    /// The type most tensors get (the file type's default).
    pub fn default_type(self) -> GgmlType {
        match self {
            Mode::Seed(t) => t.ggml_type(),
            Mode::Pure(f) | Mode::Mixture(f) => f.default_type(),
        }
    }
}

/// Parse `--type` with `--pure` / `--llama-mixture` into a [`Mode`].
pub fn parse_mode(t: Option<&str>, pure: bool, mixture: bool) -> Result<Mode, ToolError> {
    if pure && mixture {
        return Err(ToolError::Usage(
            "quantize: --pure and --llama-mixture exclude each other (--pure is llama-quantize without its mixture)".into(),
        ));
    }
    let llama = match t {
        Some(s) if pure || mixture || FileType::is_mixture_name(s) => FileType::parse(s),
        _ => None,
    };
    match llama {
        Some(f) if !quant::is_encodable(f.default_type()) => Err(ToolError::Refused(format!(
            "{PROG} quantize: {} puts most tensors at {}, and {PROG} has no {} encoder yet; supported file types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, F16, F32",
            f.name(),
            f.default_type(),
            f.default_type()
        ))),
        Some(f) if pure => Ok(Mode::Pure(f)),
        Some(f) => Ok(Mode::Mixture(f)),
        None => parse_target(t).map(Mode::Seed),
    }
}

/// Parse a `--type` value into a target, with the seed's three refusals.
pub fn parse_target(t: Option<&str>) -> Result<QuantTarget, ToolError> {
    let s = t.ok_or_else(|| {
        ToolError::Refused(format!(
            "{PROG} quantize: --type is required (no silent default: a wrong target would write wrong weights); supported: {}; llama-quantize's file types select its mixture: {}",
            quant::SUPPORTED,
            FileType::names()
        ))
    })?;
    if let Some(q) = QuantTarget::parse(s) {
        return Ok(q);
    }
    if GgmlType::from_name(s).is_some() {
        return Err(ToolError::Refused(format!(
            "{PROG} quantize: target {s:?} is a known GGUF type but {PROG} has no weight encoder for it ({PROG} can only read it, so writing it would emit wrong weights); supported encoder targets: {}",
            quant::SUPPORTED
        )));
    }
    Err(ToolError::Refused(format!(
        "{PROG} quantize: unknown quant target {s:?}; supported: {}",
        quant::SUPPORTED
    )))
}

/// Result of `quantize`.
#[derive(Debug)]
pub struct QuantizeReport {
    /// The plan that was executed.
    pub plan: Vec<PlanEntry>,
    /// The printed lines.
    pub lines: Vec<String>,
    /// Files written.
    pub outputs: Vec<PathBuf>,
}

/// Encode one tensor per its plan entry.
pub fn encode_tensor(
    t: &TensorInfo,
    src: &[u8],
    to: GgmlType,
    fma: FmaContract,
) -> Result<Vec<u8>, GgufError> {
    if t.n_bytes == 0 || t.row_len() == 0 {
        return Ok(Vec::new());
    }
    let mut f = Vec::with_capacity(t.n_elements() as usize);
    quant::decode_to_f32(t.ggml_type, src, &mut f)
        .map_err(|e| GgufError::Write(format!("tensor `{}`: {e}", t.name)))?;
    let row = t.row_len() as usize;
    let n_rows = f.len() / row.max(1);
    let row_bytes = (row as u64 / to.block_size() * to.type_size()) as usize;
    let mut out = vec![0u8; row_bytes * n_rows];
    // Rows are independent: encode in parallel chunks of rows.
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(n_rows.max(1));
    let rows_per = n_rows.div_ceil(threads.max(1)).max(1);
    let res: Vec<Result<(), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = f
            .chunks(rows_per * row)
            .zip(out.chunks_mut(rows_per * row_bytes))
            .map(|(x, o)| {
                s.spawn(move || {
                    let mut buf = Vec::with_capacity(o.len());
                    quant::encode(to, x, row, &mut buf, fma)?;
                    if buf.len() != o.len() {
                        return Err(format!("encoded {} bytes, expected {}", buf.len(), o.len()));
                    }
                    o.copy_from_slice(&buf);
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("encoder thread failed".into()))
            })
            .collect()
    });
    for r in res {
        r.map_err(|e| GgufError::Write(format!("tensor `{}` → {to}: {e}", t.name)))?;
    }
    Ok(out)
}

/// llama-quantize's guard: re-encoding an already-quantized tensor compounds its quantization
/// error, so it is refused unless asked for (`--allow-requantize`). Copies are not re-encoding.
fn refuse_requantize(plan: &[PlanEntry]) -> Result<(), ToolError> {
    let requant = plan
        .iter()
        .find(|e| matches!(e.action, Action::Encode(_)) && e.from.block_size() > 1);
    match requant {
        None => Ok(()),
        Some(e) => Err(ToolError::Refused(format!(
            "{PROG} quantize: requantizing from type {} is disabled: tensor '{}' is already {}-quantized, and re-encoding it to {} compounds the quantization error; pass --allow-requantize to do it anyway (as llama-quantize does), or start from an f16/f32 GGUF",
            e.from,
            e.name,
            e.from,
            e.out_type()
        ))),
    }
}

/// `minirun-gguf quantize` (seed 003 §2.2).
pub fn run_quantize(o: &QuantizeOpts) -> Result<QuantizeReport, ToolError> {
    let mode = parse_mode(o.target.as_deref(), o.pure, o.mixture)?;
    let max = o.split_max_size.as_deref().map(parse_size).transpose()?;
    let shown = o.input.display();
    let model = GgufModel::open(&o.input).map_err(gg("quantize"))?;
    let n = split_count(&model);
    if n > 1 {
        return Err(ToolError::Refused(format!(
            "{PROG} quantize: {shown} is a multi-part split ({n} parts); quantize a single-file GGUF, then split the result"
        )));
    }
    let part = &model.parts[0];
    let src_md = &part.header.metadata;
    let (tensors, plan, md) = match mode {
        Mode::Seed(target) => {
            let tensors = &part.header.tensors;
            let plan = plan_quantize(tensors, target)?;
            let mut md: Metadata = src_md.clone();
            md.kv.retain(|(k, _)| !k.starts_with("split."));
            md.set("general.quantization_version", Value::U32(2));
            md.set("general.file_type", Value::U32(target.file_type()));
            (Cow::Borrowed(tensors), plan, md)
        }
        Mode::Pure(f) | Mode::Mixture(f) => {
            let tensors = pure::reorder(&part.header.tensors);
            let plan = if matches!(mode, Mode::Pure(_)) {
                let arch = src_md.get_str("general.architecture").unwrap_or_default();
                pure::plan_pure(&tensors, f.default_type(), arch)?
            } else {
                mixture::plan_mixture(&tensors, f, &Hparams::from_metadata(src_md)?)?
            };
            let md =
                pure::pure_metadata(src_md, part.header.alignment, f.id(), &shown.to_string())?;
            (Cow::Owned(tensors), plan, md)
        }
    };
    if !o.allow_requantize {
        refuse_requantize(&plan)?;
    }
    let align = part.header.alignment;
    let tensors: &[TensorInfo] = &tensors;
    let lines = plan_lines(&plan, mode.default_type());
    let specs: Vec<TensorSpec> = tensors
        .iter()
        .zip(&plan)
        .map(|(t, p)| TensorSpec {
            name: t.name.clone(),
            dims: t.dims.clone(),
            ggml_type: p.out_type(),
        })
        .collect();
    let fma = o.fma;
    let payload = |i: usize| -> Result<Cow<'_, [u8]>, GgufError> {
        let t = &tensors[i];
        let src = part.tensor_bytes(t)?;
        match plan[i].action {
            Action::Copy => Ok(Cow::Borrowed(src)),
            Action::Encode(to) => encode_tensor(t, src, to, fma).map(Cow::Owned),
        }
    };
    let outputs = match max {
        None => {
            write_file(&o.output, &md, &specs, align, payload).map_err(gg("quantize"))?;
            vec![o.output.clone()]
        }
        Some(m) => {
            let dir = o.output.parent().unwrap_or_else(|| Path::new(""));
            write_split(
                dir,
                &stem_of(&o.output),
                &md,
                &specs,
                align,
                m,
                "--split-max-size",
                payload,
            )
            .map_err(gg("quantize"))?
        }
    };
    Ok(QuantizeReport {
        plan,
        lines,
        outputs,
    })
}

/// How many elements of an array value `info` shows (its `count` says how many there are).
pub const INFO_ARRAY_LIMIT: usize = 16;

/// `minirun-gguf info`: a JSON description of a model (one file or a split) — the index the
/// independent Python reader is compared against.
pub fn run_info(path: &Path) -> Result<serde_json::Value, ToolError> {
    let model = GgufModel::open(path).map_err(gg("info"))?;
    let md: Vec<serde_json::Value> = model
        .metadata()
        .kv
        .iter()
        .map(|(k, v)| {
            let ty = match v {
                Value::StringArray(_) => "array[string]".to_string(),
                Value::NumArray { elem, .. } => format!("array[{}]", elem.name()),
                other => other.value_type().name().to_string(),
            };
            let mut m =
                serde_json::json!({"key": k, "type": ty, "value": v.to_json(INFO_ARRAY_LIMIT)});
            if let Value::StringArray(items) = v {
                m["count"] = items.len().into();
            } else if let Value::NumArray { count, .. } = v {
                m["count"] = (*count).into();
            }
            m
        })
        .collect();
    let tensors: Vec<serde_json::Value> = model
        .tensors
        .iter()
        .map(|(p, t)| {
            serde_json::json!({
                "name": t.name, "type": t.ggml_type.name(), "type_id": t.ggml_type.id(),
                "dims": t.dims, "offset": t.offset, "n_bytes": t.n_bytes, "part": p,
                "abs_offset": model.parts[*p].header.data_start + t.offset,
            })
        })
        .collect();
    Ok(serde_json::json!({
        "schema": "minirun.gguf-info/1",
        "array_limit": INFO_ARRAY_LIMIT,
        "parts": model.parts.iter().map(|p| p.path().display().to_string()).collect::<Vec<_>>(),
        "alignment": model.parts[0].header.alignment,
        "data_start": model.parts[0].header.data_start,
        "metadata": md,
        "tensors": tensors,
    }))
}
