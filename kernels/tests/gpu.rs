//! GPU-vs-CPU tests: every kernel on seeded random inputs against its `kernels::reference`
//! version, within the tolerance of the table below (docs/kernels.md), plus the bit-identity of a
//! row-split (streamed) dispatch with the whole-matrix (resident) one for every matmul family.
//!
//! With no adapter these tests fail when `MINIRUN_REQUIRE_ADAPTER=1` (CI); otherwise each prints a
//! visible `SKIPPED` line on stderr (not captured by the test harness) and returns.

#![allow(clippy::panic)] // a test reports failure by panicking

use std::io::Write;
use std::sync::OnceLock;

use kernels::gpu::{elementwise_groups, matmul_launch, Bind, Gpu, MatvecShape};
use kernels::reference::{self, AttentionShape, WeightMatrix};
use kernels::{
    grid_2d, ActivationParams, ArgmaxParams, AttentionParams, Dtype, EmbeddingFormat,
    EmbeddingParams, Kernel, KernelError, RmsNormParams, RopeMode, RopeParams, SoftmaxParams,
    WeightFormat,
};

// ---- tolerance table (docs/kernels.md §tolerances): |gpu − cpu| ≤ abs + rel · scale ----
/// Matmul families: scale = Σ_k |w·x| of the row; covers an adapter that does not fuse `fma`.
const MATMUL_REL: f32 = 1e-6;
/// RMSNorm: scale = |expected| (GPU sqrt/division may be a few ulp off).
const RMSNORM: (f32, f32) = (1e-7, 4e-6);
/// RoPE: scale = |expected| (table from the host; only fma fusion can differ).
const ROPE: (f32, f32) = (1e-6, 1e-6);
/// Softmax: scale = |expected| (GPU exp: Vulkan allows 3 + 2|x| ulp).
const SOFTMAX: (f32, f32) = (1e-7, 2e-5);
/// Attention: scale = max |v| (exp error, normalisation).
const ATTENTION: (f32, f32) = (1e-6, 2e-5);
/// SiLU / SwiGLU: scale = |expected|.
const ACTIVATION: (f32, f32) = (1e-7, 2e-5);
// Embedding lookup and argmax are exact (tolerance 0).

fn adapter() -> Option<&'static Gpu> {
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
        Err(KernelError::NoAdapter) => None,
        Err(e) => panic!("gpu set-up failed: {e}"),
    })
    .as_ref()
}

