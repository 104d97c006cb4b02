//! A small wgpu dispatch harness: device set-up kept apart from the work (`Gpu::new` acquires an
//! adapter, `Gpu::with_device` takes one the caller already has, as wgpu's `execute_gpu`/`_inner`
//! split), pipelines compiled once per [`Kernel`] with explicit bind-group layouts from
//! [`Kernel::storage`], storage uploads checked against the device's binding limit (128 MiB on
//! Mesa lavapipe, oracles.md), and blocking readback. The runner's engine builds on this.
//!
//! This is the one wrapper through which every queue submit, buffer write, buffer map and resource
//! creation of the runner passes: each is counted in [`GpuStats`] (`minirun-run --stats`), and
//! `runner/tests/engine_counters.rs` fails if any other source file reaches wgpu's submit, map or
//! create calls directly.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use bytemuck::Pod;
use wgpu::util::DeviceExt;

mod stats;

pub use crate::device::{Adapter, Backends, DeviceRequest, ShaderStats};
use crate::error::KernelError;
use crate::generated::BindingKind;
use crate::kernel::{Access, Kernel};
pub use crate::launch::{
    elementwise_groups, entry_point, matmul_groups, matmul_launch, MatvecShape,
};
use stats::{bump, Counters, DEVICES_OPENED};
pub use stats::{devices_opened, GpuStats};

/// Usage of every storage buffer: also bindable as a uniform block (the uniform-x matvec) and
/// copyable both ways.
const STORAGE_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::UNIFORM)
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

/// A compiled kernel: its bind-group layout and pipeline.
pub struct Compiled {
    layout: wgpu::BindGroupLayout,
    pipeline: wgpu::ComputePipeline,
}

/// Which module of a kernel a pipeline runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Variant {
    /// The kernel's own module (input vectors in a storage buffer).
    Storage,
    /// A matmul module with binding 1 as a 64 KiB uniform block ([`crate::X_UNIFORM`]).
    UniformX,
    /// A matmul module with the subgroup-reduction entry points ([`Kernel::subgroup_source`]).
    Subgroup,
    /// The shared-memory tiled matmul ([`Kernel::tiled_source`]), with the LANES fold or the
    /// subgroup reduction.
    Tiled,
    TiledSubgroup,
}

/// A device, its queue and the pipelines compiled on it.
pub struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: Option<wgpu::AdapterInfo>,
    shape: MatvecShape,
    /// Whether the `Lanes` matmul pipelines reduce with subgroup operations
    /// (docs/kernels.md "Subgroup reduction").
    subgroups: bool,
    pipelines: Mutex<HashMap<(Kernel, Variant), Arc<Compiled>>>,
    generated: Mutex<HashMap<String, Arc<Compiled>>>,
    counters: Counters,
}

/// Staging memory for [`Gpu::write_in`], owned by one recorder (one thread's encoders, submitted
/// through [`Gpu::submit_staged`]): chunks mapped for writing, reused once the submit that copied
/// from them is done (`Queue::write_buffer` makes and frees a staging buffer per call). Not
/// shared: another thread's submit must not close chunks an unsubmitted encoder still copies
/// from.
pub struct Staging(wgpu::util::StagingBelt);

/// Bytes of one staging chunk of [`Gpu::write_in`] (one-token inputs are a few KiB; a larger
/// write gets a chunk of its own size).
const BELT_CHUNK: u64 = 256 * 1024;

/// One storage binding: a whole buffer, or a window of one (e.g. the scale sub-region of a tile
/// slot; offsets must be multiples of the device's storage offset alignment, 256 bytes or less).
#[derive(Clone, Copy)]
pub struct Bind<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub offset: u64,
    pub size: Option<u64>,
}

impl<'a> From<&'a wgpu::Buffer> for Bind<'a> {
    fn from(buffer: &'a wgpu::Buffer) -> Self {
        Bind {
            buffer,
            offset: 0,
            size: None,
        }
    }
}

impl Gpu {
    /// Acquires the default adapter (Mesa lavapipe on a machine without a GPU) and a device with
    /// the adapter's own limits (so the largest storage binding it allows).
    pub fn new() -> Result<Self, KernelError> {
        Self::new_with_shape(None)
    }

