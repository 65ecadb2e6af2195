//! `load_artifact`: an artifact folder in, a model ready to run out (the runtime's
//! loader, plus the compiler's checks of what it asks for).

use super::recorded::check_kv_dtype;
use crate::model::{LoadError, LoadedModel};
use oxrelax_models::{KvDtype, ModelConfig, ModelError};
use oxrelax_runtime::artifact::{Artifact, Manifest};
use std::path::Path;

/// Loads the artifact in `dir` with the runtime ([`Artifact::open`], every check
/// included), after checking that its KV cache stores `kv_dtype` when given.
pub fn load_artifact(dir: &Path, kv_dtype: Option<KvDtype>) -> Result<LoadedModel, LoadError> {
    check_kv_dtype(
        &Manifest::read(dir).map_err(super::ArtifactError::from)?,
        dir,
        kv_dtype,
    )?;
    let artifact = Artifact::open(dir).map_err(super::ArtifactError::from)?;
    let manifest = artifact.manifest();
    let config =
        ModelConfig::from_json(&manifest.model_config.to_string()).map_err(ModelError::from)?;
    let (context_window, prefill_chunk) = (manifest.context_window, manifest.prefill_chunk);
    let (vm, weights) = artifact.into_parts();
    Ok(LoadedModel {
        dir: dir.to_path_buf(),
        config,
        vm,
        weights,
        context_window,
        prefill_chunk,
    })
}
