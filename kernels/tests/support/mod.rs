//! Shared set-up of the GPU kernel tests: the adapter (skip or fail without one), a seeded RNG,
//! bitwise and tolerance assertions, and the matmul cases every format is checked on.

#![allow(dead_code, clippy::panic)]

use std::io::Write;
use std::sync::OnceLock;

use kernels::gpu::{matmul_launch, Bind, Gpu};
use kernels::{Dtype, Kernel, KernelError, WeightFormat};

pub fn adapter() -> Option<&'static Gpu> {
    static GPU: OnceLock<Option<Gpu>> = OnceLock::new();
    GPU.get_or_init(|| match Gpu::new() {
        Ok(g) => {
            if let Some(info) = g.adapter_info() {
                let _ = writeln!(
                    std::io::stderr(),
                    "gpu tests on {} ({:?}, {:?})",
                    info.name,
                    info.backend,
                    info.device_type
                );
            }
            Some(g)
        }
        Err(KernelError::NoAdapter { .. }) => None,
        Err(e) => panic!("gpu set-up failed: {e}"),
    })
    .as_ref()
}

/// The adapter, or `None` after printing a visible skip; panics under MINIRUN_REQUIRE_ADAPTER=1.
pub fn gpu(test: &str) -> Option<&'static Gpu> {
    let g = adapter();
    if g.is_none() {
        if std::env::var("MINIRUN_REQUIRE_ADAPTER").is_ok_and(|v| v == "1") {
            panic!("{test}: no wgpu adapter and MINIRUN_REQUIRE_ADAPTER=1 (install mesa-vulkan-drivers)");
        }
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: no wgpu adapter (install mesa-vulkan-drivers; set MINIRUN_REQUIRE_ADAPTER=1 to fail instead)"
        );
    }
    g
}

/// Deterministic xorshift64* so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    pub fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit()
    }
    pub fn normals(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.range(-1.0, 1.0) * scale).collect()
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

pub fn assert_close(what: &str, actual: &[f32], expected: &[f32], tol: impl Fn(usize) -> f32) {
    assert_eq!(actual.len(), expected.len(), "{what}: length");
    let (mut worst, mut used) = (0f32, 0f32);
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        let t = tol(i);
        let d = (a - e).abs();
        assert!(
            d <= t || (a.is_nan() && e.is_nan()),
            "{what}: index {i}: actual {a:e}, expected {e:e}, |Δ| {d:e} > tolerance {t:e}"
        );
        worst = worst.max(d);
        if t > 0.0 {
            used = used.max(d / t);
        }
    }
    let _ = writeln!(
        std::io::stderr(),
        "{what}: max |Δ| = {worst:e} ({:.1}% of its tolerance) over {} values",
        used * 100.0,
        actual.len()
    );
}

pub fn assert_bits(what: &str, a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{what}: length");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(
            x.to_bits(),
            y.to_bits(),
            "{what}: index {i}: {x:e} vs {y:e} differ in bits"
        );
    }
}

/// A random matrix in `format` with realistic scales.
pub struct Case {
    pub name: String,
    pub format: WeightFormat,
    pub rows: usize,
    pub k: usize,
    pub packed: Vec<u8>,
    pub scales: Vec<u8>,
    pub biases: Vec<u8>,
    /// A row where the matrix can be split into two tiles.
    pub split: usize,
}

pub fn dtype_bytes(dtype: Dtype, values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| match dtype {
            Dtype::F32 => v.to_le_bytes().to_vec(),
            Dtype::F16 => half::f16::from_f32(v).to_bits().to_le_bytes().to_vec(),
            Dtype::Bf16 => half::bf16::from_f32(v).to_bits().to_le_bytes().to_vec(),
        })
        .collect()
}

pub fn f16_bytes(v: f32) -> [u8; 2] {
    half::f16::from_f32(v).to_bits().to_le_bytes()
}

