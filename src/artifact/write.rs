//! `compile_artifact`: a Hugging Face model folder in, an artifact folder out.

use super::destination::{inspect, move_into_place, resolve_output, sibling};
use super::error::ArtifactError;
use super::kernels::{write_kernels, KernelTarget};
use super::recorded::{compiled_target, exported_signatures};
use crate::build::build_checked;
use crate::checkpoint::{Checkpoint, GENERATION_CONFIG};
use crate::memory::{compiled_estimate, declared_estimate, default_limit};
use crate::model::{
    compiled_weights, expected_weights, export_for, transform_weights, LoadError, Quantization,
};
use crate::passes::Instrument;
use oxrelax_dsl::IRModule;
use oxrelax_models::{ExportOptions, KvDtype};
use oxrelax_runtime::artifact::{
    sha256_file, HashingFile, Manifest, NpuRecord, FORMAT_VERSION, MODULE_FILE, PARAMS_FILE,
    VM_FILE,
};
use oxrelax_runtime::weights::stored_as;
use oxrelax_runtime::Registry;
use oxrelax_runtime::{Tensor, Value};
use safetensors::tensor::{Metadata, TensorInfo, TensorView};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How to compile an artifact.
#[derive(Debug, Clone)]
pub struct CompileOptions {
    /// How to store the projection weights.
    pub quantization: Quantization,
    /// The longest context to support (capped by the model's `max_position_embeddings`).
    pub max_context: i64,
    /// Tokens per `prefill` call at most.
    pub prefill_chunk: i64,
    /// How the KV cache stores K and V (f32, f16 or q8); `None`: the scheme's default
    /// ([`Quantization::default_kv_dtype`]).
    pub kv_dtype: Option<KvDtype>,
    /// Sequences per `batch_decode` call at most (0: none exported).
    pub max_batch: i64,
    /// Print what the passes report (`--verbose`).
    pub verbose: bool,
    /// The triple and CPU features the kernels are compiled for, and the linker.
    pub target: KernelTarget,
    /// Partition prefill, prefill_all and decode for an NPU and write its graphs to
    /// `npu/` (the CPU part then runs the weight scheme and prefill chunk it gives).
    pub npu: Option<Arc<dyn GraphCompile>>,
    /// Bytes the compiled model may take when it runs (its memory estimate: weights, KV
    /// cache, arenas); a model beyond it is refused before its weights are converted.
    pub max_memory: u64,
}

impl Default for CompileOptions {
    fn default() -> Self {
        let export = ExportOptions::default();
        CompileOptions {
            quantization: Quantization::Auto,
            max_context: export.max_context,
            prefill_chunk: export.prefill_chunk,
            kv_dtype: None,
            max_batch: export.max_batch,
            verbose: false,
            target: KernelTarget::host(),
            npu: None,
            max_memory: default_limit(),
        }
    }
}

/// How to compile the part of a model that runs on an accelerator beside the CPU (the
/// NPU's, in the `npu` module behind the `npu` feature): [`compile_artifact`] knows only
/// this trait.
pub trait GraphCompile: std::fmt::Debug + Send + Sync {
    /// The CPU part's weight scheme, when `asked` was asked for.
    fn scheme(&self, asked: Quantization) -> Result<Quantization, LoadError>;

    /// Tokens per `prefill` call (the graphs' chunk).
    fn prefill_chunk(&self) -> i64;

    /// Compiles the graphs of the model in `src`, with the CPU part's `options`.
    fn compile(
        &self,
        src: &Path,
        options: &CompileOptions,
    ) -> Result<Box<dyn CompiledGraphs>, LoadError>;
}

/// A model's graphs compiled by a [`GraphCompile`].
pub trait CompiledGraphs {
    /// The module the CPU part compiles (it calls the graphs).
    fn module(&self) -> IRModule;

    /// The runtime's builtins and the graphs (what the weight transforms run with).
    fn builtins(&self) -> Result<Registry, LoadError>;

    /// Writes the graphs into the artifact folder `out`; returns their manifest record.
    fn write(&self, out: &Path) -> Result<NpuRecord, LoadError>;
}

/// A step of [`compile_artifact`], reported as it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompileStep {
    /// Building the model's exported functions and compiling them (passes, bytecode,
    /// kernels).
    Compile,
    /// Reading the checkpoint's weights and checking them.
    LoadWeights,
    /// Running the weight transforms (quantizing, packing).
    TransformWeights,
    /// Writing the converted weights.
    WriteWeights,
    /// Writing the module, the executable and the tokenizer files.
    Files,
    /// Compiling the kernels for the target and linking them.
    Kernels,
    /// Hashing every file and writing the manifest.
    Manifest,
}

