//! [`V4Model`]: a DeepSeek V4 artifact opened through a [`WeightSource`], with the decode state,
//! run as prefill (any number of tokens) then decode steps (docs/runner-deepseek-v4.md).
//!
//! The block structure (transformers `DeepseekV4DecoderLayer` / `DeepseekV4Model`): the embedding
//! is copied into `hc_mult` streams; each layer runs `attn_hc` mix → `attn_norm` → attention →
//! expand, then `ffn_hc` mix → `ffn_norm` → MoE → expand; the head collapses the streams
//! (`hc_head_*`), applies `norm` and `head`. The MTP block (`mtp.0.*`) is not run: transformers
//! does not instantiate it either, and it only drafts tokens for speculative decoding.

use std::path::Path;
use std::sync::Arc;

use crate::engine::Engine;

use super::attention::{self, AttnCache, AttnParams, PathStats, StepRope};
use super::chain::{Input, Link};
use super::compress::CompParams;
use super::config::{LayerKind, V4Config};
use super::error::V4Error;
use super::hc::{self, HcParams};
use super::linear::{load_tid2eid, load_vector, CpuLinears, Linears};
use super::moe::{self, MoeParams};
use super::ops::rmsnorm;
use super::residual::{BlockOut, Mixer, Residual};
use super::source::{ReleaseDir, WeightSource};

/// How the matrices are multiplied.
#[derive(Clone)]
pub enum Mode {
    /// The exact CPU reference (f32 storage, f64 sums); routed experts decoded on demand into a
    /// cache of `expert_cache` matrices.
    Reference { expert_cache: usize },
    /// wgpu kernels on `engine`'s device (the one the front-end opened: the backend opens
    /// none); `streamed`: routed experts are read tile by tile on demand into a device cache of
    /// at most `expert_cache_bytes` (least recently used out); otherwise every matrix is
    /// resident.
    Gpu {
        engine: Engine,
        streamed: bool,
        expert_cache_bytes: u64,
    },
}

pub(super) struct Layer {
    attn_norm: Vec<f32>,
    ffn_norm: Vec<f32>,
    hc_attn: HcParams,
    hc_ffn: HcParams,
    attn: AttnParams,
    moe: MoeParams,
}

impl Layer {
    pub(super) fn attn(&self) -> &AttnParams {
        &self.attn
    }
}

/// An opened V4 model with its decode state.
pub struct V4Model {
    pub config: V4Config,
    lin: Box<dyn Linears>,
    embed: Vec<f32>,
    pub(super) layers: Vec<Layer>,
    norm: Vec<f32>,
    hc_head: HcParams,
    pub(super) cache: Vec<AttnCache>,
    pub(super) pos: usize,
    /// Whether `cache` is the decode state (else the device attention holds a newer one), and
    /// whether the device attention's is (docs "Attention on the device").
    pub(super) host_state: bool,
    pub(super) device_state: bool,
    /// Whether one-token steps run the attention on the device (asked at the first such step),
    /// and whether they may ([`V4Model::set_device_attention`]).
    device_attn: Option<bool>,
    attention_wanted: bool,
    /// What the compressed / sparse paths did since the last [`V4Model::reset`].
    pub stats: PathStats,
}

fn hc_params(
    src: &dyn WeightSource,
    prefix: &str,
    rows: usize,
    cols: usize,
    scales: usize,
) -> Result<HcParams, V4Error> {
    Ok(HcParams {
        weight: load_vector(src, &format!("{prefix}_fn"), &[rows, cols])?,
        base: load_vector(src, &format!("{prefix}_base"), &[rows])?,
        scale: load_vector(src, &format!("{prefix}_scale"), &[scales])?,
    })
}

/// A compressor's rows per output channel: 2 for the overlapping ratio-4 windows, else 1.
fn coff(ratio: usize) -> usize {
    if ratio == 4 {
        2
    } else {
        1
    }
}

