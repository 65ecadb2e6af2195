//! `oxrelax compile`: a Hugging Face model folder in, an artifact folder out.

use crate::cli_generate::kv_dtype_parser;
use indicatif::{ProgressBar, ProgressStyle};
use oxrelax::artifact::{compile_artifact, CompileOptions, CompileStep, KernelTarget};
use oxrelax::model::Quantization;
use oxrelax_models::KvDtype;
use std::path::PathBuf;

/// Arguments of `oxrelax compile`.
#[derive(clap::Args)]
pub struct CompileArgs {
    /// The Hugging Face model folder (config.json, safetensors, tokenizer files).
    model: PathBuf,
    /// The artifact folder to write (created if needed).
    #[arg(short, long)]
    output: PathBuf,
    /// How to store the projection weights (auto: as the checkpoint stores them, q0f16
    /// or else q0f32).
    #[arg(long, value_enum, default_value = "auto")]
    quant: Quantization,
    /// How the KV cache stores keys and values: f32, f16 (half the memory, widened in the
    /// attention kernel) or q8 (int8 codes with a scale per position and KV head, about a
    /// quarter of the memory, dequantized in the attention kernel).
    #[arg(long, value_parser = kv_dtype_parser(), default_value = "f32")]
    kv_dtype: KvDtype,
    /// Tokens per `prefill` call at most.
    #[arg(long)]
    prefill_chunk: Option<i64>,
    /// The longest context to support (capped by the model's max_position_embeddings).
    #[arg(long)]
    context: Option<i64>,
    /// Print what each rewrite phase did (rules fired, e-graph sizes, iterations, stop
    /// reasons) to stderr.
    #[arg(long)]
    verbose: bool,
    /// The target triple the kernels are compiled for (x86_64-unknown-linux-gnu,
    /// aarch64-unknown-linux-gnu, aarch64-linux-android, aarch64-apple-darwin,
    /// x86_64-apple-darwin). Default: the host.
    #[arg(long)]
    target: Option<String>,
    /// The CPU features the kernels may use, comma-separated (e.g. `+avx2,+fma`,
    /// `+dotprod,+i8mm`); loading on a CPU without them is an error. Default: the host's
    /// features for the host; the architecture's baseline for another triple.
    #[arg(long)]
    target_features: Option<String>,
    /// The linker that makes the kernel library (default per target: cc,
    /// aarch64-linux-gnu-gcc, ld.lld for Android, ld64.lld for Apple).
    #[arg(long)]
    linker: Option<String>,
}

/// Compiles the model with a progress bar and prints a summary line.
pub fn run(args: &CompileArgs) -> Result<(), Box<dyn std::error::Error>> {
    let target = KernelTarget::parse(
        args.target.as_deref(),
        args.target_features.as_deref(),
        args.linker.clone(),
    )?;
    let defaults = CompileOptions::default();
    let options = CompileOptions {
        quantization: args.quant,
        max_context: args.context.unwrap_or(defaults.max_context),
        prefill_chunk: args.prefill_chunk.unwrap_or(defaults.prefill_chunk),
        kv_dtype: args.kv_dtype,
        verbose: args.verbose,
        target,
    };
    let bar = ProgressBar::new(CompileStep::ALL.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed:>4} [{bar:24}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut started = 0;
    let result = compile_artifact(&args.model, &args.output, &options, |step| {
        bar.set_position(started);
        bar.set_message(step.describe());
        started += 1;
    });
    bar.finish_and_clear();
    let manifest = result?;
    println!(
        "wrote {} ({} functions, context {}, prefill chunk {}, kv {}, target {}, kernels {})",
        args.output.display(),
        manifest.functions.len(),
        manifest.context_window,
        manifest.prefill_chunk,
        manifest.kv_dtype,
        manifest.target.triple,
        manifest.target.kernels
    );
    Ok(())
}
