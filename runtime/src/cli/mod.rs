//! The command-line front ends an app-side binary shares with the compiler's: the
//! `generate` and `chat` commands over an opened model, and the sampling options
//! (behind the `cli` feature; `oxrelax-run` and `oxrelax` both use them).

mod chat;
mod generate;

pub use chat::{run_chat, ChatArgs};
pub use generate::{run_generate, stop_word, GenerateArgs, GenerateReport, StatsReport};

use crate::qnn::sim::SimMode;
use crate::sampler::{InvalidSampling, Sampler, SamplingConfig};
use clap::Args;

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

/// Which backend runs an artifact's NPU graphs (`compile --npu qnn` artifacts need one).
#[derive(Args, Clone, Default)]
pub struct NpuArgs {
    /// Run the artifact's NPU graphs on the host reference backend: `sim` with QNN's
    /// quantized semantics as specified (dequantize, compute in f32, requantize),
    /// `sim-integer` with integer arithmetic where a fixed-point NPU uses it.
    #[arg(long, value_parser = ["sim", "sim-integer"])]
    pub npu: Option<String>,
}

impl NpuArgs {
    /// The reference backend's mode asked for.
    pub fn mode(&self) -> Option<SimMode> {
        match self.npu.as_deref() {
            Some("sim-integer") => Some(SimMode::Integer),
            Some(_) => Some(SimMode::Spec),
            None => None,
        }
    }
}

/// How to pick tokens (greedy unless a temperature is given).
#[derive(Args, Clone)]
pub struct SamplingArgs {
    /// Sampling temperature (0 or absent: greedy).
    #[arg(long, allow_negative_numbers = true)]
    pub temperature: Option<f32>,
    /// Nucleus sampling: keep the most likely tokens up to this probability mass.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub top_p: f32,
    /// Keep only this many most likely tokens (0: all).
    #[arg(long, default_value_t = 0)]
    pub top_k: usize,
    /// Penalize tokens seen already (1: off).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub repetition_penalty: f32,
    /// Seed of the random generator.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl SamplingArgs {
    /// The sampler these options describe, once their ranges are checked.
    pub fn sampler(&self) -> Result<Sampler, InvalidSampling> {
        let config = SamplingConfig {
            temperature: self.temperature.unwrap_or(0.0),
            top_p: self.top_p,
            top_k: self.top_k,
            repetition_penalty: self.repetition_penalty,
            seed: self.seed,
        };
        config.check()?;
        Ok(Sampler::new(config))
    }
}