/// A compressor's small parameters (its `wkv` and `wgate` are declared with the layer's
/// other input projections: [`merged_projections`]).
fn comp_params(
    src: &dyn WeightSource,
    stem: String,
    ratio: usize,
    dim: usize,
) -> Result<CompParams, V4Error> {
    let coff = coff(ratio);
    Ok(CompParams {
        ape: load_vector(src, &format!("{stem}.ape"), &[ratio, coff * dim])?,
        norm: load_vector(src, &format!("{stem}.norm.weight"), &[dim])?,
        stem,
        ratio,
        coff,
        dim,
    })
}

/// A merged matrix's name and its parts: (stem, rows, K) each, in order.
pub type MergedParts = (String, Vec<(String, usize, usize)>);

/// Layer `i`'s products of its normalised input, then those of its normalised query LoRA, each
/// declared together ([`Linears::declare_merged`]: one matrix each on the GPU, docs
/// "Merged input projections"), in the order the attention asks for them.
pub fn merged_projections(c: &V4Config, i: usize) -> [MergedParts; 2] {
    let a = format!("layers.{i}.attn");
    let (d, h, hd) = (c.hidden, c.heads, c.head_dim);
    let kind = c.kinds.get(i).copied().unwrap_or(LayerKind::Sliding);
    let mut inputs = vec![
        (format!("{a}.wq_a"), c.q_lora, d),
        (format!("{a}.wkv"), hd, d),
    ];
    let mut lora = vec![(format!("{a}.wq_b"), h * hd, c.q_lora)];
    if kind != LayerKind::Sliding {
        for w in ["wkv", "wgate"] {
            inputs.push((format!("{a}.compressor.{w}"), coff(kind.ratio()) * hd, d));
        }
    }
    if kind == LayerKind::Csa {
        let ihd = c.index_head_dim;
        for w in ["wkv", "wgate"] {
            inputs.push((format!("{a}.indexer.compressor.{w}"), coff(4) * ihd, d));
        }
        inputs.push((format!("{a}.indexer.weights_proj"), c.index_heads, d));
        lora.push((format!("{a}.indexer.wq_b"), c.index_heads * ihd, c.q_lora));
    }
    [
        (format!("{a}.in_proj"), inputs),
        (format!("{a}.q_lora_proj"), lora),
    ]
}

fn layer(
    c: &V4Config,
    src: &dyn WeightSource,
    lin: &mut dyn Linears,
    i: usize,
) -> Result<Layer, V4Error> {
    let p = format!("layers.{i}");
    let kind = c.kinds.get(i).copied().unwrap_or(LayerKind::Sliding);
    let (d, h, hd) = (c.hidden, c.heads, c.head_dim);
    let mix = (2 + c.hc) * c.hc;
    let a = format!("{p}.attn");
    lin.declare_groups(&format!("{a}.wo_a"), c.o_groups)?;
    lin.declare(
        &format!("{a}.wo_a"),
        c.o_groups * c.o_lora,
        h * hd / c.o_groups,
        false,
    )?;
    lin.declare(&format!("{a}.wo_b"), d, c.o_groups * c.o_lora, false)?;
    let comp = match kind {
        LayerKind::Sliding => None,
        k => Some(comp_params(src, format!("{a}.compressor"), k.ratio(), hd)?),
    };
    let indexer = match kind {
        LayerKind::Csa => Some(comp_params(
            src,
            format!("{a}.indexer.compressor"),
            4,
            c.index_head_dim,
        )?),
        _ => None,
    };
    for (name, parts) in merged_projections(c, i) {
        lin.declare_merged(&name, &parts)?;
    }
    let f = format!("{p}.ffn");
    let hash = i < c.hash_layers;
    lin.declare_mlp(&format!("{f}.shared_experts"), c.swiglu_limit)?;
    for w in ["w1", "w3"] {
        lin.declare(&format!("{f}.shared_experts.{w}"), c.moe_inter, d, false)?;
    }
    lin.declare(&format!("{f}.shared_experts.w2"), d, c.moe_inter, false)?;
    lin.declare_experts(&f, c.experts)?;
    for e in 0..c.experts {
        lin.declare_mlp(&format!("{f}.experts.{e}"), c.swiglu_limit)?;
        for w in ["w1", "w3"] {
            lin.declare(&format!("{f}.experts.{e}.{w}"), c.moe_inter, d, true)?;
        }
        lin.declare(&format!("{f}.experts.{e}.w2"), d, c.moe_inter, true)?;
    }
    Ok(Layer {
        attn_norm: load_vector(src, &format!("{p}.attn_norm.weight"), &[d])?,
        ffn_norm: load_vector(src, &format!("{p}.ffn_norm.weight"), &[d])?,
        hc_attn: hc_params(src, &format!("{p}.hc_attn"), mix, c.hc * d, 3)?,
        hc_ffn: hc_params(src, &format!("{p}.hc_ffn"), mix, c.hc * d, 3)?,
        attn: AttnParams {
            kind,
            q_norm: load_vector(src, &format!("{a}.q_norm.weight"), &[c.q_lora])?,
            kv_norm: load_vector(src, &format!("{a}.kv_norm.weight"), &[hd])?,
            sinks: load_vector(src, &format!("{a}.attn_sink"), &[h])?,
            stem: a,
            comp,
            indexer,
        },
        moe: MoeParams {
            gate: load_vector(src, &format!("{f}.gate.weight"), &[c.experts, d])?,
            bias: if hash {
                None
            } else {
                Some(load_vector(src, &format!("{f}.gate.bias"), &[c.experts])?)
            },
            tid2eid: if hash {
                Some(load_tid2eid(
                    src,
                    &format!("{f}.gate.tid2eid"),
                    c.vocab,
                    c.top_k,
                    c.experts,
                )?)
            } else {
                None
            },
            stem: f,
        },
    })
}

