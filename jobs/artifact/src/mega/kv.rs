//! `.megakv`: MEGA's KV-cache sidecar (seed `004`: "for prompt or prefix cache reuse"; the byte
//! layout is `docs/mega.md` §12, frozen by `tests/golden/megakv/`). A file holds the attention
//! keys and values a model computed for a token prefix (or, for a model whose state is more than
//! that, its whole decode state as named arrays), bound to the exact model (GGUF file digest
//! or verified artifact commit), the KV layout and the tokens; it records the SHA-256 of its
//! payload and of everything after the fixed header, so a truncated, altered or foreign file is
//! refused before any byte of it reaches a model.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// `"MEGAKV\r\n"`.
pub const KV_MAGIC: [u8; 8] = *b"MEGAKV\r\n";
/// The major version this crate writes and reads.
pub const KV_MAJOR: u16 = 1;
/// Bytes of the fixed header.
pub const KV_FIXED: usize = 64;
/// The payload starts at a multiple of this.
pub const KV_ALIGN: usize = 64;
/// Headers (JSON) larger than this are refused.
pub const KV_MAX_HEADER: usize = 64 << 20;

/// The model a KV state belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum KvModel {
    /// A GGUF file: its SHA-256 and length (its tokenizer lives in it).
    Gguf { sha256: String, bytes: u64 },
    /// A verified Minirun artifact at a commit, with its tokenizer's SHA-256.
    Artifact {
        repo: String,
        commit: String,
        tokenizer_sha256: String,
    },
}

/// How the payload is laid out: attention keys and values per layer ([`KvHeads`], a Llama-family
/// cache), or a model's decode state as named arrays ([`KvSections`], DeepSeek V4's sliding
/// window, compressor buffers and entries). The JSON tells them apart by their fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KvLayout {
    Heads(KvHeads),
    Sections(KvSections),
}

/// Per layer, K then V, each `[positions, kv_heads, head_dim]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvHeads {
    pub layers: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    /// `f32` (little-endian), the only one written.
    pub dtype: String,
}

/// A decode state as named row-major arrays, back to back in the listed order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvSections {
    /// The model family whose state this is (`deepseek-v4`).
    pub family: String,
    /// `f32` (little-endian), the only one written.
    pub dtype: String,
    pub sections: Vec<KvSection>,
}

/// One array of a [`KvSections`] state: `rows × cols` values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvSection {
    pub name: String,
    pub rows: u64,
    pub cols: u64,
}

impl KvSection {
    /// Bytes of the section (saturating: a crafted header cannot overflow the size check).
    pub fn bytes(&self) -> u64 {
        self.rows.saturating_mul(self.cols).saturating_mul(4)
    }
}

impl KvHeads {
    /// Bytes of one position of one layer's K (or V).
    pub fn row_bytes(&self) -> u64 {
        u64::from(self.kv_heads) * u64::from(self.head_dim) * 4
    }
}

impl KvLayout {
    /// The element type's name.
    pub fn dtype(&self) -> &str {
        match self {
            Self::Heads(h) => &h.dtype,
            Self::Sections(s) => &s.dtype,
        }
    }

    /// Payload bytes for `positions`: per layer, K then V, each `[positions, kv_heads, head_dim]`;
    /// or the sections' sizes summed (they already count the positions).
    pub fn payload_bytes(&self, positions: usize) -> u64 {
        match self {
            Self::Heads(h) => (2 * u64::from(h.layers))
                .saturating_mul(positions as u64)
                .saturating_mul(h.row_bytes()),
            Self::Sections(s) => s
                .sections
                .iter()
                .fold(0u64, |a, x| a.saturating_add(x.bytes())),
        }
    }

    /// A sections layout whose names are empty or repeated is not a state anyone wrote.
    fn check(&self) -> Result<(), KvError> {
        if let Self::Sections(s) = self {
            let mut seen = std::collections::BTreeSet::new();
            if let Some(bad) = s
                .sections
                .iter()
                .find(|x| x.name.is_empty() || !seen.insert(x.name.as_str()))
            {
                return Err(KvError::Header(format!(
                    "section name `{}` is empty or repeated",
                    bad.name
                )));
            }
        }
        Ok(())
    }
}

/// The JSON header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvHeader {
    /// `"megakv"`.
    pub format: String,
    pub model: KvModel,
    pub layout: KvLayout,
    /// The tokens whose keys and values the payload holds, in position order.
    pub tokens: Vec<u32>,
    /// SHA-256 of the payload, lowercase hex.
    pub payload_sha256: String,
}

