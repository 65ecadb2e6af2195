//! `oxrelax bench`: prefill and decode speed of a model, and peak memory.

use crate::cli_generate::{open_engine, LoadedEngine, ModelArgs};
use clap::Args;
use oxrelax_runtime::engine::{Engine, GenerateOptions, GenerationStats, Step};
use oxrelax_runtime::sampler::{Sampler, SamplingConfig};
use std::path::PathBuf;

type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Arguments of `oxrelax bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// A Hugging Face model folder (or a compiled artifact).
    dir: PathBuf,
    /// Prompt tokens to prefill.
    #[arg(long, default_value_t = 128)]
    prompt_len: usize,
    /// Tokens to generate (greedy, EOS ignored).
    #[arg(long, default_value_t = 64)]
    gen: usize,
    /// Measured runs (after one warm-up run); the median is reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    #[command(flatten)]
    load: ModelArgs,
}

/// A synthetic prompt: ids cycling through the vocabulary away from the first (special)
/// ids.
fn synthetic_prompt(len: usize, vocab: usize) -> Vec<u32> {
    let start = vocab.min(100);
    let span = (vocab - start).max(1);
    (0..len)
        .map(|i| (start + (i * 7919) % span).min(vocab - 1) as u32)
        .collect()
}

fn one_run(engine: &mut Engine, prompt: &[u32], gen: usize) -> CliResult<GenerationStats> {
    engine.reset()?;
    let options = GenerateOptions {
        max_new_tokens: gen,
        ignore_eos: true,
        keep_logits: false,
    };
    let mut sampler = Sampler::new(SamplingConfig::default());
    let generation = engine.generate(prompt, options, &mut sampler, |_| Ok(Step::Continue))?;
    Ok(generation.stats)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// The process's peak resident set (VmHWM) in KiB, where the OS reports it.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs `oxrelax bench`.
pub fn run(args: &BenchArgs) -> CliResult<()> {
    if args.prompt_len == 0 || args.gen == 0 || args.runs == 0 {
        return Err("--prompt-len, --gen and --runs must be positive".into());
    }
    let LoadedEngine { mut engine, .. } = open_engine(&args.dir, &args.load)?;
    let prompt = synthetic_prompt(args.prompt_len, engine.config().vocab_size);
    engine.check_fits(args.prompt_len + args.gen - 1)?;
    one_run(&mut engine, &prompt, args.gen)?;
    let mut runs = Vec::with_capacity(args.runs);
    for _ in 0..args.runs {
        runs.push(one_run(&mut engine, &prompt, args.gen)?);
    }
    let prefill = median(runs.iter().map(|s| s.prefill_tokens_per_s()).collect());
    let decode = median(runs.iter().map(|s| s.decode_tokens_per_s()).collect());
    let ttft = median(
        runs.iter()
            .map(|s| s.time_to_first_token.as_secs_f64() * 1e3)
            .collect(),
    );
    println!(
        "model {}: prompt {} tokens, generate {}, {} runs (median)",
        args.dir.display(),
        args.prompt_len,
        args.gen,
        args.runs
    );
    println!("prefill: {prefill:.1} tok/s");
    println!("decode: {decode:.1} tok/s");
    println!("time to first token: {ttft:.1} ms");
    match peak_rss_kib() {
        Some(kib) => println!("peak memory (VmHWM): {:.1} MiB", kib as f64 / 1024.0),
        None => println!("peak memory: unavailable (no VmHWM in /proc/self/status)"),
    }
    Ok(())
}