impl V4Model {
    /// Opens a release directory (the one holding `config.json` and the unit directories).
    pub fn open_dir(dir: &Path, mode: Mode) -> Result<Self, V4Error> {
        Self::open(Arc::new(ReleaseDir::open(dir)?), mode)
    }

    /// Opens the model behind `src`, checking every tensor's presence, dtype and shape.
    pub fn open(src: Arc<dyn WeightSource>, mode: Mode) -> Result<Self, V4Error> {
        let config = V4Config::parse(&src.root_file("config.json")?, "config.json")?;
        let mut lin: Box<dyn Linears> = match mode {
            Mode::Reference { expert_cache } => {
                Box::new(CpuLinears::new(src.clone(), expert_cache))
            }
            Mode::Gpu {
                engine,
                streamed,
                expert_cache_bytes,
            } => Box::new(super::gpu::GpuLinears::new(
                engine,
                src.clone(),
                streamed,
                expert_cache_bytes,
            )),
        };
        let c = &config;
        let s = src.as_ref();
        let layers = (0..c.layers)
            .map(|i| layer(c, s, lin.as_mut(), i))
            .collect::<Result<Vec<_>, _>>()?;
        lin.declare("head", c.vocab, c.hidden, false)?;
        let model = Self {
            embed: load_vector(s, "embed.weight", &[c.vocab, c.hidden])?,
            norm: load_vector(s, "norm.weight", &[c.hidden])?,
            hc_head: hc_params(s, "hc_head", c.hc, c.hc * c.hidden, 1)?,
            cache: vec![AttnCache::default(); c.layers],
            layers,
            lin,
            pos: 0,
            host_state: true,
            device_state: false,
            device_attn: None,
            attention_wanted: true,
            stats: PathStats::default(),
            config,
        };
        Ok(model)
    }

    /// One-token steps with the mHC residual on the device (`true`) or on the host; returns
    /// whether the backend does as asked (the wgpu backend always does). The default is the
    /// device on a GPU mapping and the host on a CPU adapter, where the host's mixers are faster
    /// (docs/runner-deepseek-v4.md "Device-resident residual").
    pub fn set_device_residual(&mut self, on: bool) -> bool {
        self.lin.set_device_residual(on)
    }

    /// With the residual on the device, whether one-token steps run the attention there too
    /// (`true`, the default, where the backend can: docs/runner-deepseek-v4.md "Attention on
    /// the device") or on the host.
    pub fn set_device_attention(&mut self, on: bool) {
        if self.attention_wanted != on {
            self.attention_wanted = on;
            self.device_attn = None;
        }
    }

    /// Positions consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Tile reads issued by the weight source / backend so far.
    pub fn tile_reads(&self) -> u64 {
        self.lin.tile_reads()
    }

