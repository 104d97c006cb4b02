//! Making the static plan of a [`super::Runner`]: buffers, the operation lists and their bind
//! groups, once, when the model opens.

use kernels::gpu::Bind;
use kernels::reference::rope_table;
use kernels::unrolled::Layout;

use super::plan::{fused_module, Op, ParamBlock, Rows, Shapes, Step, TileUse, When};
use super::tiles::{TileReader, SLOT_ALIGN};
use super::{Activations, Runner, WeightMode, PREFILL_CHUNK};
use crate::engine::{Engine, ResidentMatrix};
use crate::error::RunError;
use crate::model::{LlamaModel, MatrixRef};

/// Which weights a matrix step binds.
#[derive(Debug, Clone, Copy)]
pub(super) enum Weights {
    /// Part `part` of resident matrix `matrix`.
    Part { matrix: usize, part: usize },
    /// A ring slot (the step's [`TileUse`]) holding `bytes` bytes of rows.
    Tile { bytes: usize },
    /// `bytes` bytes from `offset` of the one part of resident matrix `matrix` (one tensor of a
    /// combined matrix).
    Window {
        matrix: usize,
        offset: u64,
        bytes: u64,
    },
    /// Interleaved copy `index` of a resident matrix (`kernels::unrolled::interleave`), read by
    /// the one-token unrolled and fused kernels.
    Interleaved { index: usize },
}

impl Binding {
    /// The layout of the weights a binding list names.
    fn layout(list: &[Binding]) -> Layout {
        if list
            .iter()
            .any(|b| matches!(b, Binding::W(Weights::Interleaved { .. })))
        {
            Layout::Interleaved
        } else {
            Layout::Rows
        }
    }
}

/// A buffer an operation binds, named before the buffers exist.
#[derive(Debug, Clone, Copy)]
pub(super) enum Binding {
    X,
    XLast,
    H,
    Q,
    Attn,
    Gate,
    Up,
    Act,
    Scores,
    Totals,
    Logits,
    Ids,
    Rope,
    Embed,
    Norm(usize),
    Kv(usize),
    W(Weights),
}

type Planned = (Step, When, Option<TileUse>, Vec<Binding>);

/// One product `y (+)= x · mᵀ` of a layer.
struct Product<'m> {
    m: &'m MatrixRef,
    x: Binding,
    y: Binding,
    kv: bool,
    accumulate: bool,
}

/// The buffers bindings resolve to.
struct Resolve<'r> {
    a: &'r Activations,
    embed: &'r wgpu::Buffer,
    norms: &'r [wgpu::Buffer],
    kv: &'r [wgpu::Buffer],
    resident: &'r [ResidentMatrix],
    interleaved: &'r [wgpu::Buffer],
    ring: &'r [wgpu::Buffer],
}

fn missing(what: &str) -> RunError {
    RunError::Tensor {
        name: what.to_string(),
        detail: "missing from the engine plan (bug)".into(),
    }
}

impl Resolve<'_> {
    fn binds(&self, list: &[Binding], tile: Option<TileUse>) -> Result<Vec<Bind<'_>>, RunError> {
        let a = self.a;
        let mut out = Vec::with_capacity(list.len() + 2);
        for b in list {
            let buffer = match *b {
                Binding::X => &a.x,
                Binding::XLast => &a.x_last,
                Binding::H => &a.h,
                Binding::Q => &a.q,
                Binding::Attn => &a.attn,
                Binding::Gate => &a.gate,
                Binding::Up => &a.up,
                Binding::Act => &a.act,
                Binding::Scores => &a.scores,
                Binding::Totals => &a.totals,
                Binding::Logits => &a.logits,
                Binding::Ids => &a.ids,
                Binding::Rope => &a.rope,
                Binding::Embed => self.embed,
                Binding::Norm(i) => self.norms.get(i).ok_or_else(|| missing("norm"))?,
                Binding::Kv(i) => self.kv.get(i).ok_or_else(|| missing("kv cache"))?,
                Binding::W(Weights::Part { matrix, part }) => {
                    let p = self
                        .resident
                        .get(matrix)
                        .and_then(|m| m.parts.get(part))
                        .ok_or_else(|| missing("resident part"))?;
                    let w = p.row_buffers();
                    out.push(w.packed);
                    out.extend(w.scales);
                    out.extend(w.biases);
                    continue;
                }
                Binding::W(Weights::Window {
                    matrix,
                    offset,
                    bytes,
                }) => {
                    let p = self
                        .resident
                        .get(matrix)
                        .and_then(|m| m.parts.first())
                        .ok_or_else(|| missing("resident window"))?;
                    let whole = p.row_buffers().packed;
                    out.push(Bind {
                        offset: whole.offset + offset,
                        size: Some(bytes.div_ceil(4) * 4),
                        ..whole
                    });
                    continue;
                }
                Binding::W(Weights::Interleaved { index }) => self
                    .interleaved
                    .get(index)
                    .ok_or_else(|| missing("interleaved matrix"))?,
                Binding::W(Weights::Tile { bytes }) => {
                    let slot = tile.map(|t| t.slot).ok_or_else(|| missing("tile"))?;
                    let buffer = self.ring.get(slot).ok_or_else(|| missing("ring slot"))?;
                    out.push(Bind {
                        buffer,
                        offset: 0,
                        size: Some(bytes.div_ceil(4) as u64 * 4),
                    });
                    continue;
                }
            };
            out.push(Bind::from(buffer));
        }
        Ok(out)
    }
}

