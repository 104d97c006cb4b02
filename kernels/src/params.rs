//! Uniform parameter structs, one per kernel family, laid out exactly as the WGSL `struct Params`
//! of the matching file (all fields 4 bytes, sizes multiples of 16, asserted at compile time).

use bytemuck::{Pod, Zeroable};

/// `matmul_*.wgsl`: y[t · y_stride + y_offset + r] = Σ_k w(r, k) · x[t · k_len + k].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct MatmulParams {
    /// Rows in the bound weight buffers (a tile's rows or the whole matrix).
    pub rows: u32,
    /// Reduction length K.
    pub k: u32,
    /// Number of input vectors (1 for matvec).
    pub tokens: u32,
    /// Distance in elements between two tokens' outputs in `y` (the full matrix's rows).
    pub y_stride: u32,
    /// Row of `y` that the first bound row writes (the tile's first row).
    pub y_offset: u32,
    /// Scale group along K (fp8 block columns, affine group, 32 for mxfp4 / GGUF blocks).
    pub group: u32,
    /// Rows one scale covers (fp8 block rows; 1 otherwise).
    pub block_rows: u32,
    /// Plain weight dtype, or affine scale/bias dtype ([`crate::Dtype::code`]).
    pub dtype: u32,
    /// Workgroups along x ([`crate::grid_2d`]); row = x + y · groups_x.
    pub groups_x: u32,
    /// 1: add the product to `y` (a residual add fused into the epilogue: `y + Σ`, the same
    /// rounding as a separate add); 0: overwrite.
    pub accumulate: u32,
    /// Always 0. The unrolled matvec xors each partial sum's bits with it before adding it to the
    /// total: the compiler cannot see through that, so it cannot reassociate a partial's
    /// additions into the total's (which would change the bits; `crate::unrolled`).
    pub zero: u32,
    /// The token position of a one-token step (the RoPE table row of the fused Q/K/V kernel,
    /// `crate::unrolled::qkv_rope`), or the pick slot of an expert-indexed product (the entry of
    /// its picks binding naming the matrix, `crate::unrolled::source_by_index`); 0 otherwise.
    pub position: u32,
}

/// `rmsnorm.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
pub struct RmsNormParams {
    pub n: u32,
    pub tokens: u32,
    pub eps: f32,
    pub groups_x: u32,
}

/// The two RoPE pairings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RopeMode {
    /// Pairs (i, i + rot_dim/2): HF Llama `rotate_half`, GGUF `rope.type = neox` and Llama
    /// checkpoints after HF's q/k permutation.
    HalfSplit = 0,
    /// Pairs (2i, 2i + 1): GPT-J, and GGUF Llama files (llama.cpp's "normal" rope).
    Interleaved = 1,
}

/// `rope.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct RopeParams {
    pub tokens: u32,
    pub n_heads: u32,
    pub head_dim: u32,
    pub rot_dim: u32,
    /// [`RopeMode`] as u32.
    pub mode: u32,
    pub groups_x: u32,
    /// Table row of token 0 (a table of every position, indexed by position).
    pub table_row0: u32,
    /// Element of `v` where token 0's heads start (rotating in place inside a KV cache).
    pub v_offset: u32,
}

/// `softmax.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct SoftmaxParams {
    pub n: u32,
    pub rows: u32,
    pub groups_x: u32,
    pub _pad: u32,
}

/// `attention.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
pub struct AttentionParams {
    pub n_heads: u32,
    pub n_kv_heads: u32,
    pub head_dim: u32,
    pub tokens: u32,
    /// Position of the first new query; query t attends to positions 0 ..= pos0 + t.
    pub pos0: u32,
    /// Positions the KV cache holds (and the scratch row length).
    pub capacity: u32,
    /// Score scale, normally 1 / sqrt(head_dim).
    pub scale: f32,
    /// Always 0: the single-workgroup decode attention xors its tree's intermediates with it so
    /// the compiler keeps the tree's shape (`crate::attention::single`).
    pub _pad: u32,
}

/// `activation.wgsl` (SiLU and SwiGLU).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct ActivationParams {
    pub n: u32,
    pub groups_x: u32,
    /// SwiGLU's clamp as f32 bits (`gate ≤ limit`, `|up| ≤ limit`: DeepSeek V4's
    /// `swiglu_limit`); 0 = none, and then the kernel reads the inputs as they are.
    pub limit_bits: u32,
    pub _pad: u32,
}

impl ActivationParams {
    /// n elements in `groups_x` columns of workgroups, no clamp.
    pub fn new(n: u32, groups_x: u32) -> Self {
        Self {
            n,
            groups_x,
            limit_bits: 0,
            _pad: 0,
        }
    }

    /// The same with SwiGLU's clamp at `limit` (a positive limit; anything else means none).
    pub fn with_limit(self, limit: f32) -> Self {
        let limit_bits = if limit > 0.0 { limit.to_bits() } else { 0 };
        Self { limit_bits, ..self }
    }
}

/// `embedding.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct EmbeddingParams {
    pub dim: u32,
    pub tokens: u32,
    pub vocab: u32,
    /// [`crate::EmbeddingFormat::code`].
    pub dtype: u32,
    pub groups_x: u32,
    pub _pad: [u32; 3],
}

