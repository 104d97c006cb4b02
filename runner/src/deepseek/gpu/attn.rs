//! A one-token step's attention on the device (docs/runner-deepseek-v4.md "Attention on the
//! device"): each layer's decode state — the key ring of its sliding window, its compressor's
//! (and a CSA layer's indexer's) buffered rows, overlap and entries — lives in device buffers
//! made at the layer's first step (or when the host's state is pushed), and each step records
//! `v4_compress` for the compressors, `v4_index_score` + `v4_index_topk` for the indexer and
//! `v4_attend` into the open encoder, reading the input chain's outputs where its prepared
//! products left them. The per-step parameters go through the staging belt; the bind groups are
//! made once (again only when an entries buffer grows, by doubling). The host reads the state
//! back only when it needs it ([`GpuLinears::pull_state`]: a prefill or a saved state after
//! device steps).

use std::collections::HashMap;

use kernels::gpu::Gpu;
use kernels::reference::{CompressShape, MAX_ATTN_DIM, MAX_ATTN_KEYS, MAX_INDEX_HEADS};

use super::super::attention::{AttnParams, StepRope};
use super::super::compress::CompParams;
use super::super::config::{LayerKind, V4Config};
use super::super::error::V4Error;
use super::super::linear::{tensor_err, Product};
use super::GpuLinears;

/// Entries a compressor's buffer holds at first (doubled as needed).
const FIRST_ENTRIES: usize = 64;

/// Where a product's rows are: the matrix whose prepared product writes them (its output
/// buffer is made when that product is first bound) and their first element there.
type At = (String, u32);

/// One compressor's device state and what its step binds.
struct CompDev {
    sh: CompressShape,
    state: wgpu::Buffer,
    entries: wgpu::Buffer,
    cap: usize,
    ape: wgpu::Buffer,
    norm: wgpu::Buffer,
    params: wgpu::Buffer,
    /// The product writing its kv and gate rows (one output), and where each starts.
    src: String,
    kv_at: u32,
    gate_at: u32,
}

/// One layer's device attention.
struct LayerAttn {
    ring: wgpu::Buffer,
    kv_norm: wgpu::Buffer,
    sinks: wgpu::Buffer,
    comp: Option<CompDev>,
    idx: Option<CompDev>,
    /// The indexer's scores (as many as its entries buffer holds) and choice.
    scores: Option<wgpu::Buffer>,
    list: wgpu::Buffer,
    q: At,
    kv: At,
    iq: Option<At>,
    w: Option<At>,
    index_params: wgpu::Buffer,
    attend_params: wgpu::Buffer,
    groups: Option<Groups>,
}

/// A layer's bind groups: compressor, indexer compressor, scores, choice, attention.
struct Groups {
    comp: Option<wgpu::BindGroup>,
    idx: Option<wgpu::BindGroup>,
    score: Option<wgpu::BindGroup>,
    topk: Option<wgpu::BindGroup>,
    attend: wgpu::BindGroup,
}

/// The device attention of every layer, and what the layers share.
pub(super) struct DeviceAttn {
    layers: HashMap<usize, LayerAttn>,
    table: wgpu::Buffer,
    /// The last layer's heads ([heads · head_dim]).
    pub out: wgpu::Buffer,
    out_len: usize,
    dummy: wgpu::Buffer,
}

fn compress_shape(p: &CompParams) -> CompressShape {
    CompressShape {
        ratio: p.ratio,
        coff: p.coff,
        dim: p.dim,
    }
}

/// Whether layer `p` of `c` is within what the kernels take.
fn fits(c: &V4Config, p: &AttnParams) -> bool {
    let keys = c.window
        + match p.kind {
            LayerKind::Sliding => 0,
            LayerKind::Csa => c.index_topk,
            // HCA attends to every entry: bounded by the kernel's keys a query
            LayerKind::Hca => 0,
        };
    let dims_fit = [c.head_dim, c.index_head_dim]
        .iter()
        .all(|&d| d <= MAX_ATTN_DIM && d % 2 == 0 && d >= 2 * c.main_inv_freq.len());
    dims_fit
        && keys <= MAX_ATTN_KEYS
        && c.index_heads <= MAX_INDEX_HEADS
        && c.window > 0
        && c.main_inv_freq.len() == c.compress_inv_freq.len()
        && p.sinks.len() == c.heads
        && p.kv_norm.len() == c.head_dim
        && [&p.comp, &p.indexer]
            .into_iter()
            .flatten()
            .all(|cp| cp.dim <= MAX_ATTN_DIM && (1..=2).contains(&cp.coff) && cp.ratio > 0)
}

