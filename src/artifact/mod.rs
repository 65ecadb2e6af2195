//! Compiled model artifacts: a folder holding everything needed to run a model without
//! its Hugging Face sources — `oxrelax-model.json` (the manifest: format version, model
//! config, exported signatures, context window, prefill chunk, tokenizer files, target
//! and SHA-256 of every file), `vm.json` (bytecode and memory plan), `module.txt` (the
//! compiled module, whose kernels are JIT-compiled at load), `params/model.safetensors`
//! (the weights converted to f32) and the tokenizer files. Loading checks the format
//! version, the target and the hashes before anything else.

mod error;
mod hash;
mod ir;
mod manifest;
mod read;
#[cfg(test)]
mod tests;
mod write;

pub use error::ArtifactError;
pub use hash::sha256_file;
pub use ir::{extract_functions, modules_after_each_pass, source_module};
pub use manifest::{
    exported_signatures, FunctionSignature, Manifest, Target, FORMAT_VERSION, KERNELS_JIT,
    MANIFEST_FILE, MODULE_FILE, PARAMS_FILE, VM_FILE,
};
pub use read::{is_artifact, load_artifact, verify_artifact};
pub use write::{
    compile_artifact, CompileOptions, CompileStep, GENERATION_CONFIG, TOKENIZER_FILES,
};