    /// As [`Gpu::new`], with the matvec row mapping forced to `shape` (`None`: the adapter's
    /// default, [`MatvecShape::for_device_type`]).
    pub fn new_with_shape(shape: Option<MatvecShape>) -> Result<Self, KernelError> {
        Self::new_with(shape, None)
    }

    /// As [`Gpu::new_with_shape`], with the subgroup reduction of the `Lanes` matmul kernels
    /// forced on or off (`None`: on where the adapter has subgroups, is not a CPU adapter and the
    /// mapping is `Lanes`; docs/kernels.md "Subgroup reduction"). Forcing it on refuses an
    /// adapter without subgroups.
    pub fn new_with(
        shape: Option<MatvecShape>,
        subgroups: Option<bool>,
    ) -> Result<Self, KernelError> {
        Self::open(DeviceRequest {
            backends: Backends::choose(None)?,
            shape,
            subgroups,
        })
    }

    /// Opens a device as `request` says: the adapter on its backends
    /// ([`crate::device::request`]), the adapter's own limits, the row mapping and subgroup
    /// choice above. The one place a device is requested.
    pub fn open(request: DeviceRequest) -> Result<Self, KernelError> {
        let adapter = crate::device::request(&request.backends)?;
        let info = adapter.get_info();
        let shape = request
            .shape
            .unwrap_or(MatvecShape::for_device_type(info.device_type));
        let has = adapter.features().contains(wgpu::Features::SUBGROUP);
        let subgroups = match request.subgroups {
            Some(true) if !has => return Err(KernelError::NoSubgroups(info.name.clone())),
            Some(on) => on,
            None => has && info.device_type != wgpu::DeviceType::Cpu,
        } && shape == MatvecShape::Lanes;
        let features = if subgroups {
            wgpu::Features::SUBGROUP
        } else {
            wgpu::Features::empty()
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("kernels"),
            required_features: features,
            required_limits: adapter.limits(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(KernelError::Device)?;
        bump(&DEVICES_OPENED, 1);
        let gpu = Self::with_device(device, queue);
        Ok(Self {
            shape,
            subgroups,
            info: Some(info),
            ..gpu
        })
    }

    /// The adapter this device was opened on (`None` for a device the caller set up).
    pub fn adapter(&self) -> Option<Adapter> {
        self.info.as_ref().map(Adapter::from_info)
    }

    /// Pipelines compiled on this device so far and the time their compilation took.
    pub fn shader_stats(&self) -> ShaderStats {
        ShaderStats {
            pipelines: self.counters.pipelines.load(Ordering::Relaxed),
            seconds: self.counters.compile_ns.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }

    /// Wraps a device the caller set up (tests, or an engine sharing one device).
    pub fn with_device(device: wgpu::Device, queue: wgpu::Queue) -> Self {
        Self {
            device,
            queue,
            info: None,
            shape: MatvecShape::Lanes,
            subgroups: false,
            pipelines: Mutex::new(HashMap::new()),
            generated: Mutex::new(HashMap::new()),
            counters: Counters::default(),
        }
    }

    /// The row mapping the matmul kernels use on this device (fixed when it was set up, so
    /// every pipeline and grid of one `Gpu` agree).
    pub fn matvec_shape(&self) -> MatvecShape {
        self.shape
    }

    /// Whether the `Lanes` matmul kernels reduce with subgroup operations (fixed at set-up).
    pub fn subgroups(&self) -> bool {
        self.subgroups
    }

    /// What crossed the wgpu API so far.
    pub fn stats(&self) -> GpuStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        GpuStats {
            submits: get(&c.submits),
            dispatches: get(&c.dispatches),
            bytes_uploaded: get(&c.bytes_uploaded),
            bytes_read_back: get(&c.bytes_read_back),
            maps: get(&c.maps),
            buffers_created: get(&c.buffers_created),
            bind_groups_created: get(&c.bind_groups_created),
            device_bytes_allocated: get(&c.device_bytes_allocated),
        }
    }

    /// Submits recorded work (the only `Queue::submit` of the runner). The staging chunks of
    /// [`Gpu::write_in`] are closed before and recalled after it.
    pub fn submit(&self, commands: wgpu::CommandBuffer) {
        bump(&self.counters.submits, 1);
        self.queue.submit(Some(commands));
    }

    /// New staging memory for [`Gpu::write_in`] (its chunks are made as writes need them).
    pub fn write_staging(&self) -> Staging {
        Staging(wgpu::util::StagingBelt::new(
            self.device.clone(),
            BELT_CHUNK,
        ))
    }

    /// [`Gpu::submit`] of commands that [`Gpu::write_in`] wrote into from `staging`: its chunks
    /// are closed before and recalled after.
    pub fn submit_staged(&self, staging: &mut Staging, commands: wgpu::CommandBuffer) {
        staging.0.finish();
        self.submit(commands);
        staging.0.recall();
    }

    /// Writes `bytes` into `buffer` at `offset` as a copy recorded into `enc` (so before what
    /// `enc` records next), from staging memory that is reused from one submit to the next:
    /// nothing is created per write once warm. `enc` must be submitted through
    /// [`Gpu::submit_staged`] with the same `staging`. Offsets and lengths are whole words, as for [`Gpu::write`] (wgpu's copy
    /// alignment; anything else goes to `Queue::write_buffer`, whose validation names it).
    pub fn write_in(
        &self,
        staging: &mut Staging,
        enc: &mut wgpu::CommandEncoder,
        buffer: &wgpu::Buffer,
        offset: u64,
        bytes: &[u8],
    ) {
        let size = wgpu::BufferSize::new(bytes.len() as u64)
            .filter(|n| n.get() % wgpu::COPY_BUFFER_ALIGNMENT == 0)
            .filter(|_| offset % wgpu::COPY_BUFFER_ALIGNMENT == 0);
        let Some(size) = size else {
            return self.write(buffer, offset, bytes);
        };
        bump(&self.counters.bytes_uploaded, bytes.len() as u64);
        staging
            .0
            .write_buffer(enc, buffer, offset, size)
            .copy_from_slice(bytes);
    }

    /// Writes `bytes` into `buffer` at `offset`; applied before the next [`Gpu::submit`] runs.
    pub fn write(&self, buffer: &wgpu::Buffer, offset: u64, bytes: &[u8]) {
        bump(&self.counters.bytes_uploaded, bytes.len() as u64);
        self.queue.write_buffer(buffer, offset, bytes);
    }

    /// Counts one compiled pipeline and the time it took.
    fn count_compile(&self, took: std::time::Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        bump(&self.counters.compile_ns, ns);
        bump(&self.counters.pipelines, 1);
    }

    fn count_buffer(&self, size: u64) {
        bump(&self.counters.buffers_created, 1);
        bump(&self.counters.device_bytes_allocated, size);
    }

    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// The adapter, when this `Gpu` acquired it itself.
    pub fn adapter_info(&self) -> Option<&wgpu::AdapterInfo> {
        self.info.as_ref()
    }

    /// The largest storage binding the device accepts.
    pub fn max_binding(&self) -> u64 {
        self.device.limits().max_storage_buffer_binding_size
    }

    /// The compiled pipeline of `kernel` (for this device's [`MatvecShape`]), compiling it on
    /// first use.
    pub fn compiled(&self, kernel: Kernel) -> Arc<Compiled> {
        if self.shape == MatvecShape::Lanes && kernel.entry_point() == "matmul" {
            let (sg, variant) = match self.subgroups {
                true => (true, Variant::TiledSubgroup),
                false => (false, Variant::Tiled),
            };
            if let Some(c) = self.compile(kernel, variant, || kernel.tiled_source(sg)) {
                return c;
            }
        }
        if self.subgroups && self.shape == MatvecShape::Lanes {
            if let Some(c) = self.compile(kernel, Variant::Subgroup, || kernel.subgroup_source()) {
                return c;
            }
        }
        let mut cache = self.cache();
        let key = (kernel, Variant::Storage);
        if let Some(c) = cache.get(&key) {
            return Arc::clone(c);
        }
        let compiled = Arc::new(self.build(kernel, Variant::Storage, kernel.source()));
        cache.insert(key, Arc::clone(&compiled));
        compiled
    }

    /// The pipeline of a matmul `kernel` whose input vectors (binding 1) are a 64 KiB uniform
    /// block ([`crate::X_UNIFORM`]); `None` for other kernels.
    pub fn compiled_uniform_x(&self, kernel: Kernel) -> Option<Arc<Compiled>> {
        self.compile(kernel, Variant::UniformX, || kernel.uniform_x_source())
    }

    fn compile(
        &self,
        kernel: Kernel,
        variant: Variant,
        source: impl FnOnce() -> Option<String>,
    ) -> Option<Arc<Compiled>> {
        let key = (kernel, variant);
        let mut cache = self.cache();
        if let Some(c) = cache.get(&key) {
            return Some(Arc::clone(c));
        }
        let compiled = Arc::new(self.build(kernel, variant, &source()?));
        cache.insert(key, Arc::clone(&compiled));
        Some(compiled)
    }

    /// The pipeline of a generated module (compiled once per label).
    pub fn compiled_generated(&self, g: &crate::generated::Generated) -> Arc<Compiled> {
        let mut cache = match self.generated.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(c) = cache.get(&g.label) {
            return Arc::clone(c);
        }
        let entries: Vec<wgpu::BindGroupLayoutEntry> = g
            .bindings
            .iter()
            .map(|(binding, kind)| layout_entry(*binding, *kind))
            .collect();
        let compiled = Arc::new(self.pipeline(&g.label, &g.source, g.entry, &entries));
        cache.insert(g.label.clone(), Arc::clone(&compiled));
        compiled
    }

    /// A bind group for a generated module: `binds[i]` at the binding its `bindings[i]` names.
    pub fn bind_group_generated(
        &self,
        compiled: &Compiled,
        g: &crate::generated::Generated,
        binds: &[Bind<'_>],
    ) -> Result<wgpu::BindGroup, KernelError> {
        if binds.len() != g.bindings.len() {
            return Err(KernelError::GeneratedBindings {
                label: g.label.clone(),
                expected: g.bindings.len(),
                actual: binds.len(),
            });
        }
        let entries: Vec<wgpu::BindGroupEntry<'_>> = binds
            .iter()
            .zip(&g.bindings)
            .map(|(b, (binding, _))| wgpu::BindGroupEntry {
                binding: *binding,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: b.buffer,
                    offset: b.offset,
                    size: b.size.and_then(wgpu::BufferSize::new),
                }),
            })
            .collect();
        bump(&self.counters.bind_groups_created, 1);
        Ok(self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(&g.label),
            layout: &compiled.layout,
            entries: &entries,
        }))
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<(Kernel, Variant), Arc<Compiled>>> {
        match self.pipelines.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Compiles `source` as `kernel`'s pipeline in `variant` (its layout from
    /// [`Kernel::storage`], binding 1 a uniform block unless `variant` is `Storage`).
    fn build(&self, kernel: Kernel, variant: Variant, source: &str) -> Compiled {
        let entry = match (variant, entry_point(kernel, self.shape)) {
            (Variant::Subgroup, "matvec") => "matvec_sg",
            (Variant::Tiled, _) => "matmul_tiled",
            (Variant::TiledSubgroup, _) => "matmul_tiled_sg",
            (_, entry) => entry,
        };
        let uniform_x = variant == Variant::UniformX;
        let mut entries = vec![layout_entry(0, BindingKind::Uniform)];
        for (i, access) in kernel.storage().iter().enumerate() {
            let kind = if i == 0 && uniform_x {
                BindingKind::Uniform
            } else {
                BindingKind::Storage {
                    read_only: *access == Access::Read,
                }
            };
            entries.push(layout_entry(i as u32 + 1, kind));
        }
        self.pipeline(kernel.name(), source, entry, &entries)
    }

    /// Compiles `source`'s `entry` with one bind group of `entries`.
    fn pipeline(
        &self,
        label: &str,
        source: &str,
        entry: &str,
        entries: &[wgpu::BindGroupLayoutEntry],
    ) -> Compiled {
        let t0 = std::time::Instant::now();
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(source.to_string().into()),
            });
        let layout = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(label),
                entries,
            });
        let pipeline_layout = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(label),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(entry),
                compilation_options: wgpu::PipelineCompilationOptions::default(),
                cache: None,
            });
        self.count_compile(t0.elapsed());
        Compiled { layout, pipeline }
    }

    /// A storage buffer holding `bytes`, zero padded to a multiple of 4 (the kernels read u32
    /// words), refused if it exceeds the binding limit.
    pub fn upload(&self, label: &str, bytes: &[u8]) -> Result<wgpu::Buffer, KernelError> {
        let padded = bytes.len().div_ceil(4).max(1) * 4;
        self.check_binding(padded as u64)?;
        let mut data = Vec::with_capacity(padded);
        data.extend_from_slice(bytes);
        data.resize(padded, 0);
        self.count_buffer(padded as u64);
        bump(&self.counters.bytes_uploaded, padded as u64);
        Ok(self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: &data,
                usage: STORAGE_USAGE,
            }))
    }

    pub fn upload_f32(&self, label: &str, values: &[f32]) -> Result<wgpu::Buffer, KernelError> {
        self.upload(label, bytemuck::cast_slice(values))
    }

    pub fn upload_u32(&self, label: &str, values: &[u32]) -> Result<wgpu::Buffer, KernelError> {
        self.upload(label, bytemuck::cast_slice(values))
    }

    /// A zero-filled storage buffer of `bytes` (rounded up to 4).
    pub fn zeros(&self, label: &str, bytes: u64) -> Result<wgpu::Buffer, KernelError> {
        let size = bytes.div_ceil(4).max(1) * 4;
        self.check_binding(size)?;
        self.count_buffer(size);
        Ok(self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: STORAGE_USAGE,
            mapped_at_creation: false,
        }))
    }

    fn check_binding(&self, bytes: u64) -> Result<(), KernelError> {
        let limit = self.max_binding();
        if bytes > limit {
            return Err(KernelError::BindingTooLarge { bytes, limit });
        }
        Ok(())
    }

    /// Records and submits one dispatch of `kernel` with `params` at binding 0 and `buffers` at
    /// bindings 1, 2, … (in [`Kernel::storage`] order).
    pub fn dispatch<P: Pod>(
        &self,
        kernel: Kernel,
        params: &P,
        buffers: &[Bind<'_>],
        groups: (u32, u32, u32),
    ) -> Result<(), KernelError> {
        let mut encoder = self.encoder(kernel.name());
        self.encode(&mut encoder, kernel, params, buffers, groups)?;
        self.submit(encoder.finish());
        Ok(())
    }

    /// A command encoder on this device, for [`Gpu::encode`].
    pub fn encoder(&self, label: &str) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) })
    }

    /// Records one dispatch into `encoder` (its own compute pass, so wgpu orders it after the
    /// passes recorded before it); nothing runs until the encoder is submitted.
    pub fn encode<P: Pod>(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        kernel: Kernel,
        params: &P,
        buffers: &[Bind<'_>],
        groups: (u32, u32, u32),
    ) -> Result<(), KernelError> {
        let compiled = self.compiled(kernel);
        let uniform = self.uniform(kernel.name(), bytemuck::bytes_of(params));
        let bind_group = self.bind_group(kernel, &uniform.as_entire_binding(), buffers)?;
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(kernel.name()),
            timestamp_writes: None,
        });
        self.dispatch_in(&mut pass, &compiled, &bind_group, groups);
        Ok(())
    }

    /// A uniform buffer holding `bytes` (a parameter block).
    pub fn uniform(&self, label: &str, bytes: &[u8]) -> wgpu::Buffer {
        self.buffer_with(label, bytes, wgpu::BufferUsages::UNIFORM)
    }

    /// A buffer a one-token product reads its input from, holding `bytes`: bound as a uniform
    /// block by the `Rows` mapping's modules and as a storage buffer by the others.
    pub fn input_window(&self, label: &str, bytes: &[u8]) -> wgpu::Buffer {
        let usage = wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::STORAGE;
        self.buffer_with(label, bytes, usage)
    }

    /// A buffer holding `bytes` with `usage` (and `COPY_DST`), counted.
    fn buffer_with(&self, label: &str, bytes: &[u8], usage: wgpu::BufferUsages) -> wgpu::Buffer {
        self.count_buffer(bytes.len() as u64);
        bump(&self.counters.bytes_uploaded, bytes.len() as u64);
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytes,
                usage: usage | wgpu::BufferUsages::COPY_DST,
            })
    }

    /// A bind group for `kernel`: `params` at binding 0 and `buffers` at 1, 2, … (in
    /// [`Kernel::storage`] order). A recorded forward creates these once and reuses them.
    pub fn bind_group(
        &self,
        kernel: Kernel,
        params: &wgpu::BindingResource<'_>,
        buffers: &[Bind<'_>],
    ) -> Result<wgpu::BindGroup, KernelError> {
        self.bind_group_for(&self.compiled(kernel), kernel, params, buffers)
    }

    /// As [`Gpu::bind_group`], for a pipeline made by [`Gpu::compiled`] or
    /// [`Gpu::compiled_uniform_x`].
    pub fn bind_group_for(
        &self,
        compiled: &Compiled,
        kernel: Kernel,
        params: &wgpu::BindingResource<'_>,
        buffers: &[Bind<'_>],
    ) -> Result<wgpu::BindGroup, KernelError> {
        let expected = kernel.storage().len();
        if buffers.len() != expected {
            return Err(KernelError::Bindings {
                kernel: kernel.name(),
                expected,
                actual: buffers.len(),
            });
        }
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: params.clone(),
        }];
        for (i, b) in buffers.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: b.buffer,
                    offset: b.offset,
                    size: b.size.and_then(wgpu::BufferSize::new),
                }),
            });
        }
        bump(&self.counters.bind_groups_created, 1);
        Ok(self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(kernel.name()),
            layout: &compiled.layout,
            entries: &entries,
        }))
    }

    /// Records one dispatch of a compiled kernel with a bind group made by [`Gpu::bind_group`]
    /// into an open compute pass (many dispatches share one pass; wgpu orders their storage
    /// accesses).
    pub fn dispatch_in(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        compiled: &Compiled,
        bind_group: &wgpu::BindGroup,
        groups: (u32, u32, u32),
    ) {
        bump(&self.counters.dispatches, 1);
        pass.set_pipeline(&compiled.pipeline);
        pass.set_bind_group(0, bind_group, &[]);
        pass.dispatch_workgroups(groups.0, groups.1, groups.2);
    }

    /// A host-mappable buffer of `bytes` for [`Gpu::read_staging`] (created once, reused).
    pub fn staging(&self, label: &str, bytes: u64) -> wgpu::Buffer {
        let size = bytes.div_ceil(4).max(1) * 4;
        self.count_buffer(size);
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Waits for the queue, maps `staging` (filled by a copy already submitted) and appends its
    /// first `bytes` bytes to `out`.
    pub fn read_staging(
        &self,
        staging: &wgpu::Buffer,
        bytes: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), KernelError> {
        let (tx, rx) = mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| KernelError::Readback(e.to_string()))?;
        rx.recv()
            .map_err(|e| KernelError::Readback(e.to_string()))?
            .map_err(|e| KernelError::Readback(e.to_string()))?;
        let view = staging
            .get_mapped_range(..)
            .map_err(|e| KernelError::Readback(e.to_string()))?;
        let n = (bytes as usize).min(view.len());
        out.extend_from_slice(view.get(..n).unwrap_or_default());
        drop(view);
        staging.unmap();
        bump(&self.counters.maps, 1);
        bump(&self.counters.bytes_read_back, n as u64);
        Ok(())
    }

    /// Copies the first `bytes` bytes of `buffer` back to the host (waits for the queue).
    pub fn read_bytes(&self, buffer: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>, KernelError> {
        let size = bytes.div_ceil(4).max(1) * 4;
        let staging = self.staging("readback", size);
        let mut encoder = self.encoder("readback");
        encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, size);
        self.submit(encoder.finish());
        let mut out = Vec::with_capacity(bytes as usize);
        self.read_staging(&staging, bytes, &mut out)?;
        Ok(out)
    }

    pub fn read_f32(&self, buffer: &wgpu::Buffer, n: usize) -> Result<Vec<f32>, KernelError> {
        let bytes = self.read_bytes(buffer, (n * 4) as u64)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    pub fn read_u32(&self, buffer: &wgpu::Buffer, n: usize) -> Result<Vec<u32>, KernelError> {
        let bytes = self.read_bytes(buffer, (n * 4) as u64)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}

/// The layout entry of binding `binding` of kind `kind` (compute stage).
fn layout_entry(binding: u32, kind: BindingKind) -> wgpu::BindGroupLayoutEntry {
    let ty = match kind {
        BindingKind::Uniform => wgpu::BufferBindingType::Uniform,
        BindingKind::Storage { read_only } => wgpu::BufferBindingType::Storage { read_only },
    };
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}
