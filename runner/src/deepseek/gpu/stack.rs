//! A resident MoE's routed experts kept as two stacks (docs/runner-deepseek-v4.md "Experts by
//! index"): every expert's fused gate/up matrix (`{expert}.w13`, [`super::fused`]) one after the
//! other in one buffer, and every down matrix (`{expert}.w2`) in another. Each expert's
//! matrices are views of their spans (`Engine::upload_stack`), so its own products run as
//! before and nothing is held twice; the stacks let a one-token step multiply the experts the
//! router picked on the device by index (`kernels::unrolled::{gate_up_clamped_by_index,
//! source_by_index}` on a CPU adapter, `kernels::looped::{gate_up_clamped, matvec_by_index}` on a
//! GPU's mapping) without the host learning which they are.
//!
//! The model announces each MoE ([`Linears::declare_experts`]); its experts' matrices are held
//! as they are declared and uploaded as stacks when the last comes. Where they cannot be (formats
//! or shapes that differ, a stack over one binding, bytes off the offset alignment, a
//! streamed backend) each is uploaded as a matrix of its own, as without the announcement.
//!
//! [`Linears::declare_experts`]: super::super::linear::Linears::declare_experts

use std::collections::HashMap;
use std::sync::Arc;

use kernels::generated::Generated;

use crate::engine::ResidentMatrix;

use super::super::error::V4Error;
use super::super::linear::{tensor_err, QMatrix};
use super::GpuLinears;

/// A fused gate/up matrix waiting for its stack, with what its fused product needs.
struct PendingW13 {
    mlp: String,
    q: QMatrix,
    module: Arc<Generated>,
    ffn: usize,
    limit: f64,
}

/// One announced MoE's experts as they are declared.
struct Gathering {
    experts: usize,
    w13: Vec<PendingW13>,
    w2: Vec<(String, QMatrix)>,
}

/// A MoE whose experts are stacks.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Stacked {
    pub experts: usize,
    /// The stack of fused gate/up matrices (`{ffn}.experts.w13`) and of down matrices
    /// (`{ffn}.experts.w2`), resident under these names.
    pub w13: String,
    pub w2: String,
    /// Rows of one projection (the MLPs' intermediate size), the hidden size, the clamp.
    pub ffn: usize,
    pub hidden: usize,
    pub limit: f64,
}

/// The announced MoEs: those being gathered and those stacked, by `layers.L.ffn` stem.
#[derive(Default)]
pub(super) struct ExpertStacks {
    gathering: HashMap<String, Gathering>,
    stacked: HashMap<String, Stacked>,
}

impl ExpertStacks {
    pub(super) fn announce(&mut self, ffn: &str, experts: usize) {
        if experts > 0 {
            self.gathering.insert(
                ffn.to_owned(),
                Gathering {
                    experts,
                    w13: Vec::new(),
                    w2: Vec::new(),
                },
            );
        }
    }

    /// The stacks of MoE `ffn`, where its experts are stacked.
    pub(super) fn get(&self, ffn: &str) -> Option<&Stacked> {
        self.stacked.get(ffn)
    }
}

/// The MoE stem (`layers.L.ffn`) of a routed expert's MLP stem (`layers.L.ffn.experts.E`).
fn moe_of(mlp: &str) -> Option<&str> {
    let (moe, e) = mlp.rsplit_once('.')?;
    e.parse::<usize>().ok()?;
    moe.strip_suffix(".experts")
}

impl GpuLinears {
    /// Holds expert `mlp`'s fused gate/up matrix `q` for its MoE's stack; `false` where `mlp` is
    /// not an expert of a MoE being gathered (the caller uploads it).
    pub(super) fn gather_w13(
        &mut self,
        mlp: &str,
        q: QMatrix,
        module: Arc<Generated>,
        limit: f64,
    ) -> Result<Option<QMatrix>, V4Error> {
        let Some(g) = moe_of(mlp).and_then(|m| self.stacks.gathering.get_mut(m)) else {
            return Ok(Some(q));
        };
        let ffn = q.rows / 2;
        g.w13.push(PendingW13 {
            mlp: mlp.to_owned(),
            q,
            module,
            ffn,
            limit,
        });
        Ok(None)
    }