/// Why a `.megakv` file is refused.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    #[error("not a .megakv file (magic {0:02x?})")]
    Magic(Vec<u8>),
    #[error(".megakv major version {0} (this build reads {KV_MAJOR})")]
    Version(u16),
    #[error(".megakv is truncated or padded: {have} bytes where the header says {want}")]
    Length { have: u64, want: u64 },
    #[error(".megakv header: {0}")]
    Header(String),
    #[error(".megakv {what} digest mismatch: recorded {recorded}, computed {computed} (the file was altered)")]
    Digest {
        what: &'static str,
        recorded: String,
        computed: String,
    },
    #[error(
        ".megakv payload holds {have} bytes; {positions} positions of this layout need {want}"
    )]
    PayloadSize {
        have: u64,
        want: u64,
        positions: usize,
    },
}

fn align_up(x: usize) -> usize {
    x.div_ceil(KV_ALIGN) * KV_ALIGN
}

/// The file: fixed header, JSON header, zero padding to [`KV_ALIGN`], payload.
/// `header.payload_sha256` is filled in here.
pub fn write_kv(header: &KvHeader, payload: &[u8]) -> Result<Vec<u8>, KvError> {
    let mut h = header.clone();
    h.payload_sha256 = hex::encode(Sha256::digest(payload));
    h.layout.check()?;
    let want = h.layout.payload_bytes(h.tokens.len());
    if payload.len() as u64 != want {
        return Err(KvError::PayloadSize {
            have: payload.len() as u64,
            want,
            positions: h.tokens.len(),
        });
    }
    let json = serde_json::to_vec(&h).map_err(|e| KvError::Header(e.to_string()))?;
    let payload_at = align_up(KV_FIXED + json.len());
    let mut out = vec![0u8; payload_at];
    out.extend_from_slice(payload);
    out[..8].copy_from_slice(&KV_MAGIC);
    out[8..10].copy_from_slice(&KV_MAJOR.to_le_bytes());
    // 10..12 minor 0
    out[12..16].copy_from_slice(&(json.len() as u32).to_le_bytes());
    out[16..24].copy_from_slice(&(payload_at as u64).to_le_bytes());
    out[24..32].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    out[KV_FIXED..KV_FIXED + json.len()].copy_from_slice(&json);
    let body = file_digest(&out);
    out[32..64].copy_from_slice(&body);
    Ok(out)
}

/// SHA-256 of the whole file but the digest field (`[0, 32)` then `[64, end)`).
fn file_digest(bytes: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(&bytes[..32]);
    h.update(&bytes[KV_FIXED..]);
    h.finalize().into()
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Reads and checks a whole file: magic, version, exact length, the body digest, the header, the
/// payload's size for its layout and tokens, and the payload digest.
pub fn read_kv(bytes: &[u8]) -> Result<(KvHeader, &[u8]), KvError> {
    if bytes.len() < KV_FIXED {
        return Err(KvError::Length {
            have: bytes.len() as u64,
            want: KV_FIXED as u64,
        });
    }
    if bytes[..8] != KV_MAGIC {
        return Err(KvError::Magic(bytes[..8].to_vec()));
    }
    let major = u16::from_le_bytes([bytes[8], bytes[9]]);
    if major != KV_MAJOR {
        return Err(KvError::Version(major));
    }
    let json_len = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]) as usize;
    let payload_at = u64_at(bytes, 16);
    let payload_len = u64_at(bytes, 24);
    if json_len > KV_MAX_HEADER || payload_at != align_up(KV_FIXED + json_len) as u64 {
        return Err(KvError::Header(format!(
            "header length {json_len} and payload offset {payload_at} disagree"
        )));
    }
    let want = payload_at.saturating_add(payload_len);
    if bytes.len() as u64 != want {
        return Err(KvError::Length {
            have: bytes.len() as u64,
            want,
        });
    }
    let body = hex::encode(file_digest(bytes));
    let recorded = hex::encode(&bytes[32..64]);
    if body != recorded {
        return Err(KvError::Digest {
            what: "body",
            recorded,
            computed: body,
        });
    }
    let header: KvHeader = serde_json::from_slice(&bytes[KV_FIXED..KV_FIXED + json_len])
        .map_err(|e| KvError::Header(e.to_string()))?;
    if header.format != "megakv" || header.layout.dtype() != "f32" {
        return Err(KvError::Header(format!(
            "format `{}` with dtype `{}` (want `megakv`, `f32`)",
            header.format,
            header.layout.dtype()
        )));
    }
    header.layout.check()?;
    let payload = &bytes[payload_at as usize..];
    let need = header.layout.payload_bytes(header.tokens.len());
    if payload.len() as u64 != need {
        return Err(KvError::PayloadSize {
            have: payload.len() as u64,
            want: need,
            positions: header.tokens.len(),
        });
    }
    let computed = hex::encode(Sha256::digest(payload));
    if computed != header.payload_sha256 {
        return Err(KvError::Digest {
            what: "payload",
            recorded: header.payload_sha256.clone(),
            computed,
        });
    }
    Ok((header, payload))
}
