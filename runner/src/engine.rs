//! The wgpu engine: device set-up kept apart from the work (`Engine::new` acquires an adapter,
//! `Engine::with_device` takes one a test already has), pipelines compiled once per kernel (cached
//! in `kernels::gpu::Gpu`), and the dispatch helpers the model adapters call.
//!
//! Matrices are multiplied by row ranges only (container seed 000: "Tiling runs along output rows
//! only"); with the kernels' fixed accumulation order (docs/kernels.md) a resident matrix, a matrix
//! split into binding-sized parts and a matrix streamed tile by tile give bit-identical outputs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use kernels::gpu::{elementwise_groups, matmul_launch, Bind, Gpu};
use kernels::{
    grid_2d, ActivationParams, ArgmaxParams, AttentionParams, EmbeddingFormat, EmbeddingParams,
    Kernel, KernelError, RmsNormParams, RopeMode, RopeParams, SoftmaxParams, WeightFormat,
};

/// What the engine refuses or fails at.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("kernel `{kernel}` failed")]
    Kernel {
        kernel: &'static str,
        #[source]
        source: KernelError,
    },
    #[error("matrix `{name}`: {source}")]
    Matrix {
        name: String,
        #[source]
        source: KernelError,
    },
    #[error(
        "matrix `{name}`: one row needs {row_bytes} bytes, above the binding limit of {limit}"
    )]
    RowTooLarge {
        name: String,
        row_bytes: usize,
        limit: u64,
    },
    #[error("{what} = {value} does not fit the kernels' u32 indexing")]
    TooLarge { what: &'static str, value: usize },
    #[error("attention `{what}` buffer holds {actual} bytes, needs {bytes} (prefill fewer tokens at once)")]
    BufferTooSmall {
        what: &'static str,
        bytes: u64,
        actual: u64,
    },
    #[error("cannot open a wgpu device")]
    Open(#[source] KernelError),
}

fn kernel_err(kernel: Kernel) -> impl FnOnce(KernelError) -> EngineError {
    move |source| EngineError::Kernel {
        kernel: kernel.name(),
        source,
    }
}

fn u32_of(what: &'static str, value: usize) -> Result<u32, EngineError> {
    u32::try_from(value).map_err(|_| EngineError::TooLarge { what, value })
}

/// The weight buffers of a run of rows: packed, and scales / biases when the format has them.
#[derive(Clone, Copy)]
pub struct RowBuffers<'a> {
    pub packed: Bind<'a>,
    pub scales: Option<Bind<'a>>,
    pub biases: Option<Bind<'a>>,
}

/// One part of a resident matrix: rows `row0 .. row0 + rows` in their own buffers, or in their
/// span of a stack's ([`Engine::upload_stack`]).
pub struct ResidentPart {
    pub row0: usize,
    pub rows: usize,
    packed: Span,
    scales: Option<Span>,
    biases: Option<Span>,
}

/// Bytes `offset .. offset + size` of a device buffer.
struct Span {
    buffer: wgpu::Buffer,
    offset: u64,
    size: u64,
}

impl Span {
    fn whole(buffer: wgpu::Buffer) -> Self {
        let size = buffer.size();
        Self {
            buffer,
            offset: 0,
            size,
        }
    }

    /// The span as a binding (the whole buffer bound as such).
    fn bind(&self) -> Bind<'_> {
        let whole = self.offset == 0 && self.size == self.buffer.size();
        Bind {
            buffer: &self.buffer,
            offset: self.offset,
            size: (!whole).then_some(self.size),
        }
    }
}

impl ResidentPart {
    /// The part's weight buffers as bindings.
    pub fn row_buffers(&self) -> RowBuffers<'_> {
        RowBuffers {
            packed: self.packed.bind(),
            scales: self.scales.as_ref().map(Span::bind),
            biases: self.biases.as_ref().map(Span::bind),
        }
    }
}

/// A matrix uploaded once. It is one part unless a buffer would exceed the device's storage
/// binding limit (128 MiB on lavapipe), in which case it is split by rows into parts that fit.
pub struct ResidentMatrix {
    pub name: String,
    pub format: WeightFormat,
    pub rows: usize,
    pub k: usize,
    pub parts: Vec<ResidentPart>,
}

