//! Synthetic-deterministic containers (what a storage benchmark writes) and the seed's
//! regeneration check.
//!
//! The generator is counter-based SplitMix64 (Steele, Lea & Flood 2014), so any byte of any stream
//! can be produced independently of the others and a tile can be regenerated on its own:
//! byte `j` of stream `s` is byte `j % 8` (little-endian) of `mix(seed + s·SALT + (j/8 + 1)·GAMMA)`,
//! with streams packed = 0, scale = 1, bias = 2. The recorded parameters are the header's seed
//! and geometry; nothing else is needed to recompute the file.
//!
//! A checkpoint-derived container is refused by [`regenerate_check`]: its bytes came from a
//! checkpoint and comparing them with a pseudo-random sequence would be meaningless.

use std::fs::File;
use std::path::Path;

use super::geometry::{ContainerSpec, Layout};
use super::header::Header;
use super::reader::{AlignedSlot, ContainerReader, DigestCheck, Streams};
use super::writer::{ContainerWriter, WriteSummary};
use super::{ContainerError, ContentKind};

const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
const SALT: u64 = 0xD1B5_4A32_D192_ED03;

/// Stream ids of the generator.
pub const STREAM_PACKED: u64 = 0;
pub const STREAM_SCALE: u64 = 1;
pub const STREAM_BIAS: u64 = 2;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fill `out` with bytes `offset..offset + out.len()` of generator stream `stream` under `seed`.
pub fn fill(seed: u64, stream: u64, offset: u64, out: &mut [u8]) {
    let base = seed.wrapping_add(stream.wrapping_mul(SALT));
    for (i, b) in out.iter_mut().enumerate() {
        let j = offset.wrapping_add(i as u64);
        let word = mix(base.wrapping_add((j / 8).wrapping_add(1).wrapping_mul(GAMMA)));
        *b = word.to_le_bytes()[(j % 8) as usize];
    }
}

fn seed_of(spec: &ContainerSpec) -> Option<u64> {
    match spec.content {
        ContentKind::SyntheticDeterministic { seed } => Some(seed),
        ContentKind::CheckpointDerived => None,
    }
}

fn not_synthetic(spec: &ContainerSpec, path: &Path) -> ContainerError {
    let _ = spec;
    ContainerError::NotRegenerable {
        path: path.to_owned(),
    }
}

/// The whole-matrix streams a synthetic `spec` stands for (small matrices; tests, goldens).
pub fn synthetic_streams(spec: &ContainerSpec) -> Result<Streams, ContainerError> {
    let seed = seed_of(spec).ok_or_else(|| not_synthetic(spec, Path::new(&spec.name)))?;
    let layout = spec.layout().map_err(|source| ContainerError::Geometry {
        tensor: spec.name.clone(),
        source,
    })?;
    let (np, ns, nb) = layout.stream_lengths();
    let gen = |stream, n: u64| {
        let mut v = vec![0u8; n as usize];
        fill(seed, stream, 0, &mut v);
        v
    };
    Ok(Streams {
        packed: gen(STREAM_PACKED, np),
        scale: gen(STREAM_SCALE, ns),
        bias: spec.bias_dtype.map(|_| gen(STREAM_BIAS, nb)),
    })
}

fn tile_payloads(layout: &Layout, seed: u64, index: u64) -> Option<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let t = layout.tile(index)?;
    let s = t.shape;
    let mut p = vec![0u8; s.packed_payload as usize];
    let mut sc = vec![0u8; s.scale_payload as usize];
    let mut b = vec![0u8; s.bias_payload as usize];
    fill(seed, STREAM_PACKED, t.packed_stream_offset, &mut p);
    fill(seed, STREAM_SCALE, t.scale_stream_offset, &mut sc);
    fill(seed, STREAM_BIAS, t.bias_stream_offset, &mut b);
    Some((p, sc, b))
}

