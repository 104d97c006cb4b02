//! A small wgpu dispatch harness: device set-up kept apart from the work (`Gpu::new` acquires an
//! adapter, `Gpu::with_device` takes one the caller already has, as wgpu's `execute_gpu`/`_inner`
//! split), pipelines compiled once per [`Kernel`] with explicit bind-group layouts from
//! [`Kernel::storage`], storage uploads checked against the device's binding limit (128 MiB on
//! Mesa lavapipe, oracles.md), and blocking readback. The runner's engine builds on this.

use std::collections::HashMap;
use std::sync::{mpsc, Arc, Mutex};

use bytemuck::Pod;
use wgpu::util::DeviceExt;

use crate::error::KernelError;
use crate::kernel::{Access, Kernel};

struct Compiled {
    layout: wgpu::BindGroupLayout,
    pipeline: wgpu::ComputePipeline,
}

/// A device, its queue and the pipelines compiled on it.
pub struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: Option<wgpu::AdapterInfo>,
    pipelines: Mutex<HashMap<Kernel, Arc<Compiled>>>,
}

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
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let options = wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        };
        let adapter = pollster::block_on(instance.request_adapter(&options))
            .map_err(|_| KernelError::NoAdapter)?;
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("kernels"),
            required_features: wgpu::Features::empty(),
            required_limits: adapter.limits(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(KernelError::Device)?;
        let mut gpu = Self::with_device(device, queue);
        gpu.info = Some(adapter.get_info());
        Ok(gpu)
    }

    /// Wraps a device the caller set up (tests, or an engine sharing one device).
    pub fn with_device(device: wgpu::Device, queue: wgpu::Queue) -> Self {
        Self {
            device,
            queue,
            info: None,
            pipelines: Mutex::new(HashMap::new()),
        }
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

    /// The compiled pipeline of `kernel`, compiling it on first use.
    fn compiled(&self, kernel: Kernel) -> Arc<Compiled> {
        let mut cache = match self.pipelines.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(c) = cache.get(&kernel) {
            return Arc::clone(c);
        }
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(kernel.file()),
                source: wgpu::ShaderSource::Wgsl(kernel.source().into()),
            });
        let mut entries = vec![wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        }];
        for (i, access) in kernel.storage().iter().enumerate() {
            entries.push(wgpu::BindGroupLayoutEntry {
                binding: i as u32 + 1,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage {
                        read_only: *access == Access::Read,
                    },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            });
        }
        let layout = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(kernel.name()),
                entries: &entries,
            });
        let pipeline_layout = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(kernel.name()),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(kernel.name()),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(kernel.entry_point()),
                compilation_options: wgpu::PipelineCompilationOptions::default(),
                cache: None,
            });
        let compiled = Arc::new(Compiled { layout, pipeline });
        cache.insert(kernel, Arc::clone(&compiled));
        compiled
    }

    /// A storage buffer holding `bytes`, zero padded to a multiple of 4 (the kernels read u32
    /// words), refused if it exceeds the binding limit.
    pub fn upload(&self, label: &str, bytes: &[u8]) -> Result<wgpu::Buffer, KernelError> {
        let padded = bytes.len().div_ceil(4).max(1) * 4;
        self.check_binding(padded as u64)?;
        let mut data = Vec::with_capacity(padded);
        data.extend_from_slice(bytes);
        data.resize(padded, 0);
        Ok(self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: &data,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
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
        Ok(self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
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
        self.queue.submit(Some(encoder.finish()));
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
        let expected = kernel.storage().len();
        if buffers.len() != expected {
            return Err(KernelError::Bindings {
                kernel: kernel.name(),
                expected,
                actual: buffers.len(),
            });
        }
        let compiled = self.compiled(kernel);
        let uniform = self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("params"),
                contents: bytemuck::bytes_of(params),
                usage: wgpu::BufferUsages::UNIFORM,
            });
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: uniform.as_entire_binding(),
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
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(kernel.name()),
            layout: &compiled.layout,
            entries: &entries,
        });
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(kernel.name()),
            timestamp_writes: None,
        });
        pass.set_pipeline(&compiled.pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(groups.0, groups.1, groups.2);
        Ok(())
    }

    /// Copies the first `bytes` bytes of `buffer` back to the host (waits for the queue).
    pub fn read_bytes(&self, buffer: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>, KernelError> {
        let size = bytes.div_ceil(4).max(1) * 4;
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("readback"),
            });
        encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, size);
        self.queue.submit(Some(encoder.finish()));
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
        let mut out = view.to_vec();
        drop(view);
        staging.unmap();
        out.truncate(bytes as usize);
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

/// The grid for a matvec (`tokens = 1`) or matmul over `rows` rows: rows on x/y, token tiles on z.
pub fn matmul_groups(kernel: Kernel, rows: u32, tokens: u32) -> (u32, u32, u32) {
    let (gx, gy) = crate::grid_2d(rows);
    let gz = match kernel.entry_point() {
        "matmul" => tokens.div_ceil(crate::TOKEN_TILE).max(1),
        _ => 1,
    };
    (gx, gy, gz)
}

/// The grid for an element-wise kernel over `n` invocations of `ELEMENTWISE_WORKGROUP`-sized groups.
pub fn elementwise_groups(n: u32) -> (u32, u32, u32) {
    let (gx, gy) = crate::grid_2d(n.div_ceil(crate::ELEMENTWISE_WORKGROUP));
    (gx, gy, 1)
}