impl GpuLinears {
    /// The matrix whose prepared one-token product (made here if need be) computes `stem`'s
    /// `rows` rows, and where they start in its output; `None` where there is no such product.
    fn location(&mut self, stem: &str, rows: usize) -> Option<(String, usize)> {
        let p = self.sliced(&Product {
            stem: stem.to_owned(),
            rows: 0..rows,
            x: &[],
            tokens: 1,
        });
        self.ensure_prepared(&p.stem)
            .then_some((p.stem, p.rows.start))
    }

    /// [`GpuLinears::location`] as an error where there is none.
    fn located(&mut self, stem: &str, rows: usize) -> Result<At, V4Error> {
        let (whole, start) = self
            .location(stem, rows)
            .ok_or_else(|| tensor_err(stem, "has no one-token product on the device".into()))?;
        let at =
            u32::try_from(start).map_err(|_| tensor_err(stem, "its rows start past u32".into()))?;
        Ok((whole, at))
    }

    /// Whether every layer's attention can run on the device: shapes the kernels take, a
    /// one-token product for each input, and each compressor's kv and gate rows in one output.
    pub(super) fn attention_fits(&mut self, c: &V4Config, layers: &[&AttnParams]) -> bool {
        if self.residual.is_none() {
            return false;
        }
        for p in layers {
            if !fits(c, p) {
                return false;
            }
            for cp in [&p.comp, &p.indexer].into_iter().flatten() {
                let w = cp.coff * cp.dim;
                let kv = self.location(&format!("{}.wkv", cp.stem), w);
                let gate = self.location(&format!("{}.wgate", cp.stem), w);
                match (kv, gate) {
                    (Some((a, _)), Some((b, _))) if a == b => {}
                    _ => return false,
                }
            }
            let s = &p.stem;
            let mut stems = vec![
                (format!("{s}.wq_b"), c.heads * c.head_dim),
                (format!("{s}.wkv"), c.head_dim),
            ];
            if p.indexer.is_some() {
                stems.push((
                    format!("{s}.indexer.wq_b"),
                    c.index_heads * c.index_head_dim,
                ));
                stems.push((format!("{s}.indexer.weights_proj"), c.index_heads));
            }
            if stems.iter().any(|(st, n)| self.location(st, *n).is_none()) {
                return false;
            }
        }
        true
    }

    /// The device attention's shared buffers, made at the first use.
    fn ensure_attn(&mut self, c: &V4Config) -> Result<(), V4Error> {
        if self.attn.is_none() {
            let g = self.engine.gpu();
            let out_len = c.heads * c.head_dim;
            self.attn = Some(DeviceAttn {
                layers: HashMap::new(),
                table: g.zeros("v4 rope rows", 4096)?,
                out: g.zeros("v4 heads", (out_len * 4) as u64)?,
                out_len,
                dummy: g.zeros("v4 attention dummy", 16)?,
            });
        }
        Ok(())
    }

    /// Writes the step's RoPE rows.
    pub(super) fn write_rope(&mut self, c: &V4Config, rope: &StepRope) -> Result<(), V4Error> {
        self.ensure_attn(c)?;
        let bytes = (rope.table.len() * 4) as u64;
        let mut enc = self.open_encoder();
        let g = self.engine.gpu();
        let a = self
            .attn
            .as_mut()
            .ok_or_else(|| V4Error::Input("the device attention was lost".into()))?;
        if a.table.size() < bytes {
            a.table = g.zeros("v4 rope rows", bytes.next_power_of_two())?;
            for l in a.layers.values_mut() {
                l.groups = None;
            }
        }
        let belt = self.buffers.belt(g);
        g.write_in(
            belt,
            &mut enc,
            &a.table,
            0,
            bytemuck::cast_slice(&rope.table),
        );
        self.open = Some(enc);
        Ok(())
    }

    /// Makes layer `layer`'s device state (empty) if it has none.
    fn layer_attn(&mut self, c: &V4Config, layer: usize, p: &AttnParams) -> Result<(), V4Error> {
        self.ensure_attn(c)?;
        let exists = self
            .attn
            .as_ref()
            .is_some_and(|a| a.layers.contains_key(&layer));
        if !exists {
            let made = self.make_layer(c, p)?;
            if let Some(a) = self.attn.as_mut() {
                a.layers.insert(layer, made);
            }
        }
        Ok(())
    }

