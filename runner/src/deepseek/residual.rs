//! The mHC residual of a one-token step kept on the device (docs/runner-deepseek-v4.md
//! "Device-resident residual", "Experts by index"): a backend that offers [`Residual`] holds the
//! token's `hc` streams, the last mixer's coefficients and the block input it made, and routes
//! and runs the MoE there, so that a layer reads back only what the host attention needs. The
//! host forward (`model.rs`, `hc.rs`, `moe.rs`) stays the reference; the device forms are
//! `hc_mix.wgsl` and `moe_route.wgsl` (f32, their references checked against it in `hc.rs`' and
//! `moe.rs`' tests).

use super::attention::{AttnCache, AttnParams, StepRope};
use super::config::V4Config;
use super::error::V4Error;
use super::hc::HcParams;

/// One mixer: the attention's or the MLP's of a layer (`head` false), or the head's collapse
/// (`head` true). `key` names it (its parameters are uploaded at its first use).
pub struct Mixer<'a> {
    pub key: &'a str,
    pub params: &'a HcParams,
    /// The norm applied to the collapsed streams (the block's input norm, or the final norm).
    pub norm: &'a [f32],
    pub head: bool,
    pub iters: usize,
    pub eps: f64,
    pub norm_eps: f64,
}

/// Where a block's output is for the expansion that follows it.
pub enum BlockOut<'a> {
    /// The output of this matrix's last one-token product, where the backend keeps it (`wo_b`).
    Product(&'a str),
    /// The MoE's picks and shared expert as the last [`Residual::stage_moe`] left them, summed
    /// with their weights.
    Moe,
}

/// The routed experts' outputs for [`Residual::stage_moe`].
pub enum Experts<'a> {
    /// Each pick's down projection (`{expert}.w2`) as its last one-token product left it, then
    /// the shared expert's.
    Products {
        picks: &'a [String],
        shared: &'a str,
    },
    /// The same outputs read back to the host (k + 1 rows, the shared one last).
    Host(&'a [Vec<f32>]),
}

/// One MoE's router for [`Residual::route`] (`moe.rs` `route` is its host form).
pub struct Router<'a> {
    /// `layers.L.ffn`: names the MoE (its ops are made at its first route).
    pub ffn: &'a str,
    /// `gate.weight` `[experts, hidden]`.
    pub gate: &'a [f32],
    /// `gate.bias` (learned layers) or the `tid2eid` table `[vocab, top_k]` (hash layers).
    pub bias: Option<&'a [f32]>,
    pub table: Option<&'a [u32]>,
    /// The step's token id (a hash layer's row of the table).
    pub token: u32,
    pub experts: usize,
    pub top_k: usize,
    /// `routed_scaling_factor`.
    pub scale: f64,
}

/// The device-resident residual of one-token steps. Calls are recorded in order; only
/// [`Residual::read_block`] and a chain that reads an output make the device run them.
pub trait Residual {
    /// Sets the `hc` streams to token `id`'s row of `table` (the embedding, `vocab × d`),
    /// `hc` times: copies from the table kept on the device (uploaded at the first step),
    /// nothing uploaded a step.
    fn embed(&mut self, table: &[f32], d: usize, id: u32, hc: usize) -> Result<(), V4Error>;
    /// Submits what is recorded without reading anything (between a prefill's tokens).
    fn submit(&mut self);
    /// With `after`, first the expansion after the block that output it
    /// (`streams[k] = post[k] · out + Σ_j comb[j][k] · streams[j]`, the last mixer's
    /// coefficients); then mixer `m` over the streams: its coefficients and the normalised block
    /// input that [`super::chain::Input::Block`] reads. One dispatch (`hc_mix.wgsl`).
    fn mix(&mut self, m: &Mixer<'_>, after: Option<BlockOut<'_>>) -> Result<(), V4Error>;
    /// The block input on the host (the router reads it).
    fn read_block(&mut self) -> Result<Vec<f32>, V4Error>;
    /// The MoE's outputs and weights (the picks in the host's order) for [`BlockOut::Moe`]:
    /// copied (or written) into one buffer, no dispatch. `weights` `None`: the last
    /// [`Residual::route`] wrote them.
    fn stage_moe(&mut self, routed: Experts<'_>, weights: Option<&[f32]>) -> Result<(), V4Error>;
    /// Routes the block input on the device: the gate product and `moe_route.wgsl`, which
    /// writes the picks (sorted by expert id) and their weights where [`BlockOut::Moe`] reads
    /// them. `false` (nothing recorded) where this backend cannot; the host routes then.
    fn route(&mut self, r: &Router<'_>) -> Result<bool, V4Error>;
    /// The picks of the last [`Residual::route`] (`k` expert ids), read back.
    fn read_picks(&mut self, k: usize) -> Result<Vec<u32>, V4Error>;
    /// After a [`Residual::route`] of MoE `ffn`: its picked experts multiplied by index on the
    /// device and their outputs staged, with the shared expert's (`shared`: its down product's
    /// stem, recorded before), for [`BlockOut::Moe`]. `false` (nothing recorded) where the
    /// experts are not kept so.
    fn experts_by_index(&mut self, ffn: &str, shared: &str) -> Result<bool, V4Error>;
    /// Whether the attention of `layers` (in order, the model's) can run on the device in a
    /// one-token step ([`Residual::attend`]); asked once, before the first such step.
    fn attention_ready(&mut self, _c: &V4Config, _layers: &[&AttnParams]) -> bool {
        false
    }
    /// The step's RoPE rows ([`StepRope`]), for every [`Residual::attend`] of the step.
    fn step_rope(&mut self, _c: &V4Config, _rope: &StepRope) -> Result<(), V4Error> {
        Err(V4Error::Input(
            "this backend has no device attention".into(),
        ))
    }
    /// Layer `layer`'s attention of the token at `pos` on the device, after its input chain
    /// (recorded, nothing read): the compressors' step, the indexer's choice (CSA), and each
    /// head's attention over the layer's key ring and compressed entries, written where
    /// [`super::chain::Input::Heads`] reads them; the layer's decode state stays on the device.
    fn attend(
        &mut self,
        _c: &V4Config,
        _layer: usize,
        _p: &AttnParams,
        _pos: usize,
        _rope: &StepRope,
    ) -> Result<(), V4Error> {
        Err(V4Error::Input(
            "this backend has no device attention".into(),
        ))
    }
    /// The last [`Residual::attend`]'s heads, read back.
    fn read_heads(&mut self) -> Result<Vec<f32>, V4Error> {
        Err(V4Error::Input(
            "this backend has no device attention".into(),
        ))
    }
    /// Puts layer `layer`'s decode state after `positions` tokens (the host's) on the device.
    fn push_attn(
        &mut self,
        _c: &V4Config,
        _layer: usize,
        _p: &AttnParams,
        _cache: &AttnCache,
        _positions: usize,
    ) -> Result<(), V4Error> {
        Err(V4Error::Input(
            "this backend has no device attention".into(),
        ))
    }
    /// Whether [`Residual::argmax_of`] can pick over `stem`'s one-token product here.
    fn argmax_ready(&mut self, _stem: &str) -> bool {
        false
    }
    /// The argmax of `stem`'s last one-token product (`n` outputs, recorded and not read),
    /// picked on the device and read back alone (4 bytes).
    fn argmax_of(&mut self, stem: &str, _n: usize) -> Result<u32, V4Error> {
        Err(V4Error::Input(format!(
            "{stem}: this backend picks no argmax on the device"
        )))
    }
}
