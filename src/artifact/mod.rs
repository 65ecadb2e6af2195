//! Compiled model artifacts: a folder holding everything needed to run a model without
//! its Hugging Face sources — `oxrelax-model.json` (the manifest: format version, model
//! config, exported signatures, context window, prefill chunk, tokenizer files, target
//! triple and CPU features, and SHA-256 of every file), `vm.json` (bytecode and memory
//! plan), the kernels compiled ahead of time for the target (`kernels.so` or
//! `kernels.dylib`), `module.txt` (the compiled module, a readable record of what the
//! kernels are), `params/model.safetensors` (the transformed weights) and the tokenizer
//! files. Loading checks the format version, the target and its features and the hashes
//! before anything else, then opens the kernel library (no compiler involved).

mod error;
mod hash;
mod ir;
mod kernels;
mod manifest;
mod read;
#[cfg(test)]
mod tests;
mod write;

pub use error::ArtifactError;
pub use hash::sha256_file;
pub use ir::{extract_functions, modules_after_each_pass, source_module};
pub use kernels::{write_kernels, KernelTarget, KERNELS_AOT};
pub use manifest::{
    exported_signatures, FunctionSignature, Manifest, Target, FORMAT_VERSION, MANIFEST_FILE,
    MODULE_FILE, PARAMS_FILE, VM_FILE,
};
pub use read::{is_artifact, load_artifact, verify_artifact};
pub use write::{
    compile_artifact, CompileOptions, CompileStep, GENERATION_CONFIG, TOKENIZER_FILES,
};
