//! The device attention's decode state to and from the host's [`AttnCache`] ([`super`]): pushed
//! before the first device step after the host changed it (a prefill, a restored or loaded
//! state), pulled when the host needs it after device steps.

use kernels::gpu::Gpu;

use super::super::super::attention::{AttnCache, AttnParams};
use super::super::super::compress::{state_shapes, CompCache, CompParams};
use super::super::super::config::V4Config;
use super::super::super::error::V4Error;
use super::super::super::linear::tensor_err;
use super::super::GpuLinears;
use super::{grow, CompDev};

/// `rows` laid out from element `at` of `out`, `width` apart.
fn place(out: &mut [f32], at: usize, width: usize, rows: &[Vec<f32>]) {
    for (j, r) in rows.iter().enumerate() {
        let n = r.len().min(width);
        if let Some(dst) = out.get_mut(at + j * width..at + j * width + n) {
            dst.copy_from_slice(&r[..n]);
        }
    }
}

/// `n` rows of `width` from element `at` of `v`.
fn rows_of(v: &[f32], at: usize, width: usize, n: usize) -> Vec<Vec<f32>> {
    (0..n)
        .map(|j| {
            v.get(at + j * width..at + (j + 1) * width)
                .unwrap_or(&[])
                .to_vec()
        })
        .collect()
}

fn read(g: &Gpu, b: &wgpu::Buffer) -> Result<Vec<f32>, V4Error> {
    Ok(bytemuck::pod_collect_to_vec(&g.read_bytes(b, b.size())?))
}

impl GpuLinears {
    /// Writes the host's layer state after `positions` tokens to layer `layer`'s buffers.
    pub(in crate::deepseek::gpu) fn push_state(
        &mut self,
        c: &V4Config,
        layer: usize,
        p: &AttnParams,
        cache: &AttnCache,
        positions: usize,
    ) -> Result<(), V4Error> {
        self.layer_attn(c, layer, p)?;
        // (the kernels read only what this run's steps wrote: an empty state needs no write)
        if positions == 0 {
            return Ok(());
        }
        let mut enc = self.open_encoder();
        let g = self.engine.gpu();
        let a = self
            .attn
            .as_mut()
            .ok_or_else(|| tensor_err(&p.stem, "lost its device attention".into()))?;
        let l = a
            .layers
            .get_mut(&layer)
            .ok_or_else(|| tensor_err(&p.stem, "lost its device attention".into()))?;
        let (w, hd) = (c.window, c.head_dim);
        let keys = cache.window_keys();
        let first = positions.saturating_sub(keys.len());
        let mut ring = vec![0f32; w * hd];
        for (i, k) in keys.iter().enumerate() {
            place(
                &mut ring,
                ((first + i) % w) * hd,
                hd,
                std::slice::from_ref(k),
            );
        }
        let mut writes: Vec<(wgpu::Buffer, Vec<f32>)> = vec![(l.ring.clone(), ring)];
        let mut stale = false;
        for (d, cp, cc) in [
            (&mut l.comp, &p.comp, &cache.comp),
            (&mut l.idx, &p.indexer, &cache.idx),
        ] {
            let (Some(d), Some(cp)) = (d.as_mut(), cp) else {
                continue;
            };
            stale |= grow(g, d, positions / cp.ratio, &mut enc)?;
            let (state, entries) = device_state(d, cp, cc);
            writes.push((d.state.clone(), state));
            writes.push((d.entries.clone(), entries));
        }
        if stale {
            if let Some(cap) = l.idx.as_ref().map(|d| d.cap) {
                l.scores = Some(g.zeros("v4 index scores", (cap * 4) as u64)?);
            }
            l.groups = None;
        }
        let belt = self.buffers.belt(g);
        for (b, v) in &writes {
            if !v.is_empty() {
                g.write_in(belt, &mut enc, b, 0, bytemuck::cast_slice(v));
            }
        }
        self.open = Some(enc);
        Ok(())
    }

    /// Layer `layer`'s state after `positions` tokens, read back (nothing may be pending).
    pub(in crate::deepseek::gpu) fn pull_state(
        &self,
        c: &V4Config,
        layer: usize,
        p: &AttnParams,
        positions: usize,
    ) -> Result<AttnCache, V4Error> {
        if self.open.is_some() {
            return Err(tensor_err(
                &p.stem,
                "its state was read with work not yet submitted".into(),
            ));
        }
        let l = self
            .attn
            .as_ref()
            .and_then(|a| a.layers.get(&layer))
            .ok_or_else(|| tensor_err(&p.stem, "has no decode state on the device".into()))?;
        let g = self.engine.gpu();
        let (w, hd) = (c.window, c.head_dim);
        let ring = read(g, &l.ring)?;
        let first = positions.saturating_sub(w.saturating_sub(1));
        let keys = (first..positions)
            .map(|pos| rows_of(&ring, (pos % w) * hd, hd, 1).remove(0))
            .collect();
        let mut comps = Vec::with_capacity(2);
        for (d, cp) in [(&l.comp, &p.comp), (&l.idx, &p.indexer)] {
            comps.push(match (d, cp) {
                (Some(d), Some(cp)) => host_state(g, d, cp, positions)?,
                _ => CompCache::default(),
            });
        }
        let idx = comps.pop().unwrap_or_default();
        let comp = comps.pop().unwrap_or_default();
        Ok(AttnCache::from_parts(positions, keys, comp, idx))
    }
}

/// A host compressor state as the device's state and entries.
fn device_state(d: &CompDev, cp: &CompParams, cc: &CompCache) -> (Vec<f32>, Vec<f32>) {
    let (r, dim) = (cp.ratio, cp.dim);
    let w = cp.coff * dim;
    let gates = r * w;
    let mut state = vec![0f32; d.sh.state_len()];
    let mut entries = Vec::new();
    for (name, rows) in cc.arrays(cp) {
        match name {
            "buffer_kv" => place(&mut state, 0, w, rows),
            "buffer_gate" => place(&mut state, gates, w, rows),
            "overlap_kv" => place(&mut state, 2 * gates, dim, rows),
            "overlap_gate" => place(&mut state, 2 * gates + r * dim, dim, rows),
            _ => entries = rows.concat(),
        }
    }
    (state, entries)
}

/// The device's compressor state after `positions` tokens as the host's.
fn host_state(
    g: &Gpu,
    d: &CompDev,
    cp: &CompParams,
    positions: usize,
) -> Result<CompCache, V4Error> {
    let (r, dim) = (cp.ratio, cp.dim);
    let w = cp.coff * dim;
    let gates = r * w;
    let state = read(g, &d.state)?;
    let entries = read(g, &d.entries)?;
    let arrays = state_shapes(cp, positions)
        .into_iter()
        .map(|(name, n, _)| match name {
            "buffer_kv" => rows_of(&state, 0, w, n),
            "buffer_gate" => rows_of(&state, gates, w, n),
            "overlap_kv" => rows_of(&state, 2 * gates, dim, n),
            "overlap_gate" => rows_of(&state, 2 * gates + r * dim, dim, n),
            _ => rows_of(&entries, 0, dim, n),
        })
        .collect();
    Ok(CompCache::from_arrays(cp, arrays))
}
