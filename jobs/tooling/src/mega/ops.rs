//! `mega::ops`: the three `minirun-mega` operations as library calls (cargo's command/ops split):
//! each returns the text to print and whether the process should exit 0 (docs/mega.md §11).

use std::path::Path;

use super::convert::{convert, render_summary, ConvertOptions};
use artifact::mega::inspect::{inspect, verify, EntryPoint};
use artifact::mega::MegaError;

/// What an operation printed and whether it succeeded (exit 0) or reported a failure (exit 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Text for stdout.
    pub text: String,
    /// True for exit 0.
    pub ok: bool,
}

/// `convert SRC --output-dir DIR`: always ok when it returns.
pub fn convert_op(src: &Path, out: &Path, opts: &ConvertOptions) -> Result<Outcome, MegaError> {
    let summary = convert(src, out, opts)?;
    Ok(Outcome {
        text: render_summary(&summary),
        ok: true,
    })
}

/// `inspect PATH`: ok when the card verified, or the release is unindexed (a legitimate state).
pub fn inspect_op(path: &Path, identity: Option<&str>) -> Result<Outcome, MegaError> {
    let card = inspect(path, identity)?;
    let ok = card.verified || matches!(card.entry, EntryPoint::Unindexed(_));
    Ok(Outcome {
        text: card.render(),
        ok,
    })
}

/// `verify PATH`: ok when the hashes match and trust metadata is not invalid.
pub fn verify_op(path: &Path) -> Result<Outcome, MegaError> {
    let report = verify(path)?;
    Ok(Outcome {
        text: report.render(),
        ok: report.ok(),
    })
}

/// Parse `--alignment` (a power of two in 8..=2^30) for the argument parser.
pub fn parse_alignment(s: &str) -> Result<u64, String> {
    let v: u64 = s.parse().map_err(|e| format!("{e}"))?;
    artifact::mega::layout::check_alignment(v).map_err(|e| e.to_string())?;
    Ok(v)
}