/// The device and the work. A cheap handle: clones share the one device, its pipeline caches
/// and counters (a process opens one device, in [`crate::open::engine`], and every model on it
/// holds a clone).
#[derive(Clone)]
pub struct Engine {
    gpu: Arc<Gpu>,
    /// While [`Engine::batched`] runs on a thread: the encoder that thread's dispatches are
    /// recorded into (per thread, so work of another thread sharing the engine is never swept
    /// into a batch it does not wait for).
    pending: Arc<Mutex<HashMap<ThreadId, wgpu::CommandEncoder>>>,
}

impl Engine {
    /// Acquires the default adapter and a device with its limits.
    pub fn new() -> Result<Self, EngineError> {
        Self::new_with_shape(None)
    }

    /// As [`Engine::new`] with the matvec row mapping forced (`None`: the adapter's default).
    pub fn new_with_shape(shape: Option<kernels::gpu::MatvecShape>) -> Result<Self, EngineError> {
        Gpu::new_with_shape(shape)
            .map(Self::from_gpu)
            .map_err(EngineError::Open)
    }

    /// Opens the device `request` names ([`Gpu::open`]).
    pub fn open(request: kernels::gpu::DeviceRequest) -> Result<Self, EngineError> {
        Gpu::open(request)
            .map(Self::from_gpu)
            .map_err(EngineError::Open)
    }

    /// Uses a device the caller set up (a forced mapping or subgroup reduction:
    /// `Gpu::new_with`).
    pub fn from_gpu(gpu: Gpu) -> Self {
        Self {
            gpu: Arc::new(gpu),
            pending: Arc::default(),
        }
    }

