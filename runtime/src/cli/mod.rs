//! The command-line front ends an app-side binary shares with the compiler's: the
//! `generate` and `chat` commands over an opened model, and the sampling options
//! (behind the `cli` feature; `oxrelax-run` and `oxrelax` both use them).

mod chat;
mod generate;
mod interrupt;

pub use chat::{run_chat, ChatArgs, OverflowArg};
pub use generate::{run_generate, stop_word, GenerateArgs, GenerateReport, StatsReport};

use crate::chat::sampling_defaults;
use crate::sampler::{Sampler, SamplingConfig};
use clap::Args;
use std::path::Path;

/// What a command returns: any error, printed with its causes by [`print_error`].
pub type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Prints `err` and each of its causes to stderr, once each.
pub fn print_error(err: &dyn std::error::Error) {
    let lines = crate::report::error_chain(err);
    eprintln!("error: {}", lines[0]);
    for cause in &lines[1..] {
        eprintln!("  caused by: {cause}");
    }
}

/// Where sampling options left out come from.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SamplingDefaults {
    /// The model's `generation_config.json`, as transformers' `generate` reads it (greedy
    /// unless it sets `do_sample`).
    Model,
    /// Greedy, no repetition penalty.
    Greedy,
}

/// How to pick tokens: each option given overrides the defaults (`--sampling-defaults`).
#[derive(Args, Clone)]
pub struct SamplingArgs {
    /// Sampling temperature (0: greedy).
    #[arg(long, allow_negative_numbers = true)]
    pub temperature: Option<f32>,
    /// Nucleus sampling: keep the most likely tokens up to this probability mass.
    #[arg(long, allow_negative_numbers = true)]
    pub top_p: Option<f32>,
    /// Keep only this many most likely tokens (0: all).
    #[arg(long)]
    pub top_k: Option<usize>,
    /// Penalize tokens seen already (1: off).
    #[arg(long, allow_negative_numbers = true)]
    pub repetition_penalty: Option<f32>,
    /// Seed of the random generator.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where the options left out come from: the model's generation_config.json or
    /// greedy (default: greedy for `generate`, the model's for `chat` and `serve`).
    #[arg(long, value_enum)]
    pub sampling_defaults: Option<SamplingDefaults>,
}

impl SamplingArgs {
    /// The sampling these options describe over the defaults they name (`fallback` when
    /// they name none) for the model in `dir`, once the ranges are checked.
    pub fn config(&self, dir: &Path, fallback: SamplingDefaults) -> CliResult<SamplingConfig> {
        let defaults = match self.sampling_defaults.unwrap_or(fallback) {
            SamplingDefaults::Model => sampling_defaults(dir)?,
            SamplingDefaults::Greedy => SamplingConfig::default(),
        };
        let config = SamplingConfig {
            temperature: self.temperature.unwrap_or(defaults.temperature),
            top_p: self.top_p.unwrap_or(defaults.top_p),
            top_k: self.top_k.unwrap_or(defaults.top_k),
            repetition_penalty: self
                .repetition_penalty
                .unwrap_or(defaults.repetition_penalty),
            seed: self.seed,
        };
        config.check()?;
        Ok(config)
    }

    /// The sampler of [`SamplingArgs::config`].
    pub fn sampler(&self, dir: &Path, fallback: SamplingDefaults) -> CliResult<Sampler> {
        Ok(Sampler::new(self.config(dir, fallback)?))
    }
}
