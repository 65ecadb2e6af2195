//! Loading a Hugging Face model folder for inference in this process: parse
//! `config.json`, build the model's exported functions, compile them for the host, and
//! load the weights (memory-mapped safetensors) in the order the functions take them.

use crate::artifact::{is_artifact, load_artifact, ArtifactError};
use crate::build::build_checked;
use crate::checkpoint::Checkpoint;
use crate::memory::{compiled_estimate, declared_estimate, default_limit, MemoryError};
use crate::passes::{Instrument, TRANSFORM_PARAMS};
use crate::{BuildError, Built};
use oxrelax_dsl::nn::Module;
use oxrelax_dsl::{DType, IRModule, Target};
use oxrelax_models::{
    causal_lm, CausalLM, ExportOptions, Exported, KvDtype, ModelConfig, ModelError,
};
use oxrelax_runtime::memory::MemoryEstimate;
use oxrelax_runtime::vm::{VirtualMachine, VmError};
use oxrelax_runtime::weights::{
    detach_from_file, release_resident_pages, ExpectedTensor, WeightError,
};
use oxrelax_runtime::{Registry, Value};
use std::path::{Path, PathBuf};

pub use crate::quantization::Quantization;

/// Why a model folder could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// `config.json` is missing, malformed or unsupported.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The weights are missing, malformed or do not match the config.
    #[error(transparent)]
    Weights(#[from] WeightError),
    /// The model could not be compiled.
    #[error(transparent)]
    Build(#[from] Box<BuildError>),
    /// An artifact could not be written, or failed its checks when loading.
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
    /// The part compiled for an accelerator beside the CPU (the NPU's) could not be
    /// compiled.
    #[error(transparent)]
    Offload(Box<dyn std::error::Error + Send + Sync>),
    /// The model would not fit in the memory limit.
    #[error(transparent)]
    Memory(#[from] MemoryError),
}

impl From<oxrelax_runtime::artifact::ArtifactError> for LoadError {
    fn from(error: oxrelax_runtime::artifact::ArtifactError) -> Self {
        LoadError::Artifact(error.into())
    }
}

/// How to compile a model.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// The longest context to support (the KV cache's capacity is the smaller of this
    /// and the model's `max_position_embeddings`).
    pub max_context: i64,
    /// Tokens per `prefill` call at most; longer prompts are prefilled in chunks.
    pub prefill_chunk: i64,
    /// How to store the projection weights.
    pub quantization: Quantization,
    /// How the KV cache stores K and V (f32, f16 or q8). `None`: the scheme's default for
    /// a model folder ([`Quantization::default_kv_dtype`]), and whatever an artifact was
    /// compiled with; an artifact compiled with another is an error.
    pub kv_dtype: Option<KvDtype>,
    /// Sequences per `batch_decode` call at most (0: none exported).
    pub max_batch: i64,
    /// Pipeline instrumentation (IR dumps, checks).
    pub instrument: Instrument,
    /// Bytes the model may take ([`MemoryEstimate`]): a model folder whose estimate
    /// exceeds it is refused before its weights are loaded or its arenas allocated.
    pub max_memory: u64,
}

impl Default for LoadOptions {
    fn default() -> Self {
        let export = ExportOptions::default();
        LoadOptions {
            max_context: export.max_context,
            prefill_chunk: export.prefill_chunk,
            quantization: Quantization::Auto,
            kv_dtype: None,
            max_batch: export.max_batch,
            instrument: Instrument::from_env(),
            max_memory: default_limit(),
        }
    }
}

impl LoadOptions {
    /// How a model folder is exported with these options under `scheme` (the resolved
    /// quantization, whose default KV dtype applies when none is asked for).
    fn export_options(&self, scheme: Quantization) -> ExportOptions {
        ExportOptions {
            max_context: self.max_context,
            prefill_chunk: self.prefill_chunk,
            kv_dtype: scheme.kv_dtype(self.kv_dtype),
            max_batch: self.max_batch,
        }
    }
}

/// A compiled model with its weights, ready to run.
pub struct LoadedModel {
    /// The folder it was loaded from.
    pub dir: PathBuf,
    /// The parsed `config.json`.
    pub config: ModelConfig,
    /// The VM running the compiled module's exported functions (`create_kv_cache`,
    /// `embed`, `prefill`, `prefill_all`, `decode`, `softmax_with_temperature`).
    pub vm: VirtualMachine,
    /// The weights, in the order every weighted function takes them after its inputs.
    pub weights: Vec<Value>,
    /// Positions the KV cache holds.
    pub context_window: i64,
    /// Tokens per `prefill` call at most.
    pub prefill_chunk: i64,
    /// What the model was estimated to allocate before it was (for an artifact, as
    /// compiled).
    pub memory: MemoryEstimate,
}

/// Loads the model at `dir` (a Hugging Face folder, config.json + safetensors, or a GGUF
/// file, [`Checkpoint`]) and compiles it,
/// once its memory estimate fits `options.max_memory`: checked before the weights load
/// (weights as declared and the KV cache) and again before the kernels are compiled and
/// the arenas allocated (with the weights as compiled and the planned arenas).
pub fn load_hf(dir: &Path, options: &LoadOptions) -> Result<LoadedModel, LoadError> {
    let Checkpoint { config, store, .. } = Checkpoint::open(dir)?;
    let scheme = options.quantization.resolve(&store);
    let (model, exported) = export_for(&config, scheme, &options.export_options(scheme))?;
    let declared = expected_weights(&model);
    let mut memory = declared_estimate(&config, &exported, &declared);
    memory.check(options.max_memory)?;
    let weights = store.load_expected_finite(&declared)?;
    let check = |module: &IRModule, executable: &_| {
        memory = compiled_estimate(memory, module, executable);
        memory.check(options.max_memory)
    };
    let (instrument, host) = (options.instrument.clone(), Target::host());
    let builtins = Registry::with_builtins();
    let built = build_checked(exported.module, instrument, &host, &builtins, check);
    let mut built = built.map_err(Box::new)?;
    let weights = transform_weights(&mut built, weights.into_iter().map(Value::Tensor).collect())?;
    let weights = detach_weights(weights, store.source())?;
    Ok(LoadedModel {
        dir: dir.to_path_buf(),
        config,
        vm: built.vm,
        weights,
        context_window: exported.context_window,
        prefill_chunk: exported.prefill_chunk,
        memory,
    })
}

/// The model `config` describes, declared for `scheme`'s storage dtype, and its exported
/// functions, marked for the scheme's compile-time weight quantization.
pub fn export_for(
    config: &ModelConfig,
    scheme: Quantization,
    options: &ExportOptions,
) -> Result<(CausalLM, Exported), LoadError> {
    let model = causal_lm(config, scheme.storage_dtype())?;
    let mut exported = model.export(options)?;
    scheme.mark(&mut exported.module);
    Ok((model, exported))
}

/// What `model`'s functions take as weights, in order (each in the dtype the model
/// declares it: stored f16 and bf16 are widened to f32, or f32 rounded to f16, as they
/// load).
pub fn expected_weights(model: &CausalLM) -> Vec<ExpectedTensor> {
    let dtypes = model.parameters().into_iter().map(|p| p.dtype());
    model
        .weight_shapes()
        .into_iter()
        .zip(dtypes)
        .map(|((name, shape), dtype)| ExpectedTensor {
            name,
            shape,
            dtype: dtype.unwrap_or(DType::F32),
        })
        .collect()
}

/// The weights the compiled functions take, given the model's weights in parameter
/// order: what `transform_params` makes of them (packed once, here) when the module has
/// it, else the weights themselves.
///
/// The transform's arena is freed after it ([`VirtualMachine::retire`]). The VM takes
/// the raw weights and drops each one once it is transformed; a raw weight
/// that was mapped from its file then leaves the resident set, as do the pages of the
/// mapped weights used as they are (read back on demand), so loading never holds the raw
/// and the packed model at once.
pub fn transform_weights(built: &mut Built, raw: Vec<Value>) -> Result<Vec<Value>, LoadError> {
    if !built.module.functions.contains_key(TRANSFORM_PARAMS) {
        return Ok(raw);
    }
    let vm_error = |e: VmError| LoadError::Build(Box::new(BuildError::Vm(e)));
    let transformed = built
        .vm
        .call_owned(TRANSFORM_PARAMS, raw)
        .map_err(vm_error)?;
    built.vm.retire(TRANSFORM_PARAMS);
    let weights = match transformed {
        Value::Tuple(items) => items,
        other => vec![other],
    };
    for tensor in weights.iter().filter_map(Value::as_tensor) {
        release_resident_pages(tensor);
    }
    Ok(weights)
}

/// `weights` copied out of the checkpoint's mapping where they borrow it
/// ([`detach_from_file`]), so a checkpoint rewritten while the model runs changes
/// nothing; `checkpoint` names the weights in errors.
fn detach_weights(weights: Vec<Value>, checkpoint: &Path) -> Result<Vec<Value>, LoadError> {
    let detach = |(index, value): (usize, Value)| match value {
        Value::Tensor(tensor) => detach_from_file(tensor)
            .map(Value::Tensor)
            .map_err(|source| WeightError::Tensor {
                tensor: format!("compiled weight {index}"),
                file: checkpoint.to_path_buf(),
                source,
            }),
        other => Ok(other),
    };
    let detached = weights.into_iter().enumerate().map(detach);
    Ok(detached.collect::<Result<_, _>>()?)
}

/// The weights the compiled functions of `module` take after their inputs (names, shapes
/// and dtypes), as `transform_params` produces them; `None` when no function is weighted.
pub fn compiled_weights(module: &IRModule) -> Option<Vec<ExpectedTensor>> {
    let weighted = module
        .functions
        .iter()
        .filter(|(name, _)| name.as_str() != TRANSFORM_PARAMS)
        .find_map(|(_, f)| Some((f, f.num_inputs()?)))?;
    let (function, inputs) = weighted;
    let params = function.params.get(inputs..)?;
    params
        .iter()
        .map(|p| {
            let tensor = p.sinfo.as_tensor()?;
            let shape = tensor
                .dims()?
                .iter()
                .map(|d| d.as_const())
                .collect::<Option<Vec<_>>>()?;
            Some(ExpectedTensor {
                name: p.name.clone(),
                shape,
                dtype: tensor.dtype,
            })
        })
        .collect()
}

/// Loads the model at `path`: an artifact folder (one with `oxrelax-model.json`, loaded
/// as compiled, after its checks; `options` do not apply, but a `kv_dtype` given must be
/// the one it was compiled with), else a Hugging Face model folder or a GGUF file
/// (compiled now with `options`).
pub fn load(path: &Path, options: &LoadOptions) -> Result<LoadedModel, LoadError> {
    if is_artifact(path) {
        return load_artifact(path, options.kv_dtype);
    }
    load_hf(path, options)
}