    /// Uses a device and queue the caller already has.
    pub fn with_device(device: wgpu::Device, queue: wgpu::Queue) -> Self {
        Self::from_gpu(Gpu::with_device(device, queue))
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<ThreadId, wgpu::CommandEncoder>> {
        match self.pending.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Runs `f` with every dispatch recorded into one command encoder, submitted once at the end
    /// (also when `f` fails, so recorded work is never lost). Host writes to buffers
    /// (`Queue::write_buffer`) land before the whole batch runs: a streaming loop that reuses a
    /// tile slot must call [`Engine::flush`] before overwriting a slot the batch still reads.
    pub fn batched<T>(
        &self,
        f: impl FnOnce(&Self) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let me = std::thread::current().id();
        let previous = self.pending().insert(me, self.gpu.encoder("batch"));
        let result = f(self);
        let encoder = {
            let mut pending = self.pending();
            let encoder = pending.remove(&me);
            if let Some(previous) = previous {
                pending.insert(me, previous);
            }
            encoder
        };
        if let Some(encoder) = encoder {
            self.gpu.submit(encoder.finish());
        }
        result
    }

    /// Submits what a running [`Engine::batched`] on this thread has recorded so far (no-op
    /// outside a batch).
    pub fn flush(&self) {
        let me = std::thread::current().id();
        let mut pending = self.pending();
        if let Some(encoder) = pending.remove(&me) {
            self.gpu.submit(encoder.finish());
            pending.insert(me, self.gpu.encoder("batch"));
        }
    }

    fn dispatch<P: bytemuck::Pod>(
        &self,
        kernel: Kernel,
        params: &P,
        binds: &[Bind<'_>],
        groups: (u32, u32, u32),
    ) -> Result<(), EngineError> {
        let mut pending = self.pending();
        match pending.get_mut(&std::thread::current().id()) {
            Some(encoder) => self.gpu.encode(encoder, kernel, params, binds, groups),
            None => self.gpu.dispatch(kernel, params, binds, groups),
        }
        .map_err(kernel_err(kernel))
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Uploads a whole matrix once; `part_limit` caps each part's largest buffer (`None` = the
    /// device's binding limit). fp8 parts start on multiples of the scale block rows.
    pub fn upload_matrix(
        &self,
        name: &str,
        format: WeightFormat,
        rows: usize,
        k: usize,
        bytes: [&[u8]; 3],
        part_limit: Option<u64>,
    ) -> Result<ResidentMatrix, EngineError> {
        let [packed, scales, biases] = bytes;
        let matrix_err = |source| EngineError::Matrix {
            name: name.to_string(),
            source,
        };
        format
            .check(rows, k, packed, scales, biases)
            .map_err(matrix_err)?;
        let limit = part_limit.unwrap_or(u64::MAX).min(self.gpu.max_binding());
        let unit = match format {
            WeightFormat::Fp8Block { block_rows, .. } => (block_rows as usize).max(1),
            _ => 1,
        };
        let unit_bytes = [
            format.packed_len(unit, k).map_err(matrix_err)?,
            format.scales_len(unit, k).map_err(matrix_err)?,
            format.biases_len(unit, k).map_err(matrix_err)?,
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        let units_per_part = usize::try_from(limit)
            .unwrap_or(usize::MAX)
            .checked_div(unit_bytes.max(1))
            .unwrap_or(0);
        if units_per_part == 0 {
            return Err(EngineError::RowTooLarge {
                name: name.to_string(),
                row_bytes: unit_bytes,
                limit,
            });
        }
        let rows_per_part = units_per_part.saturating_mul(unit);
        let mut parts = Vec::new();
        let mut row0 = 0;
        while row0 < rows {
            let row1 = rows.min(row0.saturating_add(rows_per_part));
            let [p, s, b] = format.row_ranges(k, row0, row1).map_err(matrix_err)?;
            let slice = |buf: &[u8], r: std::ops::Range<usize>| -> Result<Vec<u8>, EngineError> {
                buf.get(r)
                    .map(<[u8]>::to_vec)
                    .ok_or_else(|| EngineError::Matrix {
                        name: name.to_string(),
                        source: KernelError::Shape {
                            what: "row range",
                            value: row1,
                            reason: "outside the matrix buffers",
                        },
                    })
            };
            let upload =
                |label: &str, bytes: Vec<u8>| self.gpu.upload(label, &bytes).map_err(matrix_err);
            let n = format.buffer_count();
            parts.push(ResidentPart {
                row0,
                rows: row1 - row0,
                packed: Span::whole(upload(name, slice(packed, p)?)?),
                scales: if n >= 2 {
                    Some(Span::whole(upload(name, slice(scales, s)?)?))
                } else {
                    None
                },
                biases: if n >= 3 {
                    Some(Span::whole(upload(name, slice(biases, b)?)?))
                } else {
                    None
                },
            });
            row0 = row1;
        }
        Ok(ResidentMatrix {
            name: name.to_string(),
            format,
            rows,
            k,
            parts,
        })
    }

    /// Writes another matrix of `m`'s format and shape (`bytes`: packed, scales, biases) over
    /// `m`'s device bytes, part by part, and names it `name`: the buffers, and the bind groups
    /// made over them, are kept (a streamed expert's slot taking the next expert:
    /// docs/runner-deepseek-v4.md "Expert cache"). The writes are queue writes, applied before
    /// the next submit; work recorded and not yet submitted must not read `m`.
    pub fn rewrite_matrix(
        &self,
        m: &mut ResidentMatrix,
        name: &str,
        bytes: [&[u8]; 3],
    ) -> Result<(), EngineError> {
        let matrix_err = |source| EngineError::Matrix {
            name: name.to_string(),
            source,
        };
        let [packed, scales, biases] = bytes;
        m.format
            .check(m.rows, m.k, packed, scales, biases)
            .map_err(matrix_err)?;
        for part in &m.parts {
            let ranges = m
                .format
                .row_ranges(m.k, part.row0, part.row0 + part.rows)
                .map_err(matrix_err)?;
            let spans = [
                Some(&part.packed),
                part.scales.as_ref(),
                part.biases.as_ref(),
            ];
            for ((span, src), r) in spans.into_iter().zip([packed, scales, biases]).zip(ranges) {
                let Some(span) = span else { continue };
                let mut data = src.get(r).map(<[u8]>::to_vec).unwrap_or_default();
                data.resize(data.len().div_ceil(4).max(1) * 4, 0);
                if data.len() as u64 > span.size {
                    return Err(matrix_err(KernelError::Shape {
                        what: "rewritten part",
                        value: data.len(),
                        reason: "larger than the span it replaces",
                    }));
                }
                self.gpu.write(&span.buffer, span.offset, &data);
            }
        }
        m.name = name.to_string();
        Ok(())
    }

    /// Matrices of one format and shape (`rows` × `k` each, `(packed, scales)` each, named
    /// `names`) uploaded one after the other as one stack `name` (docs/kernels.md "Experts by
    /// index": a product can then pick its matrix on the device), and each matrix as a view of
    /// its span of the stack: the views multiply as matrices of their own, and nothing is held
    /// twice. `None` (nothing uploaded) where the stack would not be one binding, the format has
    /// biases, or a matrix's bytes do not end on the device's storage offset alignment.
    pub fn upload_stack(
        &self,
        name: &str,
        format: WeightFormat,
        rows: usize,
        k: usize,
        matrices: &[(&str, &[u8], &[u8])],
    ) -> Result<Option<(ResidentMatrix, Vec<ResidentMatrix>)>, EngineError> {
        let matrix_err = |source| EngineError::Matrix {
            name: name.to_string(),
            source,
        };
        if format.buffer_count() > 2 {
            return Ok(None);
        }
        for &(_, packed, scales) in matrices {
            format
                .check(rows, k, packed, scales, &[])
                .map_err(matrix_err)?;
        }
        let limits = self.gpu.device().limits();
        let align = u64::from(limits.min_storage_buffer_offset_alignment).max(4);
        let packed_len = format.packed_len(rows, k).map_err(matrix_err)? as u64;
        let scales_len = format.scales_len(rows, k).map_err(matrix_err)? as u64;
        let n = matrices.len() as u64;
        let fits = !matrices.is_empty()
            && packed_len % align == 0
            && scales_len % align == 0
            && (packed_len * n).max(scales_len * n) <= self.gpu.max_binding();
        if !fits {
            return Ok(None);
        }
        let join = |i: usize| -> Vec<u8> {
            matrices
                .iter()
                .flat_map(|m| if i == 0 { m.1 } else { m.2 }.iter().copied())
                .collect()
        };
        let upload = |bytes: Vec<u8>| self.gpu.upload(name, &bytes).map_err(matrix_err);
        let packed = upload(join(0))?;
        let scales = (format.buffer_count() == 2)
            .then(|| upload(join(1)))
            .transpose()?;
        let span = |buffer: &wgpu::Buffer, len: u64, i: u64| Span {
            buffer: buffer.clone(),
            offset: i * len,
            size: len,
        };
        let part = |spans: (Span, Option<Span>), rows: usize| ResidentPart {
            row0: 0,
            rows,
            packed: spans.0,
            scales: spans.1,
            biases: None,
        };
        let matrix = |name: &str, rows: usize, part: ResidentPart| ResidentMatrix {
            name: name.to_string(),
            format,
            rows,
            k,
            parts: vec![part],
        };
        let views = matrices
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let i = i as u64;
                let spans = (
                    span(&packed, packed_len, i),
                    scales.as_ref().map(|s| span(s, scales_len, i)),
                );
                matrix(m.0, rows, part(spans, rows))
            })
            .collect();
        let all = rows * matrices.len();
        let whole = (Span::whole(packed), scales.map(Span::whole));
        Ok(Some((matrix(name, all, part(whole, all)), views)))
    }

    /// y[t · y_stride + row0 + r] = Σ_k w(r, k) · x[t · k + k'] for the `rows` rows in `w`
    /// (a tile slot or one resident part), `tokens` input vectors (matvec when 1).
    #[allow(clippy::too_many_arguments)]
    pub fn matmul_rows(
        &self,
        format: WeightFormat,
        k: usize,
        rows: usize,
        row0: usize,
        y_stride: usize,
        tokens: usize,
        w: RowBuffers<'_>,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
    ) -> Result<(), EngineError> {
        let kernel = if tokens == 1 {
            format.matvec_kernel()
        } else {
            format.matmul_kernel()
        };
        format.check_k(k).map_err(kernel_err(kernel))?;
        let rows32 = u32_of("rows", rows)?;
        let tokens32 = u32_of("tokens", tokens)?;
        let mut params = format.params(
            rows32,
            u32_of("k", k)?,
            tokens32,
            u32_of("y_stride", y_stride)?,
            u32_of("row0", row0)?,
        );
        let groups = matmul_launch(self.gpu.matvec_shape(), kernel, &mut params);
        let mut binds = vec![Bind::from(x), Bind::from(y), w.packed];
        binds.extend(w.scales);
        binds.extend(w.biases);
        self.dispatch(kernel, &params, &binds, groups)
    }

    /// y [tokens, m.rows] = x [tokens, m.k] · mᵀ, one dispatch per resident part.
    pub fn matmul(
        &self,
        m: &ResidentMatrix,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
        tokens: usize,
    ) -> Result<(), EngineError> {
        for part in &m.parts {
            let w = part.row_buffers();
            self.matmul_rows(m.format, m.k, part.rows, part.row0, m.rows, tokens, w, x, y)?;
        }
        Ok(())
    }

    /// y = RMSNorm(x) · w for `tokens` rows of `n`.
    pub fn rmsnorm(
        &self,
        x: &wgpu::Buffer,
        w: &wgpu::Buffer,
        y: &wgpu::Buffer,
        n: usize,
        tokens: usize,
        eps: f32,
    ) -> Result<(), EngineError> {
        let (gx, gy) = grid_2d(u32_of("tokens", tokens)?);
        let p = RmsNormParams {
            n: u32_of("n", n)?,
            tokens: u32_of("tokens", tokens)?,
            eps,
            groups_x: gx,
        };
        self.dispatch(
            Kernel::RmsNorm,
            &p,
            &[x.into(), w.into(), y.into()],
            (gx, gy, 1),
        )
    }

    /// Rotates v [tokens, n_heads, head_dim] in place with a (cos, sin) table from
    /// `kernels::reference::rope_table`.
    #[allow(clippy::too_many_arguments)]
    pub fn rope(
        &self,
        v: &wgpu::Buffer,
        table: &wgpu::Buffer,
        tokens: usize,
        n_heads: usize,
        head_dim: usize,
        rot_dim: usize,
        mode: RopeMode,
    ) -> Result<(), EngineError> {
        let pairs = tokens
            .checked_mul(n_heads)
            .and_then(|n| n.checked_mul(rot_dim / 2))
            .ok_or(EngineError::TooLarge {
                what: "rope pairs",
                value: usize::MAX,
            })?;
        let groups = elementwise_groups(u32_of("rope pairs", pairs)?);
        let p = RopeParams {
            tokens: u32_of("tokens", tokens)?,
            n_heads: u32_of("n_heads", n_heads)?,
            head_dim: u32_of("head_dim", head_dim)?,
            rot_dim: u32_of("rot_dim", rot_dim)?,
            mode: mode as u32,
            groups_x: groups.0,
            table_row0: 0,
            v_offset: 0,
        };
        self.dispatch(Kernel::Rope, &p, &[v.into(), table.into()], groups)
    }

    /// Softmax of `rows` rows of `n`, in place.
    pub fn softmax(&self, v: &wgpu::Buffer, n: usize, rows: usize) -> Result<(), EngineError> {
        let (gx, gy) = grid_2d(u32_of("rows", rows)?);
        let p = SoftmaxParams {
            n: u32_of("n", n)?,
            rows: u32_of("rows", rows)?,
            groups_x: gx,
            _pad: 0,
        };
        self.dispatch(Kernel::Softmax, &p, &[v.into()], (gx, gy, 1))
    }

    /// Causal GQA attention of `p.tokens` queries at positions `p.pos0 ..` over the caches.
    pub fn attention(
        &self,
        p: &AttentionParams,
        q: &wgpu::Buffer,
        k_cache: &wgpu::Buffer,
        v_cache: &wgpu::Buffer,
        out: &wgpu::Buffer,
        scratch: &wgpu::Buffer,
    ) -> Result<(), EngineError> {
        if p.n_kv_heads == 0 || p.n_heads % p.n_kv_heads != 0 || p.pos0 + p.tokens > p.capacity {
            return Err(EngineError::Kernel {
                kernel: Kernel::Attention.name(),
                source: KernelError::Shape {
                    what: "attention heads or positions",
                    value: p.pos0 as usize + p.tokens as usize,
                    reason: "n_kv_heads must divide n_heads and pos0 + tokens fit the cache",
                },
            });
        }
        // Buffers are checked on the host: the kernel would clamp an out-of-range read silently.
        let elems = |a: u32, b: u32, c: u32| u64::from(a) * u64::from(b) * u64::from(c) * 4;
        let needs = [
            ("q", q, elems(p.tokens, p.n_heads, p.head_dim)),
            ("out", out, elems(p.tokens, p.n_heads, p.head_dim)),
            (
                "k_cache",
                k_cache,
                elems(p.capacity, p.n_kv_heads, p.head_dim),
            ),
            (
                "v_cache",
                v_cache,
                elems(p.capacity, p.n_kv_heads, p.head_dim),
            ),
            ("scratch", scratch, elems(p.tokens, p.n_heads, p.capacity)),
        ];
        for (what, buffer, bytes) in needs {
            if buffer.size() < bytes {
                return Err(EngineError::BufferTooSmall {
                    what,
                    bytes,
                    actual: buffer.size(),
                });
            }
        }
        let binds = [
            q.into(),
            k_cache.into(),
            v_cache.into(),
            out.into(),
            scratch.into(),
        ];
        self.dispatch(Kernel::Attention, p, &binds, (p.n_heads, p.tokens, 1))
    }

    /// y = silu(gate) · up over n elements; with a positive `limit`, gate = min(gate, limit)
    /// and up = clamp(up, −limit, limit) first (DeepSeek V4's `swiglu_limit`).
    pub fn swiglu(
        &self,
        gate: &wgpu::Buffer,
        up: &wgpu::Buffer,
        y: &wgpu::Buffer,
        n: usize,
        limit: f32,
    ) -> Result<(), EngineError> {
        let groups = elementwise_groups(u32_of("n", n)?);
        let p = ActivationParams::new(u32_of("n", n)?, groups.0).with_limit(limit);
        self.dispatch(
            Kernel::Swiglu,
            &p,
            &[gate.into(), up.into(), y.into()],
            groups,
        )
    }

    /// out [ids.len(), dim] = rows of a [vocab, dim] table; ids are checked on the host first.
    #[allow(clippy::too_many_arguments)]
    pub fn embedding(
        &self,
        format: EmbeddingFormat,
        table: &wgpu::Buffer,
        vocab: usize,
        dim: usize,
        ids: &[u32],
        out: &wgpu::Buffer,
    ) -> Result<(), EngineError> {
        if let Some((position, &id)) = ids.iter().enumerate().find(|(_, &id)| id as usize >= vocab)
        {
            return Err(kernel_err(Kernel::Embedding)(KernelError::TokenId {
                id,
                position,
                vocab,
            }));
        }
        let idb = self
            .gpu
            .upload_u32("ids", ids)
            .map_err(kernel_err(Kernel::Embedding))?;
        let (gx, gy) = grid_2d(u32_of("tokens", ids.len())?);
        let p = EmbeddingParams {
            dim: u32_of("dim", dim)?,
            tokens: u32_of("tokens", ids.len())?,
            vocab: u32_of("vocab", vocab)?,
            dtype: format.code(),
            groups_x: gx,
            _pad: [0; 3],
        };
        self.dispatch(
            Kernel::Embedding,
            &p,
            &[(&idb).into(), table.into(), out.into()],
            (gx, gy, 1),
        )
    }

    /// The first-maximum index of each of `rows` rows of `n` logits, read back to the host.
    pub fn argmax(&self, v: &wgpu::Buffer, n: usize, rows: usize) -> Result<Vec<u32>, EngineError> {
        let (gx, gy) = grid_2d(u32_of("rows", rows)?);
        let out = self
            .gpu
            .zeros("argmax", (rows as u64) * 4)
            .map_err(kernel_err(Kernel::Argmax))?;
        let p = ArgmaxParams {
            n: u32_of("n", n)?,
            rows: u32_of("rows", rows)?,
            groups_x: gx,
            _pad: 0,
        };
        self.dispatch(Kernel::Argmax, &p, &[v.into(), (&out).into()], (gx, gy, 1))?;
        // a read inside a batch must see the recorded work
        self.flush();
        self.gpu
            .read_u32(&out, rows)
            .map_err(kernel_err(Kernel::Argmax))
    }
}
