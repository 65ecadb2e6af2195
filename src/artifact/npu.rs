//! The NPU part of an artifact (`compile --npu qnn`): its graphs compiled, bound for the
//! compile-time weight transforms, and written to `npu/` with a manifest record
//! ([`NpuCompile`]'s [`GraphCompile`]).

use super::write::{CompileOptions, CompiledGraphs, GraphCompile};
use crate::model::{LoadError, LoadOptions, Quantization};
use crate::npu::compile::{npu_parts, NpuCompile, NpuParts};
use crate::npu::load::NpuError;
use crate::npu::qnn::emit::write_npu_dir;
use crate::npu::QNN_HTP;
use oxrelax_dsl::IRModule;
use oxrelax_runtime::artifact::{NpuRecord, NPU_DIR};
use oxrelax_runtime::qnn::bind::{register_npu_graphs, SimRunner};
use oxrelax_runtime::qnn::htp::stored::binary_file;
use oxrelax_runtime::qnn::sim::{SimContext, SimMode};
use oxrelax_runtime::Registry;
use std::path::Path;
use std::sync::Arc;

/// A weight scheme was asked for the CPU part of an NPU artifact.
#[derive(Debug, thiserror::Error)]
#[error("--npu runs the projections on the NPU with its own recipe and keeps f32 weights on the CPU: drop --quant {scheme} (or use --npu-recipe)")]
struct NpuScheme {
    /// The scheme asked for.
    scheme: String,
}

impl GraphCompile for NpuCompile {
    /// f32 (the NPU's recipe quantizes what it runs); another scheme asked for is an
    /// error.
    fn scheme(&self, asked: Quantization) -> Result<Quantization, LoadError> {
        match asked {
            Quantization::Auto | Quantization::Q0f32 => Ok(Quantization::Q0f32),
            other => Err(LoadError::Offload(Box::new(NpuScheme {
                scheme: other.name().to_string(),
            }))),
        }
    }

    fn prefill_chunk(&self) -> i64 {
        self.chunk
    }

    fn compile(
        &self,
        src: &Path,
        options: &CompileOptions,
    ) -> Result<Box<dyn CompiledGraphs>, LoadError> {
        Ok(Box::new(CompiledNpu {
            parts: compile_npu_part(src, options, self)?,
            spec: self.clone(),
        }))
    }
}

/// The NPU part of a model, and how it was asked for.
struct CompiledNpu {
    parts: NpuParts,
    spec: NpuCompile,
}

impl CompiledGraphs for CompiledNpu {
    fn module(&self) -> IRModule {
        self.parts.module.clone()
    }

    fn builtins(&self) -> Result<Registry, LoadError> {
        npu_builtins(&self.parts)
    }

    fn write(&self, out: &Path) -> Result<NpuRecord, LoadError> {
        write_npu_part(out, &self.parts, &self.spec)
    }
}

/// The NPU part of the model in `src`.
fn compile_npu_part(
    src: &Path,
    options: &CompileOptions,
    npu: &NpuCompile,
) -> Result<NpuParts, LoadError> {
    let load = LoadOptions {
        max_context: options.max_context,
        kv_dtype: options.kv_dtype,
        ..LoadOptions::default()
    };
    let variants: Vec<String> = npu.chunk_variants.iter().map(i64::to_string).collect();
    let variants = if variants.is_empty() {
        "0".into()
    } else {
        variants.join(",")
    };
    let command = format!(
        "oxrelax compile {} --npu qnn --soc {} --chunk {} --chunk-variants {variants} --npu-recipe {}",
        src.display(),
        npu.socs().iter().map(|soc| soc.name).collect::<Vec<_>>().join(","),
        npu.chunk,
        npu.recipe.name()
    );
    Ok(npu_parts(src, &load, npu, &command)?)
}

/// The runtime's builtins and the NPU graphs on the host reference backend (what the
/// weight transforms run with; they never call the graphs).
fn npu_builtins(parts: &NpuParts) -> Result<Registry, LoadError> {
    let npu = |e: Box<dyn std::error::Error + Send + Sync>| {
        LoadError::from(oxrelax_runtime::artifact::ArtifactError::Npu {
            path: NPU_DIR.into(),
            source: e,
        })
    };
    let sim = SimContext::from_parts(
        parts.graphs.net.clone(),
        parts.graphs.quantized.statics.clone(),
    )
    .map_err(|e| npu(Box::new(e)))?;
    let runner = Arc::new(SimRunner {
        sim,
        mode: SimMode::Spec,
    });
    let mut builtins = Registry::with_builtins();
    register_npu_graphs(&mut builtins, runner, None).map_err(|e| npu(Box::new(e)))?;
    Ok(builtins)
}

/// Writes `parts`' graphs into the artifact folder `out` and returns their manifest
/// record.
fn write_npu_part(out: &Path, parts: &NpuParts, npu: &NpuCompile) -> Result<NpuRecord, LoadError> {
    let written = write_npu_dir(
        &out.join(NPU_DIR),
        &parts.graphs.net,
        &parts.graphs.quantized,
        &npu.socs(),
        npu.qnn_lib.as_deref(),
    )
    .map_err(NpuError::from)?;
    Ok(NpuRecord {
        backend: QNN_HTP.name.into(),
        soc: npu.soc.name.into(),
        chunk: npu.chunk,
        chunk_variants: npu.chunk_variants.clone(),
        recipe: parts.graphs.quantized.recipe.name.into(),
        recipe_agreement: (parts.graphs.agreement.iter())
            .map(|(name, share)| (name.to_string(), *share))
            .collect(),
        context_binaries: (npu.socs().iter())
            .filter(|soc| written.contains(&binary_file(soc.name)))
            .map(|soc| {
                (
                    soc.name.to_string(),
                    format!("{NPU_DIR}/{}", binary_file(soc.name)),
                )
            })
            .collect(),
        files: written.iter().map(|f| format!("{NPU_DIR}/{f}")).collect(),
    })
}