/// The adapter, or `None` after printing a visible skip; panics under MINIRUN_REQUIRE_ADAPTER=1.
fn gpu(test: &str) -> Option<&'static Gpu> {
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
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit()
    }
    fn normals(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.range(-1.0, 1.0) * scale).collect()
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn assert_close(what: &str, actual: &[f32], expected: &[f32], tol: impl Fn(usize) -> f32) {
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

fn assert_bits(what: &str, a: &[f32], b: &[f32]) {
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
struct Case {
    name: String,
    format: WeightFormat,
    rows: usize,
    k: usize,
    packed: Vec<u8>,
    scales: Vec<u8>,
    biases: Vec<u8>,
    /// A row where the matrix can be split into two tiles.
    split: usize,
}

fn dtype_bytes(dtype: Dtype, values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| match dtype {
            Dtype::F32 => v.to_le_bytes().to_vec(),
            Dtype::F16 => half::f16::from_f32(v).to_bits().to_le_bytes().to_vec(),
            Dtype::Bf16 => half::bf16::from_f32(v).to_bits().to_le_bytes().to_vec(),
        })
        .collect()
}

fn f16_bytes(v: f32) -> [u8; 2] {
    half::f16::from_f32(v).to_bits().to_le_bytes()
}

fn case(format: WeightFormat, rows: usize, k: usize, split: usize, rng: &mut Rng) -> Case {
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

fn all_cases() -> Vec<Case> {
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
        // two super-blocks per row (K = 512): the super-block index advances inside a row
        case(WeightFormat::Q4K, 70, 512, 35, &mut rng),
        case(WeightFormat::Q5K, 70, 512, 35, &mut rng),
        case(WeightFormat::Q6K, 70, 512, 35, &mut rng),
    ]
}

/// Multiplies rows `r0..r1` of `c` (uploaded as one tile slot with 16 KiB-aligned sub-regions,
/// as the container lays a tile out) by `tokens` vectors, writing into `y` at row offset r0.
#[allow(clippy::too_many_arguments)]
fn dispatch_rows(
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

fn run_matmul(g: &Gpu, c: &Case, x: &[f32], tokens: usize, cuts: &[usize]) -> Vec<f32> {
    run_matmul_into(g, c, x, tokens, cuts, None)
}

/// As [`run_matmul`]; with `y0`, `y` starts as `y0` and the product is added to it (the fused
/// residual epilogue, `MatmulParams::accumulate`).
fn run_matmul_into(
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

#[test]
fn matvec_and_matmul_match_the_cpu_reference() {
    let Some(g) = gpu("matvec_and_matmul_match_the_cpu_reference") else {
        return;
    };
    let mut rng = Rng(7);
    for c in all_cases() {
        let w = WeightMatrix::new(c.format, c.rows, c.k, &c.packed, &c.scales, &c.biases)
            .expect("case is well formed");
        let tokens = 5;
        let x = rng.normals(tokens * c.k, 1.0);
        let dense = w.dequantize();
        let scale_of = |t: usize, r: usize| -> f32 {
            (0..c.k)
                .map(|k| (dense[r * c.k + k] * x[t * c.k + k]).abs())
                .sum()
        };
        let want1 = reference::matvec(&w, &x[..c.k]).expect("reference");
        let got1 = run_matmul(g, &c, &x[..c.k], 1, &[0, c.rows]);
        assert_close(&format!("matvec {}", c.name), &got1, &want1, |r| {
            MATMUL_REL * scale_of(0, r)
        });
        let want = reference::matmul(&w, &x, tokens).expect("reference");
        let got = run_matmul(g, &c, &x, tokens, &[0, c.rows]);
        assert_close(&format!("matmul {}", c.name), &got, &want, |i| {
            MATMUL_REL * scale_of(i / c.rows, i % c.rows)
        });
        // per token, the prefill kernel gives the decode kernel's bits
        assert_bits(
            &format!("matmul token 0 vs matvec {}", c.name),
            &got[..c.rows],
            &got1,
        );
    }
}

#[test]
fn row_split_dispatch_is_bit_identical_to_whole_matrix() {
    let Some(g) = gpu("row_split_dispatch_is_bit_identical_to_whole_matrix") else {
        return;
    };
    let mut rng = Rng(11);
    for c in all_cases() {
        for tokens in [1, 6] {
            let x = rng.normals(tokens * c.k, 1.0);
            let whole = run_matmul(g, &c, &x, tokens, &[0, c.rows]);
            let split = run_matmul(g, &c, &x, tokens, &[0, c.split, c.rows]);
            assert_bits(
                &format!("{} tokens={tokens} split at {}", c.name, c.split),
                &split,
                &whole,
            );
        }
    }
}

/// A second device whose matmul kernels use the other row mapping than the shared one.
fn other_shape(g: &Gpu) -> Gpu {
    let other = match g.matvec_shape() {
        MatvecShape::Lanes => MatvecShape::Rows,
        MatvecShape::Rows => MatvecShape::Lanes,
    };
    Gpu::new_with_shape(Some(other)).expect("a second device on the same adapter")
}

#[test]
fn both_matvec_shapes_give_the_same_bits() {
    let Some(g) = gpu("both_matvec_shapes_give_the_same_bits") else {
        return;
    };
    let h = other_shape(g);
    let mut rng = Rng(13);
    for c in all_cases() {
        for tokens in [1, 6] {
            let x = rng.normals(tokens * c.k, 1.0);
            let a = run_matmul(g, &c, &x, tokens, &[0, c.split, c.rows]);
            let b = run_matmul(&h, &c, &x, tokens, &[0, c.rows]);
            assert_bits(
                &format!(
                    "{} tokens={tokens}: {:?} vs {:?}",
                    c.name,
                    g.matvec_shape(),
                    h.matvec_shape()
                ),
                &a,
                &b,
            );
        }
    }
}

/// One matvec of case `c` through the uniform-x pipeline (binding 1 a 64 KiB uniform block).
fn run_matvec_uniform_x(g: &Gpu, c: &Case, x: &[f32]) -> Vec<f32> {
    let kernel = c.format.matvec_kernel();
    let compiled = g.compiled_uniform_x(kernel).expect("a matmul kernel");
    let mut padded = x.to_vec();
    padded.resize(kernels::UNIFORM_X_ELEMENTS, 0.0);
    let xb = g.upload_f32("x", &padded).expect("x");
    let yb = g.zeros("y", (c.rows * 4) as u64).expect("y");
    let buf = |b: &[u8]| g.upload("w", b).expect("w");
    let (pb, sb, bb) = (buf(&c.packed), buf(&c.scales), buf(&c.biases));
    let mut binds = vec![
        Bind {
            buffer: &xb,
            offset: 0,
            size: Some((kernels::UNIFORM_X_ELEMENTS * 4) as u64),
        },
        Bind::from(&yb),
        Bind::from(&pb),
    ];
    if c.format.buffer_count() >= 2 {
        binds.push(Bind::from(&sb));
    }
    if c.format.buffer_count() >= 3 {
        binds.push(Bind::from(&bb));
    }
    let mut params = c
        .format
        .params(c.rows as u32, c.k as u32, 1, c.rows as u32, 0);
    let groups = matmul_launch(g.matvec_shape(), kernel, &mut params);
    let ub = g.uniform("params", bytemuck::bytes_of(&params));
    let group = g
        .bind_group_for(&compiled, kernel, &ub.as_entire_binding(), &binds)
        .expect("bind group");
    let mut enc = g.encoder("uniform x");
    {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        g.dispatch_in(&mut pass, &compiled, &group, groups);
    }
    g.submit(enc.finish());
    g.read_f32(&yb, c.rows).expect("read y")
}

#[test]
fn uniform_x_matvec_gives_the_same_bits() {
    let Some(g) = gpu("uniform_x_matvec_gives_the_same_bits") else {
        return;
    };
    let h = other_shape(g);
    let mut rng = Rng(23);
    for c in all_cases() {
        let x = rng.normals(c.k, 1.0);
        let want = run_matmul(g, &c, &x, 1, &[0, c.rows]);
        for dev in [g, &h] {
            let got = run_matvec_uniform_x(dev, &c, &x);
            assert_bits(
                &format!("{} uniform x ({:?})", c.name, dev.matvec_shape()),
                &got,
                &want,
            );
        }
    }
}

#[test]
fn accumulate_adds_the_product_with_one_rounding() {
    let Some(g) = gpu("accumulate_adds_the_product_with_one_rounding") else {
        return;
    };
    let h = other_shape(g);
    let mut rng = Rng(17);
    for c in all_cases() {
        for tokens in [1, 6] {
            let x = rng.normals(tokens * c.k, 1.0);
            let y0 = rng.normals(tokens * c.rows, 3.0);
            let product = run_matmul(g, &c, &x, tokens, &[0, c.rows]);
            // the host's residual add: y0 + product, one f32 rounding per element
            let want: Vec<f32> = y0.iter().zip(&product).map(|(a, b)| a + b).collect();
            for dev in [g, &h] {
                let got = run_matmul_into(dev, &c, &x, tokens, &[0, c.split, c.rows], Some(&y0));
                assert_bits(
                    &format!(
                        "{} tokens={tokens} accumulate ({:?})",
                        c.name,
                        dev.matvec_shape()
                    ),
                    &got,
                    &want,
                );
            }
        }
    }
}

#[test]
fn stream_read_touches_every_word() {
    let Some(g) = gpu("stream_read_touches_every_word") else {
        return;
    };
    let words = 4096usize;
    let mut rng = Rng(19);
    let src: Vec<u32> = (0..words).map(|_| rng.next() as u32).collect();
    let invocations = 256u32;
    let sb = g.upload_u32("src", &src).expect("upload");
    let out = g.zeros("out", u64::from(invocations) * 4).expect("out");
    let p = kernels::StreamReadParams {
        words: words as u32,
        invocations,
        groups_x: 1,
        _pad: 0,
    };
    g.dispatch(
        Kernel::StreamRead,
        &p,
        &[(&sb).into(), (&out).into()],
        (1, 1, 1),
    )
    .expect("dispatch");
    let got = g.read_u32(&out, invocations as usize).expect("read");
    // invocation i xors the vec4 words i, i + N, …: the xor of all outputs is the xor of all words
    let all = src.iter().fold(0u32, |a, w| a ^ w);
    assert_eq!(got.iter().fold(0u32, |a, w| a ^ w), all);
    let vec4 = |i: usize| src[4 * i] ^ src[4 * i + 1] ^ src[4 * i + 2] ^ src[4 * i + 3];
    let want0 = (0..words / 4)
        .step_by(invocations as usize)
        .fold(0u32, |a, i| a ^ vec4(i));
    assert_eq!(got[0], want0);
}

#[test]
fn rmsnorm_matches() {
    let Some(g) = gpu("rmsnorm_matches") else {
        return;
    };
    let mut rng = Rng(3);
    let (n, tokens) = (576, 3);
    let x = rng.normals(n * tokens, 3.0);
    let w = rng.normals(n, 1.0);
    let want = reference::rmsnorm(&x, &w, 1e-5).expect("reference");
    let (xb, wb) = (
        g.upload_f32("x", &x).expect("x"),
        g.upload_f32("w", &w).expect("w"),
    );
    let yb = g.zeros("y", (x.len() * 4) as u64).expect("y");
    let (gx, gy) = grid_2d(tokens as u32);
    let p = RmsNormParams {
        n: n as u32,
        tokens: tokens as u32,
        eps: 1e-5,
        groups_x: gx,
    };
    g.dispatch(
        Kernel::RmsNorm,
        &p,
        &[(&xb).into(), (&wb).into(), (&yb).into()],
        (gx, gy, 1),
    )
    .expect("dispatch");
    let got = g.read_f32(&yb, x.len()).expect("read");
    assert_close("rmsnorm", &got, &want, |i| {
        RMSNORM.0 + RMSNORM.1 * want[i].abs()
    });
}

#[test]
fn rope_matches_both_pairings() {
    let Some(g) = gpu("rope_matches_both_pairings") else {
        return;
    };
    let mut rng = Rng(5);
    let (tokens, n_heads, head_dim) = (3, 4, 64);
    for (mode, rot_dim) in [
        (RopeMode::HalfSplit, 64),
        (RopeMode::Interleaved, 64),
        (RopeMode::HalfSplit, 32),
    ] {
        let v = rng.normals(tokens * n_heads * head_dim, 2.0);
        let table = reference::rope_table(&[7, 8, 300], rot_dim, 10000.0);
        let mut want = v.clone();
        reference::rope(&mut want, &table, n_heads, head_dim, rot_dim, mode).expect("reference");
        let vb = g.upload_f32("v", &v).expect("v");
        let tb = g.upload_f32("table", &table).expect("table");
        let pairs = (tokens * n_heads * rot_dim / 2) as u32;
        let groups = elementwise_groups(pairs);
        let p = RopeParams {
            tokens: tokens as u32,
            n_heads: n_heads as u32,
            head_dim: head_dim as u32,
            rot_dim: rot_dim as u32,
            mode: mode as u32,
            groups_x: groups.0,
            table_row0: 0,
            v_offset: 0,
        };
        g.dispatch(Kernel::Rope, &p, &[(&vb).into(), (&tb).into()], groups)
            .expect("dispatch");
        let got = g.read_f32(&vb, v.len()).expect("read");
        assert_close(&format!("rope {mode:?} rot {rot_dim}"), &got, &want, |i| {
            ROPE.0 + ROPE.1 * want[i].abs()
        });
    }
}

#[test]
fn softmax_matches() {
    let Some(g) = gpu("softmax_matches") else {
        return;
    };
    let mut rng = Rng(9);
    let (n, rows) = (1000, 3);
    let v = rng.normals(n * rows, 8.0);
    let mut want = v.clone();
    reference::softmax(&mut want, n).expect("reference");
    let vb = g.upload_f32("v", &v).expect("v");
    let (gx, gy) = grid_2d(rows as u32);
    let p = SoftmaxParams {
        n: n as u32,
        rows: rows as u32,
        groups_x: gx,
        _pad: 0,
    };
    g.dispatch(Kernel::Softmax, &p, &[(&vb).into()], (gx, gy, 1))
        .expect("dispatch");
    let got = g.read_f32(&vb, v.len()).expect("read");
    assert_close("softmax", &got, &want, |i| {
        SOFTMAX.0 + SOFTMAX.1 * want[i].abs()
    });
}

#[test]
fn attention_matches_decode_and_prefill() {
    let Some(g) = gpu("attention_matches_decode_and_prefill") else {
        return;
    };
    let mut rng = Rng(13);
    let (n_heads, n_kv_heads, head_dim, capacity) = (9, 3, 64, 150);
    for (tokens, pos0) in [(1, 129), (4, 0), (3, 70)] {
        let s = AttentionShape {
            n_heads,
            n_kv_heads,
            head_dim,
            tokens,
            pos0,
            capacity,
            scale: 1.0 / (head_dim as f32).sqrt(),
        };
        let q = rng.normals(tokens * n_heads * head_dim, 2.0);
        let kc = rng.normals(capacity * n_kv_heads * head_dim, 1.0);
        let vc = rng.normals(capacity * n_kv_heads * head_dim, 1.0);
        let want = reference::attention(&s, &q, &kc, &vc).expect("reference");
        let qb = g.upload_f32("q", &q).expect("q");
        let kb = g.upload_f32("k", &kc).expect("k");
        let vb = g.upload_f32("v", &vc).expect("v");
        let ob = g.zeros("out", (q.len() * 4) as u64).expect("out");
        let sb = g
            .zeros("scratch", (tokens * n_heads * capacity * 4) as u64)
            .expect("scratch");
        let p = AttentionParams {
            n_heads: n_heads as u32,
            n_kv_heads: n_kv_heads as u32,
            head_dim: head_dim as u32,
            tokens: tokens as u32,
            pos0: pos0 as u32,
            capacity: capacity as u32,
            scale: s.scale,
            _pad: 0,
        };
        let binds = [
            (&qb).into(),
            (&kb).into(),
            (&vb).into(),
            (&ob).into(),
            (&sb).into(),
        ];
        g.dispatch(
            Kernel::Attention,
            &p,
            &binds,
            (n_heads as u32, tokens as u32, 1),
        )
        .expect("dispatch");
        let got = g.read_f32(&ob, q.len()).expect("read");
        assert_close(
            &format!("attention tokens={tokens} pos0={pos0}"),
            &got,
            &want,
            |_| ATTENTION.0 + ATTENTION.1,
        );
    }
}

#[test]
fn silu_and_swiglu_match() {
    let Some(g) = gpu("silu_and_swiglu_match") else {
        return;
    };
    let mut rng = Rng(17);
    let n = 1537;
    let a = rng.normals(n, 8.0);
    let b = rng.normals(n, 2.0);
    let (ab, bb) = (
        g.upload_f32("a", &a).expect("a"),
        g.upload_f32("b", &b).expect("b"),
    );
    let groups = elementwise_groups(n as u32);
    let p = ActivationParams {
        n: n as u32,
        groups_x: groups.0,
        _pad: [0; 2],
    };
    for (kernel, want) in [
        (Kernel::Silu, reference::silu(&a)),
        (
            Kernel::Swiglu,
            reference::swiglu(&a, &b).expect("reference"),
        ),
    ] {
        let yb = g.zeros("y", (n * 4) as u64).expect("y");
        g.dispatch(
            kernel,
            &p,
            &[(&ab).into(), (&bb).into(), (&yb).into()],
            groups,
        )
        .expect("dispatch");
        let got = g.read_f32(&yb, n).expect("read");
        assert_close(kernel.name(), &got, &want, |i| {
            ACTIVATION.0 + ACTIVATION.1 * want[i].abs()
        });
    }
}

#[test]
fn embedding_lookup_is_exact() {
    let Some(g) = gpu("embedding_lookup_is_exact") else {
        return;
    };
    let mut rng = Rng(19);
    let vocab = 50;
    let ids = [0u32, 49, 7, 7, 23];
    for format in [
        EmbeddingFormat::F32,
        EmbeddingFormat::F16,
        EmbeddingFormat::Bf16,
        EmbeddingFormat::Q8_0,
        EmbeddingFormat::Q4_1,
        EmbeddingFormat::Q4_0,
        EmbeddingFormat::Q5_0,
        EmbeddingFormat::Q5_1,
        EmbeddingFormat::Q4K,
        EmbeddingFormat::Q5K,
        EmbeddingFormat::Q6K,
    ] {
        let k_quant = matches!(
            format,
            EmbeddingFormat::Q4K | EmbeddingFormat::Q5K | EmbeddingFormat::Q6K
        );
        let dim = if k_quant { 512 } else { 96 };
        let c = case(format.weight_format(), vocab, dim, 0, &mut rng);
        let want = reference::embedding(format, &c.packed, vocab, dim, &ids).expect("reference");
        let idb = g.upload_u32("ids", &ids).expect("ids");
        let tb = g.upload("table", &c.packed).expect("table");
        let ob = g.zeros("out", (ids.len() * dim * 4) as u64).expect("out");
        let (gx, gy) = grid_2d(ids.len() as u32);
        let p = EmbeddingParams {
            dim: dim as u32,
            tokens: ids.len() as u32,
            vocab: vocab as u32,
            dtype: format.code(),
            groups_x: gx,
            _pad: [0; 3],
        };
        g.dispatch(
            Kernel::Embedding,
            &p,
            &[(&idb).into(), (&tb).into(), (&ob).into()],
            (gx, gy, 1),
        )
        .expect("dispatch");
        let got = g.read_f32(&ob, want.len()).expect("read");
        assert_bits(&format!("embedding {format:?}"), &got, &want);
    }
}

#[test]
fn argmax_is_exact() {
    let Some(g) = gpu("argmax_is_exact") else {
        return;
    };
    let mut rng = Rng(23);
    let n = 49_152;
    let mut v = rng.normals(3 * n, 10.0);
    // row 1: a tie between index 5 and 40_000 (first wins); row 2: NaNs and the max at the end
    v[n + 5] = 100.0;
    v[n + 40_000] = 100.0;
    v[2 * n] = f32::NAN;
    v[3 * n - 1] = 1e6;
    let want = reference::argmax(&v, n);
    assert_eq!(want[1], 5);
    assert_eq!(want[2], (n - 1) as u32);
    let vb = g.upload_f32("v", &v).expect("v");
    let ob = g.zeros("out", 12).expect("out");
    let (gx, gy) = grid_2d(3);
    let p = ArgmaxParams {
        n: n as u32,
        rows: 3,
        groups_x: gx,
        _pad: 0,
    };
    g.dispatch(
        Kernel::Argmax,
        &p,
        &[(&vb).into(), (&ob).into()],
        (gx, gy, 1),
    )
    .expect("dispatch");
    assert_eq!(g.read_u32(&ob, 3).expect("read"), want);
}