/// Uploads resident matrices or lays out streamed tiles, and lists the matrix steps.
struct Builder<'a> {
    engine: &'a Engine,
    model: &'a LlamaModel,
    mode: WeightMode,
    reader: TileReader,
    ring: Vec<wgpu::Buffer>,
    resident: Vec<ResidentMatrix>,
    /// Interleaved copies of resident matrices for the one-token kernels.
    interleaved: Vec<wgpu::Buffer>,
    /// Whether one-token fused kernels may be planned (a CPU adapter, resident weights, inputs
    /// large enough for the uniform window).
    fuse: bool,
    /// Whether every chunk is one token (prefill too): then a matrix whose one-token product
    /// reads an interleaved copy is not uploaded in rows at all (docs/runner.md "Prefill on a
    /// CPU adapter").
    one_token_chunks: bool,
}

impl Builder<'_> {
    /// Whether `m`'s one-token product is an unrolled module on this adapter (resident weights
    /// on a CPU adapter, a format and K that have one).
    fn unrolled(&self, m: &MatrixRef) -> bool {
        self.fuse
            && m.format.buffer_count() == 1
            && kernels::unrolled::available(m.format.matvec_kernel(), m.k)
    }

    /// Uploads `bytes` (whole rows of `name`) as an interleaved copy; its index.
    fn interleave(
        &mut self,
        name: &str,
        format: kernels::WeightFormat,
        k: usize,
        bytes: &[u8],
    ) -> Result<usize, RunError> {
        let row_bytes = format.packed_len(1, k)?;
        let copy = kernels::unrolled::interleave(row_bytes, bytes);
        let buffer = self
            .engine
            .gpu()
            .upload(&format!("{name} (interleaved)"), &copy)?;
        self.interleaved.push(buffer);
        Ok(self.interleaved.len() - 1)
    }

    fn slot_bytes(&self) -> u64 {
        match self.mode {
            WeightMode::Resident => 0,
            WeightMode::Streamed { tile_bytes, .. } => {
                (tile_bytes as u64).div_ceil(SLOT_ALIGN).max(1) * SLOT_ALIGN
            }
        }
    }

    /// The steps of `y (+)= x · mᵀ` (one per resident part or streamed tile).
    #[allow(clippy::too_many_arguments)]
    fn product(
        &mut self,
        out: &mut Vec<Planned>,
        m: &MatrixRef,
        x: Binding,
        y: Binding,
        kv: bool,
        accumulate: bool,
        tokens: Rows,
    ) -> Result<(), RunError> {
        let step = |rows, row0| Step::Matmul {
            format: m.format,
            rows,
            row0,
            k: m.k,
            y_stride: m.rows,
            kv,
            accumulate,
            tokens,
        };
        match self.mode {
            WeightMode::Resident => {
                let bytes = self.model.bytes(&m.name)?;
                // one-token products read an interleaved copy where they are unrolled; the rows
                // then serve longer chunks only, and are not needed when every chunk is one token
                let one_binding =
                    m.format.packed_len(m.rows, m.k)? as u64 <= self.engine.gpu().max_binding();
                let interleaved = one_binding && self.unrolled(m);
                if !(interleaved && self.one_token_chunks) {
                    let r = self.engine.upload_matrix(
                        &m.name,
                        m.format,
                        m.rows,
                        m.k,
                        [bytes, &[], &[]],
                        None,
                    )?;
                    let matrix = self.resident.len();
                    let when = if interleaved {
                        When::Many
                    } else {
                        When::Always
                    };
                    for (part, p) in r.parts.iter().enumerate() {
                        let w = Binding::W(Weights::Part { matrix, part });
                        out.push((step(p.rows, p.row0), when, None, vec![x, y, w]));
                    }
                    self.resident.push(r);
                }
                if interleaved {
                    let index = self.interleave(&m.name, m.format, m.k, bytes)?;
                    let w = Binding::W(Weights::Interleaved { index });
                    out.push((step(m.rows, 0), When::One, None, vec![x, y, w]));
                }
            }
            WeightMode::Streamed { .. } => {
                let row_bytes = m.format.packed_len(1, m.k)?;
                let slot = self.slot_bytes() as usize;
                if m.format.buffer_count() != 1 || row_bytes == 0 || row_bytes > slot {
                    return Err(RunError::Tensor {
                        name: m.name.clone(),
                        detail: format!(
                            "cannot stream {} rows of {row_bytes} bytes through {slot}-byte slots",
                            m.format.name()
                        ),
                    });
                }
                let (path, offset, _) = self.model.location(&m.name)?;
                let tile_rows = (slot / row_bytes).max(1);
                let mut row0 = 0;
                while row0 < m.rows {
                    let rows = tile_rows.min(m.rows - row0);
                    let bytes = rows * row_bytes;
                    let index = self
                        .reader
                        .add(path, offset + (row0 * row_bytes) as u64, bytes)?;
                    let tile = TileUse {
                        index,
                        slot: index % self.ring.len().max(1),
                    };
                    let w = Binding::W(Weights::Tile { bytes });
                    out.push((step(rows, row0), When::Always, Some(tile), vec![x, y, w]));
                    row0 += rows;
                }
            }
        }
        Ok(())
    }

    /// Plans `mats` (one layer's Q, K, V, or gate and up: one format, one K) as one combined
    /// resident matrix served by the fused one-token kernel `fused` (its step and bindings, the
    /// weights named `Weights::Part { matrix, 0 }`), plus one op per matrix over its window of the
    /// combined buffer for longer chunks. `false`, with nothing planned, where fusion does not
    /// apply: streamed weights, a GPU adapter, mixed formats, no such kernel, a tensor that does
    /// not end on a binding-offset boundary, or a combined matrix over the binding limit.
    fn fused(
        &mut self,
        out: &mut Vec<Planned>,
        c: &crate::model::LlamaConfig,
        fused: (Step, Vec<Binding>),
        mats: &[Product<'_>],
    ) -> Result<bool, RunError> {
        let Some(first) = mats.first() else {
            return Ok(false);
        };
        let (format, k) = (first.m.format, first.m.k);
        let gpu = self.engine.gpu();
        let align = u64::from(gpu.device().limits().min_storage_buffer_offset_alignment).max(4);
        let mut sizes = Vec::new();
        for p in mats {
            sizes.push(p.m.format.packed_len(p.m.rows, p.m.k)? as u64);
        }
        let total: u64 = sizes.iter().sum();
        let ok = self.fuse
            && format.buffer_count() == 1
            && mats.iter().all(|p| p.m.format == format && p.m.k == k)
            && sizes.iter().all(|b| b % align == 0)
            && total <= gpu.max_binding()
            && fused_module(c, &fused.0, Layout::Interleaved).is_some();
        if !ok {
            return Ok(false);
        }
        let mut combined = Vec::with_capacity(total as usize);
        for p in mats {
            combined.extend_from_slice(self.model.bytes(&p.m.name)?);
        }
        let name = format!("{} (combined)", first.m.name);
        let index = self.interleave(&name, format, k, &combined)?;
        let (step, mut binds) = fused;
        for b in &mut binds {
            if let Binding::W(_) = b {
                *b = Binding::W(Weights::Interleaved { index });
            }
        }
        out.push((step, When::One, None, binds));
        if self.one_token_chunks {
            return Ok(true);
        }
        let rows = mats.iter().map(|p| p.m.rows).sum();
        let r = self
            .engine
            .upload_matrix(&name, format, rows, k, [&combined, &[], &[]], None)?;
        if r.parts.len() != 1 {
            return Err(RunError::Tensor {
                name,
                detail: "a combined matrix must be one buffer (engine plan bug)".into(),
            });
        }
        let matrix = self.resident.len();
        self.resident.push(r);
        let mut offset = 0;
        for (p, bytes) in mats.iter().zip(sizes) {
            let step = Step::Matmul {
                format,
                rows: p.m.rows,
                row0: 0,
                k,
                y_stride: p.m.rows,
                kv: p.kv,
                accumulate: p.accumulate,
                tokens: Rows::Tokens,
            };
            let w = Binding::W(Weights::Window {
                matrix,
                offset,
                bytes,
            });
            out.push((step, When::Many, None, vec![p.x, p.y, w]));
            offset += bytes;
        }
        Ok(true)
    }

    /// Plans `mats` one product each, for every chunk length.
    fn products(&mut self, out: &mut Vec<Planned>, mats: &[Product<'_>]) -> Result<(), RunError> {
        for p in mats {
            self.product(out, p.m, p.x, p.y, p.kv, p.accumulate, Rows::Tokens)?;
        }
        Ok(())
    }
}

fn norm(engine: &Engine, model: &LlamaModel, name: &str) -> Result<wgpu::Buffer, RunError> {
    Ok(engine.gpu().upload_f32(name, &model.norm(name)?)?)
}

fn activations(
    engine: &Engine,
    model: &LlamaModel,
    capacity: usize,
    chunk: usize,
) -> Result<Activations, RunError> {
    let c = &model.config;
    let g = engine.gpu();
    let chunk = chunk.min(capacity);
    let f = |n: usize| (n * 4) as u64;
    // inputs of one-token products and of the decode attention's q: at least the 64 KiB uniform
    // window of the uniform-input kernels (docs/kernels.md "Uniform input")
    let input = |n: usize| f(n).max((kernels::UNIFORM_X_ELEMENTS * 4) as u64);
    let (dim, qd) = (c.dim, c.n_heads * c.head_dim);
    let positions: Vec<u32> = (0..capacity)
        .map(|p| u32::try_from(p).unwrap_or(u32::MAX))
        .collect();
    Ok(Activations {
        chunk,
        x: g.zeros("x", input(chunk * dim))?,
        x_last: g.zeros("x last", f(dim))?,
        h: g.zeros("h", input(chunk * dim))?,
        q: g.zeros("q", input(chunk * qd))?,
        attn: g.zeros("attn", input(chunk * qd))?,
        gate: g.zeros("gate", f(chunk * c.ffn))?,
        up: g.zeros("up", f(chunk * c.ffn))?,
        act: g.zeros("swiglu", input(chunk * c.ffn))?,
        scores: g.zeros("scores", f(chunk * c.n_heads * capacity))?,
        totals: g.zeros("softmax totals", f(c.n_heads))?,
        logits: g.zeros("logits", f(chunk * c.vocab))?,
        ids: g.zeros("ids", f(chunk))?,
        rope: g.upload_f32("rope", &rope_table(&positions, c.rot_dim, c.rope_base))?,
        id_staging: g.staging("token id", 4),
        logits_staging: g.staging("logits", f(chunk * c.vocab)),
    })
}

/// The three tails: final norm, head and (for `Last`) the argmax into `ids[0]`.
fn tail(x: Binding, rows: Rows, head: &[Planned], out_norm: usize, argmax: bool) -> Vec<Planned> {
    let mut ops = vec![(
        Step::Norm(rows),
        When::Always,
        None,
        vec![x, Binding::Norm(out_norm), Binding::H],
    )];
    for (s, when, t, w) in head {
        let s = s.with_tokens(rows);
        let mut binds = w.clone();
        if let Some(first) = binds.first_mut() {
            *first = Binding::H;
        }
        ops.push((s, *when, *t, binds));
    }
    if argmax {
        ops.push((
            Step::Argmax,
            When::Always,
            None,
            vec![Binding::Logits, Binding::Ids],
        ));
    }
    ops
}

/// Where one layer's per-layer buffers are in the plan's lists.
struct LayerSlots {
    attn_norm: usize,
    ffn_norm: usize,
    k_cache: Binding,
    v_cache: Binding,
}

/// Plans the norm `x → h` ahead of `mats` (one layer's Q/K/V or gate/up, reading `h`) and the
/// products: where the fused one-token kernel `fused` (which normalises `x` itself) applies, the
/// separate norm and products serve longer chunks only. Returns when the step that completes
/// the separate products (RoPE, SwiGLU) runs.
fn normed(
    b: &mut Builder<'_>,
    body: &mut Vec<Planned>,
    c: &crate::model::LlamaConfig,
    norm: usize,
    fused: (Step, Vec<Binding>),
    mats: &[Product<'_>],
) -> Result<When, RunError> {
    let mut fused_ops = Vec::new();
    let is_fused = b.fused(&mut fused_ops, c, fused, mats)?;
    let when = if is_fused { When::Many } else { When::Always };
    let binds = vec![Binding::X, Binding::Norm(norm), Binding::H];
    body.push((Step::Norm(Rows::Tokens), when, None, binds));
    if is_fused {
        body.append(&mut fused_ops);
    } else {
        b.products(body, mats)?;
    }
    Ok(when)
}

/// Plans one decoder layer (module docs): on a CPU adapter with resident weights the one-token
/// chunk runs norm + Q/K/V + RoPE and norm + gate/up + SwiGLU as fused kernels, longer chunks
/// the separate ones.
fn layer(
    b: &mut Builder<'_>,
    body: &mut Vec<Planned>,
    c: &crate::model::LlamaConfig,
    l: &crate::model::LayerRefs,
    s: &LayerSlots,
) -> Result<(), RunError> {
    use Binding::{Act, Attn, Gate, Rope, Up, H, Q, X};
    let always = When::Always;
    let (k_cache, v_cache) = (s.k_cache, s.v_cache);
    let prod = |m, x, y, kv, accumulate| Product {
        m,
        x,
        y,
        kv,
        accumulate,
    };
    let w = Binding::W(Weights::Tile { bytes: 0 });
    // attention: norm, then Q/K/V + RoPE (fused with the norm for one token where it can be)
    let qkv = [
        prod(&l.q, H, Q, false, false),
        prod(&l.k, H, k_cache, true, false),
        prod(&l.v, H, v_cache, true, false),
    ];
    let fused = Step::QkvRope {
        format: l.q.format,
        k: l.q.k,
        pairs: (l.q.rows + l.k.rows + l.v.rows) / 2,
    };
    let binds = vec![X, Q, w, k_cache, v_cache, Rope, Binding::Norm(s.attn_norm)];
    let rope = normed(b, body, c, s.attn_norm, (fused, binds), &qkv)?;
    body.push((Step::RopeQ, rope, None, vec![Q, Rope]));
    body.push((Step::RopeK, rope, None, vec![k_cache, Rope]));
    let attn = vec![Q, k_cache, v_cache, Attn, Binding::Scores, Binding::Totals];
    body.push((Step::Attention, always, None, attn));
    b.product(body, &l.o, Attn, X, false, true, Rows::Tokens)?;
    // feed-forward: norm, then gate/up + SwiGLU, then down
    let gate_up = [
        prod(&l.gate, H, Gate, false, false),
        prod(&l.up, H, Up, false, false),
    ];
    let fused = Step::GateUp {
        format: l.gate.format,
        k: l.gate.k,
        ffn: l.gate.rows,
    };
    let binds = vec![X, Act, w, Binding::Norm(s.ffn_norm)];
    let swiglu = normed(b, body, c, s.ffn_norm, (fused, binds), &gate_up)?;
    body.push((Step::Swiglu, swiglu, None, vec![Gate, Up, Act]));
    b.product(body, &l.down, Act, X, false, true, Rows::Tokens)
}

/// The resident head's buffer when the model ties its head to the token embedding (one tensor,
/// uploaded whole as one part): the embedding lookup reads the same bytes, so it is not uploaded
/// a second time.
fn tied_head(resident: &[ResidentMatrix], model: &LlamaModel) -> Option<wgpu::Buffer> {
    if model.output.name != model.embedding.name {
        return None;
    }
    let m = resident.iter().find(|m| m.name == model.output.name)?;
    let [part] = m.parts.as_slice() else {
        return None;
    };
    let w = part.row_buffers();
    (w.scales.is_none() && w.biases.is_none()).then(|| w.packed.buffer.clone())
}

impl Runner {
    /// Loads `model` onto `engine` with a KV cache of `capacity` positions (clamped to the
    /// model's context).
    pub fn new(
        engine: &Engine,
        model: &LlamaModel,
        mode: WeightMode,
        capacity: usize,
    ) -> Result<Self, RunError> {
        let c = model.config.clone();
        let capacity = capacity.clamp(1, c.context.max(1));
        let g = engine.gpu();
        // On a CPU adapter with resident weights the one-token kernels (unrolled, fused, reading
        // interleaved weights) outrun the batched matmul per token, so prefill runs them token by
        // token too (docs/runner.md "Prefill on a CPU adapter").
        let fuse =
            mode == WeightMode::Resident && g.matvec_shape() == kernels::gpu::MatvecShape::Rows;
        let chunk = if fuse { 1 } else { PREFILL_CHUNK };
        let a = activations(engine, model, capacity, chunk)?;
        let mut b = Builder {
            engine,
            model,
            mode,
            reader: TileReader::new(),
            ring: Vec::new(),
            resident: Vec::new(),
            interleaved: Vec::new(),
            fuse,
            one_token_chunks: chunk == 1,
        };
        if let WeightMode::Streamed { ring, .. } = mode {
            for i in 0..ring.max(1) {
                b.ring
                    .push(g.zeros(&format!("tile slot {i}"), b.slot_bytes())?);
            }
        }
        let kv_bytes = (capacity * c.n_kv_heads * c.head_dim * 4) as u64;
        let (mut norms, mut kv) = (Vec::new(), Vec::new());
        let mut body: Vec<Planned> = vec![(
            Step::Embed,
            When::Always,
            None,
            vec![Binding::Ids, Binding::Embed, Binding::X],
        )];
        for l in &model.layers {
            let slots = LayerSlots {
                attn_norm: norms.len(),
                ffn_norm: norms.len() + 1,
                k_cache: Binding::Kv(kv.len()),
                v_cache: Binding::Kv(kv.len() + 1),
            };
            norms.push(norm(engine, model, &l.attn_norm)?);
            norms.push(norm(engine, model, &l.ffn_norm)?);
            kv.push(g.zeros("k cache", kv_bytes)?);
            kv.push(g.zeros("v cache", kv_bytes)?);
            layer(&mut b, &mut body, &c, l, &slots)?;
        }
        let out_norm = norms.len();
        norms.push(norm(engine, model, &model.output_norm)?);
        let mut head = Vec::new();
        let out = &model.output;
        b.product(
            &mut head,
            out,
            Binding::H,
            Binding::Logits,
            false,
            false,
            Rows::One,
        )?;
        let embed = match tied_head(&b.resident, model) {
            Some(buffer) => buffer,
            None => g.upload("token_embd", model.bytes(&model.embedding.name)?)?,
        };
        let tail_one = tail(Binding::X, Rows::One, &head, out_norm, true);
        let tail_last = tail(Binding::XLast, Rows::One, &head, out_norm, true);
        let tail_all = tail(Binding::X, Rows::Tokens, &head, out_norm, false);
        let lists = [&body, &tail_one, &tail_last, &tail_all];
        let params = ParamBlock::new(g, lists.iter().flat_map(|l| l.iter().map(|(s, _, _, _)| s)));
        let shapes = Shapes {
            c,
            capacity,
            embedding_code: model.embedding_format.code(),
            shape: g.matvec_shape(),
        };
        let ops = {
            let res = Resolve {
                a: &a,
                embed: &embed,
                norms: &norms,
                kv: &kv,
                resident: &b.resident,
                interleaved: &b.interleaved,
                ring: &b.ring,
            };
            let one_token = b.one_token_chunks;
            let make = |list: &[Planned]| -> Result<Vec<Op>, RunError> {
                list.iter()
                    // an op for longer chunks never runs when every chunk is one token
                    .filter(|(_, when, _, _)| !(one_token && *when == When::Many))
                    .map(|(step, when, tile, binds)| {
                        let buffers = res.binds(binds, *tile)?;
                        let layout = Binding::layout(binds);
                        Op::new(g, &shapes, &params, (*step, *when), &buffers, *tile, layout)
                    })
                    .collect()
            };
            [
                make(&body)?,
                make(&tail_one)?,
                make(&tail_last)?,
                make(&tail_all)?,
            ]
        };
        let [body, tail_one, tail_last, tail_all] = ops;
        let mut reader = b.reader;
        reader.start(b.ring.len().max(1))?;
        Ok(Runner {
            engine: engine.clone(),
            shapes,
            params,
            body,
            tail_one,
            tail_last,
            tail_all,
            a,
            ring: b.ring,
            reader,
            weights: b.resident,
            interleaved: b.interleaved,
            norms,
            kv,
            embed,
            capacity,
            pos: 0,
            host: Vec::new(),
            slots: crate::sequence::Slots::new(1),
            picked: None,
        })
    }
}
