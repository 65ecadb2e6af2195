//! `oxrelax compile`: a Hugging Face model folder or a GGUF file in, an artifact folder
//! out.

use crate::cli::generate::{kv_dtype_parser, memory_size_parser};
#[cfg(feature = "npu")]
use crate::cli::npu::{print_npu_record, NpuCompileFlags};
use indicatif::{ProgressBar, ProgressStyle};
use oxrelax::artifact::{
    compile_artifact, resolve_output, staging_dir, CompileOptions, CompileStep, KernelTarget,
};
use oxrelax::memory::artifact_estimate;
use oxrelax::model::Quantization;
use oxrelax_models::KvDtype;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Arguments of `oxrelax compile`.
#[derive(clap::Args)]
pub struct CompileArgs {
    /// The model: a Hugging Face folder (config.json, safetensors, tokenizer files) or a
    /// GGUF file.
    model: PathBuf,
    /// The artifact folder to write: created, or replacing an earlier artifact that holds
    /// nothing but its own files, or an empty folder (the new artifact is written beside
    /// it and renamed into place); any other folder is refused.
    #[arg(short, long)]
    output: PathBuf,
    /// How to store the projection weights (auto: as the checkpoint stores them: for a
    /// GGUF file of quantized blocks w4a8_asym (Q4_1), w4a8 (Q4_0) or w8a8 (others),
    /// else q0f16 for an f16 embedding table, else q0f32).
    #[arg(long, value_enum, default_value = "auto")]
    quant: Quantization,
    /// How the KV cache stores keys and values: f32, f16 (half the memory, widened in the
    /// attention kernel) or q8 (int8 codes with a scale per position and KV head, about a
    /// quarter of the memory, dequantized in the attention kernel). Default: f16 for the
    /// weight-quantized schemes (q8f32, q4f32_1, q4f16_1, w8a8, w4a8; --quant auto
    /// resolved first, so a GGUF file of quantized blocks gets f16), else f32.
    #[arg(long, value_parser = kv_dtype_parser())]
    kv_dtype: Option<KvDtype>,
    /// Tokens per `prefill` call at most.
    #[arg(long)]
    prefill_chunk: Option<i64>,
    /// The longest context to support (capped by the model's max_position_embeddings).
    #[arg(long)]
    context: Option<i64>,
    /// Sequences one `batch_decode` call decodes at most (what `serve` batches); 0
    /// exports no `batch_decode`. Default: 16.
    #[arg(long)]
    max_batch: Option<i64>,
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
    #[cfg(feature = "npu")]
    #[command(flatten)]
    npu: NpuCompileFlags,
    /// The most memory the compiled model may take when it runs, in bytes or with a K,
    /// M, G or T suffix (8G, 512M): a model whose estimate (weights + KV cache + arenas)
    /// exceeds it is refused. Default: the physical memory (or `ulimit -v` when lower).
    #[arg(long, value_name = "BYTES", value_parser = memory_size_parser)]
    max_memory: Option<u64>,
}

/// Compiles the model with a progress bar and prints a summary line.
pub fn run(args: &CompileArgs) -> Result<(), Box<dyn std::error::Error>> {
    let target = KernelTarget::parse(
        args.target.as_deref(),
        args.target_features.as_deref(),
        args.linker.clone(),
    )?;
    let defaults = CompileOptions::default();
    #[cfg(feature = "npu")]
    let npu = args.npu.npu_compile()?;
    #[cfg(not(feature = "npu"))]
    let npu = None;
    let options = CompileOptions {
        quantization: args.quant,
        max_context: args.context.unwrap_or(defaults.max_context),
        prefill_chunk: args.prefill_chunk.unwrap_or(defaults.prefill_chunk),
        kv_dtype: args.kv_dtype,
        max_batch: args.max_batch.unwrap_or(defaults.max_batch),
        verbose: args.verbose,
        target,
        npu,
        max_memory: args.max_memory.unwrap_or(defaults.max_memory),
    };
    // Resolved once: compiling into `.` renames the folder the process started in.
    let output = resolve_output(&args.output)?;
    remove_partial_output_on_interrupt(&output);
    let bar = ProgressBar::new(CompileStep::ALL.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed:>4} [{bar:24}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut started = 0;
    // With --verbose, each step's wall time as the next one starts.
    let mut running: Option<(CompileStep, Instant)> = None;
    let report_time = |running: Option<(CompileStep, Instant)>| {
        if let (true, Some((step, since))) = (args.verbose, running) {
            let seconds = since.elapsed().as_secs_f64();
            bar.suspend(|| eprintln!("{seconds:7.2} s  {}", step.describe()));
        }
    };
    let result = compile_artifact(&args.model, &output, &options, |step| {
        report_time(running.replace((step, Instant::now())));
        bar.set_position(started);
        bar.set_message(step.describe());
        started += 1;
    });
    report_time(running);
    bar.finish_and_clear();
    let manifest = result?;
    #[cfg(feature = "npu")]
    print_npu_record(&manifest, &output);
    println!(
        "wrote {} ({} functions, context {}, prefill chunk {}, kv {}, target {}, kernels {})",
        output.display(),
        manifest.functions.len(),
        manifest.context_window,
        manifest.prefill_chunk,
        manifest.kv_dtype,
        manifest.target.triple,
        manifest.target.kernels
    );
    let memory = artifact_estimate(&output, &manifest)?;
    println!("memory estimate: {memory}");
    Ok(())
}

/// On Ctrl-C (SIGINT), removes the half-written artifact before exiting (code 130); other
/// signals leave the hidden staging folder behind.
fn remove_partial_output_on_interrupt(output: &Path) {
    let staging = staging_dir(output);
    // Without a handler (one is installed already) the default signal action stays.
    let _ = ctrlc::set_handler(move || {
        let _ = std::fs::remove_dir_all(&staging);
        eprintln!("\ninterrupted: removed {}", staging.display());
        std::process::exit(130);
    });
}
