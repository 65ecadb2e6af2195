//! Choosing the next token from logits: greedy when the temperature is 0, otherwise
//! temperature, top-k and top-p (nucleus) sampling with a seeded generator; an optional
//! repetition penalty (as in Hugging Face's `RepetitionPenaltyLogitsProcessor`).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How to pick tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingConfig {
    /// 0 means greedy (argmax).
    pub temperature: f32,
    /// Keep the smallest set of most likely tokens whose probability reaches this (1 = all).
    pub top_p: f32,
    /// Keep only this many most likely tokens (0 = all).
    pub top_k: usize,
    /// Divide positive logits (multiply negative ones) of already seen tokens by this
    /// (1 = off).
    pub repetition_penalty: f32,
    /// Seed of the random generator.
    pub seed: u64,
}

/// A sampling option out of its range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{option} = {value}: {expected}")]
pub struct InvalidSampling {
    /// The option (`temperature`, `top_p`, `repetition_penalty`).
    pub option: &'static str,
    /// Its value, as given.
    pub value: f32,
    /// What it must be.
    pub expected: &'static str,
}

/// An option's name, value, test and what it must be.
type RangeRule = (&'static str, f32, fn(f32) -> bool, &'static str);

impl SamplingConfig {
    /// Checks every option's range: temperature finite and >= 0, top_p in (0, 1],
    /// repetition_penalty finite and > 0.
    pub fn check(&self) -> Result<(), InvalidSampling> {
        let rules: [RangeRule; 3] = [
            (
                "temperature",
                self.temperature,
                |t| t.is_finite() && t >= 0.0,
                "a finite number >= 0 (0: greedy)",
            ),
            (
                "top_p",
                self.top_p,
                |p| p > 0.0 && p <= 1.0,
                "a probability in (0, 1]",
            ),
            (
                "repetition_penalty",
                self.repetition_penalty,
                |r| r.is_finite() && r > 0.0,
                "a finite number > 0 (1: off)",
            ),
        ];
        match rules.into_iter().find(|(_, value, ok, _)| !ok(*value)) {
            Some((option, value, _, expected)) => Err(InvalidSampling {
                option,
                value,
                expected,
            }),
            None => Ok(()),
        }
    }
}

impl Default for SamplingConfig {
    fn default() -> Self {
        SamplingConfig {
            temperature: 0.0,
            top_p: 1.0,
            top_k: 0,
            repetition_penalty: 1.0,
            seed: 0,
        }
    }
}

/// Picks tokens according to a [`SamplingConfig`].
#[derive(Debug, Clone)]
pub struct Sampler {
    config: SamplingConfig,
    rng: StdRng,
}

impl Sampler {
    /// A sampler seeded with `config.seed` ([`SamplingConfig::check`] its options first:
    /// out of range, they sample as their nearest sensible value would, or not at all).
    pub fn new(config: SamplingConfig) -> Self {
        let rng = StdRng::seed_from_u64(config.seed);
        Sampler { config, rng }
    }

    /// The configuration.
    pub fn config(&self) -> &SamplingConfig {
        &self.config
    }

    /// The next token given the logits of the last position and the tokens seen so far
    /// (prompt and generated, for the repetition penalty).
    pub fn sample(&mut self, logits: &[f32], seen: &[u32]) -> u32 {
        let mut logits = logits.to_vec();
        self.penalize(&mut logits, seen);
        if self.config.temperature <= 0.0 {
            return argmax(&logits);
        }
        let candidates = self.candidates(&logits);
        let total: f64 = candidates.iter().map(|(_, p)| p).sum();
        let mut target = self.rng.gen::<f64>() * total;
        for (token, p) in &candidates {
            if target < *p {
                return *token;
            }
            target -= p;
        }
        candidates.last().map_or(0, |(t, _)| *t)
    }

    fn penalize(&self, logits: &mut [f32], seen: &[u32]) {
        let penalty = self.config.repetition_penalty;
        if penalty == 1.0 {
            return;
        }
        let mut done = vec![false; logits.len()];
        for &token in seen {
            let Some(logit) = logits.get_mut(token as usize) else {
                continue;
            };
            if !std::mem::replace(&mut done[token as usize], true) {
                *logit = if *logit < 0.0 {
                    *logit * penalty
                } else {
                    *logit / penalty
                };
            }
        }
    }

