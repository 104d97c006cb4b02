//! The kernel table: which `.wgsl` source and entry point each kernel is, and the storage buffers
//! it binds (binding 0 is always the uniform parameters; storage bindings follow from 1).

// Every dequantize-and-multiply family shares one multiply body, `wgsl/matmul_body.wgsl` (one
// accumulation order, so a streamed and a resident run perform the same arithmetic); each
// `MATMUL_*` below is its format prefix, then `wgsl/matmul_common.wgsl` (parameters, bindings,
// decode helpers), then that body. `crate::unrolled` builds the unrolled one-token matvec from the
// same prefix and common part.
/// The subgroup-reduction entry points appended to a family's source where the device has
/// subgroups ([`Kernel::subgroup_source`]).
pub const MATMUL_SUBGROUP: &str = include_str!("../wgsl/matmul_subgroup.wgsl");
pub const MATMUL_TILED: &str = include_str!("../wgsl/matmul_tiled.wgsl");
pub const MATMUL_TILED_SG: &str = include_str!("../wgsl/matmul_tiled_sg.wgsl");
/// How the tiled matmul's module reads its inputs: from the workgroup tile
/// (`wgsl/matmul_tiled.wgsl` stages them there from binding 1).
const XV_TILED: &str = "@group(0) @binding(1) var<storage, read> x: array<f32>;
fn xv(i: u32) -> f32 {
    return xs[i];
}
";
pub const MATMUL_PLAIN: &str = concat!(
    include_str!("../wgsl/matmul_plain.wgsl"),
    include_str!("../wgsl/matmul_common.wgsl"),
    include_str!("../wgsl/matmul_body.wgsl")
);
pub const MATMUL_FP8_BLOCK: &str = concat!(
    include_str!("../wgsl/matmul_fp8_block.wgsl"),
    include_str!("../wgsl/matmul_common.wgsl"),
    include_str!("../wgsl/matmul_body.wgsl")
);
pub const MATMUL_MXFP4: &str = concat!(
    include_str!("../wgsl/matmul_mxfp4.wgsl"),
    include_str!("../wgsl/matmul_common.wgsl"),
    include_str!("../wgsl/matmul_body.wgsl")
);
pub const MATMUL_AFFINE8: &str = concat!(
    include_str!("../wgsl/matmul_affine8.wgsl"),
    include_str!("../wgsl/matmul_common.wgsl"),
    include_str!("../wgsl/matmul_body.wgsl")
);
pub const MATMUL_Q8_0: &str = concat!(
    include_str!("../wgsl/matmul_q8_0.wgsl"),
    include_str!("../wgsl/matmul_common.wgsl"),
    include_str!("../wgsl/matmul_body.wgsl")
);
pub const MATMUL_Q4_1: &str = concat!(
    include_str!("../wgsl/matmul_q4_1.wgsl"),
    include_str!("../wgsl/matmul_common.wgsl"),
    include_str!("../wgsl/matmul_body.wgsl")
);
pub const MATMUL_Q4_0: &str = concat!(
    include_str!("../wgsl/matmul_q4_0.wgsl"),
    include_str!("../wgsl/matmul_chunk8.wgsl"),
    include_str!("../wgsl/matmul_common.wgsl"),
    include_str!("../wgsl/matmul_body.wgsl")
);
pub const MATMUL_Q5_0: &str = concat!(
    include_str!("../wgsl/matmul_q5_0.wgsl"),
    include_str!("../wgsl/matmul_chunk8.wgsl"),
    include_str!("../wgsl/matmul_common.wgsl"),
    include_str!("../wgsl/matmul_body.wgsl")
);
pub const MATMUL_Q5_1: &str = concat!(
    include_str!("../wgsl/matmul_q5_1.wgsl"),
    include_str!("../wgsl/matmul_chunk8.wgsl"),
    include_str!("../wgsl/matmul_common.wgsl"),
    include_str!("../wgsl/matmul_body.wgsl")
);
pub const MATMUL_Q4_K: &str = concat!(
    include_str!("../wgsl/matmul_q4_k.wgsl"),
    include_str!("../wgsl/matmul_chunk8.wgsl"),
    include_str!("../wgsl/matmul_common.wgsl"),
    include_str!("../wgsl/matmul_body.wgsl")
);
pub const MATMUL_Q5_K: &str = concat!(
    include_str!("../wgsl/matmul_q5_k.wgsl"),
    include_str!("../wgsl/matmul_chunk8.wgsl"),
    include_str!("../wgsl/matmul_common.wgsl"),
    include_str!("../wgsl/matmul_body.wgsl")
);
pub const MATMUL_Q6_K: &str = concat!(
    include_str!("../wgsl/matmul_q6_k.wgsl"),
    include_str!("../wgsl/matmul_chunk8.wgsl"),
    include_str!("../wgsl/matmul_common.wgsl"),
    include_str!("../wgsl/matmul_body.wgsl")
);
/// The parameters, bindings and helpers every matmul module shares.
pub const MATMUL_COMMON: &str = include_str!("../wgsl/matmul_common.wgsl");
/// The entry points (and accumulation order) every matmul module ends with.
pub const MATMUL_BODY: &str = include_str!("../wgsl/matmul_body.wgsl");
pub const RMSNORM: &str = include_str!("../wgsl/rmsnorm.wgsl");
pub const ROPE: &str = include_str!("../wgsl/rope.wgsl");
pub const SOFTMAX: &str = include_str!("../wgsl/softmax.wgsl");
pub const ATTENTION: &str = include_str!("../wgsl/attention.wgsl");
pub const ATTENTION_DECODE: &str = include_str!("../wgsl/attention_decode.wgsl");
pub const ACTIVATION: &str = include_str!("../wgsl/activation.wgsl");
pub const EMBEDDING: &str = include_str!("../wgsl/embedding.wgsl");
pub const ARGMAX: &str = include_str!("../wgsl/argmax.wgsl");
pub const STREAM_READ: &str = include_str!("../wgsl/stream_read.wgsl");
pub const HC_MIX: &str = include_str!("../wgsl/hc_mix.wgsl");
pub const MOE_ROUTE: &str = include_str!("../wgsl/moe_route.wgsl");
pub const V4_COMPRESS: &str = include_str!("../wgsl/v4_compress.wgsl");
pub const V4_INDEX_SCORE: &str = include_str!("../wgsl/v4_index_score.wgsl");
pub const V4_INDEX_TOPK: &str = include_str!("../wgsl/v4_index_topk.wgsl");
pub const V4_ATTEND: &str = include_str!("../wgsl/v4_attend.wgsl");