pub fn case(format: WeightFormat, rows: usize, k: usize, split: usize, rng: &mut Rng) -> Case {
    let n = rows * k;
    let (packed, scales, biases) = match format {
        WeightFormat::Plain(d) => (dtype_bytes(d, &rng.normals(n, 1.0)), vec![], vec![]),
        WeightFormat::Fp8Block { block_rows, group } => {
            let packed = rng
                .bytes(n)
                .into_iter()
                .map(|b| if b & 0x7f == 0x7f { b ^ 1 } else { b })
                .collect();
            let cells = rows.div_ceil(block_rows as usize) * k.div_ceil(group as usize);
            let scales = (0..cells).map(|_| 118 + (rng.next() % 6) as u8).collect();
            (packed, scales, vec![])
        }
        WeightFormat::Mxfp4 => {
            let scales = (0..n / 32).map(|_| 124 + (rng.next() % 6) as u8).collect();
            (rng.bytes(n / 2), scales, vec![])
        }
        WeightFormat::Affine8 { group, scale_dtype } => {
            let g = n / group as usize;
            let s: Vec<f32> = (0..g).map(|_| rng.range(-0.02, 0.02)).collect();
            let b: Vec<f32> = rng.normals(g, 1.0);
            (
                rng.bytes(n),
                dtype_bytes(scale_dtype, &s),
                dtype_bytes(scale_dtype, &b),
            )
        }
        WeightFormat::Q8_0 => {
            let mut out = Vec::new();
            for _ in 0..n / 32 {
                out.extend(
                    half::f16::from_f32(rng.range(0.001, 0.02))
                        .to_bits()
                        .to_le_bytes(),
                );
                out.extend(rng.bytes(32));
            }
            (out, vec![], vec![])
        }
        WeightFormat::Q4_1 => {
            let mut out = Vec::new();
            for _ in 0..n / 32 {
                out.extend(
                    half::f16::from_f32(rng.range(0.01, 0.1))
                        .to_bits()
                        .to_le_bytes(),
                );
                out.extend(
                    half::f16::from_f32(rng.range(-0.8, 0.0))
                        .to_bits()
                        .to_le_bytes(),
                );
                out.extend(rng.bytes(16));
            }
            (out, vec![], vec![])
        }
        // Q5_0/Q5_1/K-quants: random level and scale bytes behind small f16 scales (formats.md §5.2)
        WeightFormat::Q4_0 | WeightFormat::Q5_0 | WeightFormat::Q5_1 => {
            let mut out = Vec::new();
            for _ in 0..n / 32 {
                out.extend(f16_bytes(rng.range(0.01, 0.05)));
                if format == WeightFormat::Q4_0 {
                    out.extend(rng.bytes(16));
                    continue;
                }
                if format == WeightFormat::Q5_1 {
                    out.extend(f16_bytes(rng.range(-0.8, 0.0)));
                }
                out.extend(rng.bytes(20));
            }
            (out, vec![], vec![])
        }
        WeightFormat::Q4K | WeightFormat::Q5K => {
            let mut out = Vec::new();
            for _ in 0..n / 256 {
                out.extend(f16_bytes(rng.range(0.0005, 0.002)));
                out.extend(f16_bytes(rng.range(0.0005, 0.01)));
                out.extend(rng.bytes(if format == WeightFormat::Q5K {
                    172
                } else {
                    140
                }));
            }
            (out, vec![], vec![])
        }
        WeightFormat::Q6K => {
            let mut out = Vec::new();
            for _ in 0..n / 256 {
                out.extend(rng.bytes(208));
                out.extend(f16_bytes(rng.range(0.0002, 0.001)));
            }
            (out, vec![], vec![])
        }
    };
    Case {
        name: format.name(),
        format,
        rows,
        k,
        packed,
        scales,
        biases,
        split,
    }
}

pub fn all_cases() -> Vec<Case> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let fp8 = WeightFormat::Fp8Block {
        block_rows: 128,
        group: 128,
    };
    let small_fp8 = WeightFormat::Fp8Block {
        block_rows: 16,
        group: 32,
    };
    let affine = |group, scale_dtype| WeightFormat::Affine8 { group, scale_dtype };
    vec![
        case(WeightFormat::Plain(Dtype::F32), 70, 97, 35, &mut rng),
        case(WeightFormat::Plain(Dtype::F16), 70, 97, 35, &mut rng),
        case(WeightFormat::Plain(Dtype::Bf16), 70, 97, 35, &mut rng),
        // partial blocks on both axes: 300 rows, K = 300 → grid [3, 3]
        case(fp8, 300, 300, 128, &mut rng),
        case(small_fp8, 70, 96, 32, &mut rng),
        case(WeightFormat::Mxfp4, 70, 256, 35, &mut rng),
        case(affine(64, Dtype::Bf16), 70, 256, 35, &mut rng),
        case(affine(32, Dtype::F16), 70, 256, 35, &mut rng),
        case(affine(128, Dtype::F32), 70, 256, 35, &mut rng),
        case(WeightFormat::Q8_0, 70, 256, 35, &mut rng),
        case(WeightFormat::Q4_1, 70, 256, 35, &mut rng),
        case(WeightFormat::Q4_0, 70, 256, 35, &mut rng),
        case(WeightFormat::Q5_0, 70, 256, 35, &mut rng),
        case(WeightFormat::Q5_1, 70, 256, 35, &mut rng),
        // three blocks per row: Q8_0's 34-byte blocks leave odd rows starting mid-word
        case(WeightFormat::Q8_0, 33, 96, 11, &mut rng),
        case(WeightFormat::Q4_1, 33, 96, 11, &mut rng),
        // 18- and 22-byte blocks: every other block (and row) starts mid-word
        case(WeightFormat::Q4_0, 33, 96, 11, &mut rng),
        case(WeightFormat::Q5_0, 33, 96, 11, &mut rng),
        // two super-blocks per row (K = 512): the super-block index advances inside a row
        case(WeightFormat::Q4K, 70, 512, 35, &mut rng),
        case(WeightFormat::Q5K, 70, 512, 35, &mut rng),
        case(WeightFormat::Q6K, 70, 512, 35, &mut rng),
        // one 210-byte super-block a row: every other row starts mid-word
        case(WeightFormat::Q6K, 33, 256, 11, &mut rng),
    ]
}

