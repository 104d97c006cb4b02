//! Linear weights: loading one upstream `[rows, k]` matrix from a [`WeightSource`] in its stored
//! format (FP8 e4m3 with an e8m0 128×128 grid, MXFP4 with e8m0 per 32, BF16, F32; from a tile
//! container or plain streams), and the [`Linears`] backend the forward pass multiplies through.
//! [`CpuLinears`] is the exact reference: values decoded by the kernels crate's CPU decoders
//! (`kernels::reference::WeightMatrix`), products summed in f64 and rounded once to f32.

pub use crate::step_stats::ExpertCacheStats;
use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use artifact::container::{Mode, NibbleOrder};
use kernels::reference::WeightMatrix;
use kernels::{Dtype, WeightFormat};

use super::chain::{self, Link};
use super::error::V4Error;
use super::source::{whole_streams, Role, Tensor, WeightSource};

/// A weight matrix `[rows, k]` in its stored format, whole streams in memory.
#[derive(Debug)]
pub struct QMatrix {
    pub name: String,
    pub format: WeightFormat,
    pub rows: usize,
    pub k: usize,
    pub packed: Vec<u8>,
    pub scales: Vec<u8>,
}

pub(crate) fn tensor_err(name: &str, detail: String) -> V4Error {
    V4Error::Tensor {
        name: name.to_owned(),
        detail,
    }
}

fn expect_shape(name: &str, got: &[u64], want: &[usize]) -> Result<(), V4Error> {
    if got.len() == want.len() && got.iter().zip(want).all(|(&g, &w)| g == w as u64) {
        Ok(())
    } else {
        Err(tensor_err(
            name,
            format!("shape {got:?}, the configuration needs {want:?}"),
        ))
    }
}

fn plain_bytes(name: &str, t: Tensor, dtype: &str, shape: &[usize]) -> Result<Vec<u8>, V4Error> {
    expect_shape(name, t.shape(), shape)?;
    match t {
        Tensor::Plain {
            dtype: d, bytes, ..
        } if d == dtype => Ok(bytes),
        other => Err(tensor_err(
            name,
            format!("expected a plain {dtype} stream, found {} ", other.dtype()),
        )),
    }
}

/// Loads `{stem}.weight` (and `{stem}.scale` when quantized) as a `[rows, k]` matrix.
pub fn load_matrix(
    src: &dyn WeightSource,
    stem: &str,
    rows: usize,
    k: usize,
) -> Result<QMatrix, V4Error> {
    let wname = format!("{stem}.weight");
    let sname = format!("{stem}.scale");
    let t = src.tensor(&wname)?;
    let (format, packed, scales) = match t {
        Tensor::Tiled {
            role,
            container,
            rows: member,
            ..
        } => {
            if role != Role::Packed {
                return Err(tensor_err(&wname, "is a container's scale stream".into()));
            }
            let spec = &container.layout().spec;
            let held = member.as_ref().map_or(spec.rows, |r| r.end - r.start);
            if held != rows as u64 || spec.cols != k as u64 {
                return Err(tensor_err(
                    &wname,
                    format!(
                        "container `{}` holds {held}×{} for it, the configuration needs {rows}×{k}",
                        container.path().display(),
                        spec.cols
                    ),
                ));
            }
            let format = match spec.mode {
                Mode::Fp8E4m3Block => WeightFormat::Fp8Block {
                    block_rows: u32::try_from(spec.rows_per_scale).unwrap_or(0),
                    group: u32::try_from(spec.group).unwrap_or(0),
                },
                Mode::Mxfp4 if spec.nibble_order == NibbleOrder::LowFirst && spec.group == 32 => {
                    WeightFormat::Mxfp4
                }
                _ => {
                    return Err(tensor_err(
                        &wname,
                        format!(
                            "container mode {} (group {}, {:?}) is not a V4 weight format",
                            spec.mode.name(),
                            spec.group,
                            spec.nibble_order
                        ),
                    ))
                }
            };
            let (p, s) = whole_streams(&container, member.as_ref(), src.digest_check())?;
            (format, p, s)
        }
        Tensor::Plain {
            dtype,
            shape,
            bytes,
        } => match dtype.as_str() {
            "BF16" | "F32" => {
                expect_shape(&wname, &shape, &[rows, k])?;
                let d = if dtype == "BF16" {
                    Dtype::Bf16
                } else {
                    Dtype::F32
                };
                (WeightFormat::Plain(d), bytes, Vec::new())
            }
            "F8_E4M3" => {
                expect_shape(&wname, &shape, &[rows, k])?;
                let grid = [rows.div_ceil(128), k.div_ceil(128)];
                let s = plain_bytes(&sname, src.tensor(&sname)?, "F8_E8M0", &grid)?;
                let f = WeightFormat::Fp8Block {
                    block_rows: 128,
                    group: 128,
                };
                (f, bytes, s)
            }
            "I8" => {
                expect_shape(&wname, &shape, &[rows, k / 2])?;
                let s = plain_bytes(&sname, src.tensor(&sname)?, "F8_E8M0", &[rows, k / 32])?;
                (WeightFormat::Mxfp4, bytes, s)
            }
            other => {
                return Err(tensor_err(
                    &wname,
                    format!("dtype {other} is not a V4 weight format"),
                ))
            }
        },
    };
    format.check(rows, k, &packed, &scales, &[])?;
    Ok(QMatrix {
        name: stem.to_owned(),
        format,
        rows,
        k,
        packed,
        scales,
    })
}

