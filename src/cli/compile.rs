//! `oxrelax compile`: a Hugging Face model folder or a GGUF file in, an artifact folder
//! out.

use crate::cli::generate::{kv_dtype_parser, memory_size_parser};
use indicatif::{ProgressBar, ProgressStyle};
use oxrelax::artifact::{
    compile_artifact, resolve_output, staging_dir, CompileOptions, CompileStep, KernelTarget,
};
use oxrelax::memory::artifact_estimate;
use oxrelax::model::Quantization;
use oxrelax::npu::compile::{NpuCompile, CALIBRATION_TOKENS};
use oxrelax::npu::qnn::recipe::RecipeChoice;
use oxrelax::npu::Soc;
use oxrelax_models::KvDtype;
use oxrelax_runtime::qnn::htp::LIB_DIR_ENV;
use std::path::{Path, PathBuf};

/// How to make a model's NPU graphs (`compile --npu qnn`, `compare --npu sim`).
#[derive(clap::Args)]
pub struct NpuCompileArgs {
    /// The SoCs the NPU graphs are for, comma-separated: one context binary each (with
    /// --npu).
    #[arg(
        long,
        default_value = "SM8650",
        value_delimiter = ',',
        requires = "npu"
    )]
    soc: Vec<String>,
    /// Tokens per NPU prefill graph call (with --npu).
    #[arg(long, default_value_t = 32, requires = "npu")]
    chunk: i64,
    /// Fewer tokens per call to give the prefill graphs variants for, comma-separated: a
    /// call runs the variant with the least padding (default: a quarter of --chunk; 0:
    /// none) (with --npu).
    #[arg(long, value_delimiter = ',', requires = "npu")]
    chunk_variants: Option<Vec<i64>>,
    /// The NPU quantization recipe: w4a16 (LPBQ int4 weights, uint16 activations),
    /// w8a16 (8-bit weights), or auto: the first of those whose graphs predict the float
    /// graphs' next token at 98% of the calibration text's positions (with --npu).
    #[arg(long, default_value = "auto", requires = "npu")]
    npu_recipe: String,
    /// The text the NPU activations are calibrated on (required with --npu).
    #[arg(long, requires = "npu")]
    calibration_text: Option<PathBuf>,
}

impl NpuCompileArgs {
    /// The chunk variants asked for (0 means none), or a quarter of the chunk.
    fn chunk_variants(&self) -> Vec<i64> {
        match &self.chunk_variants {
            Some(sizes) => sizes.iter().copied().filter(|&s| s != 0).collect(),
            None => (self.chunk / 4 > 1)
                .then_some(self.chunk / 4)
                .into_iter()
                .collect(),
        }
    }

    /// The NPU compile these options describe (the calibration text read), with
    /// Qualcomm's libraries in `qnn_lib` (else OXRELAX_QNN_LIB_DIR's, else none).
    pub fn npu_compile(
        &self,
        qnn_lib: Option<&Path>,
    ) -> Result<NpuCompile, Box<dyn std::error::Error>> {
        let path = self.calibration_text.as_ref().ok_or(
            "--npu needs --calibration-text FILE (the text its activations are calibrated on)",
        )?;
        let text = oxrelax_runtime::files::read_text(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(NpuCompile {
            soc: Soc::named(self.soc.first().map_or("", String::as_str))?,
            more_socs: (self.soc.iter().skip(1))
                .map(|name| Soc::named(name))
                .collect::<Result<_, _>>()?,
            chunk: self.chunk,
            chunk_variants: self.chunk_variants(),
            recipe: RecipeChoice::named(&self.npu_recipe)?,
            calibration_text: text,
            calibration_tokens: CALIBRATION_TOKENS,
            qnn_lib: (qnn_lib.map(Path::to_path_buf))
                .or_else(|| std::env::var_os(LIB_DIR_ENV).map(PathBuf::from)),
        })
    }
}

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
    /// How to store the projection weights (auto: as the checkpoint stores them: w8a8
    /// for a GGUF file holding quantized blocks, else q0f16 for an f16 embedding table,
    /// else q0f32).
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
    /// Also partition prefill and decode for an NPU and write its graphs to `npu/`
    /// (`qnn`: Qualcomm HTP through QNN, with the recipe --npu-recipe names or picks:
    /// W4A16 or W8A16).
    #[arg(long, value_parser = ["qnn"])]
    npu: Option<String>,
    #[command(flatten)]
    npu_options: NpuCompileArgs,
    /// The folder holding Qualcomm's libQnnHtp.so, to build the NPU graphs with it and
    /// store the SoC's context binary (default: OXRELAX_QNN_LIB_DIR; with neither, no
    /// context binary is written) (with --npu).
    #[arg(long, value_name = "DIR", requires = "npu")]
    qnn_lib: Option<PathBuf>,
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
    let options = CompileOptions {
        quantization: args.quant,
        max_context: args.context.unwrap_or(defaults.max_context),
        prefill_chunk: args.prefill_chunk.unwrap_or(defaults.prefill_chunk),
        kv_dtype: args.kv_dtype,
        verbose: args.verbose,
        target,
        npu: npu_compile(args)?,
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
    let result = compile_artifact(&args.model, &output, &options, |step| {
        bar.set_position(started);
        bar.set_message(step.describe());
        started += 1;
    });
    bar.finish_and_clear();
    let manifest = result?;
    if let Some(npu) = &manifest.npu {
        for (recipe, share) in &npu.recipe_agreement {
            println!(
                "npu: {recipe} predicts the float graphs' next token at {:.1}% of the calibration positions",
                share * 100.0
            );
        }
        for (soc, binary) in &npu.context_binaries {
            println!(
                "npu: context binary for {soc} in {}",
                output.join(binary).display()
            );
        }
        if npu.context_binaries.is_empty() {
            println!(
                "npu: no context binary (set OXRELAX_QNN_LIB_DIR or --qnn-lib to the folder holding \
                 Qualcomm's libQnnHtp.so to build one; `--npu sim` runs the artifact without it)"
            );
        }
        println!(
            "npu: {} graphs for {} ({} recipe, chunks of {}, variants for {:?}) in {}",
            npu.backend,
            npu.soc,
            npu.recipe,
            npu.chunk,
            npu.chunk_variants,
            output.join("npu").display()
        );
    }
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

/// The NPU part asked for by `--npu`, if any.
fn npu_compile(args: &CompileArgs) -> Result<Option<NpuCompile>, Box<dyn std::error::Error>> {
    match args.npu {
        Some(_) => args
            .npu_options
            .npu_compile(args.qnn_lib.as_deref())
            .map(Some),
        None => Ok(None),
    }
}