/// Write the synthetic container of `spec` (whose content kind must be synthetic-deterministic)
/// at `path`, tile by tile with memory bounded by one tile.
pub fn write_synthetic(path: &Path, spec: &ContainerSpec) -> Result<WriteSummary, ContainerError> {
    let seed = seed_of(spec).ok_or_else(|| not_synthetic(spec, path))?;
    let io = |action| {
        move |source| ContainerError::Io {
            path: path.to_owned(),
            action,
            source,
        }
    };
    let mut file = File::create(path).map_err(io("creating"))?;
    let mut w = ContainerWriter::with_path(std::io::BufWriter::new(&mut file), spec, path)?;
    let layout = w.layout().clone();
    for i in 0..layout.tile_count {
        let (p, s, b) = tile_payloads(&layout, seed, i).ok_or(ContainerError::TileCount {
            tensor: spec.name.clone(),
            written: i,
            expected: layout.tile_count,
        })?;
        w.write_tile(&p, &s, spec.bias_dtype.map(|_| b.as_slice()))?;
    }
    let summary = w.finish()?;
    file.sync_all().map_err(io("syncing"))?;
    Ok(summary)
}

/// What a successful regeneration check compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegenerationReport {
    pub seed: u64,
    pub tiles: u64,
    /// Every byte of the file was compared: header and all tiles.
    pub bytes_compared: u64,
}

/// Recompute a synthetic-deterministic container from its recorded seed and geometry and compare
/// every byte (header, payloads, padding, digests). A checkpoint-derived container is refused with
/// [`ContainerError::NotRegenerable`], never compared against pseudo-random bytes.
pub fn regenerate_check(path: &Path) -> Result<RegenerationReport, ContainerError> {
    let reader = ContainerReader::open(path)?;
    let layout = reader.layout().clone();
    let seed = seed_of(&layout.spec).ok_or_else(|| not_synthetic(&layout.spec, path))?;
    let mut slot = AlignedSlot::for_layout(&layout);
    let mut digests = Vec::new();
    let mismatch = |region: String| ContainerError::RegenerationMismatch {
        path: path.to_owned(),
        region,
    };
    for i in 0..layout.tile_count {
        let (p, s, b) = tile_payloads(&layout, seed, i)
            .ok_or_else(|| mismatch(format!("tile {i} (out of range)")))?;
        // Padding is checked zero by read_tile; payloads are compared here.
        let view = reader.read_tile(i, &mut slot, DigestCheck::Skip)?;
        if view.packed != p.as_slice() {
            return Err(mismatch(format!("tile {i} packed sub-region")));
        }
        if view.scale != s.as_slice() {
            return Err(mismatch(format!("tile {i} scale sub-region")));
        }
        if view.bias.is_some_and(|vb| vb != b.as_slice()) {
            return Err(mismatch(format!("tile {i} bias sub-region")));
        }
        use sha2::Digest;
        digests.push(sha2::Sha256::digest(view.bytes).into());
    }
    let expected_header = Header {
        layout: layout.clone(),
        digests: if layout.spec.digests {
            digests
        } else {
            Vec::new()
        },
    }
    .encode();
    let mut actual_header = vec![0u8; expected_header.len()];
    use std::os::unix::fs::FileExt;
    File::open(path)
        .and_then(|f| f.read_exact_at(&mut actual_header, 0))
        .map_err(|source| ContainerError::Io {
            path: path.to_owned(),
            action: "reading the header",
            source,
        })?;
    if actual_header != expected_header {
        return Err(mismatch("the header (fields or tile digests)".to_owned()));
    }
    Ok(RegenerationReport {
        seed,
        tiles: layout.tile_count,
        bytes_compared: layout.total_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stream 0 is textbook SplitMix64: seeded with 0 its first outputs are 0xE220A8397B1DCDAF
    /// and 0x6E789E6AA1B965F4 (reference values of the published algorithm).
    #[test]
    fn stream_zero_is_splitmix64() {
        let mut b = [0u8; 16];
        fill(0, STREAM_PACKED, 0, &mut b);
        let w0 = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
        let w1 = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
        assert_eq!((w0, w1), (0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4));
    }

    #[test]
    fn any_window_of_a_stream_matches_the_whole() {
        let mut whole = [0u8; 100];
        fill(42, STREAM_SCALE, 0, &mut whole);
        let mut part = [0u8; 37];
        fill(42, STREAM_SCALE, 13, &mut part);
        assert_eq!(&whole[13..50], &part);
        let mut other = [0u8; 100];
        fill(42, STREAM_BIAS, 0, &mut other);
        assert_ne!(whole, other, "streams are distinct");
    }
}
