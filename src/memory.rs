//! A model's memory estimate ([`MemoryEstimate`]) before anything large is allocated: its
//! weights as the compiled functions take them, its KV cache from the config and context
//! window, its arenas from the static memory plan of its bytecode (but the weight
//! transform's, freed once the weights are loaded).

use crate::artifact::{recorded_config, recorded_kv_dtype};
use crate::model::{compiled_weights, LoadError};
use crate::passes::TRANSFORM_PARAMS;
use oxrelax_dsl::IRModule;
use oxrelax_models::{Exported, KvDtype, ModelConfig, ModelError};
use oxrelax_runtime::artifact::{ArtifactError, Manifest, VM_FILE};
use oxrelax_runtime::memory::{arena_bytes, kv_cache_bytes, tensors_bytes, MemoryEstimate};
use oxrelax_runtime::vm::Executable;
use oxrelax_runtime::{DType, ExpectedTensor, KvFormat};
use std::path::Path;

pub use oxrelax_runtime::memory::{default_limit, parse_size, MemoryError};

/// How the runtime's KV cache stores `kv_dtype`.
fn kv_format(kv_dtype: KvDtype) -> KvFormat {
    match kv_dtype {
        KvDtype::F32 => KvFormat::Plain(DType::F32),
        KvDtype::F16 => KvFormat::Plain(DType::F16),
        KvDtype::Q8 => KvFormat::Q8,
    }
}

/// Bytes of the KV cache of the model `config` describes, holding `context_window`
/// positions stored as `kv_dtype`.
pub fn kv_cache_estimate(config: &ModelConfig, context_window: i64, kv_dtype: KvDtype) -> u64 {
    let size = |value: i64| u64::try_from(value).unwrap_or(0);
    kv_cache_bytes(
        size(config.num_hidden_layers),
        size(config.num_key_value_heads),
        size(config.head_dim),
        size(context_window),
        kv_format(kv_dtype),
    )
}

/// The estimate before compiling: `weights` as the model declares them and the KV cache
/// of the functions `exported`; the arenas are not planned yet.
pub fn declared_estimate(
    config: &ModelConfig,
    exported: &Exported,
    weights: &[ExpectedTensor],
) -> MemoryEstimate {
    MemoryEstimate {
        weights: tensors_bytes(weights),
        kv_cache: kv_cache_estimate(config, exported.context_window, exported.kv_dtype),
        arena: 0,
        kv_pages: 0,
    }
}

/// Bytes of the arenas `executable`'s functions hold once the weights are loaded: all but
/// the weight transform's, retired after it runs.
fn loaded_arena_bytes(executable: &Executable) -> u64 {
    arena_bytes(executable, &[TRANSFORM_PARAMS])
}

/// `declared` (a [`declared_estimate`]) once compiled: with the weights `module`'s
/// functions take (as before when none is weighted) and the arenas `executable` plans.
pub fn compiled_estimate(
    declared: MemoryEstimate,
    module: &IRModule,
    executable: &Executable,
) -> MemoryEstimate {
    MemoryEstimate {
        weights: compiled_weights(module).map_or(declared.weights, |w| tensors_bytes(&w)),
        arena: loaded_arena_bytes(executable),
        ..declared
    }
}

/// The estimate of the artifact in `dir` with `manifest`, whose bytecode is `executable`.
pub fn manifest_estimate(
    dir: &Path,
    manifest: &Manifest,
    executable: &Executable,
) -> Result<MemoryEstimate, LoadError> {
    let config = recorded_config(manifest, dir).map_err(ModelError::from)?;
    let kv_dtype = recorded_kv_dtype(manifest, dir)?;
    Ok(MemoryEstimate {
        weights: tensors_bytes(&manifest.weights),
        kv_cache: kv_cache_estimate(&config, manifest.context_window, kv_dtype),
        arena: loaded_arena_bytes(executable),
        kv_pages: 0,
    })
}

/// [`manifest_estimate`] of an artifact just written to `dir` (its bytecode read back).
pub fn artifact_estimate(dir: &Path, manifest: &Manifest) -> Result<MemoryEstimate, LoadError> {
    let path = dir.join(VM_FILE);
    let executable =
        Executable::load(&path).map_err(|source| ArtifactError::Executable { path, source })?;
    manifest_estimate(dir, manifest, &executable)
}
