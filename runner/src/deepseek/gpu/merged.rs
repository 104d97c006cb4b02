//! Weights that read one input kept as one matrix (docs/runner-deepseek-v4.md "Merged input
//! projections"): the model declares them together ([`Linears::declare_merged`]); those that
//! share a format and K, where their rows can be stacked (an `fp8-e4m3-block` part other than the
//! last must end on a scale block), the backend uploads the stored bytes side by side as one
//! matrix and serves each part's products as that matrix's rows. A batch's products of several
//! parts over one input are then one dispatch, where they were one each — on a CPU adapter a
//! dispatch costs about as much as a 256-row product, so the attention's seven input
//! projections cost one. Each row's accumulation order depends only on its row and K, so every
//! output is the bits the part's own product gives.
//!
//! [`Linears::declare_merged`]: super::super::linear::Linears::declare_merged

use super::super::error::V4Error;
use super::super::linear::{load_matrix, QMatrix};
use super::GpuLinears;

impl GpuLinears {
    /// Loads `parts` and uploads those of one format and K as one matrix (`{name}.{i}` for the
    /// i-th such set, in the order of their first part) where they can be stacked; every other
    /// part as itself.
    pub(super) fn declare_merged_parts(
        &mut self,
        name: &str,
        parts: &[(String, usize, usize)],
    ) -> Result<(), V4Error> {
        let mut sets: Vec<Vec<QMatrix>> = Vec::new();
        for (stem, rows, k) in parts {
            self.shapes.insert(stem.clone(), (*rows, *k, false));
            let q = load_matrix(self.src.as_ref(), stem, *rows, *k)?;
            match sets.iter_mut().find(|s| {
                s.first()
                    .is_some_and(|f| f.format == q.format && f.k == q.k)
            }) {
                Some(set) => set.push(q),
                None => sets.push(vec![q]),
            }
        }
        for (i, set) in sets.iter().enumerate() {
            let special = set.iter().any(|q| {
                self.groups.contains_key(&q.name)
                    || q.name
                        .rsplit_once('.')
                        .is_some_and(|(mlp, _)| self.mlps.contains_key(mlp))
            });
            let stacked = if special { None } else { stack(set) };
            match stacked {
                Some((packed, scales, offsets)) => {
                    self.upload_stacked(&format!("{name}.{i}"), set, &packed, &scales, &offsets)?
                }
                None => {
                    for q in set {
                        self.upload_resident(&q.name, q)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Uploads `set`'s stacked bytes as matrix `name` and points each part at its rows.
    fn upload_stacked(
        &mut self,
        name: &str,
        set: &[QMatrix],
        packed: &[u8],
        scales: &[u8],
        offsets: &[usize],
    ) -> Result<(), V4Error> {
        let Some(first) = set.first() else {
            return Ok(());
        };
        let rows: usize = set.iter().map(|q| q.rows).sum();
        let m = self.upload_rows(name, first, rows, packed, scales)?;
        self.resident.insert(name.to_owned(), m);
        self.shapes.insert(name.to_owned(), (rows, first.k, false));
        for (q, &off) in set.iter().zip(offsets) {
            self.merged.insert(q.name.clone(), (name.to_owned(), off));
        }
        Ok(())
    }

    /// The merged matrix that holds `stem`'s rows, and where they start.
    pub(super) fn merged_into(&self, stem: &str) -> Option<(&str, usize)> {
        self.merged.get(stem).map(|(s, off)| (s.as_str(), *off))
    }
}

/// `qs`' packed and scale bytes one matrix after the other, with each one's first row, where
/// they share format and K and each one's rows come back unchanged from the stack (the format
/// cuts there: `row_ranges` and a byte comparison prove it); `None` otherwise.
fn stack(qs: &[QMatrix]) -> Option<(Vec<u8>, Vec<u8>, Vec<usize>)> {
    let first = qs.first()?;
    if qs.len() < 2
        || qs
            .iter()
            .any(|q| q.format != first.format || q.k != first.k)
    {
        return None;
    }
    let packed: Vec<u8> = qs.iter().flat_map(|q| q.packed.iter().copied()).collect();
    let scales: Vec<u8> = qs.iter().flat_map(|q| q.scales.iter().copied()).collect();
    let mut offsets = Vec::with_capacity(qs.len());
    let mut row = 0;
    for q in qs {
        let [p, s, _] = q.format.row_ranges(q.k, row, row + q.rows).ok()?;
        let same = packed.get(p)? == q.packed.as_slice() && scales.get(s)? == q.scales.as_slice();
        if !same {
            return None;
        }
        offsets.push(row);
        row += q.rows;
    }
    Some((packed, scales, offsets))
}