impl CompileStep {
    /// Every step, in order.
    pub const ALL: [CompileStep; 7] = [
        CompileStep::Compile,
        CompileStep::LoadWeights,
        CompileStep::TransformWeights,
        CompileStep::WriteWeights,
        CompileStep::Files,
        CompileStep::Kernels,
        CompileStep::Manifest,
    ];

    /// What the step does, for a progress line.
    pub fn describe(self) -> &'static str {
        match self {
            CompileStep::Compile => "compiling the model",
            CompileStep::LoadWeights => "reading the weights",
            CompileStep::TransformWeights => "quantizing and packing the weights",
            CompileStep::WriteWeights => "writing the weights",
            CompileStep::Files => "writing the module, bytecode and tokenizer",
            CompileStep::Kernels => "compiling and linking the kernels for the target",
            CompileStep::Manifest => "hashing files and writing the manifest",
        }
    }
}

/// Compiles the Hugging Face model in `src` into an artifact folder `out`, calling
/// `progress` as each step starts; returns the manifest written. The artifact is written
/// into a fresh folder beside `out` and renamed into place when complete, so a failed or
/// interrupted compile never leaves a folder that loads. `out` may be absent, an empty
/// folder or an earlier artifact holding nothing but its listed files (whose files are
/// then removed); anything else is refused before any work.
pub fn compile_artifact(
    src: &Path,
    out: &Path,
    options: &CompileOptions,
    progress: impl FnMut(CompileStep),
) -> Result<Manifest, LoadError> {
    let out = resolve_output(out)?;
    let found = inspect(&out)?;
    let staging = staging_dir(&out);
    let _ = std::fs::remove_dir_all(&staging);
    create_dir(&staging)?;
    let written = write_artifact(src, &staging, options, progress).and_then(|manifest| {
        move_into_place(&staging, &out, &found)?;
        Ok(manifest)
    });
    if written.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    written
}

/// The folder an artifact for `out` (as [`resolve_output`] gives it) is written into by
/// this process: a hidden sibling, so the final rename stays on one file system. A compile
/// interrupted by Ctrl-C removes it.
pub fn staging_dir(out: &Path) -> PathBuf {
    sibling(out, "partial")
}

/// Writes every file of the artifact into `out` (an empty folder).
fn write_artifact(
    src: &Path,
    out: &Path,
    options: &CompileOptions,
    mut progress: impl FnMut(CompileStep),
) -> Result<Manifest, LoadError> {
    progress(CompileStep::Compile);
    let checkpoint = Checkpoint::open(src)?;
    let side_files = checkpoint.side_files()?;
    let Checkpoint {
        config_json,
        config,
        store,
        ..
    } = checkpoint;
    let scheme = match &options.npu {
        Some(npu) => npu.scheme(options.quantization)?,
        None => options.quantization.resolve(&store),
    };
    let export = ExportOptions {
        max_context: options.max_context,
        prefill_chunk: options
            .npu
            .as_ref()
            .map_or(options.prefill_chunk, |n| n.prefill_chunk()),
        kv_dtype: scheme.kv_dtype(options.kv_dtype),
        max_batch: options.max_batch,
    };
    let (model, exported) = export_for(&config, scheme, &export)?;
    let declared = expected_weights(&model);
    let memory = declared_estimate(&config, &exported, &declared);
    memory.check(options.max_memory)?;
    let instrument = Instrument {
        verbose: options.verbose,
        ..Instrument::from_env()
    };
    let npu = match &options.npu {
        Some(npu) => Some(npu.compile(src, options)?),
        None => None,
    };
    let (module, builtins) = match &npu {
        Some(graphs) => (graphs.module(), graphs.builtins()?),
        None => (exported.module, Registry::with_builtins()),
    };
    let check = |module: &_, executable: &_| {
        compiled_estimate(memory, module, executable).check(options.max_memory)
    };
    let mut built = build_checked(module, instrument, &options.target.target, &builtins, check)
        .map_err(Box::new)?;

    progress(CompileStep::LoadWeights);
    create_dir(&out.join(PARAMS_FILE).with_file_name(""))?;
    let raw = store.load_expected_finite(&declared)?;
    progress(CompileStep::TransformWeights);
    let weights = transform_weights(&mut built, raw.into_iter().map(Value::Tensor).collect())?;
    progress(CompileStep::WriteWeights);
    let expected = compiled_weights(&built.module).unwrap_or_default();
    let tensors = expected.iter().zip(&weights).filter_map(|(e, w)| match w {
        Value::Tensor(t) => Some((e.name.clone(), t)),
        _ => None,
    });
    let params_hash = write_weights(&out.join(PARAMS_FILE), tensors)?;

    progress(CompileStep::Files);
    let module_text = oxrelax_dsl::text::print_module(&built.module);
    write_file(&out.join(MODULE_FILE), module_text.as_bytes())?;
    built
        .executable
        .save(&out.join(VM_FILE))
        .map_err(
            |source| oxrelax_runtime::artifact::ArtifactError::Executable {
                path: out.join(VM_FILE),
                source,
            },
        )?;
    for (name, bytes) in &side_files {
        write_file(&out.join(name), bytes)?;
    }
    let names = side_files.iter().map(|(name, _)| name.clone());
    let (generation, tokenizer_files): (Vec<String>, Vec<String>) =
        names.partition(|name| name == GENERATION_CONFIG);

    progress(CompileStep::Kernels);
    let kernels = &built.executable.kernels;
    let library = write_kernels(out, &built.module, kernels, &options.target)?;

    let npu_record = match &npu {
        Some(graphs) => Some(graphs.write(out)?),
        None => None,
    };

    progress(CompileStep::Manifest);
    let listed = [MODULE_FILE, VM_FILE, PARAMS_FILE, library.as_str()]
        .into_iter()
        .map(str::to_string)
        .chain(tokenizer_files.iter().cloned())
        .chain(generation)
        .chain(npu_record.iter().flat_map(|r| r.files.clone()));
    // The weights were hashed as they were written; the other files are small.
    let hash = |file: &str| match file {
        PARAMS_FILE => Ok(params_hash.clone()),
        _ => sha256_file(&out.join(file)),
    };
    let files = listed
        .map(|file| Ok((file.clone(), hash(&file)?)))
        .collect::<Result<BTreeMap<_, _>, oxrelax_runtime::artifact::ArtifactError>>()?;
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        model_config: config_json,
        functions: exported_signatures(&built.module),
        context_window: exported.context_window,
        prefill_chunk: exported.prefill_chunk,
        quantization: scheme.name().into(),
        kv_dtype: exported.kv_dtype.name().into(),
        max_batch: exported.max_batch,
        weights: expected,
        tokenizer_files,
        target: compiled_target(&options.target, library),
        files,
        npu: npu_record,
    };
    manifest.write(out)?;
    Ok(manifest)
}

