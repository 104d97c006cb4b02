//! The mHC residual of a one-token step kept on the device (docs/runner-deepseek-v4.md
//! "Device-resident residual"): a backend that offers [`Residual`] holds the token's `hc`
//! streams, the last mixer's coefficients and the block input it made, so that between the
//! attention's host part and the router nothing but the router's input comes back. The host
//! forward (`model.rs`, `hc.rs`) stays the reference; the device forms are `hc_mix.wgsl`,
//! `hc_expand.wgsl` and `moe_combine.wgsl` (f32, checked against it in `hc.rs`' tests).

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

/// The device-resident residual of one-token steps. Calls are recorded in order; only
/// [`Residual::read_block`] and a chain that reads an output make the device run them.
pub trait Residual {
    /// Sets the `hc` streams to one token's `hc · d` values (the embedding, `hc` times).
    fn streams_in(&mut self, h: &[f32], hc: usize) -> Result<(), V4Error>;
    /// With `after`, first the expansion after the block that output it
    /// (`streams[k] = post[k] · out + Σ_j comb[j][k] · streams[j]`, the last mixer's
    /// coefficients); then mixer `m` over the streams: its coefficients and the normalised block
    /// input that [`super::chain::Input::Block`] reads. One dispatch (`hc_mix.wgsl`).
    fn mix(&mut self, m: &Mixer<'_>, after: Option<BlockOut<'_>>) -> Result<(), V4Error>;
    /// The block input on the host (the router reads it).
    fn read_block(&mut self) -> Result<Vec<f32>, V4Error>;
    /// The MoE's outputs and weights (the picks in the host's order) for [`BlockOut::Moe`]:
    /// copied (or written) into one buffer, no dispatch.
    fn stage_moe(&mut self, routed: Experts<'_>, weights: &[f32]) -> Result<(), V4Error>;
}