/// How the multiply body declares its input vectors (binding 1) and reads them (`xv`).
pub const X_STORAGE: &str = "@group(0) @binding(1) var<storage, read> x: array<f32>;
fn xv(i: u32) -> f32 {
    return x[i];
}
";

/// The same input as a 64 KiB uniform block (at most [`UNIFORM_X_ELEMENTS`] values): on a CPU
/// adapter (lavapipe) a load whose index is the same for every invocation is then one scalar load
/// instead of a gather, which makes the row-per-invocation matvec about 3× faster on Q4_1. The
/// values read are the same, so are the bits.
pub const X_UNIFORM: &str = "@group(0) @binding(1) var<uniform> x: array<vec4<f32>, 4096>;
fn xv(i: u32) -> f32 {
    return x[i >> 2u][i & 3u];
}
";

/// Input elements the uniform form of binding 1 holds (64 KiB of f32).
pub const UNIFORM_X_ELEMENTS: usize = 16384;

/// How a storage binding is accessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    ReadWrite,
}

use Access::{Read, ReadWrite};

/// One compute entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum Kernel {
    MatvecPlain,
    MatmulPlain,
    MatvecFp8Block,
    MatmulFp8Block,
    MatvecMxfp4,
    MatmulMxfp4,
    MatvecAffine8,
    MatmulAffine8,
    MatvecQ8_0,
    MatmulQ8_0,
    MatvecQ4_1,
    MatmulQ4_1,
    MatvecQ4_0,
    MatmulQ4_0,
    MatvecQ5_0,
    MatmulQ5_0,
    MatvecQ5_1,
    MatmulQ5_1,
    MatvecQ4K,
    MatmulQ4K,
    MatvecQ5K,
    MatmulQ5K,
    MatvecQ6K,
    MatmulQ6K,
    RmsNorm,
    Rope,
    Softmax,
    Attention,
    AttnSoftmax,
    Silu,
    Swiglu,
    Embedding,
    Argmax,
    StreamRead,
    HcMix,
    MoeRoute,
    V4Compress,
    V4IndexScore,
    V4IndexTopk,
    V4Attend,
}

