//! Token sampling on the host from one position's logits (docs/runner.md "Sampling"): the chain
//! llama.cpp applies by default — repetition penalty over the last N tokens, the OpenAI API's
//! frequency and presence penalties over the tokens generated so far, top-k, top-p, min-p,
//! temperature, then one draw from a seeded ChaCha8 stream. Temperature 0 is greedy (the argmax,
//! ties to the lowest id, as the device kernel picks). The same seed and settings over the same
//! logits give the same tokens on every machine. A [`Constraint`] (structured output) masks the
//! candidates to what its grammar allows before any of the chain, and is told each token chosen.

use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;

use crate::constrain::{Constraint, ConstraintError};

/// The sampling settings (`--temp`, `--top-k`, `--top-p`, `--min-p`, `--repeat-penalty`,
/// `--repeat-last-n`, `--seed`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingParams {
    /// 0 = greedy.
    pub temperature: f32,
    /// 0 = off (all tokens).
    pub top_k: usize,
    /// 1.0 = off.
    pub top_p: f32,
    /// 0.0 = off.
    pub min_p: f32,
    /// 1.0 = off.
    pub repeat_penalty: f32,
    /// How many of the latest tokens the penalty looks at (0 = off).
    pub repeat_last_n: usize,
    /// Subtracted from a token's logit once per time it was generated (0 = off; OpenAI's
    /// `frequency_penalty`, in [-2, 2]).
    pub frequency_penalty: f32,
    /// Subtracted from the logit of every token generated at least once (0 = off; OpenAI's
    /// `presence_penalty`, in [-2, 2]).
    pub presence_penalty: f32,
    pub seed: u64,
}

/// llama.cpp's defaults for everything but the temperature (`common/common.h`: top-k 40,
/// top-p 0.95, min-p 0.05, repeat penalty 1.0 over the last 64 tokens); the temperature defaults
/// to 0 (greedy) so that a run is reproducible unless sampling is asked for.
impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temperature: 0.0,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            seed: 0,
        }
    }
}

/// Why settings are refused (a usage error).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SamplingError {
    #[error("--temp {0} must be a finite number ≥ 0")]
    Temperature(f32),
    #[error("--top-p {0} must be in (0, 1]")]
    TopP(f32),
    #[error("--min-p {0} must be in [0, 1]")]
    MinP(f32),
    #[error("--repeat-penalty {0} must be a finite number > 0")]
    Penalty(f32),
    #[error("{0} {1} must be in [-2, 2]")]
    OpenAiPenalty(&'static str, f32),
}

impl SamplingParams {
    /// Refuses settings that have no meaning.
    pub fn validate(&self) -> Result<(), SamplingError> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(SamplingError::Temperature(self.temperature));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(SamplingError::TopP(self.top_p));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return Err(SamplingError::MinP(self.min_p));
        }
        if !(self.repeat_penalty.is_finite() && self.repeat_penalty > 0.0) {
            return Err(SamplingError::Penalty(self.repeat_penalty));
        }
        for (name, v) in [
            ("frequency_penalty", self.frequency_penalty),
            ("presence_penalty", self.presence_penalty),
        ] {
            if !(-2.0..=2.0).contains(&v) {
                return Err(SamplingError::OpenAiPenalty(name, v));
            }
        }
        Ok(())
    }

    /// Whether every token is the argmax (the device can pick it; no logits cross to the host).
    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0
            && (self.repeat_penalty == 1.0 || self.repeat_last_n == 0)
            && self.frequency_penalty == 0.0
            && self.presence_penalty == 0.0
    }
}

/// A sampler: the settings and its random stream.
pub struct Sampler {
    params: SamplingParams,
    rng: ChaCha8Rng,
    /// Scratch: (logit, id) of the candidates.
    cand: Vec<(f32, u32)>,
    /// How many times each token was generated since [`Sampler::start_output`] (for the
    /// frequency and presence penalties).
    generated: std::collections::HashMap<u32, u32>,
    /// The output's grammar, if it has one.
    constraint: Option<Constraint>,
}

impl Sampler {
    pub fn new(params: SamplingParams) -> Self {
        Self {
            params,
            rng: ChaCha8Rng::seed_from_u64(params.seed),
            cand: Vec::new(),
            generated: std::collections::HashMap::new(),
            constraint: None,
        }
    }

    /// The output must follow `c` (from the next [`Sampler::sample`] on).
    pub fn constrain(&mut self, c: Constraint) {
        self.constraint = Some(c);
    }

    /// Whether a grammar constrains the output (then every pick is the host's).
    pub fn constrained(&self) -> bool {
        self.constraint.is_some()
    }

    /// A new output begins: the frequency and presence penalties count from here.
    pub fn start_output(&mut self) {
        self.generated.clear();
    }

