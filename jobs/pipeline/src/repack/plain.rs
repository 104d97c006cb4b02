//! A unit's plain streams in one file (docs/repack.md "Plain streams", docs/plans.md "One file of
//! plain streams a unit"): every tensor the unit keeps verbatim — by a `plain` rule, or as a
//! container's fallback — one after the other in tensor-name order, each its upstream bytes
//! unchanged and nothing between them; `tensors.json` records each one's `span`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{io_err, RepackError};
use crate::plan::UpstreamTensor;

/// The file of a unit's plain streams.
pub const PLAIN_FILE: &str = "plain.bin";
/// The repack journal's `extra` key recording the group's members (resume without re-hashing).
pub(super) const JOURNAL_KEY: &str = "plain_streams";
/// Bytes copied per read.
const PIECE: usize = 4 << 20;

/// One tensor of the group: its upstream file and byte range, and why it is plain when it is a
/// container's fallback.
pub(super) struct PlainMember {
    pub tensor: UpstreamTensor,
    pub src: PathBuf,
    pub range: Range<u64>,
    pub fallback: Option<String>,
}

/// What the journal keeps of one written member: its name, span in the file and SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Written {
    pub name: String,
    pub span: [u64; 2],
    pub sha256: String,
}

/// The spans `members` (in order) take in the group file.
pub(super) fn spans(members: &[PlainMember]) -> Vec<[u64; 2]> {
    let mut at = 0;
    members
        .iter()
        .map(|m| {
            let s = [at, at + (m.range.end - m.range.start)];
            at = s[1];
            s
        })
        .collect()
}

/// Write `members` (sorted by name) into `out`, one read of each upstream range, each member and
/// the whole file hashed as the bytes pass. Returns the file's size and SHA-256 and what the
/// journal keeps of each member.
pub(super) fn write_group(
    members: &[PlainMember],
    out: &Path,
) -> Result<(u64, String, Vec<Written>), RepackError> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(out)
        .map_err(io_err("create", out))?;
    let mut whole = Sha256::new();
    let mut written = Vec::with_capacity(members.len());
    let mut buf = vec![0u8; PIECE];
    for (m, span) in members.iter().zip(spans(members)) {
        let src = File::open(&m.src).map_err(io_err("open", &m.src))?;
        let mut one = Sha256::new();
        let mut at = m.range.start;
        while at < m.range.end {
            let n = usize::try_from(m.range.end - at).map_or(PIECE, |left| left.min(PIECE));
            let piece = buf.get_mut(..n).unwrap_or_default();
            src.read_exact_at(piece, at)
                .map_err(io_err("read", &m.src))?;
            one.update(&*piece);
            whole.update(&*piece);
            f.write_all(piece).map_err(io_err("write", out))?;
            at += n as u64;
        }
        written.push(Written {
            name: m.tensor.name.clone(),
            span,
            sha256: hex::encode(one.finalize()),
        });
    }
    f.flush().map_err(io_err("write", out))?;
    let size = spans(members).last().map_or(0, |s| s[1]);
    Ok((size, hex::encode(whole.finalize()), written))
}

/// The members' digests a previous run journaled, when that run wrote exactly these members at
/// these spans (a kept `plain.bin` of another plan is written again).
pub(super) fn kept(
    journaled: Option<&serde_json::Value>,
    members: &[PlainMember],
) -> Option<Vec<Written>> {
    let w: Vec<Written> = serde_json::from_value(journaled?.clone()).ok()?;
    let same = w.len() == members.len()
        && w.iter()
            .zip(members.iter().zip(spans(members)))
            .all(|(w, (m, s))| w.name == m.tensor.name && w.span == s);
    same.then_some(w)
}
