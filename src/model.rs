//! Loading a Hugging Face model folder for inference in this process: parse
//! `config.json`, build the model's exported functions, compile them for the host, and
//! load the weights (memory-mapped safetensors) in the order the functions take them.

use crate::artifact::{is_artifact, load_artifact, ArtifactError};
use crate::lower_vm::runtime_dtype;
use crate::passes::{Instrument, TRANSFORM_PARAMS};
use crate::{build, BuildError, Built};
use oxrelax_dsl::nn::Module;
use oxrelax_dsl::{DataType, IRModule};
use oxrelax_models::{causal_lm, CausalLM, ExportOptions, ModelConfig, ModelError};
use oxrelax_runtime::vm::VmError;
use oxrelax_runtime::weights::{release_resident_pages, ExpectedTensor, WeightError, WeightStore};
use oxrelax_runtime::{DType, Value};
use std::path::{Path, PathBuf};

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
}

/// How the projection weights (and the embedding table) are stored: the quantization
/// scheme (`--quant`, named as MLC-LLM names them). Norms and biases are f32, and the
/// kernels compute in f32 either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Quantization {
    /// As the checkpoint stores them: `q0f16` when the embedding table is stored as f16,
    /// else `q0f32` (bf16 is widened to f32).
    #[default]
    Auto,
    /// No quantization: 32-bit floats.
    #[value(name = "q0f32")]
    Q0f32,
    /// No quantization, 16-bit float storage (half the memory and the bytes each decode
    /// step streams; f32 and bf16 checkpoints are rounded to f16).
    #[value(name = "q0f16")]
    Q0f16,
}

impl Quantization {
    /// The scheme's name (as `--quant` takes it).
    pub fn name(self) -> &'static str {
        match self {
            Quantization::Auto => "auto",
            Quantization::Q0f32 => "q0f32",
            Quantization::Q0f16 => "q0f16",
        }
    }

    /// The dtype to keep the weights of the checkpoint in `store` in.
    pub fn resolve(self, store: &WeightStore) -> DataType {
        match self {
            Quantization::Q0f32 => DataType::F32,
            Quantization::Q0f16 => DataType::F16,
            Quantization::Auto => match store.info(EMBEDDING_TABLE) {
                Some((_, tensor)) if tensor.dtype == DType::F16 => DataType::F16,
                _ => DataType::F32,
            },
        }
    }
}

/// The tensor whose stored dtype [`Quantization::Auto`] follows (every model has it).
const EMBEDDING_TABLE: &str = "model.embed_tokens.weight";

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
    /// Pipeline instrumentation (IR dumps, checks).
    pub instrument: Instrument,
}

impl Default for LoadOptions {
    fn default() -> Self {
        let export = ExportOptions::default();
        LoadOptions {
            max_context: export.max_context,
            prefill_chunk: export.prefill_chunk,
            quantization: Quantization::Auto,
            instrument: Instrument::from_env(),
        }
    }
}

/// A compiled model with its weights, ready to run.
pub struct LoadedModel {
    /// The folder it was loaded from.
    pub dir: PathBuf,
    /// The parsed `config.json`.
    pub config: ModelConfig,
    /// The compiled module and its VM (`create_kv_cache`, `embed`, `prefill`,
    /// `prefill_all`, `decode`, `softmax_with_temperature`).
    pub built: Built,
    /// The weights, in the order every weighted function takes them after its inputs.
    pub weights: Vec<Value>,
    /// Positions the KV cache holds.
    pub context_window: i64,
    /// Tokens per `prefill` call at most.
    pub prefill_chunk: i64,
}

/// Loads the Hugging Face model in `dir` (config.json + safetensors) and compiles it.
pub fn load_hf(dir: &Path, options: &LoadOptions) -> Result<LoadedModel, LoadError> {
    let config = ModelConfig::from_file(&dir.join("config.json")).map_err(ModelError::from)?;
    let store = WeightStore::open(dir)?;
    let model = causal_lm(&config, options.quantization.resolve(&store))?;
    let exported = model.export(&ExportOptions {
        max_context: options.max_context,
        prefill_chunk: options.prefill_chunk,
    })?;
    let weights = store.load_expected(&expected_weights(&model))?;
    let mut built = build(exported.module, options.instrument.clone()).map_err(Box::new)?;
    let weights = transform_weights(&mut built, weights.into_iter().map(Value::Tensor).collect())?;
    Ok(LoadedModel {
        dir: dir.to_path_buf(),
        config,
        built,
        weights,
        context_window: exported.context_window,
        prefill_chunk: exported.prefill_chunk,
    })
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
            dtype: runtime_dtype(dtype.unwrap_or(DataType::F32)),
        })
        .collect()
}

/// The weights the compiled functions take, given the model's weights in parameter
/// order: what `transform_params` makes of them (packed once, here) when the module has
/// it, else the weights themselves.
///
/// The VM takes the raw weights and drops each one once it is transformed; a raw weight
/// that was mapped from its file then leaves the resident set, as do the pages of the
/// mapped weights used as they are (read back on demand), so loading never holds the raw
/// and the packed model at once.
pub fn transform_weights(built: &mut Built, raw: Vec<Value>) -> Result<Vec<Value>, LoadError> {
    if !built.module.functions.contains_key(TRANSFORM_PARAMS) {
        return Ok(raw);
    }
    let vm_error = |e: VmError| LoadError::Build(Box::new(BuildError::Vm(e)));
    let weights = match built
        .vm
        .call_owned(TRANSFORM_PARAMS, raw)
        .map_err(vm_error)?
    {
        Value::Tuple(items) => items,
        other => vec![other],
    };
    for tensor in weights.iter().filter_map(Value::as_tensor) {
        release_resident_pages(tensor);
    }
    Ok(weights)
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
                dtype: runtime_dtype(tensor.dtype),
            })
        })
        .collect()
}

/// Loads the model at `path`: an artifact folder (one with `oxrelax-model.json`, loaded
/// as compiled, after its checks; `options` do not apply), else a Hugging Face model
/// folder (compiled now with `options`).
pub fn load(path: &Path, options: &LoadOptions) -> Result<LoadedModel, LoadError> {
    if is_artifact(path) {
        return load_artifact(path);
    }
    load_hf(path, options)
}