    /// `id` was generated (whoever picked it). Counted only where a penalty reads the counts,
    /// so a greedy decode on the device does no host work per token for it; a constraint is told.
    pub fn accept(&mut self, id: u32) -> Result<(), ConstraintError> {
        let p = &self.params;
        if p.frequency_penalty != 0.0 || p.presence_penalty != 0.0 {
            *self.generated.entry(id).or_insert(0) += 1;
        }
        match &mut self.constraint {
            Some(c) => c.commit(id),
            None => Ok(()),
        }
    }

    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// The next token from `logits`, given the tokens so far (`history`: prompt and output);
    /// fails only where a constraint does.
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> Result<u32, ConstraintError> {
        let p = self.params;
        self.cand.clear();
        self.cand
            .extend(logits.iter().enumerate().map(|(i, &l)| (l, i as u32)));
        if let Some(c) = &mut self.constraint {
            c.mask(&mut self.cand)?;
        }
        if p.repeat_penalty != 1.0 && p.repeat_last_n > 0 {
            let from = history.len().saturating_sub(p.repeat_last_n);
            let mut seen: Vec<u32> = history[from..].to_vec();
            seen.sort_unstable();
            seen.dedup();
            for id in seen {
                if let Some(c) = self.cand.get_mut(id as usize) {
                    // llama.cpp: a positive logit is divided, a negative one multiplied.
                    c.0 = if c.0 > 0.0 {
                        c.0 / p.repeat_penalty
                    } else {
                        c.0 * p.repeat_penalty
                    };
                }
            }
        }
        if p.frequency_penalty != 0.0 || p.presence_penalty != 0.0 {
            for (&id, &n) in &self.generated {
                if let Some(c) = self.cand.get_mut(id as usize) {
                    // OpenAI: μ − c·α_frequency − [c > 0]·α_presence
                    c.0 -= n as f32 * p.frequency_penalty + p.presence_penalty;
                }
            }
        }
        if p.temperature == 0.0 {
            return Ok(argmax(&self.cand));
        }
        // Highest logit first, ties to the lower id (a total order: NaN last).
        let by_logit = |a: &(f32, u32), b: &(f32, u32)| {
            b.0.partial_cmp(&a.0)
                .unwrap_or_else(|| a.0.is_nan().cmp(&b.0.is_nan()))
                .then(a.1.cmp(&b.1))
        };
        let k = if p.top_k == 0 {
            self.cand.len()
        } else {
            p.top_k.min(self.cand.len())
        };
        if k < self.cand.len() {
            self.cand.select_nth_unstable_by(k - 1, by_logit);
            self.cand.truncate(k);
        }
        self.cand.sort_unstable_by(by_logit);
        // Probabilities of the raw logits (before temperature), as llama.cpp's top-p and min-p.
        let probs = softmax(&self.cand, 1.0);
        let mut keep = probs.len();
        if p.top_p < 1.0 {
            let mut sum = 0.0;
            for (i, q) in probs.iter().enumerate() {
                sum += q;
                if sum >= f64::from(p.top_p) {
                    keep = i + 1;
                    break;
                }
            }
        }
        if p.min_p > 0.0 {
            let floor = probs.first().copied().unwrap_or(0.0) * f64::from(p.min_p);
            keep = keep.min(probs.iter().take_while(|&&q| q >= floor).count().max(1));
        }
        self.cand.truncate(keep.max(1));
        let probs = softmax(&self.cand, p.temperature);
        let r: f64 = self.rng.random::<f64>();
        let mut acc = 0.0;
        for (q, c) in probs.iter().zip(&self.cand) {
            acc += q;
            if r < acc {
                return Ok(c.1);
            }
        }
        Ok(self.cand.last().map_or(0, |c| c.1))
    }
}

fn argmax(cand: &[(f32, u32)]) -> u32 {
    let mut best: Option<(f32, u32)> = None;
    for &(l, i) in cand {
        if best.is_none_or(|(b, _)| l > b) {
            best = Some((l, i));
        }
    }
    best.map_or(0, |b| b.1)
}

/// Softmax of `cand`'s logits divided by `temperature`, in f64, sorted order kept.
fn softmax(cand: &[(f32, u32)], temperature: f32) -> Vec<f64> {
    let t = f64::from(temperature);
    let max = cand.first().map_or(0.0, |c| f64::from(c.0) / t);
    let mut e: Vec<f64> = cand
        .iter()
        .map(|c| {
            let x = (f64::from(c.0) / t - max).exp();
            if x.is_finite() {
                x
            } else {
                0.0
            }
        })
        .collect();
    let sum: f64 = e.iter().sum();
    if sum > 0.0 {
        e.iter_mut().for_each(|x| *x /= sum);
    }
    e
}

#[cfg(test)]
mod tests {
    /// `Sampler::sample` without a constraint (which alone can fail).
    fn pick(s: &mut Sampler, logits: &[f32], history: &[u32]) -> u32 {
        s.sample(logits, history).unwrap_or(u32::MAX)
    }

    fn accept(s: &mut Sampler, id: u32) {
        assert!(s.accept(id).is_ok(), "no constraint to fail");
    }

    use super::*;

    fn params(temperature: f32) -> SamplingParams {
        SamplingParams {
            temperature,
            seed: 7,
            ..SamplingParams::default()
        }
    }

