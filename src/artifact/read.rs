//! `load_artifact`: an artifact folder in, a model ready to run out (the runtime's
//! loader, plus the compiler's checks of what it asks for).

use super::recorded::{check_kv_dtype, recorded_config};
use crate::memory::manifest_estimate;
use crate::model::{LoadError, LoadedModel};
use oxrelax_models::{KvDtype, ModelError};
use oxrelax_runtime::artifact::{Artifact, GraphBackend, Manifest};
use std::path::Path;

/// Opens the artifact in `dir` with the runtime ([`Artifact::open`], every check
/// included), after checking that its KV cache stores `kv_dtype` when given (a cheap
/// check, made before the library and weights are loaded).
pub fn open_artifact(dir: &Path, kv_dtype: Option<KvDtype>) -> Result<Artifact, LoadError> {
    open_artifact_with(dir, kv_dtype, None)
}

/// [`open_artifact`] with its NPU graphs (which it then must have) run by `backend`.
pub fn open_artifact_with(
    dir: &Path,
    kv_dtype: Option<KvDtype>,
    backend: Option<&dyn GraphBackend>,
) -> Result<Artifact, LoadError> {
    check_kv_dtype(&Manifest::read(dir)?, dir, kv_dtype)?;
    Ok(Artifact::open_with(dir, backend)?)
}

/// Loads the artifact in `dir` ([`open_artifact`]) as a model in this process.
pub fn load_artifact(dir: &Path, kv_dtype: Option<KvDtype>) -> Result<LoadedModel, LoadError> {
    let artifact = open_artifact(dir, kv_dtype)?;
    let manifest = artifact.manifest();
    let config = recorded_config(manifest, dir).map_err(ModelError::from)?;
    let (context_window, prefill_chunk) = (manifest.context_window, manifest.prefill_chunk);
    let memory = manifest_estimate(dir, manifest, artifact.executable())?;
    let (vm, weights) = artifact.into_parts();
    Ok(LoadedModel {
        dir: dir.to_path_buf(),
        config,
        vm,
        weights,
        context_window,
        prefill_chunk,
        memory,
    })
}
