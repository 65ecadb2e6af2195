//! `oxrelax bench`: prefill and decode speed of a model, and its memory: peak RSS and the
//! bytes of its weights, KV cache and VM arenas. `--json` adds one JSON object as the
//! last line of stdout (see [`BenchReport`]).

use crate::cli::bench_batch::{self, BatchFigures, BatchRun};
use crate::cli::generate::{open_engine_on, ModelArgs};
use clap::Args;
use oxrelax_runtime::artifact::LoadedEngine;
use oxrelax_runtime::engine::{BatchEngine, Engine, GenerateOptions, GenerationStats, Step};
use oxrelax_runtime::kv_cache::PoolSize;
use oxrelax_runtime::memory::{format_bytes, MemoryEstimate};
use oxrelax_runtime::sampler::{Sampler, SamplingConfig};
use oxrelax_runtime::trace::Timeline;
use oxrelax_runtime::trace::OFFLOAD_LANE;
use oxrelax_runtime::vm::KernelProfile;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;

type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Arguments of `oxrelax bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// A Hugging Face model folder, a GGUF file, or a compiled artifact.
    dir: PathBuf,
    /// Prompt tokens to prefill.
    #[arg(long, default_value_t = 128)]
    prompt_len: usize,
    /// Tokens to generate (greedy, EOS ignored).
    #[arg(long, default_value_t = 64)]
    gen: usize,
    /// Measured runs (after one warm-up run, at most 1000); the median is reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Also print the figures as one JSON object on the last line of stdout.
    #[arg(long)]
    json: bool,
    /// After the measured runs, one more run with per-kernel timing: prints the
    /// slowest kernels of prefill and decode.
    #[arg(long)]
    profile: bool,
    /// Prefill one chunk at a time even where the model pipelines chunks (an artifact
    /// with NPU graphs overlaps one chunk's CPU work with the next one's NPU graphs).
    #[arg(long)]
    no_pipeline: bool,
    /// Write the last measured run's prefill as a Chrome trace (one row per device
    /// thread: `cpu 0`, `cpu 1`, `npu`) to this file.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Decode this many sequences together instead, per size (e.g. 1,2,4,8,16): each
    /// prefills the prompt, then all decode `--gen` tokens in batched steps; reports
    /// aggregate tokens per second (needs a model compiled with `batch_decode`).
    #[arg(long, value_name = "SIZES", value_parser = parse_batches)]
    batch: Option<Batches>,
    /// With --batch: the sequences share the prompt (a system prompt, say): the first
    /// computes it, the others take its KV pages for all but its last token (as
    /// llama-batched-bench's -pps).
    #[arg(long, requires = "batch")]
    shared_prompt: bool,
    #[command(flatten)]
    load: ModelArgs,
}

/// The batch sizes of `--batch`.
#[derive(Debug, Clone)]
pub struct Batches(Vec<usize>);

fn parse_batches(text: &str) -> Result<Batches, String> {
    bench_batch::parse_batches(text)
        .map(Batches)
        .map_err(|e| e.to_string())
}

/// The plan of a `bench` run, the first fields of its JSON line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchPlan {
    /// The model path as given on the command line.
    pub model: String,
    /// `release` or `debug` (debug figures are not meaningful).
    pub build: &'static str,
    /// Participants of the pool the kernels ran on.
    pub threads: usize,
    /// Prompt tokens prefilled per run (per sequence).
    pub prompt: usize,
    /// Tokens generated per run (per sequence).
    pub gen: usize,
    /// Measured runs (per batch size).
    pub runs: usize,
}

/// What `bench --batch --json` prints: the plan and one line of figures per batch size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchReport {
    /// The plan.
    #[serde(flatten)]
    pub plan: BenchPlan,
    /// Whether the sequences shared the prompt (`--shared-prompt`).
    pub shared_prompt: bool,
    /// Per batch size, medians over the runs.
    pub batches: Vec<BatchFigures>,
    /// Peak resident set (VmHWM) in MiB; `null` where the OS does not report it.
    pub peak_rss_mib: Option<f64>,
}

/// What `bench --json` prints: the plan, medians over the measured runs and the memory
/// figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchReport {
    /// The plan.
    #[serde(flatten)]
    pub plan: BenchPlan,
    /// Positions the KV cache holds.
    pub context_window: usize,
    /// Median prefill speed (prompt tokens per second).
    pub prefill_tok_s: f64,
    /// Median decode speed (decode steps per second).
    pub decode_tok_s: f64,
    /// Median time to first token in milliseconds.
    pub ttft_ms: f64,
    /// Median prefill wall time in seconds.
    pub prefill_s: f64,
    /// Median busy time of the CPU threads during prefill, in seconds (summed over the
    /// pipeline's threads).
    pub cpu_s: f64,
    /// Median busy time of the NPU during prefill, in seconds (0 without NPU graphs).
    pub npu_s: f64,
    /// Peak resident set (VmHWM) in MiB; `null` where the OS does not report it.
    pub peak_rss_mib: Option<f64>,
    /// Bytes of the weight tensors the engine holds.
    pub weights_bytes: usize,
    /// Bytes the KV cache allocates (K and V of every layer at its capacity).
    pub kv_cache_bytes: usize,
    /// Bytes of the VM's arenas as allocated (one per function, sized by its memory plan).
    pub arena_bytes: usize,
}

impl BenchReport {
    /// The report as one JSON line (no newline).
    pub fn json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
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

/// The most measured runs `--runs` accepts.
const MAX_RUNS: usize = 1000;

/// An error unless `--prompt-len`, `--gen` and `--runs` are positive, `--runs` is at most
/// [`MAX_RUNS`] and a run's positions (`prompt + gen - 1`: the last token is not fed
/// back) fit in `window`.
fn check_sizes(prompt: usize, gen: usize, runs: usize, window: usize) -> CliResult<()> {
    if prompt == 0 || gen == 0 || runs == 0 {
        return Err("--prompt-len, --gen and --runs must be positive".into());
    }
    if runs > MAX_RUNS {
        return Err(format!("--runs {runs} is more than {MAX_RUNS}").into());
    }
    let Some(needed) = prompt.checked_add(gen - 1) else {
        return Err(format!(
            "--prompt-len {prompt} and --gen {gen} are too large (their sum overflows)"
        )
        .into());
    };
    if needed > window {
        return Err(format!(
            "--prompt-len {prompt} and --gen {gen} do not fit in the context window of \
             {window} positions (a run needs prompt-len + gen - 1 <= {window}; \
             --max-context raises the window up to the model's limit)"
        )
        .into());
    }
    Ok(())
}

/// What one run measured: its timing, and its prefill's busy time per device.
struct RunStats {
    stats: GenerationStats,
    timeline: Arc<Timeline>,
}

impl RunStats {
    fn cpu_s(&self) -> f64 {
        self.timeline.busy("cpu").as_secs_f64()
    }

    fn npu_s(&self) -> f64 {
        self.timeline.busy(OFFLOAD_LANE).as_secs_f64()
    }
}

fn one_run(engine: &mut Engine, prompt: &[u32], gen: usize) -> CliResult<RunStats> {
    let timeline = Timeline::new();
    engine.set_timeline(Some(timeline.clone()));
    let stats = timed_generation(engine, prompt, gen);
    engine.set_timeline(None);
    Ok(RunStats {
        stats: stats?,
        timeline,
    })
}

fn timed_generation(engine: &mut Engine, prompt: &[u32], gen: usize) -> CliResult<GenerationStats> {
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

/// The median of `figure` over `runs`.
fn median_of(runs: &[RunStats], figure: impl Fn(&RunStats) -> f64) -> f64 {
    median(runs.iter().map(figure).collect())
}

/// `release` or `debug` (debug figures are not meaningful).
fn build_kind() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// The median of `values` (0 for none).
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
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

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// The engine for `bench --batch` up to `largest` sequences: a page pool of that many full
/// contexts (resident only as they fill), or of what `--max-memory` leaves besides the
/// model (`memory`) when less. Refused when the run's sequences (prompt plus generated
/// positions each) would not fit in that pool.
fn batch_engine(
    engine: Engine,
    memory: MemoryEstimate,
    args: &BenchArgs,
    largest: usize,
) -> CliResult<BatchEngine> {
    let limit = args.load.max_memory();
    let left = limit.saturating_sub(memory.total());
    let size = PoolSize::ContextsWithin {
        contexts: largest,
        bytes: left,
    };
    let batched = BatchEngine::with_pool(engine, Some(size))?;
    let pages = batched.page_stats();
    let positions = args.prompt_len.saturating_add(args.gen);
    let needed = pages.pages_for(positions).saturating_mul(largest);
    if needed > pages.pages {
        let page = pages.page_bytes as u64;
        return Err(format!(
            "--batch {largest} with --prompt-len {} and --gen {} needs {needed} KV pages \
             ({}), but the memory limit of {} leaves {} besides the model ({memory}), \
             room for {} pages",
            args.prompt_len,
            args.gen,
            format_bytes(page.saturating_mul(needed as u64)),
            format_bytes(limit),
            format_bytes(left),
            pages.pages,
        )
        .into());
    }
    Ok(batched)
}

/// Runs `oxrelax bench`.
pub fn run(args: &BenchArgs) -> CliResult<()> {
    // Checked before loading, against the largest window there can be.
    check_sizes(args.prompt_len, args.gen, args.runs, usize::MAX)?;
    let pool = args.load.pool()?;
    let threads = pool.threads();
    let (LoadedEngine { mut engine, .. }, memory) = open_engine_on(&args.dir, &args.load, pool)?;
    println!("memory estimate: {memory}");
    if args.no_pipeline {
        engine.disable_pipeline();
    }
    let window = engine.config().context_window;
    check_sizes(args.prompt_len, args.gen, args.runs, window)?;
    let prompt = synthetic_prompt(args.prompt_len, engine.config().vocab_size);
    let plan = BenchPlan {
        model: args.dir.display().to_string(),
        build: build_kind(),
        threads,
        prompt: args.prompt_len,
        gen: args.gen,
        runs: args.runs,
    };
    if let Some(Batches(batches)) = &args.batch {
        let largest = batches.iter().copied().max().unwrap_or(1);
        let mut batched = batch_engine(engine, memory, args, largest)?;
        let run = BatchRun {
            prompt: &prompt,
            gen: args.gen,
            shared: args.shared_prompt,
        };
        let batches = bench_batch::measure(&mut batched, run, (batches, args.runs))?;
        let report = BatchReport {
            plan,
            shared_prompt: args.shared_prompt,
            batches,
            peak_rss_mib: peak_rss_kib().map(|kib| kib as f64 / 1024.0),
        };
        if args.json {
            let line = serde_json::to_string(&report);
            println!(
                "{}",
                line.unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
            );
        }
        return Ok(());
    }
    one_run(&mut engine, &prompt, args.gen)?;
    let mut runs = Vec::new();
    for _ in 0..args.runs {
        runs.push(one_run(&mut engine, &prompt, args.gen)?);
    }
    let report = BenchReport {
        plan,
        context_window: window,
        prefill_tok_s: median_of(&runs, |r| r.stats.prefill_tokens_per_s()),
        decode_tok_s: median_of(&runs, |r| r.stats.decode_tokens_per_s()),
        ttft_ms: median_of(&runs, |r| r.stats.time_to_first_token.as_secs_f64() * 1e3),
        prefill_s: median_of(&runs, |r| r.stats.prefill_time.as_secs_f64()),
        cpu_s: median_of(&runs, RunStats::cpu_s),
        npu_s: median_of(&runs, RunStats::npu_s),
        peak_rss_mib: peak_rss_kib().map(|kib| kib as f64 / 1024.0),
        weights_bytes: engine.weights_bytes(),
        kv_cache_bytes: engine.kv_cache_bytes()?,
        arena_bytes: engine.arena_bytes(),
    };
    print_report(&report);
    if let (Some(path), Some(last)) = (&args.trace, runs.last()) {
        let trace = last.timeline.chrome_trace().to_string();
        std::fs::write(path, trace).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    if args.profile {
        engine.set_profiling(true);
        let profiled = one_run(&mut engine, &prompt, args.gen)?.stats;
        engine.set_profiling(false);
        for (function, wall) in [
            ("prefill", profiled.prefill_time),
            ("decode", profiled.decode_time),
        ] {
            let lines = engine.profile(function).unwrap_or_default();
            print_profile(function, wall.as_secs_f64(), &lines);
        }
    }
    if args.json {
        println!("{}", report.json_line());
    }
    Ok(())
}

/// The kernels printed per function by `--profile`.
const PROFILE_LINES: usize = 15;

/// The slowest kernels of one function's profiled run, with their share of its kernel time,
/// after the time in kernels against the run's `wall` seconds in that function (the rest
/// is the VM's own work between kernels, builtins and sampling).
fn print_profile(function: &str, wall: f64, lines: &[KernelProfile]) {
    let total: f64 = lines.iter().map(|l| l.total.as_secs_f64()).sum();
    println!(
        "profile of {function}: {:.2} ms in kernels of {:.2} ms ({:.1}%)",
        total * 1e3,
        wall * 1e3,
        100.0 * total / wall.max(f64::MIN_POSITIVE)
    );
    for line in lines.iter().take(PROFILE_LINES) {
        let ms = line.total.as_secs_f64() * 1e3;
        println!(
            "  {:>9.2} ms {:>5.1}% {:>6} calls  {}",
            ms,
            100.0 * line.total.as_secs_f64() / total.max(f64::MIN_POSITIVE),
            line.calls,
            line.kernel
        );
    }
}

/// The human-readable report.
fn print_report(r: &BenchReport) {
    println!(
        "model {}: prompt {} tokens, generate {}, {} runs (median), threads {}",
        r.plan.model, r.plan.prompt, r.plan.gen, r.plan.runs, r.plan.threads
    );
    println!("prefill: {:.1} tok/s", r.prefill_tok_s);
    println!("decode: {:.1} tok/s", r.decode_tok_s);
    println!("time to first token: {:.1} ms", r.ttft_ms);
    println!(
        "prefill: {:.3} s; busy: cpu {:.3} s, npu {:.3} s",
        r.prefill_s, r.cpu_s, r.npu_s
    );
    match r.peak_rss_mib {
        Some(mib) => println!("peak memory (VmHWM): {mib:.1} MiB"),
        None => println!("peak memory: unavailable (no VmHWM in /proc/self/status)"),
    }
    println!(
        "allocated: weights {:.1} MiB, KV cache {:.1} MiB ({} positions), VM arenas {:.1} MiB",
        mib(r.weights_bytes),
        mib(r.kv_cache_bytes),
        r.context_window,
        mib(r.arena_bytes)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_line_has_every_field() {
        let report = BenchReport {
            plan: BenchPlan {
                model: "models/x".into(),
                build: "release",
                threads: 2,
                prompt: 4,
                gen: 2,
                runs: 1,
            },
            context_window: 64,
            prefill_tok_s: 10.5,
            decode_tok_s: 20.0,
            ttft_ms: 1.5,
            prefill_s: 0.4,
            cpu_s: 0.3,
            npu_s: 0.2,
            peak_rss_mib: None,
            weights_bytes: 100,
            kv_cache_bytes: 200,
            arena_bytes: 300,
        };
        let line = report.json_line();
        assert!(!line.contains('\n'));
        let json: serde_json::Value = serde_json::from_str(&line).unwrap();
        let object = json.as_object().unwrap();
        for key in [
            "model",
            "build",
            "threads",
            "prompt",
            "gen",
            "runs",
            "context_window",
            "prefill_tok_s",
            "decode_tok_s",
            "ttft_ms",
            "prefill_s",
            "cpu_s",
            "npu_s",
            "peak_rss_mib",
            "weights_bytes",
            "kv_cache_bytes",
            "arena_bytes",
        ] {
            assert!(object.contains_key(key), "{key} missing in {line}");
        }
        assert_eq!(object.len(), 17, "{line}");
        assert_eq!(json["model"], "models/x");
        assert_eq!(json["threads"], 2);
        assert_eq!(json["prefill_tok_s"], 10.5);
        assert!(json["peak_rss_mib"].is_null());
        assert_eq!(json["arena_bytes"], 300);
    }

    #[test]
    fn sizes_must_be_positive_and_fit_the_window() {
        assert!(check_sizes(4, 2, 1, 5).is_ok());
        let err = check_sizes(4, 3, 1, 5).unwrap_err().to_string();
        assert!(err.contains("context window of 5 positions"), "{err}");
        let err = check_sizes(1_000_000_000_000, 64, 1, 2048).unwrap_err();
        assert!(err.to_string().contains("do not fit"), "{err}");
        for (prompt, gen) in [(usize::MAX, 2), (2, usize::MAX)] {
            let err = check_sizes(prompt, gen, 1, usize::MAX).unwrap_err();
            assert!(err.to_string().contains("too large"), "{err}");
        }
        assert!(check_sizes(0, 1, 1, 5).is_err());
        assert!(check_sizes(1, 0, 1, 5).is_err());
        assert!(check_sizes(1, 1, 0, 5).is_err());
        let err = check_sizes(1, 1, 1_000_000_000_000, 5).unwrap_err();
        assert!(err.to_string().contains("--runs 1000000000000"), "{err}");
    }
}
