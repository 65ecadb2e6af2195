//! Compiled model artifacts, written by the compiler: [`compile_artifact`] turns a
//! Hugging Face model folder into an artifact folder (the format, its checks and loading
//! without a compiler are the runtime's: [`oxrelax_runtime::artifact`]), with its kernels
//! compiled ahead of time for a target triple ([`write_kernels`]); [`load_artifact`] loads
//! one for the compiler's commands.

mod destination;
mod error;
mod ir;
mod kernels;
#[cfg(feature = "npu")]
mod npu;
mod read;
mod recorded;
#[cfg(test)]
mod tests;
mod write;

pub use destination::resolve_output;
pub use error::ArtifactError;
pub use ir::{extract_functions, modules_after_each_pass, modules_after_passes_of, source_module};
pub use kernels::{write_kernels, KernelTarget};
pub use oxrelax_runtime::artifact::{
    is_artifact, sha256_file, Manifest, FORMAT_VERSION, KERNELS_AOT, MANIFEST_FILE, PARAMS_FILE,
};
pub use read::{load_artifact, open_artifact, open_artifact_with};
pub use recorded::{
    check_kv_dtype, compiled_target, exported_signatures, recorded_config, recorded_kv_dtype,
    recorded_quantization,
};
pub use write::{
    compile_artifact, staging_dir, CompileOptions, CompileStep, CompiledGraphs, GraphCompile,
};