/// Writes `tensors` (name, tensor) as one safetensors file ([`stored_as`] their dtype)
/// and returns its SHA-256, hashed as it is written. The header is the safetensors
/// crate's metadata; the tensors are laid out as the crate lays them out (by dtype
/// alignment, then name), so every tensor's data is aligned to its dtype.
fn write_weights<'a>(
    path: &Path,
    tensors: impl Iterator<Item = (String, &'a Tensor)>,
) -> Result<String, ArtifactError> {
    let failed = |reason: String| ArtifactError::WriteWeights {
        path: path.to_path_buf(),
        reason,
    };
    let mut stored = tensors
        .map(|(name, tensor)| {
            let bytes = tensor
                .as_bytes()
                .map_err(|e| failed(format!("`{name}`: {e}")))?;
            let (dtype, shape) = stored_as(tensor.dtype(), tensor.shape()).ok_or_else(|| {
                failed(format!(
                    "`{name}`: safetensors cannot store {} {:?}",
                    tensor.dtype(),
                    tensor.shape()
                ))
            })?;
            let shape: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
            // Checks the bytes against the shape and dtype.
            TensorView::new(dtype, shape.clone(), bytes)
                .map_err(|e| failed(format!("`{name}`: {e}")))?;
            Ok((name, dtype, shape, bytes))
        })
        .collect::<Result<Vec<_>, ArtifactError>>()?;
    stored.sort_by(|(a, a_dtype, ..), (b, b_dtype, ..)| b_dtype.cmp(a_dtype).then(a.cmp(b)));
    let mut offset = 0;
    let infos = stored.iter().map(|(name, dtype, shape, bytes)| {
        let data_offsets = (offset, offset + bytes.len());
        offset += bytes.len();
        let (dtype, shape) = (*dtype, shape.clone());
        let info = TensorInfo {
            dtype,
            shape,
            data_offsets,
        };
        (name.clone(), info)
    });
    let metadata = Metadata::new(None, infos.collect()).map_err(|e| failed(e.to_string()))?;
    let mut header = serde_json::to_vec(&metadata).map_err(|e| failed(e.to_string()))?;
    header.resize(header.len().next_multiple_of(8), b' ');
    let mut file = HashingFile::create(path)?;
    file.write(&(header.len() as u64).to_le_bytes())?;
    file.write(&header)?;
    for (.., bytes) in &stored {
        file.write(bytes)?;
    }
    Ok(file.finish()?)
}

/// Copies those of `names` that exist in `src` into `out` (as new writable files, not
/// keeping the sources' permissions); returns the copied names.
fn create_dir(path: &PathBuf) -> Result<(), ArtifactError> {
    std::fs::create_dir_all(path).map_err(|source| ArtifactError::Io {
        path: path.clone(),
        source,
    })
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ArtifactError> {
    std::fs::write(path, bytes).map_err(|source| ArtifactError::Io {
        path: path.to_path_buf(),
        source,
    })
}