    /// Holds expert down matrix `stem` (`{expert}.w2`) for its MoE's stack, uploading the stacks
    /// when it is the last; gives `q` back where `stem` is not one being gathered.
    pub(super) fn gather_w2(&mut self, stem: &str, q: QMatrix) -> Result<Option<QMatrix>, V4Error> {
        let moe = stem
            .strip_suffix(".w2")
            .and_then(moe_of)
            .filter(|m| self.stacks.gathering.contains_key(*m))
            .map(str::to_owned);
        let Some(moe) = moe else {
            return Ok(Some(q));
        };
        let done = match self.stacks.gathering.get_mut(&moe) {
            Some(g) => {
                g.w2.push((stem.to_owned(), q));
                g.w2.len() == g.experts
            }
            None => false,
        };
        if done {
            self.finish_stacks(&moe)?;
        }
        Ok(None)
    }

    /// Uploads MoE `moe`'s gathered experts as stacks, or each as a matrix of its own where they
    /// cannot be.
    fn finish_stacks(&mut self, moe: &str) -> Result<(), V4Error> {
        let Some(g) = self.stacks.gathering.remove(moe) else {
            return Ok(());
        };
        if let Some(stacked) = self.upload_stacks(moe, &g)? {
            self.stacks.stacked.insert(moe.to_owned(), stacked);
            return Ok(());
        }
        for p in g.w13 {
            let m = self.upload_rows(
                &format!("{}.w13", p.mlp),
                &p.q,
                p.q.rows,
                &p.q.packed,
                &p.q.scales,
            )?;
            self.install_fused(&p.mlp, m, p.module, p.ffn, p.limit)?;
        }
        for (stem, q) in g.w2 {
            self.upload_resident(&stem, &q)?;
        }
        Ok(())
    }

    /// The stacks of `g` with every expert's matrices as views, `None` (nothing kept) where
    /// the experts differ in format or shape or the engine cannot stack them.
    fn upload_stacks(&mut self, moe: &str, g: &Gathering) -> Result<Option<Stacked>, V4Error> {
        let (Some(a), Some(b)) = (g.w13.first(), g.w2.first()) else {
            return Ok(None);
        };
        let same13 = g.w13.iter().all(|p| {
            (p.q.format, p.q.rows, p.q.k, p.limit.to_bits())
                == (a.q.format, a.q.rows, a.q.k, a.limit.to_bits())
        });
        let same2 =
            g.w2.iter()
                .all(|(_, q)| (q.format, q.rows, q.k) == (b.1.format, b.1.rows, b.1.k));
        if g.w13.len() != g.experts || !same13 || !same2 || b.1.k != a.ffn {
            return Ok(None);
        }
        let names13: Vec<String> = g.w13.iter().map(|p| format!("{}.w13", p.mlp)).collect();
        let parts13: Vec<(&str, &[u8], &[u8])> = g
            .w13
            .iter()
            .zip(&names13)
            .map(|(p, n)| (n.as_str(), p.q.packed.as_slice(), p.q.scales.as_slice()))
            .collect();
        let parts2: Vec<(&str, &[u8], &[u8])> =
            g.w2.iter()
                .map(|(n, q)| (n.as_str(), q.packed.as_slice(), q.scales.as_slice()))
                .collect();
        let (w13, w2) = (format!("{moe}.experts.w13"), format!("{moe}.experts.w2"));
        let e = &self.engine;
        let s13 = e.upload_stack(&w13, a.q.format, a.q.rows, a.q.k, &parts13)?;
        let Some((stack13, views13)) = s13 else {
            return Ok(None);
        };
        let s2 = e.upload_stack(&w2, b.1.format, b.1.rows, b.1.k, &parts2)?;
        let Some((stack2, views2)) = s2 else {
            return Ok(None);
        };
        for (p, view) in g.w13.iter().zip(views13) {
            self.install_fused(&p.mlp, view, Arc::clone(&p.module), p.ffn, p.limit)?;
        }
        for view in views2 {
            self.resident.insert(view.name.clone(), view);
        }
        self.resident.insert(w13.clone(), stack13);
        self.resident.insert(w2.clone(), stack2);
        Ok(Some(Stacked {
            experts: g.experts,
            w13,
            w2,
            ffn: a.ffn,
            hidden: b.1.rows,
            limit: a.limit,
        }))
    }

    /// Installs `m` (`{mlp}.w13`) as MLP `mlp`'s fused gate/up matrix with its product; an
    /// error where the product cannot be made over it (its module was made for its shape).
    pub(super) fn install_fused(
        &mut self,
        mlp: &str,
        m: ResidentMatrix,
        module: Arc<Generated>,
        ffn: usize,
        limit: f64,
    ) -> Result<(), V4Error> {
        if !self.fuse_into(mlp, m, module, ffn, limit) {
            return Err(tensor_err(
                &format!("{mlp}.w13"),
                "has no fused gate/up product on this device".into(),
            ));
        }
        Ok(())
    }
}