/// Multiplies rows `r0..r1` of `c` (uploaded as one tile slot with 16 KiB-aligned sub-regions,
/// as the container lays a tile out) by `tokens` vectors, writing into `y` at row offset r0.
#[allow(clippy::too_many_arguments)]
pub fn dispatch_rows(
    g: &Gpu,
    c: &Case,
    kernel: Kernel,
    x: &wgpu::Buffer,
    y: &wgpu::Buffer,
    tokens: usize,
    r0: usize,
    r1: usize,
    accumulate: bool,
) {
    const ALIGN: usize = 16 * 1024;
    let [p, s, b] = c.format.row_ranges(c.k, r0, r1).expect("tile ranges");
    let mut slot = c.packed[p].to_vec();
    let s_off = slot.len().div_ceil(ALIGN) * ALIGN;
    slot.resize(s_off, 0);
    slot.extend_from_slice(&c.scales[s.clone()]);
    let b_off = slot.len().div_ceil(ALIGN) * ALIGN;
    slot.resize(b_off, 0);
    slot.extend_from_slice(&c.biases[b.clone()]);
    let buf = g.upload("tile slot", &slot).expect("upload");
    let window = |offset: usize, len: usize| Bind {
        buffer: &buf,
        offset: offset as u64,
        size: Some((len.div_ceil(4).max(1) * 4) as u64),
    };
    let mut binds = vec![Bind::from(x), Bind::from(y), window(0, s_off.max(4))];
    if c.format.buffer_count() >= 2 {
        binds.push(window(s_off, s.len()));
    }
    if c.format.buffer_count() >= 3 {
        binds.push(window(b_off, b.len()));
    }
    let rows = (r1 - r0) as u32;
    let mut params = c
        .format
        .params(rows, c.k as u32, tokens as u32, c.rows as u32, r0 as u32);
    params.accumulate = u32::from(accumulate);
    let groups = matmul_launch(g.matvec_shape(), kernel, &mut params);
    g.dispatch(kernel, &params, &binds, groups)
        .expect("dispatch");
}

pub fn run_matmul(g: &Gpu, c: &Case, x: &[f32], tokens: usize, cuts: &[usize]) -> Vec<f32> {
    run_matmul_into(g, c, x, tokens, cuts, None)
}

/// As [`run_matmul`]; with `y0`, `y` starts as `y0` and the product is added to it (the fused
/// residual epilogue, `MatmulParams::accumulate`).
pub fn run_matmul_into(
    g: &Gpu,
    c: &Case,
    x: &[f32],
    tokens: usize,
    cuts: &[usize],
    y0: Option<&[f32]>,
) -> Vec<f32> {
    let kernel = if tokens == 1 {
        c.format.matvec_kernel()
    } else {
        c.format.matmul_kernel()
    };
    let xb = g.upload_f32("x", x).expect("upload x");
    let yb = match y0 {
        Some(v) => g.upload_f32("y", v).expect("upload y"),
        None => g.zeros("y", (tokens * c.rows * 4) as u64).expect("y"),
    };
    for w in cuts.windows(2) {
        dispatch_rows(g, c, kernel, &xb, &yb, tokens, w[0], w[1], y0.is_some());
    }
    g.read_f32(&yb, tokens * c.rows).expect("read y")
}
