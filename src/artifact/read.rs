//! `load_artifact`: an artifact folder in, a model ready to run out.

use super::error::ArtifactError;
use super::manifest::{Manifest, MODULE_FILE, PARAMS_FILE, VM_FILE};
use crate::model::{compiled_weights, expected_weights, LoadError, LoadedModel};
use oxrelax_models::{causal_lm, KvDtype, ModelConfig, ModelError};
use oxrelax_runtime::abi::SharedKernelLibrary;
use oxrelax_runtime::microkernel::MicrokernelSet;
use oxrelax_runtime::vm::Executable;
use oxrelax_runtime::weights::WeightStore;
use oxrelax_runtime::Value;
use std::path::Path;
use std::sync::Arc;

/// Whether `dir` is an artifact folder (it holds a manifest).
pub fn is_artifact(dir: &Path) -> bool {
    dir.join(super::MANIFEST_FILE).is_file()
}

/// Reads the manifest of the artifact in `dir` and checks it: the format version, the
/// target triple and CPU features (against this host) and the hash of every file.
pub fn verify_artifact(dir: &Path) -> Result<Manifest, ArtifactError> {
    let manifest = Manifest::read(dir)?;
    manifest.check_compatible(dir)?;
    let library = manifest.target.library.as_str();
    manifest.check_files(dir, &[MODULE_FILE, VM_FILE, PARAMS_FILE, library])?;
    Ok(manifest)
}

/// Loads the artifact in `dir`: verifies it ([`verify_artifact`]) and that its KV cache
/// stores `kv_dtype` when given, parses its module, opens its kernel library, loads the
/// executable into a VM with the library's kernels, and loads the weights.
pub fn load_artifact(dir: &Path, kv_dtype: Option<KvDtype>) -> Result<LoadedModel, LoadError> {
    let manifest = verify_artifact(dir)?;
    manifest.check_kv_dtype(dir, kv_dtype)?;
    let config =
        ModelConfig::from_json(&manifest.model_config.to_string()).map_err(ModelError::from)?;
    let model = causal_lm(&config, manifest.quantization(dir)?.storage_dtype())?;
    let module_path = dir.join(MODULE_FILE);
    let text = std::fs::read_to_string(&module_path).map_err(|source| ArtifactError::Io {
        path: module_path.clone(),
        source,
    })?;
    let module =
        oxrelax_dsl::text::parse_module(&text).map_err(|source| ArtifactError::Module {
            path: module_path,
            source,
        })?;
    let vm_path = dir.join(VM_FILE);
    let executable = Executable::load(&vm_path).map_err(|source| ArtifactError::Executable {
        path: vm_path,
        source,
    })?;
    manifest.check_functions(dir, &executable)?;
    let library_path = dir.join(&manifest.target.library);
    // SAFETY: the library's hash is the one the compiler recorded (`verify_artifact`), so
    // it is the kernel library the compiler wrote.
    let library = unsafe { SharedKernelLibrary::open(&library_path, &executable.kernels) }
        .map_err(ArtifactError::from)?;
    let mut built =
        crate::build::load_with(module, executable, Arc::new(library)).map_err(Box::new)?;
    // The microkernels the artifact's features allow (its `--target-features`), not
    // necessarily the best this CPU has.
    let features: Vec<&str> = manifest
        .target
        .cpu_features
        .iter()
        .map(String::as_str)
        .collect();
    built.vm = built
        .vm
        .with_microkernels(MicrokernelSet::for_features(&features));
    let store = WeightStore::open(&dir.join(PARAMS_FILE))?;
    let expected = compiled_weights(&built.module).unwrap_or_else(|| expected_weights(&model));
    let weights = store.load_expected(&expected)?;
    Ok(LoadedModel {
        dir: dir.to_path_buf(),
        config,
        built,
        weights: weights.into_iter().map(Value::Tensor).collect(),
        context_window: manifest.context_window,
        prefill_chunk: manifest.prefill_chunk,
    })
}