/// A plain BF16 or F32 tensor of `shape` as f32 values.
pub fn load_vector(
    src: &dyn WeightSource,
    name: &str,
    shape: &[usize],
) -> Result<Vec<f32>, V4Error> {
    let t = src.tensor(name)?;
    expect_shape(name, t.shape(), shape)?;
    match t {
        Tensor::Plain { dtype, bytes, .. } => match dtype.as_str() {
            "F32" => Ok(bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()),
            "BF16" => Ok(bytes
                .chunks_exact(2)
                .map(|c| kernels::reference::bf16_to_f32(u16::from_le_bytes([c[0], c[1]])))
                .collect()),
            other => Err(tensor_err(
                name,
                format!("dtype {other}, expected BF16 or F32"),
            )),
        },
        Tensor::Tiled { .. } => Err(tensor_err(name, "expected a plain stream".into())),
    }
}

/// `ffn.gate.tid2eid`: I64 `[vocab, top_k]` expert ids, each checked `< experts`.
pub fn load_tid2eid(
    src: &dyn WeightSource,
    name: &str,
    vocab: usize,
    top_k: usize,
    experts: usize,
) -> Result<Vec<u32>, V4Error> {
    let bytes = plain_bytes(name, src.tensor(name)?, "I64", &[vocab, top_k])?;
    bytes
        .chunks_exact(8)
        .map(|c| {
            let v = i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            u32::try_from(v)
                .ok()
                .filter(|&e| (e as usize) < experts)
                .ok_or_else(|| tensor_err(name, format!("expert id {v} is not below {experts}")))
        })
        .collect()
}

/// One product of a [`Linears::linear_batch`]: rows `rows` of weight `stem` times `tokens`
/// row-major inputs `x`.
pub struct Product<'a> {
    pub stem: String,
    pub rows: Range<usize>,
    pub x: &'a [f32],
    pub tokens: usize,
}

impl<'a> Product<'a> {
    /// The first `rows` rows of `stem` (every row of a matrix that has that many).
    pub fn new(stem: String, rows: usize, x: &'a [f32], tokens: usize) -> Self {
        Self {
            stem,
            rows: 0..rows,
            x,
            tokens,
        }
    }
}

/// Takes the results of a batch in order (a batch returns one per product).
pub struct Results(std::vec::IntoIter<Vec<f32>>);

