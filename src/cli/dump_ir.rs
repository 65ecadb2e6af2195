//! `oxrelax dump-ir`: a model's module after each pass of the compile pipeline.

use crate::cli::generate::kv_dtype_parser;
use oxrelax::artifact::{
    check_kv_dtype, extract_functions, is_artifact, modules_after_each_pass,
    modules_after_passes_of, source_module, Manifest,
};
use oxrelax::checkpoint::Checkpoint;
use oxrelax::model::Quantization;
use oxrelax::passes::Instrument;
use oxrelax_dsl::target::Target;
use oxrelax_dsl::text::print_module;
use oxrelax_dsl::IRModule;
use oxrelax_models::{ExportOptions, KvDtype};
use std::path::PathBuf;

/// Arguments of `oxrelax dump-ir`.
#[derive(clap::Args)]
pub struct DumpIrArgs {
    /// An artifact folder, a Hugging Face model folder or a GGUF file.
    model: PathBuf,
    /// Print the module after this pass (`input` for the exported module); the
    /// module after the last pass when neither this nor `-o` is given.
    #[arg(long)]
    after: Option<String>,
    /// Print what each rewrite phase did (rules fired, e-graph sizes, iterations, stop
    /// reasons) to stderr.
    #[arg(long)]
    verbose: bool,
    /// Write the module before the first pass and after each pass into this folder
    /// (`00-input.txt`, `01-normalize.txt`, ...).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Keep only these graph functions and the primitive functions they call.
    #[arg(long = "function")]
    functions: Vec<String>,
    /// How to store a model folder's or GGUF file's projection weights (auto: as stored:
    /// for a GGUF file of quantized blocks w4a8_asym (Q4_1), w4a8 (Q4_0) or w8a8 (others),
    /// else q0f16 for an f16 embedding table, else q0f32).
    #[arg(long, value_enum, default_value = "auto")]
    quant: Quantization,
    #[cfg(feature = "npu")]
    #[command(flatten)]
    npu: crate::cli::npu::DumpIrNpuArgs,
    /// How a model folder's or GGUF file's KV cache stores keys and values (default: f16
    /// for the weight-quantized schemes, --quant auto resolved first, else f32; an
    /// artifact keeps its own, and asking it for another is an error).
    #[arg(long, value_parser = kv_dtype_parser())]
    kv_dtype: Option<KvDtype>,
}

/// Runs the pipeline on the model's exported module and prints or writes the IR.
pub fn run(args: &DumpIrArgs) -> Result<(), Box<dyn std::error::Error>> {
    let scheme = if is_artifact(&args.model) {
        check_kv_dtype(&Manifest::read(&args.model)?, &args.model, args.kv_dtype)?;
        args.quant
    } else {
        args.quant.resolve(&Checkpoint::open(&args.model)?.store)
    };
    let defaults = ExportOptions::default();
    let options = ExportOptions {
        kv_dtype: scheme.kv_dtype(args.kv_dtype),
        ..defaults
    };
    let module = source_module(&args.model, &options, scheme)?;
    let instrument = Instrument {
        verbose: args.verbose,
        ..Instrument::default()
    };
    #[cfg(feature = "npu")]
    let npu_pipeline = args.npu.pipeline();
    #[cfg(not(feature = "npu"))]
    let npu_pipeline = None;
    let stages = match npu_pipeline {
        Some(pipeline) => modules_after_passes_of(pipeline, module, instrument)?,
        None => modules_after_each_pass(module, &Target::host(), instrument)?,
    };
    let names: Vec<&str> = args.functions.iter().map(String::as_str).collect();
    check_function_names(&names, &stages)?;
    let shown = |module| {
        if names.is_empty() {
            print_module(module)
        } else {
            print_module(&extract_functions(module, &names))
        }
    };
    if let Some(dir) = &args.output {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for (stage, module) in &stages {
            let path = dir.join(format!("{stage}.txt"));
            std::fs::write(&path, shown(module)).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        if args.after.is_none() {
            return Ok(());
        }
    }
    let wanted = args.after.as_deref();
    let stage = match wanted {
        None => stages.last(),
        Some(pass) => stages.iter().find(|(stage, _)| stage[3..] == *pass),
    };
    let Some((_, module)) = stage else {
        let known: Vec<&str> = stages.iter().map(|(s, _)| &s[3..]).collect();
        return Err(format!(
            "--after {}: no such pass (the passes are: {})",
            wanted.unwrap_or_default(),
            known.join(", ")
        )
        .into());
    };
    print!("{}", shown(module));
    Ok(())
}

/// An error naming each of `names` no stage's module defines, with the functions there
/// are.
fn check_function_names(
    names: &[&str],
    stages: &[(String, IRModule)],
) -> Result<(), Box<dyn std::error::Error>> {
    let defined = |name: &str| stages.iter().any(|(_, m)| m.functions.contains_key(name));
    let unknown: Vec<&str> = names.iter().copied().filter(|n| !defined(n)).collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let mut known: Vec<&str> = stages
        .iter()
        .flat_map(|(_, m)| m.functions.keys().map(String::as_str))
        .collect();
    known.sort_unstable();
    known.dedup();
    Err(format!(
        "no function {} in the module (its functions: {})",
        unknown.join(", "),
        known.join(", ")
    )
    .into())
}
