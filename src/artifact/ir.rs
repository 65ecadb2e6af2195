//! The IR of a model after each pass of the compile pipeline (behind `oxrelax dump-ir`).

use super::recorded::{recorded_config, recorded_kv_dtype, recorded_quantization};
use crate::checkpoint::Checkpoint;
use crate::model::{export_for, LoadError, Quantization};
use crate::passes::{compile_pipeline_for, Instrument, PassError, Pipeline};
use oxrelax_dsl::ir::{BindingValue, Callee, Expr};
use oxrelax_dsl::target::Target;
use oxrelax_dsl::IRModule;
use oxrelax_models::{ExportOptions, ModelError};
use oxrelax_runtime::artifact::{is_artifact, Manifest};
use std::collections::BTreeSet;
use std::path::Path;

/// The exported module (before the compile pipeline) of a model folder or an artifact.
/// A model folder is exported with `options`, its weights stored as `quantization` says; an
/// artifact with its recorded context window, prefill chunk, KV cache dtype and weight
/// dtype.
pub fn source_module(
    path: &Path,
    options: &ExportOptions,
    quantization: Quantization,
) -> Result<IRModule, LoadError> {
    let (config, options, scheme) = if is_artifact(path) {
        let manifest = Manifest::read(path)?;
        let config = recorded_config(&manifest, path).map_err(ModelError::from)?;
        let options = ExportOptions {
            max_context: manifest.context_window,
            prefill_chunk: manifest.prefill_chunk,
            kv_dtype: recorded_kv_dtype(&manifest, path)?,
            max_batch: manifest.max_batch,
        };
        (config, options, recorded_quantization(&manifest, path)?)
    } else {
        let checkpoint = Checkpoint::open(path)?;
        let scheme = quantization.resolve(&checkpoint.store);
        (checkpoint.config, *options, scheme)
    };
    Ok(export_for(&config, scheme, &options)?.1.module)
}

/// The module before `target`'s compile pipeline and after each of its passes, as
/// `(NN-name, module)` (`00-input`, `01-normalize`, ...), with `instrument`'s dumps
/// and checks.
pub fn modules_after_each_pass(
    module: IRModule,
    target: &Target,
    instrument: Instrument,
) -> Result<Vec<(String, IRModule)>, PassError> {
    modules_after_passes_of(compile_pipeline_for(target), module, instrument)
}

/// The module before `pipeline` and after each of its passes, as `(NN-name, module)`
/// (see [`modules_after_each_pass`]).
pub fn modules_after_passes_of(
    pipeline: Pipeline,
    module: IRModule,
    instrument: Instrument,
) -> Result<Vec<(String, IRModule)>, PassError> {
    let mut stages = Vec::new();
    pipeline
        .instrumented(instrument)
        .run_observed(module, |name, module| {
            stages.push((format!("{:02}-{name}", stages.len()), module.clone()));
        })?;
    Ok(stages)
}

/// The graph functions of `module` named in `functions` and the primitive functions
/// they call.
pub fn extract_functions(module: &IRModule, functions: &[&str]) -> IRModule {
    let mut out = IRModule::new();
    for (name, function) in &module.functions {
        if functions.contains(&name.as_str()) {
            out.functions.insert(name.clone(), function.clone());
        }
    }
    let called: BTreeSet<&String> = out
        .functions
        .values()
        .flat_map(|f| f.bindings())
        .filter_map(|binding| match &binding.value {
            BindingValue::Expr(Expr::Call(call)) => match &call.callee {
                Callee::Tir(name) => Some(name),
                _ => None,
            },
            _ => None,
        })
        .collect();
    out.prim_funcs = module
        .prim_funcs
        .iter()
        .filter(|(name, _)| called.contains(name))
        .map(|(name, f)| (name.clone(), f.clone()))
        .collect();
    out
}