/// `argmax.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct ArgmaxParams {
    pub n: u32,
    pub rows: u32,
    pub groups_x: u32,
    pub _pad: u32,
}

/// `stream_read.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct StreamReadParams {
    /// u32 words in the source buffer (a multiple of 4).
    pub words: u32,
    pub invocations: u32,
    pub groups_x: u32,
    pub _pad: u32,
}

/// `hc_mix.wgsl`: the mHC step of one token — with `expand` 1 the expansion after a block, then
/// the mixer (`head` 0: pre, post and comb over (2 + hc)·hc rows) or the head's collapse (`head`
/// 1: pre over hc rows).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
pub struct HcMixParams {
    pub hc: u32,
    pub d: u32,
    /// Sinkhorn iterations (`hc_sinkhorn_iters`).
    pub iters: u32,
    pub head: u32,
    /// `hc_eps`.
    pub eps: f32,
    /// The RMSNorm epsilon (`rms_norm_eps`).
    pub norm_eps: f32,
    /// 1: expand the streams with the block output first.
    pub expand: u32,
    /// Weighted rows of the block output before its last, unweighted one (the MoE's picks; 0
    /// for a plain output).
    pub k: u32,
    /// Where in the mix binding the previous mixer's coefficients are, and where this one's go.
    pub prev: u32,
    pub cur: u32,
    pub _pad0: u32,
    pub _pad1: u32,
}

/// `moe_route.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
pub struct MoeRouteParams {
    pub experts: u32,
    pub top_k: u32,
    /// 1: the picks are row `token` of the `tid2eid` table (hash layers).
    pub hash: u32,
    /// Where the token id is in the token binding.
    pub token_at: u32,
    /// `routed_scaling_factor`.
    pub scale: f32,
    pub _pad0: u32,
    pub _pad1: u32,
    pub _pad2: u32,
}

/// `v4_compress.wgsl`: one token through one KV compressor (the header gives the layout).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
pub struct V4CompressParams {
    pub ratio: u32,
    /// 2: two series (ratio-4 compressors, the overlap), else 1.
    pub coff: u32,
    pub dim: u32,
    /// The token's buffer slot (positions so far mod ratio).
    pub slot: u32,
    /// 1: the slot closes a window, entry `entry` is written.
    pub emit: u32,
    pub entry: u32,
    /// Rotated trailing channel pairs, and the RoPE table row of the entry's position.
    pub pairs: u32,
    pub table_row: u32,
    /// Where the token's kv and gate rows are in the source binding.
    pub kv_at: u32,
    pub gate_at: u32,
    pub eps: f32,
    pub _pad0: u32,
}

/// `v4_index_score.wgsl` and `v4_index_topk.wgsl` (one parameter block for both).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
pub struct V4IndexParams {
    pub heads: u32,
    pub dim: u32,
    /// Causal entries scored.
    pub n: u32,
    pub pairs: u32,
    pub table_row: u32,
    /// Where the indexer query and its head weights are in their bindings.
    pub q_at: u32,
    pub w_at: u32,
    /// Entries kept (`index_topk`).
    pub k: u32,
    /// Workgroups along x of the score grid ([`crate::grid_2d`]).
    pub groups_x: u32,
    pub _pad0: u32,
    pub _pad1: u32,
    pub _pad2: u32,
}

/// `v4_attend.wgsl`: one query token's attention, a workgroup a head.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
pub struct V4AttendParams {
    pub heads: u32,
    pub dim: u32,
    /// Slots of the key ring (the sliding window).
    pub window: u32,
    pub pos: u32,
    /// The first window position the query sees.
    pub lo: u32,
    /// 0: the window only; 1: then the first `n` entries; 2: then the `n` listed entries.
    pub mode: u32,
    pub n: u32,
    pub pairs: u32,
    pub table_row: u32,
    pub q_at: u32,
    pub kv_at: u32,
    pub eps: f32,
    pub scale: f32,
    pub _pad0: u32,
    pub _pad1: u32,
    pub _pad2: u32,
}

const _: () = assert!(size_of::<MatmulParams>() == 48);
const _: () = assert!(size_of::<StreamReadParams>() == 16);
const _: () = assert!(size_of::<RmsNormParams>() == 16);
const _: () = assert!(size_of::<RopeParams>() == 32);
const _: () = assert!(size_of::<SoftmaxParams>() == 16);
const _: () = assert!(size_of::<AttentionParams>() == 32);
const _: () = assert!(size_of::<ActivationParams>() == 16);
const _: () = assert!(size_of::<EmbeddingParams>() == 32);
const _: () = assert!(size_of::<ArgmaxParams>() == 16);
const _: () = assert!(size_of::<HcMixParams>() == 48);
const _: () = assert!(size_of::<MoeRouteParams>() == 32);
const _: () = assert!(size_of::<V4CompressParams>() == 48);
const _: () = assert!(size_of::<V4IndexParams>() == 48);
const _: () = assert!(size_of::<V4AttendParams>() == 64);