    #[test]
    fn temperature_zero_is_the_argmax_with_ties_to_the_lowest_id() {
        let mut s = Sampler::new(params(0.0));
        assert_eq!(pick(&mut s, &[0.5, 2.0, 2.0, -1.0], &[]), 1);
    }

    #[test]
    fn the_same_seed_gives_the_same_tokens_and_another_seed_differs() {
        let logits: Vec<f32> = (0..500).map(|i| ((i * 37 % 101) as f32) / 40.0).collect();
        let draw = |seed| {
            let mut s = Sampler::new(SamplingParams {
                seed,
                top_k: 0,
                top_p: 1.0,
                min_p: 0.0,
                temperature: 1.5,
                ..SamplingParams::default()
            });
            (0..64)
                .map(|_| pick(&mut s, &logits, &[]))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
    }

    #[test]
    fn top_k_one_and_a_tight_top_p_are_greedy_and_min_p_cuts_the_tail() {
        let logits = [1.0, 3.0, 2.9, -4.0];
        for p in [
            SamplingParams {
                top_k: 1,
                ..params(1.0)
            },
            SamplingParams {
                top_p: 0.01,
                ..params(1.0)
            },
        ] {
            let mut s = Sampler::new(p);
            assert!((0..50).all(|_| pick(&mut s, &logits, &[]) == 1), "{p:?}");
        }
        // min-p 0.5: only tokens with p ≥ 0.5·p(best) survive: ids 1 and 2, never 0 or 3.
        let mut s = Sampler::new(SamplingParams {
            min_p: 0.5,
            top_k: 0,
            top_p: 1.0,
            ..params(1.0)
        });
        let got: Vec<u32> = (0..200).map(|_| pick(&mut s, &logits, &[])).collect();
        assert!(got.iter().all(|&t| t == 1 || t == 2), "{got:?}");
        assert!(got.contains(&1) && got.contains(&2));
    }

    #[test]
    fn the_repetition_penalty_moves_the_argmax_off_a_recent_token() {
        let logits = [1.0, 3.0, 2.9, -4.0];
        let mut s = Sampler::new(SamplingParams {
            repeat_penalty: 1.3,
            ..params(0.0)
        });
        assert_eq!(pick(&mut s, &logits, &[1]), 2);
        // Outside the window it does not apply.
        let mut s = Sampler::new(SamplingParams {
            repeat_penalty: 1.3,
            repeat_last_n: 2,
            ..params(0.0)
        });
        assert_eq!(pick(&mut s, &logits, &[1, 0, 0]), 1);
        assert!(!SamplingParams {
            repeat_penalty: 1.3,
            ..params(0.0)
        }
        .is_greedy());
    }

    #[test]
    fn frequency_and_presence_penalties_count_the_output_only() {
        let logits = [1.0, 3.0, 2.9, 2.0];
        let greedy = |f: f32, pr: f32| {
            Sampler::new(SamplingParams {
                frequency_penalty: f,
                presence_penalty: pr,
                ..params(0.0)
            })
        };
        // the prompt (history) does not count, only accepted output
        let mut s = greedy(0.2, 0.0);
        assert_eq!(pick(&mut s, &logits, &[1, 1, 1]), 1);
        accept(&mut s, 1);
        assert_eq!(pick(&mut s, &logits, &[]), 2, "3.0 − 0.2 < 2.9");
        // frequency grows with the count; presence does not
        let mut s = greedy(0.0, 0.5);
        for _ in 0..5 {
            accept(&mut s, 2);
        }
        accept(&mut s, 1);
        assert_eq!(pick(&mut s, &logits, &[]), 1, "3.0 − 0.5 > 2.9 − 0.5");
        let mut s = greedy(0.5, 0.0);
        accept(&mut s, 1);
        accept(&mut s, 1);
        accept(&mut s, 1);
        assert_eq!(pick(&mut s, &logits, &[]), 2, "3.0 − 1.5 < 2.9");
        s.start_output();
        assert_eq!(
            pick(&mut s, &logits, &[]),
            1,
            "a new output counts from zero"
        );
        assert!(!SamplingParams {
            presence_penalty: 0.1,
            ..params(0.0)
        }
        .is_greedy());
        let err = SamplingParams {
            frequency_penalty: 2.5,
            ..params(0.0)
        }
        .validate()
        .unwrap_err();
        assert_eq!(err.to_string(), "frequency_penalty 2.5 must be in [-2, 2]");
    }

    #[test]
    fn meaningless_settings_are_refused() {
        assert!(params(-1.0).validate().is_err());
        assert!(params(f32::NAN).validate().is_err());
        assert!(SamplingParams {
            top_p: 0.0,
            ..params(1.0)
        }
        .validate()
        .is_err());
        assert!(SamplingParams {
            min_p: 1.5,
            ..params(1.0)
        }
        .validate()
        .is_err());
        assert!(SamplingParams {
            repeat_penalty: 0.0,
            ..params(1.0)
        }
        .validate()
        .is_err());
        assert!(params(0.8).validate().is_ok());
    }
}
