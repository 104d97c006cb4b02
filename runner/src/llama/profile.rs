//! A per-operation profile of one greedy decode step (issue 16: "the profile that explains a
//! miss"). Each operation of the one-token forward is recorded `reps` times into one compute pass,
//! submitted alone and waited for; its wall time over `reps` is its cost per token, dispatch
//! included. The whole step is timed the same way (`reps` steps of [`Runner::step_argmax`]), so
//! the gap between the sum of the operations and the step is what a step pays besides its kernels
//! (the submit, the 4-byte read-back, the pass). Between the two, the step's operations recorded
//! back to back in one pass and one submit separate what changing pipelines and bind groups
//! between dispatches costs from what the submit and the read-back cost.
//!
//! Repeating an operation in place re-reads what it wrote (a residual add accumulates, a KV row
//! is rewritten): the values drift, the memory traffic and the work do not, and the runner's state
//! is restored by rewinding to the profiled position. Only resident weights are profiled: a
//! streamed operation's cost is its tile upload, which this does not isolate.

use std::time::Instant;

use super::plan::{Op, Step};
use super::Runner;
use crate::error::RunError;

/// One operation's cost per decode token.
#[derive(Debug, Clone)]
pub struct OpTime {
    /// What the operation computes (`QkvRope q4_1 k=576`, `Attention`, …).
    pub label: String,
    /// Weight bytes it reads per token (0 for operations without weights).
    pub weight_bytes: u64,
    /// Microseconds per token (median of the rounds).
    pub us: f64,
}

/// The profile of one decode step.
#[derive(Debug, Clone)]
pub struct DecodeProfile {
    /// Position the step was profiled at.
    pub position: usize,
    /// Every operation of the step, in order.
    pub ops: Vec<OpTime>,
    /// Every operation of the step recorded back to back, `reps` steps in one pass and one
    /// submit, per step (median of the rounds): the step's kernels with its pipeline and bind
    /// group changes, without its submit, fence and read-back.
    pub pass_us: f64,
    /// The whole step ([`Runner::step_argmax`]), microseconds (median of the rounds).
    pub step_us: f64,
}

fn label(step: &Step) -> String {
    match *step {
        Step::Matmul {
            format, rows, k, ..
        } => format!("Matmul {format:?} {rows}x{k}"),
        Step::QkvRope { format, k, pairs } => {
            format!("QkvRope {format:?} k={k} ({pairs} rope pairs)")
        }
        Step::GateUp { format, k, ffn } => format!("GateUp {format:?} {}x{k}", 2 * ffn),
        other => format!("{other:?}"),
    }
}

fn weight_bytes(step: &Step, qkv_rows: usize) -> u64 {
    let (format, rows, k) = match *step {
        Step::Matmul {
            format, rows, k, ..
        } => (format, rows, k),
        Step::QkvRope { format, k, .. } => (format, qkv_rows, k),
        Step::GateUp { format, k, ffn } => (format, 2 * ffn, k),
        _ => return 0,
    };
    match format.block() {
        Some((elems, bytes)) => (rows * k / elems * bytes) as u64,
        None => 0,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Records `ops` in order, `reps` times, into one compute pass of one encoder; submits it, waits
/// for the queue, and returns the wall time per repetition in microseconds.
fn timed_pass(
    g: &kernels::gpu::Gpu,
    shapes: &super::plan::Shapes,
    ops: &[&Op],
    reps: usize,
    position: usize,
) -> Result<f64, RunError> {
    let mut enc = g.encoder("profile");
    {
        let desc = wgpu::ComputePassDescriptor {
            label: Some("profile"),
            timestamp_writes: None,
        };
        let mut pass = enc.begin_compute_pass(&desc);
        for _ in 0..reps {
            for op in ops {
                op.record(g, shapes, &mut pass, 1, position)?;
            }
        }
    }
    let t0 = Instant::now();
    g.submit(enc.finish());
    g.device()
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| RunError::Kernel(kernels::KernelError::Readback(e.to_string())))?;
    Ok(t0.elapsed().as_secs_f64() * 1e6 / reps as f64)
}

impl Runner {
    /// Profile the one-token forward at the current position (module docs): `rounds` rounds of
    /// `reps` repetitions per operation, medians. The KV cache keeps its first `position`
    /// positions; the next token must come through [`Runner::forward`] again.
    pub fn profile_decode(
        &mut self,
        reps: usize,
        rounds: usize,
    ) -> Result<DecodeProfile, RunError> {
        let (reps, rounds) = (reps.max(1), rounds.max(1));
        let position = self.pos;
        if position + reps + 1 > self.capacity || position == 0 {
            return Err(RunError::ContextFull {
                capacity: self.capacity,
            });
        }
        let c = &self.shapes.c;
        let qkv_rows = (c.n_heads + 2 * c.n_kv_heads) * c.head_dim;
        let ops: Vec<&Op> = self
            .body
            .iter()
            .chain(&self.tail_one)
            .filter(|op| op.when.serves(1) && op.tile.is_none())
            .collect();
        let g = self.engine.gpu();
        self.params.update(g, &self.shapes, 1, position)?;
        let shapes = &self.shapes;
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); ops.len()];
        let mut passes = Vec::new();
        for _ in 0..rounds {
            for (i, op) in ops.iter().enumerate() {
                let us = timed_pass(g, shapes, std::slice::from_ref(op), reps, position)?;
                if let Some(s) = samples.get_mut(i) {
                    s.push(us);
                }
            }
            passes.push(timed_pass(g, shapes, &ops, reps, position)?);
        }
        let mut steps = Vec::new();
        let ops_out = ops
            .iter()
            .zip(samples)
            .map(|(op, s)| OpTime {
                label: label(&op.step),
                weight_bytes: weight_bytes(&op.step, qkv_rows),
                us: median(s),
            })
            .collect();
        for _ in 0..rounds {
            self.pos = position;
            let t0 = Instant::now();
            for _ in 0..reps {
                self.step_argmax()?;
            }
            steps.push(t0.elapsed().as_secs_f64() * 1e6 / reps as f64);
        }
        self.pos = position;
        Ok(DecodeProfile {
            position,
            ops: ops_out,
            pass_us: median(passes),
            step_us: median(steps),
        })
    }
}