impl Kernel {
    pub const ALL: [Kernel; 40] = [
        Kernel::MatvecPlain,
        Kernel::MatmulPlain,
        Kernel::MatvecFp8Block,
        Kernel::MatmulFp8Block,
        Kernel::MatvecMxfp4,
        Kernel::MatmulMxfp4,
        Kernel::MatvecAffine8,
        Kernel::MatmulAffine8,
        Kernel::MatvecQ8_0,
        Kernel::MatmulQ8_0,
        Kernel::MatvecQ4_1,
        Kernel::MatmulQ4_1,
        Kernel::MatvecQ4_0,
        Kernel::MatmulQ4_0,
        Kernel::MatvecQ5_0,
        Kernel::MatmulQ5_0,
        Kernel::MatvecQ5_1,
        Kernel::MatmulQ5_1,
        Kernel::MatvecQ4K,
        Kernel::MatmulQ4K,
        Kernel::MatvecQ5K,
        Kernel::MatmulQ5K,
        Kernel::MatvecQ6K,
        Kernel::MatmulQ6K,
        Kernel::RmsNorm,
        Kernel::Rope,
        Kernel::Softmax,
        Kernel::Attention,
        Kernel::AttnSoftmax,
        Kernel::Silu,
        Kernel::Swiglu,
        Kernel::Embedding,
        Kernel::Argmax,
        Kernel::StreamRead,
        Kernel::HcMix,
        Kernel::MoeRoute,
        Kernel::V4Compress,
        Kernel::V4IndexScore,
        Kernel::V4IndexTopk,
        Kernel::V4Attend,
    ];