    /// Routed-expert matrices loaded on demand since open, and their bytes (streamed GPU mode).
    pub fn expert_loads(&self) -> (u64, u64) {
        self.lin.expert_loads()
    }

    /// The streamed-expert cache's counters (`None` unless routed experts are streamed).
    /// The device's counters so far (`None` on the CPU reference).
    pub fn gpu_stats(&self) -> Option<kernels::gpu::GpuStats> {
        self.lin.gpu_stats()
    }

    pub fn expert_cache(&self) -> Option<super::linear::ExpertCacheStats> {
        self.lin.expert_cache()
    }

    /// Forgets the decode state (the weights stay loaded).
    pub fn reset(&mut self) {
        self.cache = vec![AttnCache::default(); self.config.layers];
        self.pos = 0;
        self.stats = PathStats::default();
        self.host_state = true;
        self.device_state = false;
    }

    /// The decode state as host caches: `cache`, or the device attention's read back.
    pub(super) fn host_caches(&self) -> Result<std::borrow::Cow<'_, [AttnCache]>, V4Error> {
        if self.host_state {
            return Ok(std::borrow::Cow::Borrowed(&self.cache));
        }
        let c = &self.config;
        self.layers
            .iter()
            .enumerate()
            .map(|(li, l)| self.lin.pull_attn(c, li, &l.attn, self.pos))
            .collect::<Result<Vec<_>, _>>()
            .map(std::borrow::Cow::Owned)
    }

    /// Makes `cache` the decode state again after device steps.
    fn sync_host(&mut self) -> Result<(), V4Error> {
        if !self.host_state {
            self.cache = self.host_caches()?.into_owned();
            self.host_state = true;
        }
        Ok(())
    }

    /// Whether this step runs the attention on the device: asked of the backend once; then the
    /// host's state is pushed where the device's is not current.
    fn attention_on_device(&mut self) -> Result<bool, V4Error> {
        let c = &self.config;
        if self.device_attn.is_none() {
            let layers: Vec<&AttnParams> = self.layers.iter().map(|l| &l.attn).collect();
            let ready = self
                .lin
                .residual()
                .is_some_and(|r| r.attention_ready(c, &layers));
            self.device_attn = Some(ready && self.attention_wanted);
        }
        if self.device_attn != Some(true) {
            return Ok(false);
        }
        if !self.device_state {
            let r = res(self.lin.as_mut())?;
            for (li, l) in self.layers.iter().enumerate() {
                let cache = self
                    .cache
                    .get(li)
                    .ok_or_else(|| V4Error::Input("decode state lost a layer".into()))?;
                r.push_attn(c, li, &l.attn, cache, self.pos)?;
            }
            self.device_state = true;
        }
        Ok(true)
    }

    /// Feeds `ids` (a prefill chunk or one decode token) and returns the logits of the last one.
    /// On a backend with a device-resident residual (where the device kernels take the shape: 4
    /// streams of a multiple of 4) every token, of a prefill too, is a device step
    /// ([`V4Model::forward_device`]: one submit a token, nothing read until the last).
    pub fn forward(&mut self, ids: &[u32]) -> Result<Vec<f32>, V4Error> {
        if self.device_steps() {
            return self.forward_device(ids);
        }
        self.sync_host()?;
        self.device_state = false;
        let c = &self.config;
        let (d, hc, s) = (c.hidden, c.hc, ids.len());
        let last = s
            .checked_sub(1)
            .ok_or_else(|| V4Error::Input("no token ids to run".into()))?;
        let mut h = Vec::with_capacity(s * hc * d);
        for &id in ids {
            let row = self.embedding(id)?;
            for _ in 0..hc {
                h.extend_from_slice(row);
            }
        }
        let w = hc * d;
        for (li, l) in self.layers.iter().enumerate() {
            let mixes: Vec<_> = h
                .chunks_exact(w)
                .map(|st| hc::mix(&l.hc_attn, st, hc, c.sinkhorn_iters, c.hc_eps, c.eps))
                .collect();
            let x: Vec<f32> = mixes
                .iter()
                .flat_map(|m| rmsnorm(&m.collapsed, Some(&l.attn_norm), c.eps))
                .collect();
            let cache = self
                .cache
                .get_mut(li)
                .ok_or_else(|| V4Error::Input("decode state lost a layer".into()))?;
            let a = attention::forward(
                c,
                &l.attn,
                cache,
                self.lin.as_mut(),
                Input::Host(&x),
                self.pos,
                s,
                &mut self.stats,
            )?;
            h = h
                .chunks_exact(w)
                .zip(&mixes)
                .enumerate()
                .flat_map(|(t, (st, m))| hc::expand(m, &a[t * d..(t + 1) * d], st, hc))
                .collect();
            let mixes: Vec<_> = h
                .chunks_exact(w)
                .map(|st| hc::mix(&l.hc_ffn, st, hc, c.sinkhorn_iters, c.hc_eps, c.eps))
                .collect();
            let x: Vec<f32> = mixes
                .iter()
                .flat_map(|m| rmsnorm(&m.collapsed, Some(&l.ffn_norm), c.eps))
                .collect();
            let f = moe::forward(c, &l.moe, self.lin.as_mut(), &x, ids)?;
            h = h
                .chunks_exact(w)
                .zip(&mixes)
                .enumerate()
                .flat_map(|(t, (st, m))| hc::expand(m, &f[t * d..(t + 1) * d], st, hc))
                .collect();
        }
        self.pos += s;
        let streams = &h[last * w..(last + 1) * w];
        let x = hc::head(&self.hc_head, streams, hc, c.hc_eps, c.eps);
        let x = rmsnorm(&x, Some(&self.norm), c.eps);
        self.lin.linear_rows("head", 0..c.vocab, &x, 1)
    }

    /// Token `id`'s embedding row.
    fn embedding(&self, id: u32) -> Result<&[f32], V4Error> {
        let d = self.config.hidden;
        self.embed
            .get(id as usize * d..(id as usize + 1) * d)
            .ok_or_else(|| {
                V4Error::Input(format!(
                    "token id {id} is outside the vocabulary ({})",
                    self.config.vocab
                ))
            })
    }

    /// Whether tokens run as device steps: a backend with a device-resident residual and a
    /// model of the device kernels' shape (4 streams of a multiple of 4).
    fn device_steps(&mut self) -> bool {
        let shaped = self.config.hc == kernels::reference::MAX_HC && self.config.hidden % 4 == 0;
        shaped && self.lin.residual().is_some()
    }

    /// `ids` as device steps (docs/runner-deepseek-v4.md "Device-resident residual"), the
    /// logits of the last: every token's residual, attention, MoE and mixers are recorded on
    /// the device; a prefill's tokens before the last are each submitted with nothing read.
    fn forward_device(&mut self, ids: &[u32]) -> Result<Vec<f32>, V4Error> {
        self.steps_to_head(ids)?;
        let c = &self.config;
        let head = [Link::new("head".into(), c.vocab, Input::Block, 1)];
        self.lin
            .linear_chain(&head)?
            .pop()
            .ok_or_else(|| V4Error::Input("head: the chain returned no output".into()))
    }

    /// Feeds `ids` and returns the argmax of the last one's logits (the first maximum; NaN
    /// never wins). A one-token step with the residual on the device picks it there
    /// (`argmax.wgsl` over the head's output) where `head` has a one-token product on the
    /// device: the step's one read is the 4-byte id.
    pub fn forward_argmax(&mut self, ids: &[u32]) -> Result<u32, V4Error> {
        if self.device_steps() {
            let on_device = self.lin.residual().is_some_and(|r| r.argmax_ready("head"));
            if on_device {
                self.steps_to_head(ids)?;
                let c = &self.config;
                let head = [Link::new("head".into(), c.vocab, Input::Block, 1).internal()];
                self.lin.linear_chain(&head)?;
                return res(self.lin.as_mut())?.argmax_of("head", c.vocab);
            }
        }
        Ok(argmax(&self.forward(ids)?))
    }

    /// `ids` as device steps up to the last one's head collapse; the steps before the last are
    /// submitted, nothing read (a prefill is one submit a token).
    fn steps_to_head(&mut self, ids: &[u32]) -> Result<(), V4Error> {
        let (last, head) = ids
            .split_last()
            .ok_or_else(|| V4Error::Input("no token ids to run".into()))?;
        for &id in head {
            self.step_to_head(id)?;
            res(self.lin.as_mut())?.submit();
        }
        self.step_to_head(*last)
    }

    /// One token with the residual on the device up to the head's collapse (its block input).
    fn step_to_head(&mut self, id: u32) -> Result<(), V4Error> {
        let (d, hc) = (self.config.hidden, self.config.hc);
        res(self.lin.as_mut())?.embed(&self.embed, d, id, hc)?;
        let on_device = self.attention_on_device()?;
        if !on_device {
            self.sync_host()?;
            self.device_state = false;
        }
        let c = &self.config;
        let read = self.lin.expert_cache().is_some();
        let lin = self.lin.as_mut();
        let rope = StepRope::new(c, self.pos);
        if on_device {
            res(lin)?.step_rope(c, &rope)?;
        }
        for (li, l) in self.layers.iter().enumerate() {
            let key = format!("layers.{li}.hc_attn");
            let after = (li > 0).then_some(BlockOut::Moe);
            res(lin)?.mix(&mixer(c, &key, &l.hc_attn, &l.attn_norm, false), after)?;
            if on_device {
                attention::forward_device(c, &l.attn, lin, li, self.pos, &rope, &mut self.stats)?;
            } else {
                let cache = self
                    .cache
                    .get_mut(li)
                    .ok_or_else(|| V4Error::Input("decode state lost a layer".into()))?;
                attention::forward(
                    c,
                    &l.attn,
                    cache,
                    lin,
                    Input::Block,
                    self.pos,
                    1,
                    &mut self.stats,
                )?;
            }
            let wo_b = format!("{}.wo_b", l.attn.stem);
            let key = format!("layers.{li}.hc_ffn");
            let after = Some(BlockOut::Product(&wo_b));
            res(lin)?.mix(&mixer(c, &key, &l.hc_ffn, &l.ffn_norm, false), after)?;
            moe::forward_device(c, &l.moe, lin, id, read)?;
        }
        self.pos += 1;
        if on_device {
            self.host_state = false;
        }
        let head = mixer(c, "hc_head", &self.hc_head, &self.norm, true);
        let after = (!self.layers.is_empty()).then_some(BlockOut::Moe);
        res(lin)?.mix(&head, after)
    }

    /// Teacher-forced logits: row 0 after prefilling `prompt`, then one row after each token of
    /// `forced` fed as a decode step (from a fresh state).
    pub fn teacher_forced(
        &mut self,
        prompt: &[u32],
        forced: &[u32],
    ) -> Result<Vec<Vec<f32>>, V4Error> {
        self.reset();
        let mut rows = vec![self.forward(prompt)?];
        for &t in forced {
            rows.push(self.forward(&[t])?);
        }
        Ok(rows)
    }

    /// Greedy: row 0 after prefilling `ids`, then `steps` decode steps each feeding the previous
    /// row's argmax (from a fresh state).
    pub fn logits_for(&mut self, ids: &[u32], steps: usize) -> Result<Vec<Vec<f32>>, V4Error> {
        self.reset();
        let mut rows = vec![self.forward(ids)?];
        for _ in 0..steps {
            let next = rows.last().map_or(0, |r| argmax(r));
            rows.push(self.forward(&[next])?);
        }
        Ok(rows)
    }
}

/// The backend's device-resident residual.
fn res(lin: &mut dyn Linears) -> Result<&mut dyn Residual, V4Error> {
    lin.residual()
        .ok_or_else(|| V4Error::Input("the backend lost its device residual".into()))
}

/// Mixer `key` of the device-resident residual with the model's constants.
fn mixer<'a>(
    c: &V4Config,
    key: &'a str,
    params: &'a HcParams,
    norm: &'a [f32],
    head: bool,
) -> Mixer<'a> {
    Mixer {
        key,
        params,
        norm,
        head,
        iters: c.sinkhorn_iters,
        eps: c.hc_eps,
        norm_eps: c.eps,
    }
}

/// Index of the largest value (the first on ties; NaN never wins).
pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0usize;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] || v[best].is_nan() {
            best = i;
        }
    }
    best as u32
}
