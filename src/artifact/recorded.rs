//! What the compiler records in a manifest, and reads back from one: the exported
//! signatures, the target, the quantization scheme and the KV cache dtype; and the model
//! config it copies.

use super::error::ArtifactError;
use super::kernels::KernelTarget;
use crate::quantization::Quantization;
use oxrelax_dsl::IRModule;
use oxrelax_models::{ConfigError, KvDtype, ModelConfig};
use oxrelax_runtime::artifact::{FunctionSignature, Manifest, Target, KERNELS_AOT, MANIFEST_FILE};
use std::collections::BTreeMap;
use std::path::Path;

/// The model config `manifest` (of the artifact in `dir`) records, checked; an error in
/// it names the manifest.
pub fn recorded_config(manifest: &Manifest, dir: &Path) -> Result<ModelConfig, ConfigError> {
    ModelConfig::from_json(&manifest.model_config.to_string()).map_err(|e| ConfigError::InFile {
        path: dir.join(MANIFEST_FILE),
        source: Box::new(e),
    })
}

/// The target `kernels` were compiled for, with its library `library`.
pub fn compiled_target(kernels: &KernelTarget, library: String) -> Target {
    Target {
        triple: kernels.target.triple.clone(),
        cpu_features: kernels.target.features.iter().cloned().collect(),
        kernels: KERNELS_AOT.to_string(),
        library,
    }
}

/// The signatures of `module`'s exported graph functions.
pub fn exported_signatures(module: &IRModule) -> BTreeMap<String, FunctionSignature> {
    module
        .functions
        .iter()
        .filter(|(_, f)| f.exported)
        .map(|(name, f)| {
            let params = f
                .params
                .iter()
                .map(|p| (p.name.clone(), p.sinfo.to_string()))
                .collect();
            let ret = f.ret_sinfo().to_string();
            (name.clone(), FunctionSignature { params, ret })
        })
        .collect()
}

/// The weight quantization scheme the manifest of the artifact in `dir` records.
pub fn recorded_quantization(
    manifest: &Manifest,
    dir: &Path,
) -> Result<Quantization, ArtifactError> {
    Quantization::from_name(&manifest.quantization).ok_or_else(|| ArtifactError::Quantization {
        path: dir.join(MANIFEST_FILE),
        value: manifest.quantization.clone(),
    })
}

/// The KV cache dtype the manifest of the artifact in `dir` records.
pub fn recorded_kv_dtype(manifest: &Manifest, dir: &Path) -> Result<KvDtype, ArtifactError> {
    manifest
        .kv_dtype
        .parse()
        .map_err(|_| ArtifactError::KvDtype {
            path: dir.join(MANIFEST_FILE),
            value: manifest.kv_dtype.clone(),
        })
}

/// Checks that the artifact in `dir` stores its KV cache as `requested`, when given (its
/// KV cache dtype is compiled in: another cannot be chosen at load).
pub fn check_kv_dtype(
    manifest: &Manifest,
    dir: &Path,
    requested: Option<KvDtype>,
) -> Result<(), ArtifactError> {
    let compiled = recorded_kv_dtype(manifest, dir)?;
    match requested {
        Some(requested) if requested != compiled => Err(ArtifactError::KvDtypeMismatch {
            path: dir.join(MANIFEST_FILE),
            compiled,
            requested,
        }),
        _ => Ok(()),
    }
}
