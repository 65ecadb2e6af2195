//! The command-line front ends an app-side binary shares with the compiler's: the
//! `generate` and `chat` commands over an opened model, and the sampling options
//! (behind the `cli` feature; `oxrelax-run` and `oxrelax` both use them).

mod chat;
mod generate;
mod interrupt;

pub use chat::{run_chat, ChatArgs, OverflowArg};
pub use generate::{run_generate, stop_word, GenerateArgs, GenerateReport, StatsReport};

use crate::chat::sampling_defaults;
use crate::qnn::bind::NpuBackend;
use crate::qnn::sim::SimMode;
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

/// Which backend runs an artifact's NPU graphs (`compile --npu qnn` artifacts need one).
#[derive(Args, Clone, Default)]
pub struct NpuArgs {
    /// Run the artifact's NPU graphs: `htp` with Qualcomm's HTP library (libQnnHtp.so,
    /// from --qnn-lib or OXRELAX_QNN_LIB_DIR) on the artifact's context binary; `sim` on
    /// the host reference backend with QNN's quantized semantics as specified
    /// (dequantize, compute in f32, requantize); `sim-integer` with integer arithmetic
    /// where a fixed-point NPU uses it.
    #[arg(long, value_parser = ["htp", "sim", "sim-integer"])]
    pub npu: Option<String>,
    /// The folder holding libQnnHtp.so for `--npu htp` (default: OXRELAX_QNN_LIB_DIR).
    #[arg(long, value_name = "DIR")]
    pub qnn_lib: Option<std::path::PathBuf>,
    /// The SoC whose context binary `--npu htp` runs (default: the first the artifact
    /// was compiled for).
    #[arg(long, value_name = "SOC")]
    pub npu_soc: Option<String>,
}

impl NpuArgs {
    /// The backend asked for.
    pub fn backend(&self) -> Option<NpuBackend> {
        match self.npu.as_deref()? {
            "htp" => Some(NpuBackend::Htp {
                lib_dir: self.qnn_lib.clone(),
                soc: self.npu_soc.clone(),
            }),
            "sim-integer" => Some(NpuBackend::Sim(SimMode::Integer)),
            _ => Some(NpuBackend::Sim(SimMode::Spec)),
        }
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
