//! Log-probabilities of generated tokens (docs/runner.md "Log-probabilities"): the chosen token's
//! and the `top` most likely tokens' of the model's own distribution at that position — the
//! log-softmax of the raw logits, before any penalty, temperature or truncation (as vLLM returns
//! by default, so a value does not depend on the sampling settings). Summed in f64.

/// One generated token's log-probability and the most likely alternatives at its position.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprobs {
    pub id: u32,
    pub logprob: f32,
    /// The `top` most likely ids with their log-probabilities, most likely first (ties to the
    /// lower id).
    pub top: Vec<(u32, f32)>,
}

impl TokenLogprobs {
    /// `id`'s log-probability and the `top` most likely of the row `logits`. A row holding no
    /// finite logit gives −∞ everywhere.
    pub fn of(logits: &[f32], id: u32, top: usize) -> Self {
        let max = logits
            .iter()
            .copied()
            .filter(|l| l.is_finite())
            .fold(f32::NEG_INFINITY, f32::max);
        let sum: f64 = logits
            .iter()
            .filter(|l| l.is_finite())
            .map(|&l| (f64::from(l) - f64::from(max)).exp())
            .sum();
        let log_z = f64::from(max) + sum.ln();
        let lp = |l: f32| -> f32 {
            if l.is_finite() && max.is_finite() {
                (f64::from(l) - log_z) as f32
            } else {
                f32::NEG_INFINITY
            }
        };
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        let key = |i: &u32| logits[*i as usize];
        let by = |a: &u32, b: &u32| {
            key(b)
                .partial_cmp(&key(a))
                .unwrap_or_else(|| key(a).is_nan().cmp(&key(b).is_nan()))
                .then(a.cmp(b))
        };
        let k = top.min(order.len());
        if k > 0 && k < order.len() {
            order.select_nth_unstable_by(k - 1, by);
        }
        order.truncate(k);
        order.sort_unstable_by(by);
        Self {
            id,
            logprob: logits
                .get(id as usize)
                .map_or(f32::NEG_INFINITY, |&l| lp(l)),
            top: order.into_iter().map(|i| (i, lp(key(&i)))).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logprobs_are_the_log_softmax_and_the_top_are_sorted() {
        let logits = [1.0f32, 3.0, 3.0, -2.0, 0.5];
        let z: f64 = logits.iter().map(|&l| f64::from(l).exp()).sum();
        let want = |l: f32| (f64::from(l) - z.ln()) as f32;
        let t = TokenLogprobs::of(&logits, 4, 3);
        assert_eq!(t.logprob, want(0.5));
        assert_eq!(t.top, vec![(1, want(3.0)), (2, want(3.0)), (0, want(1.0))]);
        let p: f64 = logits.iter().map(|&l| f64::from(want(l)).exp()).sum();
        assert!((p - 1.0).abs() < 1e-6, "{p}");
        assert!(TokenLogprobs::of(&logits, 0, 0).top.is_empty());
        assert_eq!(TokenLogprobs::of(&logits, 0, 99).top.len(), 5);
    }

    #[test]
    fn large_logits_do_not_overflow_and_masked_ones_are_minus_infinity() {
        let logits = [1000.0f32, 999.0, f32::NEG_INFINITY];
        let t = TokenLogprobs::of(&logits, 2, 3);
        assert_eq!(t.logprob, f32::NEG_INFINITY);
        let first = t.top[0].1;
        assert!(first.is_finite() && first < 0.0 && first > -1.0, "{first}");
        assert_eq!(t.top[2], (2, f32::NEG_INFINITY));
        let none = TokenLogprobs::of(&[f32::NAN, f32::NAN], 0, 1);
        assert_eq!(none.logprob, f32::NEG_INFINITY);
    }
}
