//! An MLP's gate and up projections kept as one matrix (docs/runner-deepseek-v4.md "Fused
//! gate/up"): when the model announces an MLP ([`Linears::declare_mlp`]) and its `w1` and `w3`
//! are resident with one format and shape, the backend uploads them as `{mlp}.w13` — the gate's
//! rows, then the up's, the stored bytes side by side — instead of as two matrices, and prepares
//! its one-token product with the clamped SwiGLU in the epilogue
//! (`kernels::unrolled::gate_up_clamped` on a CPU adapter, `kernels::looped::gate_up_clamped` on
//! a GPU's mapping): one dispatch writes the MLP's activations, where the
//! two products and the SwiGLU kernel took three. Every other product of `w1` or `w3` (a prefill
//! chunk, a chain that cannot run on the device) is the matching half of `w13`'s rows, the same
//! bits: a row's accumulation order depends only on the row and K, and the fused epilogue is
//! `activation.wgsl`'s (kernels tests/fused.rs, tests/looped.rs).
//!
//! [`Linears::declare_mlp`]: super::super::linear::Linears::declare_mlp

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Arc;

use kernels::generated::Generated;
use kernels::gpu::MatvecShape;
use kernels::unrolled::gate_up_clamped;
use kernels::{looped, WeightFormat};

use super::super::error::V4Error;
use super::super::linear::QMatrix;
use super::super::prepared::Prepared;
use super::{device_limit, GpuLinears};
use crate::engine::ResidentMatrix;

/// The fused MLP matrices of a backend.
#[derive(Default)]
pub(super) struct FusedMlps {
    /// An announced MLP's gate matrix (its stem and bytes), held until its up matrix comes.
    pending: Option<(String, QMatrix)>,
    /// `{mlp}.w1` and `{mlp}.w3` → `{mlp}.w13` and the first of their rows in it.
    redirect: HashMap<String, (String, usize)>,
    /// `{mlp}.w13` → its SwiGLU limit and its gate/up + SwiGLU product.
    products: HashMap<String, (f64, Prepared)>,
    /// The generated modules, by format, K, rows of one projection and limit bits.
    modules: HashMap<(WeightFormat, usize, usize, u32), Arc<Generated>>,
}

impl FusedMlps {
    /// The fused matrix that holds `stem`'s rows, and where they start.
    pub(super) fn redirect(&self, stem: &str) -> Option<(&str, usize)> {
        self.redirect.get(stem).map(|(s, off)| (s.as_str(), *off))
    }

    /// The limit and the gate/up + SwiGLU product of fused matrix `w13`.
    pub(super) fn product(&self, w13: &str) -> Option<(f64, &Prepared)> {
        self.products.get(w13).map(|(l, p)| (*l, p))
    }

    pub(super) fn product_mut(&mut self, w13: &str) -> Option<&mut Prepared> {
        self.products.get_mut(w13).map(|(_, p)| p)
    }
}

impl GpuLinears {
    /// Takes `q` (being declared as `stem`) where it is an announced MLP's gate or up matrix: the
    /// gate is held until the up comes, then both become one fused matrix where they can, else
    /// are uploaded as they are. Returns `q` when it is not taken (the caller uploads it).
    pub(super) fn declare_mlp_part(
        &mut self,
        stem: &str,
        q: QMatrix,
    ) -> Result<Option<QMatrix>, V4Error> {
        let part = stem
            .rsplit_once('.')
            .filter(|(mlp, _)| self.mlps.contains_key(*mlp));
        let up_of_pending = match (&self.fused.pending, part) {
            (Some((gate, _)), Some((mlp, "w3"))) => *gate == format!("{mlp}.w1"),
            _ => false,
        };
        if !up_of_pending {
            self.upload_pending()?;
        }
        match part {
            Some((_, "w1")) => {
                self.fused.pending = Some((stem.to_owned(), q));
                Ok(None)
            }
            Some((mlp, "w3")) if up_of_pending => {
                let limit = self.mlps.get(mlp).copied().unwrap_or(0.0);
                let Some((gate_stem, gate)) = self.fused.pending.take() else {
                    return Ok(Some(q));
                };
                if self.fuse(mlp, &gate, &q, limit)? {
                    return Ok(None);
                }
                self.upload_resident(&gate_stem, &gate)?;
                Ok(Some(q))
            }
            _ => Ok(Some(q)),
        }
    }

    /// Uploads a held gate matrix as it is (its up matrix did not follow).
    fn upload_pending(&mut self) -> Result<(), V4Error> {
        if let Some((stem, q)) = self.fused.pending.take() {
            self.upload_resident(&stem, &q)?;
        }
        Ok(())
    }

    /// Uploads `gate` and `up` as `{mlp}.w13` with its fused product; `false` (nothing
    /// uploaded) where the two differ in format or shape, or the format, K or shape has no fused
    /// module on this adapter's mapping.
    fn fuse(
        &mut self,
        mlp: &str,
        gate: &QMatrix,
        up: &QMatrix,
        limit: f64,
    ) -> Result<bool, V4Error> {
        let g = self.engine.gpu();
        if gate.format != up.format || gate.k != up.k || gate.rows != up.rows {
            return Ok(false);
        }
        let Some(lim) = device_limit(limit) else {
            return Ok(false);
        };
        let module = match self
            .fused
            .modules
            .entry((gate.format, gate.k, gate.rows, lim.to_bits()))
        {
            Entry::Occupied(e) => Arc::clone(e.get()),
            Entry::Vacant(e) => {
                let module = match g.matvec_shape() {
                    MatvecShape::Rows => gate_up_clamped(gate.format, gate.k, gate.rows, lim),
                    _ => looped::gate_up_clamped(gate.format, gate.rows, lim, None),
                };
                match module {
                    Some(m) => Arc::clone(e.insert(Arc::new(m))),
                    None => return Ok(false),
                }
            }
        };
        let name = format!("{mlp}.w13");
        let q = QMatrix {
            name: name.clone(),
            format: gate.format,
            rows: 2 * gate.rows,
            k: gate.k,
            packed: [gate.packed.as_slice(), &up.packed].concat(),
            scales: [gate.scales.as_slice(), &up.scales].concat(),
        };
        // (a routed expert of an announced MoE waits for its stack: `stack`)
        let Some(q) = self.gather_w13(mlp, q, Arc::clone(&module), limit)? else {
            return Ok(true);
        };
        let m = self.upload_rows(&name, &q, q.rows, &q.packed, &q.scales)?;
        Ok(self.fuse_into(mlp, m, module, gate.rows, limit))
    }

    /// Installs `m` (`{mlp}.w13`, gate rows then up rows, `ffn` each) as MLP `mlp`'s fused
    /// matrix with its gate/up + SwiGLU product; `false` (nothing installed) where the product
    /// cannot be made over it.
    pub(super) fn fuse_into(
        &mut self,
        mlp: &str,
        m: ResidentMatrix,
        module: Arc<Generated>,
        ffn: usize,
        limit: f64,
    ) -> bool {
        let name = format!("{mlp}.w13");
        let Some(product) = Prepared::gate_up(self.engine.gpu(), &m, module, ffn) else {
            return false;
        };
        self.resident.insert(name.clone(), m);
        let f = &mut self.fused;
        f.redirect.insert(format!("{mlp}.w1"), (name.clone(), 0));
        f.redirect.insert(format!("{mlp}.w3"), (name.clone(), ffn));
        f.products.insert(name, (limit, product));
        true
    }
}