    /// Tokens that survive top-k and top-p, most likely first, with unnormalized
    /// probabilities at the configured temperature.
    fn candidates(&self, logits: &[f32]) -> Vec<(u32, f64)> {
        let t = f64::from(self.config.temperature);
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        order.sort_by(|&a, &b| {
            logits[b as usize]
                .total_cmp(&logits[a as usize])
                .then(a.cmp(&b))
        });
        if self.config.top_k > 0 {
            order.truncate(self.config.top_k);
        }
        let max = order
            .first()
            .map_or(0.0, |&t0| f64::from(logits[t0 as usize]));
        let weights: Vec<(u32, f64)> = order
            .into_iter()
            .map(|tok| (tok, ((f64::from(logits[tok as usize]) - max) / t).exp()))
            .collect();
        let total: f64 = weights.iter().map(|(_, w)| w).sum();
        let mut kept = Vec::with_capacity(weights.len());
        let mut cumulative = 0.0;
        for (token, w) in weights {
            kept.push((token, w));
            cumulative += w / total;
            if cumulative >= f64::from(self.config.top_p) {
                break;
            }
        }
        kept
    }
}

/// The index of the largest logit (the first one on ties, as `torch.argmax`).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    #[test]
    fn out_of_range_options_are_named() {
        use super::SamplingConfig;
        let bad = |c: SamplingConfig| c.check().unwrap_err().option;
        let d = SamplingConfig::default();
        assert!(d.check().is_ok());
        assert_eq!(
            bad(SamplingConfig {
                temperature: f32::NAN,
                ..d.clone()
            }),
            "temperature"
        );
        assert_eq!(
            bad(SamplingConfig {
                temperature: -1.0,
                ..d.clone()
            }),
            "temperature"
        );
        assert_eq!(
            bad(SamplingConfig {
                top_p: 2.0,
                ..d.clone()
            }),
            "top_p"
        );
        assert_eq!(
            bad(SamplingConfig {
                top_p: 0.0,
                ..d.clone()
            }),
            "top_p"
        );
        assert_eq!(
            bad(SamplingConfig {
                repetition_penalty: -2.0,
                ..d.clone()
            }),
            "repetition_penalty"
        );
        let message = SamplingConfig { top_p: 2.0, ..d }
            .check()
            .unwrap_err()
            .to_string();
        assert_eq!(message, "top_p = 2: a probability in (0, 1]");
    }

    use super::*;

    fn sampler(temperature: f32, top_k: usize, top_p: f32) -> Sampler {
        Sampler::new(SamplingConfig {
            temperature,
            top_k,
            top_p,
            seed: 7,
            ..SamplingConfig::default()
        })
    }

    #[test]
    fn greedy_takes_the_first_maximum() {
        assert_eq!(argmax(&[0.1, 3.0, 3.0, -1.0]), 1);
        assert_eq!(sampler(0.0, 0, 1.0).sample(&[0.1, 3.0, 3.0, -1.0], &[]), 1);
    }

    #[test]
    fn top_k_one_and_tiny_top_p_are_greedy() {
        let logits = [0.5, 2.0, 1.9, -3.0];
        for _ in 0..20 {
            assert_eq!(sampler(1.5, 1, 1.0).sample(&logits, &[]), 1);
            assert_eq!(sampler(1.5, 0, 1e-6).sample(&logits, &[]), 1);
        }
    }

    #[test]
    fn sampling_is_seeded_and_follows_the_distribution() {
        let logits = [0.0f32, (3.0f32).ln(), f32::NEG_INFINITY];
        let draw = |seed| {
            let mut s = Sampler::new(SamplingConfig {
                temperature: 1.0,
                seed,
                ..SamplingConfig::default()
            });
            (0..4000)
                .map(|_| s.sample(&logits, &[]))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        let picks = draw(3);
        let ones = picks.iter().filter(|&&t| t == 1).count() as f64 / picks.len() as f64;
        assert!((ones - 0.75).abs() < 0.03, "{ones}");
        assert!(!picks.contains(&2));
    }

    #[test]
    fn repetition_penalty_discourages_seen_tokens() {
        let mut s = Sampler::new(SamplingConfig {
            repetition_penalty: 2.0,
            ..SamplingConfig::default()
        });
        // 3.0 / 2 = 1.5 < 2.0: the seen token loses; a negative seen logit gets worse.
        assert_eq!(s.sample(&[3.0, 2.0, -1.0], &[0, 0]), 1);
        assert_eq!(s.sample(&[-1.0, -1.5], &[0]), 1);
    }
}