impl Results {
    pub fn of(v: Vec<Vec<f32>>) -> Self {
        Self(v.into_iter())
    }

    /// The next product's output.
    pub fn take(&mut self) -> Result<Vec<f32>, V4Error> {
        self.0
            .next()
            .ok_or_else(|| V4Error::Input("a batch of products returned too few outputs".into()))
    }
}

/// The matrix multiplications of the forward pass, by weight stem (`layers.3.attn.wq_a`).
pub trait Linears {
    /// Declares a weight and its shape before use (resident backends load it here).
    fn declare(
        &mut self,
        stem: &str,
        rows: usize,
        k: usize,
        routed_expert: bool,
    ) -> Result<(), V4Error>;
    /// Says, before [`Linears::declare`], that the weight's rows are `groups` equal groups whose
    /// products are asked for one group at a time (`wo_a`): a backend may keep each group as a
    /// matrix of its own.
    fn declare_groups(&mut self, _stem: &str, _groups: usize) -> Result<(), V4Error> {
        Ok(())
    }
    /// Says, before they are declared, that MoE `ffn` (`layers.L.ffn`) has `experts` routed
    /// experts (`{ffn}.experts.E`, each declared as an MLP): a backend may keep their matrices
    /// as stacks that a product can index on the device.
    fn declare_experts(&mut self, _ffn: &str, _experts: usize) -> Result<(), V4Error> {
        Ok(())
    }
    /// Says, before they are declared, that `{stem}.w1` and `{stem}.w3` are an MLP's gate and up
    /// projections, whose outputs only feed a SwiGLU clamped at `limit` ([`Input::SwiGlu`] in a
    /// chain): a backend may keep them as one matrix whose product writes the activation.
    ///
    /// [`Input::SwiGlu`]: super::chain::Input::SwiGlu
    fn declare_mlp(&mut self, _stem: &str, _limit: f64) -> Result<(), V4Error> {
        Ok(())
    }
    /// Declares `parts` (stem, rows, K), resident weights whose products always read the same
    /// input, as [`Linears::declare`] declares each: a backend may keep them as one matrix
    /// `name` (their rows one after the other, in the order given) and run a batch's products of
    /// them, over one input, as one product whose rows each takes.
    fn declare_merged(
        &mut self,
        _name: &str,
        parts: &[(String, usize, usize)],
    ) -> Result<(), V4Error> {
        for (stem, rows, k) in parts {
            self.declare(stem, *rows, *k, false)?;
        }
        Ok(())
    }
    /// `y[t, r - rows.start] = Σ_k W[r, k] · x[t, k]` for `tokens` row-major inputs and the rows
    /// `rows` of the weight.
    fn linear_rows(
        &mut self,
        stem: &str,
        rows: Range<usize>,
        x: &[f32],
        tokens: usize,
    ) -> Result<Vec<f32>, V4Error>;
    /// Several independent products (none reads another's output), in order: a backend may run
    /// them in one device round trip; the results are those of [`Linears::linear_rows`] for each.
    fn linear_batch(&mut self, items: &[Product<'_>]) -> Result<Vec<Vec<f32>>, V4Error> {
        items
            .iter()
            .map(|p| self.linear_rows(&p.stem, p.rows.clone(), p.x, p.tokens))
            .collect()
    }
    /// Several products some of which read others' outputs ([`Link`]), in order: a backend may
    /// run the whole chain in one device round trip; the results are those of
    /// [`chain::on_host`] (each level through [`Linears::linear_batch`]), empty for the links
    /// not read back.
    fn linear_chain(&mut self, links: &[Link<'_>]) -> Result<Vec<Vec<f32>>, V4Error> {
        chain::on_host(self, links)
    }
    /// Whether [`Linears::linear_chain`] would run `links` in one submit on the device with
    /// every matrix already there (nothing loaded): then the links it does not read back leave
    /// their outputs on the device, where the residual can stage them.
    fn chain_ready(&mut self, _links: &[Link<'_>]) -> bool {
        false
    }
    /// Makes the routed experts `experts` (`layers.L.ffn.experts.E`) available together for
    /// the chain that follows, one use each (a streamed backend loads what its cache lacks and
    /// counts hits and misses here); nothing where the backend holds every expert.
    fn ensure_experts(&mut self, _experts: &[String]) -> Result<(), V4Error> {
        Ok(())
    }
    /// `silu(min(gate, limit)) · clamp(up, −limit, limit)`, element by element (V4's clamped
    /// SwiGLU); here in f64, rounded to f32 (transformers' order of operations).
    fn swiglu(&mut self, gate: &[f32], up: &[f32], limit: f64) -> Result<Vec<f32>, V4Error> {
        if gate.len() != up.len() {
            return Err(V4Error::Input(format!(
                "SwiGLU of {} gate and {} up values",
                gate.len(),
                up.len()
            )));
        }
        Ok(super::moe::swiglu(gate, up, limit))
    }
    /// Per row of `weight.len()` values of `x`, `x · w / sqrt(mean(x²) + eps)`; here in f64,
    /// rounded to f32 (`ops::rmsnorm`, the reference's order of operations).
    fn rmsnorm(&mut self, x: &[f32], weight: &[f32], eps: f64) -> Result<Vec<f32>, V4Error> {
        let n = weight.len();
        if n == 0 || x.len() % n != 0 {
            return Err(V4Error::Input(format!(
                "RMSNorm of {} values in rows of {n}",
                x.len()
            )));
        }
        Ok(x.chunks_exact(n)
            .flat_map(|row| super::ops::rmsnorm(row, Some(weight), eps))
            .collect())
    }
    /// Layer `layer`'s decode state after `positions` tokens as the device attention holds it
    /// ([`super::residual::Residual::attend`]), read back for the host (nothing may be
    /// recorded and not submitted).
    fn pull_attn(
        &self,
        _c: &super::config::V4Config,
        layer: usize,
        _p: &super::attention::AttnParams,
        _positions: usize,
    ) -> Result<super::attention::AttnCache, V4Error> {
        Err(V4Error::Input(format!(
            "layer {layer}: this backend holds no decode state"
        )))
    }
    /// The device-resident residual of one-token steps (`None`: the host forward keeps it).
    fn residual(&mut self) -> Option<&mut dyn super::residual::Residual> {
        None
    }

    /// Asks for one-token steps with the residual on the device (`true`) or on the host; returns
    /// whether the backend now does as asked (one without a device keeps it on the host).
    fn set_device_residual(&mut self, on: bool) -> bool {
        !on
    }

    /// The device's counters so far (`None`: the backend has no device).
    fn gpu_stats(&self) -> Option<kernels::gpu::GpuStats> {
        None
    }
    /// Tile reads so far (streamed backends).
    fn tile_reads(&self) -> u64 {
        0
    }
    /// Routed-expert matrices loaded after open and their bytes (packed + scales).
    fn expert_loads(&self) -> (u64, u64) {
        (0, 0)
    }
    /// The streamed-expert device cache's counters (`None`: no such cache).
    fn expert_cache(&self) -> Option<ExpertCacheStats> {
        None
    }
}

struct Dense {
    rows: usize,
    k: usize,
    w: Vec<f32>,
}

/// The reference backend: every weight decoded once to f32, products summed in f64.
pub struct CpuLinears {
    src: Arc<dyn WeightSource>,
    shapes: HashMap<String, (usize, usize, bool)>,
    resident: HashMap<String, Arc<Dense>>,
    experts: VecDeque<(String, Arc<Dense>)>,
    expert_cache: usize,
    /// Routed-expert matrices decoded from the source so far (cache misses).
    pub expert_loads: u64,
}

impl CpuLinears {
    /// `expert_cache`: how many routed-expert matrices stay decoded (at least 1).
    pub fn new(src: Arc<dyn WeightSource>, expert_cache: usize) -> Self {
        Self {
            src,
            shapes: HashMap::new(),
            resident: HashMap::new(),
            experts: VecDeque::new(),
            expert_cache: expert_cache.max(1),
            expert_loads: 0,
        }
    }

    fn dense(&mut self, stem: &str) -> Result<Arc<Dense>, V4Error> {
        if let Some(d) = self.resident.get(stem) {
            return Ok(d.clone());
        }
        if let Some(i) = self.experts.iter().position(|(n, _)| n == stem) {
            if let Some(hit) = self.experts.remove(i) {
                let d = hit.1.clone();
                self.experts.push_back(hit);
                return Ok(d);
            }
        }
        let &(rows, k, expert) = self
            .shapes
            .get(stem)
            .ok_or_else(|| tensor_err(stem, "used before it was declared".into()))?;
        let q = load_matrix(self.src.as_ref(), stem, rows, k)?;
        let m = WeightMatrix::new(q.format, rows, k, &q.packed, &q.scales, &[])?;
        let d = Arc::new(Dense {
            rows,
            k,
            w: m.dequantize(),
        });
        if expert {
            self.expert_loads += 1;
            if self.experts.len() >= self.expert_cache {
                self.experts.pop_front();
            }
            self.experts.push_back((stem.to_owned(), d.clone()));
        } else {
            self.resident.insert(stem.to_owned(), d.clone());
        }
        Ok(d)
    }
}

/// Σ w·x in f64 with four interleaved partial sums (a fixed order), rounded once.
pub fn dot(w: &[f32], x: &[f32]) -> f64 {
    let mut acc = [0f64; 4];
    let n = w.len().min(x.len());
    let mut i = 0;
    while i + 4 <= n {
        for (j, a) in acc.iter_mut().enumerate() {
            *a += f64::from(w[i + j]) * f64::from(x[i + j]);
        }
        i += 4;
    }
    while i < n {
        acc[0] += f64::from(w[i]) * f64::from(x[i]);
        i += 1;
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

impl Linears for CpuLinears {
    fn declare(
        &mut self,
        stem: &str,
        rows: usize,
        k: usize,
        routed_expert: bool,
    ) -> Result<(), V4Error> {
        self.shapes
            .insert(stem.to_owned(), (rows, k, routed_expert));
        Ok(())
    }

    fn linear_rows(
        &mut self,
        stem: &str,
        rows: Range<usize>,
        x: &[f32],
        tokens: usize,
    ) -> Result<Vec<f32>, V4Error> {
        let d = self.dense(stem)?;
        check_product(stem, &rows, d.rows, d.k, x, tokens)?;
        let n = rows.len();
        let mut y = vec![0f32; tokens * n];
        // Tokens are split over threads for big products; every output is one `dot`, so the
        // result does not depend on the split.
        let threads = if tokens * n * d.k >= 1 << 22 {
            std::thread::available_parallelism().map_or(1, |p| p.get().min(8))
        } else {
            1
        };
        let per = tokens.div_ceil(threads).max(1);
        std::thread::scope(|sc| {
            for (ci, chunk) in y.chunks_mut(per * n).enumerate() {
                let d = &d;
                let rows = rows.clone();
                sc.spawn(move || {
                    for (ti, out) in chunk.chunks_mut(n).enumerate() {
                        let t = ci * per + ti;
                        let xt = &x[t * d.k..(t + 1) * d.k];
                        for (o, r) in out.iter_mut().zip(rows.clone()) {
                            *o = dot(&d.w[r * d.k..(r + 1) * d.k], xt) as f32;
                        }
                    }
                });
            }
        });
        Ok(y)
    }

    fn tile_reads(&self) -> u64 {
        self.src.tile_reads()
    }
}

/// The arguments of [`Linears::linear_rows`] against an `n` × `k` matrix: `rows` within it and
/// `tokens` inputs of `k` values each.
pub fn check_product(
    stem: &str,
    rows: &Range<usize>,
    n: usize,
    k: usize,
    x: &[f32],
    tokens: usize,
) -> Result<(), V4Error> {
    check_shape(stem, rows, n, k, x.len(), tokens)
}

/// As [`check_product`], for an input of `inputs` values.
pub fn check_shape(
    stem: &str,
    rows: &Range<usize>,
    n: usize,
    k: usize,
    inputs: usize,
    tokens: usize,
) -> Result<(), V4Error> {
    if rows.end > n || rows.start > rows.end || inputs != tokens * k {
        return Err(tensor_err(
            stem,
            format!("rows {rows:?} of {n} with {inputs} inputs for {tokens} tokens of {k}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Plain tensors in memory.
    struct Mem(HashMap<String, (String, Vec<u64>, Vec<u8>)>);

    impl WeightSource for Mem {
        fn tensor(&self, name: &str) -> Result<Tensor, V4Error> {
            let (dtype, shape, bytes) =
                self.0.get(name).cloned().ok_or_else(|| V4Error::Tensor {
                    name: name.into(),
                    detail: "missing".into(),
                })?;
            Ok(Tensor::Plain {
                dtype,
                shape,
                bytes,
            })
        }
        fn root_file(&self, name: &str) -> Result<Vec<u8>, V4Error> {
            Err(V4Error::Input(format!("no {name}")))
        }
        fn tile_reads(&self) -> u64 {
            0
        }
    }

    fn mem(items: &[(&str, &str, &[u64], Vec<u8>)]) -> Mem {
        Mem(items
            .iter()
            .map(|(n, d, s, b)| (n.to_string(), (d.to_string(), s.to_vec(), b.clone())))
            .collect())
    }

    #[test]
    fn plain_mxfp4_fallback_decodes_low_nibble_first_with_e8m0_scale() {
        // one row of 32: byte 0 = 0x21 → elements 0 = e2m1(1) = 0.5, 1 = e2m1(2) = 1.0; scale 2^1.
        let mut packed = vec![0u8; 16];
        packed[0] = 0x21;
        let src = mem(&[
            ("e.w1.weight", "I8", &[1, 16], packed),
            ("e.w1.scale", "F8_E8M0", &[1, 1], vec![128]),
        ]);
        let q = load_matrix(&src, "e.w1", 1, 32).expect("loads");
        assert_eq!(q.format, WeightFormat::Mxfp4);
        let mut l = CpuLinears::new(Arc::new(src), 1);
        l.declare("e.w1", 1, 32, true).expect("declare");
        let mut x = vec![0f32; 32];
        x[0] = 1.0;
        x[1] = 10.0;
        // 0.5·2·1 + 1.0·2·10 = 21
        assert_eq!(
            l.linear_rows("e.w1", 0..1, &x, 1).expect("runs"),
            vec![21.0]
        );
        assert_eq!(l.expert_loads, 1);
    }

    #[test]
    fn wrong_shapes_and_dtypes_name_the_tensor() {
        let src = mem(&[
            ("a.weight", "BF16", &[2, 3], vec![0; 12]),
            ("b.weight", "F8_E4M3", &[2, 3], vec![0; 6]),
            (
                "t",
                "I64",
                &[1, 2],
                [0i64, 7].iter().flat_map(|v| v.to_le_bytes()).collect(),
            ),
        ]);
        let e = load_matrix(&src, "a", 3, 2)
            .expect_err("shape refused")
            .to_string();
        assert!(e.contains("a.weight") && e.contains("[3, 2]"), "{e}");
        let e = load_matrix(&src, "b", 2, 3)
            .expect_err("no scale")
            .to_string();
        assert!(e.contains("b.scale"), "{e}");
        let e = load_tid2eid(&src, "t", 1, 2, 4)
            .expect_err("id 7 ≥ 4")
            .to_string();
        assert!(e.contains("expert id 7"), "{e}");
        let e = load_vector(&src, "a.weight", &[6])
            .expect_err("shape")
            .to_string();
        assert!(e.contains("a.weight"), "{e}");
    }
}