    /// The WGSL file name under `kernels/wgsl/`.
    pub fn file(self) -> &'static str {
        match self {
            Kernel::MatvecPlain | Kernel::MatmulPlain => "matmul_plain.wgsl",
            Kernel::MatvecFp8Block | Kernel::MatmulFp8Block => "matmul_fp8_block.wgsl",
            Kernel::MatvecMxfp4 | Kernel::MatmulMxfp4 => "matmul_mxfp4.wgsl",
            Kernel::MatvecAffine8 | Kernel::MatmulAffine8 => "matmul_affine8.wgsl",
            Kernel::MatvecQ8_0 | Kernel::MatmulQ8_0 => "matmul_q8_0.wgsl",
            Kernel::MatvecQ4_1 | Kernel::MatmulQ4_1 => "matmul_q4_1.wgsl",
            Kernel::MatvecQ4_0 | Kernel::MatmulQ4_0 => "matmul_q4_0.wgsl",
            Kernel::MatvecQ5_0 | Kernel::MatmulQ5_0 => "matmul_q5_0.wgsl",
            Kernel::MatvecQ5_1 | Kernel::MatmulQ5_1 => "matmul_q5_1.wgsl",
            Kernel::MatvecQ4K | Kernel::MatmulQ4K => "matmul_q4_k.wgsl",
            Kernel::MatvecQ5K | Kernel::MatmulQ5K => "matmul_q5_k.wgsl",
            Kernel::MatvecQ6K | Kernel::MatmulQ6K => "matmul_q6_k.wgsl",
            Kernel::RmsNorm => "rmsnorm.wgsl",
            Kernel::Rope => "rope.wgsl",
            Kernel::Softmax => "softmax.wgsl",
            Kernel::Attention => "attention.wgsl",
            Kernel::AttnSoftmax => "attention_decode.wgsl",
            Kernel::Silu | Kernel::Swiglu => "activation.wgsl",
            Kernel::Embedding => "embedding.wgsl",
            Kernel::Argmax => "argmax.wgsl",
            Kernel::StreamRead => "stream_read.wgsl",
            Kernel::HcMix => "hc_mix.wgsl",
            Kernel::MoeRoute => "moe_route.wgsl",
            Kernel::V4Compress => "v4_compress.wgsl",
            Kernel::V4IndexScore => "v4_index_score.wgsl",
            Kernel::V4IndexTopk => "v4_index_topk.wgsl",
            Kernel::V4Attend => "v4_attend.wgsl",
        }
    }

    pub fn source(self) -> &'static str {
        match self {
            Kernel::MatvecPlain | Kernel::MatmulPlain => MATMUL_PLAIN,
            Kernel::MatvecFp8Block | Kernel::MatmulFp8Block => MATMUL_FP8_BLOCK,
            Kernel::MatvecMxfp4 | Kernel::MatmulMxfp4 => MATMUL_MXFP4,
            Kernel::MatvecAffine8 | Kernel::MatmulAffine8 => MATMUL_AFFINE8,
            Kernel::MatvecQ8_0 | Kernel::MatmulQ8_0 => MATMUL_Q8_0,
            Kernel::MatvecQ4_1 | Kernel::MatmulQ4_1 => MATMUL_Q4_1,
            Kernel::MatvecQ4_0 | Kernel::MatmulQ4_0 => MATMUL_Q4_0,
            Kernel::MatvecQ5_0 | Kernel::MatmulQ5_0 => MATMUL_Q5_0,
            Kernel::MatvecQ5_1 | Kernel::MatmulQ5_1 => MATMUL_Q5_1,
            Kernel::MatvecQ4K | Kernel::MatmulQ4K => MATMUL_Q4_K,
            Kernel::MatvecQ5K | Kernel::MatmulQ5K => MATMUL_Q5_K,
            Kernel::MatvecQ6K | Kernel::MatmulQ6K => MATMUL_Q6_K,
            Kernel::RmsNorm => RMSNORM,
            Kernel::Rope => ROPE,
            Kernel::Softmax => SOFTMAX,
            Kernel::Attention => ATTENTION,
            Kernel::AttnSoftmax => ATTENTION_DECODE,
            Kernel::Silu | Kernel::Swiglu => ACTIVATION,
            Kernel::Embedding => EMBEDDING,
            Kernel::Argmax => ARGMAX,
            Kernel::StreamRead => STREAM_READ,
            Kernel::HcMix => HC_MIX,
            Kernel::MoeRoute => MOE_ROUTE,
            Kernel::V4Compress => V4_COMPRESS,
            Kernel::V4IndexScore => V4_INDEX_SCORE,
            Kernel::V4IndexTopk => V4_INDEX_TOPK,
            Kernel::V4Attend => V4_ATTEND,
        }
    }

    pub fn entry_point(self) -> &'static str {
        match self {
            Kernel::MatvecPlain
            | Kernel::MatvecFp8Block
            | Kernel::MatvecMxfp4
            | Kernel::MatvecAffine8
            | Kernel::MatvecQ8_0
            | Kernel::MatvecQ4_0
            | Kernel::MatvecQ5_0
            | Kernel::MatvecQ5_1
            | Kernel::MatvecQ4K
            | Kernel::MatvecQ5K
            | Kernel::MatvecQ4_1
            | Kernel::MatvecQ6K => "matvec",
            Kernel::MatmulPlain
            | Kernel::MatmulFp8Block
            | Kernel::MatmulMxfp4
            | Kernel::MatmulAffine8
            | Kernel::MatmulQ8_0
            | Kernel::MatmulQ4_0
            | Kernel::MatmulQ5_0
            | Kernel::MatmulQ5_1
            | Kernel::MatmulQ4K
            | Kernel::MatmulQ5K
            | Kernel::MatmulQ4_1
            | Kernel::MatmulQ6K => "matmul",
            Kernel::RmsNorm => "rmsnorm",
            Kernel::Rope => "rope",
            Kernel::Softmax => "softmax",
            Kernel::Attention => "attention",
            Kernel::AttnSoftmax => "attn_softmax",
            Kernel::Silu => "silu",
            Kernel::Swiglu => "swiglu",
            Kernel::Embedding => "embedding",
            Kernel::Argmax => "argmax",
            Kernel::StreamRead => "stream_read",
            Kernel::HcMix => "hc_mix",
            Kernel::MoeRoute => "moe_route",
            Kernel::V4Compress => "v4_compress",
            Kernel::V4IndexScore => "v4_index_score",
            Kernel::V4IndexTopk => "v4_index_topk",
            Kernel::V4Attend => "v4_attend",
        }
    }

    /// Whether this is a dequantize-and-multiply kernel (x, y, weights…).
    pub fn is_matmul(self) -> bool {
        self.file().starts_with("matmul_")
    }

    /// Elements per chunk of the accumulation order (docs/kernels.md): 8 for the block formats,
    /// one for the element-wise ones (plain, fp8, affine).
    pub fn chunk_elements(self) -> usize {
        match self {
            Kernel::MatvecPlain
            | Kernel::MatmulPlain
            | Kernel::MatvecFp8Block
            | Kernel::MatmulFp8Block
            | Kernel::MatvecAffine8
            | Kernel::MatmulAffine8 => 1,
            _ => 8,
        }
    }

    /// A matmul module's format prefix (with the chunk interface, where it has one) and the
    /// shared common part, without the body; `None` for other kernels.
    pub fn matmul_parts(self) -> Option<(&'static str, &'static str)> {
        let head = self.source().strip_suffix(MATMUL_BODY)?;
        let prefix = head.strip_suffix(MATMUL_COMMON)?;
        Some((prefix, MATMUL_COMMON))
    }

    /// A matmul kernel's module with the subgroup-reduction entry point (`matvec_sg`:
    /// `wgsl/matmul_subgroup.wgsl`; several tokens run the tiled module's `matmul_tiled_sg`)
    /// after its body: only for a device with `wgpu::Features::SUBGROUP` (naga 30 takes the subgroup built-ins with that feature and
    /// refuses the `enable subgroups;` directive); `None` for other kernels.
    pub fn subgroup_source(self) -> Option<String> {
        self.is_matmul()
            .then(|| format!("{}{MATMUL_SUBGROUP}", self.source()))
    }

    /// A matmul kernel's shared-memory tiled module (`matmul_tiled`, with `matmul_tiled_sg` when
    /// `subgroups`: only for a device with `wgpu::Features::SUBGROUP`): the family's source with
    /// `xv` reading the workgroup tile, then `wgsl/matmul_tiled.wgsl`; `None` for a kernel
    /// without the `matmul` entry point.
    pub fn tiled_source(self, subgroups: bool) -> Option<String> {
        let s = self.source();
        let ok = self.is_matmul() && self.entry_point() == "matmul";
        (ok && s.matches(X_STORAGE).count() == 1).then(|| {
            let sg = if subgroups { MATMUL_TILED_SG } else { "" };
            format!("{}{MATMUL_TILED}{sg}", s.replacen(X_STORAGE, XV_TILED, 1))
        })
    }

    /// The module with binding 1 as a uniform block ([`X_UNIFORM`]), for matmul kernels.
    pub fn uniform_x_source(self) -> Option<String> {
        let s = self.source();
        (self.is_matmul() && s.matches(X_STORAGE).count() == 1)
            .then(|| s.replacen(X_STORAGE, X_UNIFORM, 1))
    }

    /// A stable name for messages and pipeline labels.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::MatvecPlain => "matvec_plain",
            Kernel::MatmulPlain => "matmul_plain",
            Kernel::MatvecFp8Block => "matvec_fp8_block",
            Kernel::MatmulFp8Block => "matmul_fp8_block",
            Kernel::MatvecMxfp4 => "matvec_mxfp4",
            Kernel::MatmulMxfp4 => "matmul_mxfp4",
            Kernel::MatvecAffine8 => "matvec_affine8",
            Kernel::MatmulAffine8 => "matmul_affine8",
            Kernel::MatvecQ8_0 => "matvec_q8_0",
            Kernel::MatmulQ8_0 => "matmul_q8_0",
            Kernel::MatvecQ4_1 => "matvec_q4_1",
            Kernel::MatmulQ4_1 => "matmul_q4_1",
            Kernel::MatvecQ4_0 => "matvec_q4_0",
            Kernel::MatmulQ4_0 => "matmul_q4_0",
            Kernel::MatvecQ5_0 => "matvec_q5_0",
            Kernel::MatmulQ5_0 => "matmul_q5_0",
            Kernel::MatvecQ5_1 => "matvec_q5_1",
            Kernel::MatmulQ5_1 => "matmul_q5_1",
            Kernel::MatvecQ4K => "matvec_q4_k",
            Kernel::MatmulQ4K => "matmul_q4_k",
            Kernel::MatvecQ5K => "matvec_q5_k",
            Kernel::MatmulQ5K => "matmul_q5_k",
            Kernel::MatvecQ6K => "matvec_q6_k",
            Kernel::MatmulQ6K => "matmul_q6_k",
            Kernel::RmsNorm => "rmsnorm",
            Kernel::Rope => "rope",
            Kernel::Softmax => "softmax",
            Kernel::Attention => "attention",
            Kernel::AttnSoftmax => "attn_softmax",
            Kernel::Silu => "silu",
            Kernel::Swiglu => "swiglu",
            Kernel::Embedding => "embedding",
            Kernel::Argmax => "argmax",
            Kernel::StreamRead => "stream_read",
            Kernel::HcMix => "hc_mix",
            Kernel::MoeRoute => "moe_route",
            Kernel::V4Compress => "v4_compress",
            Kernel::V4IndexScore => "v4_index_score",
            Kernel::V4IndexTopk => "v4_index_topk",
            Kernel::V4Attend => "v4_attend",
        }
    }

    /// Storage bindings 1, 2, … in order. Matmul kernels: x, y, packed, [scales, [biases]].
    pub fn storage(self) -> &'static [Access] {
        match self {
            Kernel::MatvecPlain
            | Kernel::MatmulPlain
            | Kernel::MatvecQ8_0
            | Kernel::MatmulQ8_0
            | Kernel::MatvecQ4_1
            | Kernel::MatvecQ4_0
            | Kernel::MatmulQ4_0
            | Kernel::MatvecQ5_0
            | Kernel::MatmulQ5_0
            | Kernel::MatvecQ5_1
            | Kernel::MatmulQ5_1
            | Kernel::MatvecQ4K
            | Kernel::MatmulQ4K
            | Kernel::MatvecQ5K
            | Kernel::MatmulQ5K
            | Kernel::MatvecQ6K
            | Kernel::MatmulQ6K
            | Kernel::MatmulQ4_1 => &[Read, ReadWrite, Read],
            Kernel::MatvecFp8Block
            | Kernel::MatmulFp8Block
            | Kernel::MatvecMxfp4
            | Kernel::MatmulMxfp4 => &[Read, ReadWrite, Read, Read],
            Kernel::MatvecAffine8 | Kernel::MatmulAffine8 => &[Read, ReadWrite, Read, Read, Read],
            // x, w, y
            Kernel::RmsNorm => &[Read, Read, ReadWrite],
            // v (in place), table
            Kernel::Rope => &[ReadWrite, Read],
            Kernel::Softmax => &[ReadWrite],
            // q, k_cache, v_cache, out, scratch
            Kernel::Attention => &[Read, Read, Read, ReadWrite, ReadWrite],
            // scratch (scores in, e_s out), totals
            Kernel::AttnSoftmax => &[ReadWrite, ReadWrite],
            // a, b, y (silu does not read b but binds it so both share one layout)
            Kernel::Silu | Kernel::Swiglu => &[Read, Read, ReadWrite],
            // ids, table, out
            Kernel::Embedding => &[Read, Read, ReadWrite],
            // v, out
            Kernel::Argmax => &[Read, ReadWrite],
            // src, out
            Kernel::StreamRead => &[Read, ReadWrite],
            // streams (expanded in place), fn, base/scale/norm, mix (previous, new), x (out), ys, w
            Kernel::HcMix => &[ReadWrite, Read, Read, ReadWrite, ReadWrite, Read, Read],
            // logits, bias, table, token, ids (out), weights (out)
            Kernel::MoeRoute => &[Read, Read, Read, Read, ReadWrite, ReadWrite],
            // src (kv, gate), ape, norm, table, state, entries
            Kernel::V4Compress => &[Read, Read, Read, Read, ReadWrite, ReadWrite],
            // q, w, entries, table, scores (out)
            Kernel::V4IndexScore => &[Read, Read, Read, Read, ReadWrite],
            // scores, list (out)
            Kernel::V4IndexTopk => &[Read, ReadWrite],
            // q, kv, kv_norm, sinks, table, ring, entries, list, out
            Kernel::V4Attend => &[
                Read, Read, Read, Read, Read, ReadWrite, Read, Read, ReadWrite,
            ],
        }
    }
}