    fn make_layer(&mut self, c: &V4Config, p: &AttnParams) -> Result<LayerAttn, V4Error> {
        let s = &p.stem;
        let q = self.located(&format!("{s}.wq_b"), c.heads * c.head_dim)?;
        let kv = self.located(&format!("{s}.wkv"), c.head_dim)?;
        let (iq, w) = match p.indexer {
            Some(_) => (
                Some(self.located(
                    &format!("{s}.indexer.wq_b"),
                    c.index_heads * c.index_head_dim,
                )?),
                Some(self.located(&format!("{s}.indexer.weights_proj"), c.index_heads)?),
            ),
            None => (None, None),
        };
        let comp = match &p.comp {
            Some(cp) => Some(self.make_comp(cp)?),
            None => None,
        };
        let idx = match &p.indexer {
            Some(cp) => Some(self.make_comp(cp)?),
            None => None,
        };
        let g = self.engine.gpu();
        let scores = match &idx {
            Some(d) => Some(g.zeros("v4 index scores", (d.cap * 4) as u64)?),
            None => None,
        };
        Ok(LayerAttn {
            ring: g.zeros("v4 key ring", (c.window * c.head_dim * 4) as u64)?,
            kv_norm: g.upload_f32("v4 kv_norm", &p.kv_norm)?,
            sinks: g.upload_f32("v4 sinks", &p.sinks)?,
            comp,
            idx,
            scores,
            list: g.zeros("v4 index list", (c.index_topk.max(4) * 4) as u64)?,
            q,
            kv,
            iq,
            w,
            index_params: g.uniform("v4 index params", &[0u8; 48]),
            attend_params: g.uniform("v4 attend params", &[0u8; 64]),
            groups: None,
        })
    }

    fn make_comp(&mut self, cp: &CompParams) -> Result<CompDev, V4Error> {
        let w = cp.coff * cp.dim;
        let (src, kv_at) = self.located(&format!("{}.wkv", cp.stem), w)?;
        let (gsrc, gate_at) = self.located(&format!("{}.wgate", cp.stem), w)?;
        if src != gsrc {
            return Err(tensor_err(
                &cp.stem,
                "its kv and gate rows are not in one product output".into(),
            ));
        }
        let sh = compress_shape(cp);
        let g = self.engine.gpu();
        Ok(CompDev {
            sh,
            state: g.zeros("v4 compressor state", (sh.state_len() * 4) as u64)?,
            entries: g.zeros("v4 entries", (FIRST_ENTRIES * cp.dim * 4) as u64)?,
            cap: FIRST_ENTRIES,
            ape: g.upload_f32("v4 ape", &cp.ape)?,
            norm: g.upload_f32("v4 compressor norm", &cp.norm)?,
            params: g.uniform("v4 compress params", &[0u8; 48]),
            src,
            kv_at,
            gate_at,
        })
    }
}

impl GpuLinears {
    /// The last attention's heads, read back (submitting what is recorded).
    pub(super) fn heads_back(&mut self) -> Result<Vec<f32>, V4Error> {
        let (out, n) = match &self.attn {
            Some(a) => (a.out.clone(), a.out_len),
            None => return Err(V4Error::Input("no attention ran on the device".into())),
        };
        let bytes = self.submit_and_read(&out, (n * 4) as u64)?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// The heads buffer and its length (`Input::Heads` in a chain).
    pub(super) fn heads(&self) -> Option<(&wgpu::Buffer, usize)> {
        self.attn.as_ref().map(|a| (&a.out, a.out_len))
    }
}

/// Grows `d`'s entries buffer to hold `n` (doubling; the old entries copied by `enc`);
/// `true` where it grew (the layer's bind groups are then stale).
fn grow(
    g: &Gpu,
    d: &mut CompDev,
    n: usize,
    enc: &mut wgpu::CommandEncoder,
) -> Result<bool, V4Error> {
    if n <= d.cap {
        return Ok(false);
    }
    let cap = n.next_power_of_two().max(2 * d.cap);
    let entries = g.zeros("v4 entries", (cap * d.sh.dim * 4) as u64)?;
    enc.copy_buffer_to_buffer(&d.entries, 0, &entries, 0, d.entries.size());
    d.entries = entries;
    d.cap = cap;
    Ok(true)
}

mod record;
mod sync;
