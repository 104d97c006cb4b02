//! How repack cuts upstream streams into a container's tiles: the container spec of a placement
//! (one matrix, or a stack of members), the tile loop that reads each tile's packed, scale and
//! bias bytes from the member they belong to, and the one write of a container assembled in
//! memory.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use artifact::container::{self, ContainerSpec, ContainerWriter, Layout};
use sha2::{Digest, Sha256};

use super::{io_err, RepackError};
use crate::direct::write_whole;
use crate::plan::{ContainerMode, Geometry, NibbleOrder};

/// Where a container is assembled: a file, or memory.
pub(super) trait WriteSeek: std::io::Write + std::io::Seek {}
impl<T: std::io::Write + std::io::Seek> WriteSeek for T {}

/// The size and SHA-256 of a container hashed as it was assembled in memory (`None`: not so).
pub(super) type Hashed = Option<(u64, String)>;

/// The upstream streams of one member (one matrix) a container cuts into tiles: file path and
/// absolute byte range of each.
#[derive(Clone)]
pub(super) struct Upstreams {
    pub weight: (PathBuf, Range<u64>),
    pub scale: (PathBuf, Range<u64>),
    pub bias: Option<(PathBuf, Range<u64>)>,
}

/// The opened upstream files of one member's [`Upstreams`].
pub(super) struct UpstreamFiles {
    pub weight: Rc<File>,
    pub scale: Rc<File>,
    pub bias: Option<Rc<File>>,
}

/// The SHA-256 of each member's packed, scale and bias streams, as the tiles read them.
pub(super) type MemberShas = Vec<[Sha256; 3]>;

/// File name of the container of weight (or stack) `name`: `layers.0.attn.wq_a.weight` →
/// `layers.0.attn.wq_a.til`, `layers.0.ffn.experts.w1.weight` → `layers.0.ffn.experts.w1.til`.
pub(crate) fn container_file(name: &str) -> String {
    format!("{}.til", name.strip_suffix(".weight").unwrap_or(name))
}

/// The container spec of a placement: `name` (a weight's, or a stack's), its geometry (the whole
/// stack's for a stack) and its rule's mode.
pub(super) fn container_spec(
    mode: &ContainerMode,
    scale_dtype: &str,
    g: &Geometry,
    name: &str,
) -> ContainerSpec {
    let tile_rows = g.tile_rows.min(g.rows).max(1);
    match mode {
        ContainerMode::Fp8E4m3Block { block, .. } => ContainerSpec::fp8_e4m3_block(
            name,
            g.rows,
            g.cols,
            u64::from(block[0]),
            u64::from(block[1]),
            tile_rows,
        ),
        ContainerMode::Mxfp4 { nibble_order, .. } => ContainerSpec::mxfp4(
            name, g.rows, g.cols, tile_rows,
        )
        .with_nibble_order(match nibble_order {
            NibbleOrder::LowFirst => container::NibbleOrder::LowFirst,
            NibbleOrder::HighFirst => container::NibbleOrder::HighFirst,
        }),
        ContainerMode::Affine { group, bits, .. } => ContainerSpec::affine(
            name,
            g.rows,
            g.cols,
            u64::from(*group),
            u8::try_from(*bits).unwrap_or(8),
            tile_rows,
            match scale_dtype {
                "F16" => container::Dtype::F16,
                "F32" => container::Dtype::F32,
                _ => container::Dtype::Bf16,
            },
        ),
    }
}

/// Tile step: read each tile's packed, scale and bias bytes from the member it belongs to (the
/// members split the tiles evenly, in order), hash them per member, and write the tile.
pub(super) fn copy_tiles(
    (unit, name): (&str, &str),
    layout: &Layout,
    members: &[(Upstreams, UpstreamFiles)],
    mut writer: Option<&mut ContainerWriter<&mut dyn WriteSeek>>,
    shas: &mut MemberShas,
) -> Result<(), RepackError> {
    let per_member = layout.tile_count / (members.len().max(1) as u64);
    for i in 0..layout.tile_count {
        let Some(tl) = layout.tile(i) else { break };
        let m = usize::try_from(i / per_member.max(1)).unwrap_or(usize::MAX);
        let (Some((up, files)), Some(sha)) = (members.get(m), shas.get_mut(m)) else {
            return Err(io_err("repack", Path::new(name))(std::io::Error::other(
                format!(
                    "tile {i} belongs to no member of the {} members",
                    members.len()
                ),
            )));
        };
        // This member's streams start where the earlier members' end in the container's.
        let before = m as u64;
        let len = |r: &Range<u64>| r.end - r.start;
        let ((wsrc, wr), (ssrc, sr)) = (&up.weight, &up.scale);
        let s = tl.shape;
        let packed = read_exact(
            &files.weight,
            wsrc,
            wr.start + tl.packed_stream_offset - before * len(wr),
            s.packed_payload,
        )?;
        let scale = read_exact(
            &files.scale,
            ssrc,
            sr.start + tl.scale_stream_offset - before * len(sr),
            s.scale_payload,
        )?;
        let b = match (&files.bias, &up.bias) {
            (Some(f), Some((p, r))) => Some(read_exact(
                f,
                p,
                r.start + tl.bias_stream_offset - before * len(r),
                s.bias_payload,
            )?),
            _ => None,
        };
        sha[0].update(&packed);
        sha[1].update(&scale);
        if let Some(b) = &b {
            sha[2].update(b);
        }
        if let Some(w) = writer.as_mut() {
            w.write_tile(&packed, &scale, b.as_deref())
                .map_err(|source| RepackError::Container {
                    unit: unit.into(),
                    tensor: name.to_owned(),
                    source,
                })?;
        }
    }
    Ok(())
}

/// Write step of an in-memory container: one write of the filled buffer; returns size and SHA-256.
pub(super) fn write_assembled(
    mem: std::io::Cursor<&mut [u8]>,
    out_path: &Path,
) -> Result<(u64, String), RepackError> {
    // Every byte of the buffer was written: header region, then each tile region
    // with its padding, ending at total_bytes (ContainerWriter::finish).
    let written = mem.position();
    let bytes = mem.into_inner();
    if written != bytes.len() as u64 {
        return Err(io_err("assemble", out_path)(std::io::Error::other(
            format!(
                "container writer stopped at byte {written} of {}",
                bytes.len()
            ),
        )));
    }
    let sha = hex::encode(Sha256::digest(&*bytes));
    write_whole(out_path, bytes).map_err(io_err("write", out_path))?;
    Ok((bytes.len() as u64, sha))
}

fn read_exact(f: &File, path: &Path, offset: u64, len: u64) -> Result<Vec<u8>, RepackError> {
    let n = usize::try_from(len)
        .map_err(|_| io_err("read", path)(std::io::Error::other("tile larger than memory")))?;
    let mut buf = vec![0u8; n];
    f.read_exact_at(&mut buf, offset)
        .map_err(io_err("read", path))?;
    Ok(buf)
}
