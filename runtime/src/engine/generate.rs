//! The generation loop: prefill a prompt, then sample and decode token by token until an
//! EOS id, the token budget, the context window, or the caller says stop.

use super::error::EngineError;
use super::step::Engine;
use crate::sampler::Sampler;
use std::time::{Duration, Instant};

/// How to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenerateOptions {
    /// Tokens to generate at most.
    pub max_new_tokens: usize,
    /// Go on past EOS ids.
    pub ignore_eos: bool,
    /// Keep every logit row: the prompt's (prefilled with `prefill_all`) and those each
    /// token was sampled from.
    pub keep_logits: bool,
}

impl Default for GenerateOptions {
    /// At most 128 tokens, stopping at EOS, logits not kept.
    fn default() -> Self {
        GenerateOptions {
            max_new_tokens: 128,
            ignore_eos: false,
            keep_logits: false,
        }
    }
}

/// A generated token, as the callback sees it.
#[derive(Debug, Clone, Copy)]
pub struct Token<'a> {
    /// The id.
    pub id: u32,
    /// The logits it was sampled from.
    pub logits: &'a [f32],
    /// Whether it is an EOS id.
    pub is_eos: bool,
}

/// What the callback wants after a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Generate the next token.
    Continue,
    /// End generation here (the user interrupted, the output was closed, ...).
    Stop,
    /// End generation here: a stop string was seen.
    StopSequence,
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// An EOS id was generated.
    Eos,
    /// `max_new_tokens` were generated.
    Length,
    /// The KV cache is full.
    ContextFull,
    /// The callback asked to stop.
    Callback,
    /// The callback saw a stop string.
    StopSequence,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Eos => "end of sequence",
            StopReason::Length => "length limit",
            StopReason::ContextFull => "context window full",
            StopReason::Callback => "stopped",
            StopReason::StopSequence => "stop string",
        })
    }
}

/// Timing of one generation.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GenerationStats {
    /// Prompt tokens prefilled.
    pub prefill_tokens: usize,
    /// Wall time of the prefill.
    pub prefill_time: Duration,
    /// Decode steps run (one fewer than the tokens generated: the last one is not fed back).
    pub decode_tokens: usize,
    /// Wall time of the decode steps (sampling included).
    pub decode_time: Duration,
    /// From the start to the first token sampled.
    pub time_to_first_token: Duration,
}

fn per_second(tokens: usize, time: Duration) -> f64 {
    let secs = time.as_secs_f64();
    if tokens == 0 || secs <= 0.0 {
        return 0.0;
    }
    tokens as f64 / secs
}

impl GenerationStats {
    /// Prompt tokens per second.
    pub fn prefill_tokens_per_s(&self) -> f64 {
        per_second(self.prefill_tokens, self.prefill_time)
    }

    /// Decode steps per second.
    pub fn decode_tokens_per_s(&self) -> f64 {
        per_second(self.decode_tokens, self.decode_time)
    }
}

impl std::fmt::Display for GenerationStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "prefill {} tokens at {:.1} tok/s, decode {} tokens at {:.1} tok/s, \
             time to first token {:.1} ms",
            self.prefill_tokens,
            self.prefill_tokens_per_s(),
            self.decode_tokens,
            self.decode_tokens_per_s(),
            self.time_to_first_token.as_secs_f64() * 1e3
        )
    }
}

/// The result of [`Engine::generate`].
#[derive(Debug, Clone, Default)]
pub struct Generation {
    /// The generated ids (an EOS id that ended generation included).
    pub ids: Vec<u32>,
    /// Why generation ended (`None` only when nothing was generated).
    pub stop: Option<StopReason>,
    /// Timing.
    pub stats: GenerationStats,
    /// With `keep_logits`: row j follows prompt token j.
    pub prefill_logits: Vec<Vec<f32>>,
    /// With `keep_logits`: row k is what `ids[k]` was sampled from.
    pub token_logits: Vec<Vec<f32>>,
}

impl Engine {
    /// Appends `prompt` to the cache and generates up to `options.max_new_tokens` tokens
    /// after it, calling `on_token` for each. The prompt must fit in the context window
    /// (checked before anything runs); generation ends early when the window fills up.
    pub fn generate(
        &mut self,
        prompt: &[u32],
        options: GenerateOptions,
        sampler: &mut Sampler,
        mut on_token: impl FnMut(Token<'_>) -> Result<Step, EngineError>,
    ) -> Result<Generation, EngineError> {
        let mut out = Generation::default();
        if options.max_new_tokens == 0 {
            self.check_fits(prompt.len())?;
            return Ok(out);
        }
        let start = Instant::now();
        let mut logits = if options.keep_logits {
            out.prefill_logits = self.prefill_all(prompt)?;
            out.prefill_logits.last().cloned().unwrap_or_default()
        } else {
            self.prefill(prompt)?
        };
        out.stats.prefill_tokens = prompt.len();
        out.stats.prefill_time = start.elapsed();
        let decode_start = Instant::now();
        loop {
            let id = sampler.sample(&logits, self.tokens());
            if out.ids.is_empty() {
                out.stats.time_to_first_token = start.elapsed();
            }
            out.ids.push(id);
            let is_eos = self.is_eos(id);
            let step = on_token(Token {
                id,
                logits: &logits,
                is_eos,
            })?;
            if options.keep_logits {
                out.token_logits.push(std::mem::take(&mut logits));
            }
            let stop = if is_eos && !options.ignore_eos {
                Some(StopReason::Eos)
            } else if step == Step::Stop {
                Some(StopReason::Callback)
            } else if step == Step::StopSequence {
                Some(StopReason::StopSequence)
            } else if out.ids.len() >= options.max_new_tokens {
                Some(StopReason::Length)
            } else if self.check_fits(1).is_err() {
                Some(StopReason::ContextFull)
            } else {
                None
            };
            if stop.is_some() {
                out.stop = stop;
                break;
            }
            logits = self.decode(id)?;
            out.stats.decode_tokens += 1;
        }
        out.stats.decode_time = decode_start.elapsed();
        Ok(out)
    }
}
