//! `oxrelax compare`: how far a quantized model's logits (weights as `--quant` says, KV
//! cache as `--kv-dtype` does) drift from the unquantized model's (`q0f32`, f32 KV cache)
//! over one generation. The f32 model generates greedily from the prompt; the quantized
//! model is fed the same tokens (teacher forcing), and every logit row (each prompt
//! position, then each generated token) is compared: the largest absolute difference and
//! how often the two agree on the most likely token. With `--npu sim`, the model's NPU
//! graphs are compared instead ([`crate::cli::compare_npu`]).

use crate::cli::generate::{open_engine, ModelArgs};
use clap::Args;
use oxrelax::checkpoint::Checkpoint;
use oxrelax::model::Quantization;
use oxrelax_runtime::engine::{Engine, GenerateOptions, Generation, Step};
use oxrelax_runtime::sampler::{Sampler, SamplingConfig};
use serde::Serialize;
use std::path::PathBuf;

type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Arguments of `oxrelax compare`.
#[derive(Args)]
pub struct CompareArgs {
    /// A Hugging Face model folder or a GGUF file, with a tokenizer (not a compiled
    /// artifact: both schemes are built from the checkpoint).
    pub model: PathBuf,
    /// The prompt text (encoded with the model's tokenizer, special tokens added).
    #[arg(long)]
    pub prompt: String,
    /// Tokens the f32 model generates (and the quantized one is fed).
    #[arg(long, default_value_t = 32)]
    pub max_new_tokens: usize,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    pub json: bool,
    /// The scheme (`--quant`) and KV cache dtype (`--kv-dtype`) compared against `q0f32`
    /// with an f32 KV cache, and how to load the model. With `--npu sim`: the model's NPU
    /// graphs, quantized, against the same graphs in f32, tensor by tensor.
    #[command(flatten)]
    pub load: ModelArgs,
    /// How to make the NPU graphs compared with `--npu sim`.
    #[cfg(feature = "npu")]
    #[command(flatten)]
    pub npu: crate::cli::npu::NpuCompileArgs,
}

/// The agreement of two sets of logit rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LogitDrift {
    /// Rows compared.
    pub rows: usize,
    /// The largest |a - b| over every element of every row.
    pub max_abs_diff: f32,
    /// The fraction of rows whose argmax is the same.
    pub top1_agreement: f64,
    #[serde(skip)]
    same_top1: usize,
}

impl LogitDrift {
    /// Adds one pair of rows (of one vocabulary).
    pub fn add(&mut self, reference: &[f32], other: &[f32]) {
        let diff = reference
            .iter()
            .zip(other)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        self.max_abs_diff = self.max_abs_diff.max(diff);
        self.rows += 1;
        self.same_top1 += usize::from(argmax(reference) == argmax(other));
        self.top1_agreement = self.same_top1 as f64 / self.rows as f64;
    }
}

/// The index of the largest value (the first of equals).
fn argmax(row: &[f32]) -> Option<usize> {
    row.iter()
        .enumerate()
        .fold(None, |best: Option<(usize, f32)>, (i, &v)| match best {
            Some((_, b)) if b >= v => best,
            _ => Some((i, v)),
        })
        .map(|(i, _)| i)
}

/// A greedy generation of `max_new_tokens` after `prompt` (EOS ignored) that keeps
/// every logit row: the reference side of a comparison.
pub fn greedy_with_logits(
    engine: &mut Engine,
    prompt: &[u32],
    max_new_tokens: usize,
) -> CliResult<Generation> {
    let options = GenerateOptions {
        max_new_tokens,
        ignore_eos: true,
        keep_logits: true,
    };
    let mut greedy = Sampler::new(SamplingConfig::default());
    Ok(engine.generate(prompt, options, &mut greedy, |_| Ok(Step::Continue))?)
}

/// How far `engine`'s logits drift from `reference`'s when it is fed the same tokens:
/// the prompt (every row), then each generated id but the last.
pub fn teacher_forced_drift(
    engine: &mut Engine,
    prompt: &[u32],
    reference: &Generation,
) -> CliResult<LogitDrift> {
    let mut drift = LogitDrift::default();
    for (a, b) in reference
        .prefill_logits
        .iter()
        .zip(engine.prefill_all(prompt)?)
    {
        drift.add(a, &b);
    }
    let fed = reference
        .ids
        .iter()
        .take(reference.ids.len().saturating_sub(1));
    for (&id, a) in fed.zip(reference.token_logits.iter().skip(1)) {
        drift.add(a, &engine.decode(id)?);
    }
    Ok(drift)
}

/// The `--json` line.
#[derive(Serialize)]
struct CompareJson {
    quant: &'static str,
    kv_dtype: &'static str,
    #[serde(flatten)]
    drift: LogitDrift,
    generated: usize,
}

/// Runs `oxrelax compare`.
pub fn run(args: &CompareArgs) -> CliResult<()> {
    if oxrelax::artifact::is_artifact(&args.model) {
        return Err(format!(
            "{} is a compiled artifact, which keeps the scheme it was compiled with: compare \
             needs the Hugging Face folder to build both schemes from",
            args.model.display()
        )
        .into());
    }
    #[cfg(feature = "npu")]
    if let Some(backend) = args.load.npu.backend() {
        return crate::cli::compare_npu::run(args, &args.npu, &backend);
    }
    let reference_args = ModelArgs {
        quant: Quantization::Q0f32,
        kv_dtype: None,
        ..args.load.clone()
    };
    let mut reference = open_engine(&args.model, &reference_args)?;
    let tokenizer = reference
        .tokenizer
        .as_ref()
        .ok_or_else(|| format!("{} has no tokenizer.json", args.model.display()))?;
    let prompt = tokenizer.encode(&args.prompt, true)?;
    let generation = greedy_with_logits(&mut reference.engine, &prompt, args.max_new_tokens)?;
    drop(reference);
    let mut quantized = open_engine(&args.model, &args.load)?.engine;
    let drift = teacher_forced_drift(&mut quantized, &prompt, &generation)?;
    let scheme = args
        .load
        .quant
        .resolve(&Checkpoint::open(&args.model)?.store);
    let kv_dtype = scheme.kv_dtype(args.load.kv_dtype);
    println!(
        "{} ({} KV cache) against q0f32 (f32 KV cache) over {} logit rows ({} prompt, {} \
         generated): max |diff| {:.3e}, top-1 agreement {:.1}%",
        scheme.name(),
        kv_dtype,
        drift.rows,
        prompt.len(),
        generation.ids.len(),
        drift.max_abs_diff,
        100.0 * drift.top1_agreement
    );
    if args.json {
        let line = CompareJson {
            quant: scheme.name(),
            kv_dtype: kv_dtype.name(),
            drift,
            generated: generation.ids.len(),
        };
        println!("{}", serde_json::to_string(&line)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::LogitDrift;

    #[test]
    fn drift_keeps_the_largest_difference_and_counts_top1_agreement() {
        let mut drift = LogitDrift::default();
        drift.add(&[1.0, 3.0, 2.0], &[1.5, 2.9, 2.0]);
        drift.add(&[0.0, 1.0], &[2.0, 1.0]);
        assert_eq!(drift.rows, 2);
        assert_eq!(drift.max_abs_diff, 2.0);
        assert_eq!(drift.top1_agreement, 0.5);
    }
}
