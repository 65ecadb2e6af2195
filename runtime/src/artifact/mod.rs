//! Compiled model artifacts, loaded without a compiler: a folder holding
//! `oxrelax-model.json` (the manifest: format version, model config, exported signatures,
//! context window, prefill chunk, the weights' names, shapes and dtypes, tokenizer files,
//! target triple and CPU features, and the SHA-256 of every file), `vm.json` (bytecode and
//! memory plan), the kernels compiled ahead of time for the target (`kernels.so` or
//! `kernels.dylib`), `module.txt` (a readable record of what the kernels were compiled
//! from), `params/model.safetensors` (the weights, packed at compile time) and the
//! tokenizer files.
//!
//! [`Artifact::open`] checks the format version, the target and its CPU features, every
//! path and hash, and the exported functions before it opens the kernel library; the
//! library's record of each kernel's signature must match what the bytecode calls.
//!
//! ```no_run
//! use oxrelax_runtime::artifact::Artifact;
//! use oxrelax_runtime::engine::{GenerateOptions, Step};
//! use oxrelax_runtime::{Sampler, SamplingConfig, ThreadPool};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = Artifact::open("dist/tiny-llama".as_ref())?.into_engine(ThreadPool::global())?;
//! let mut engine = model.engine;
//! let prompt = model.tokenizer.as_ref().unwrap().encode("Once upon a time", true)?;
//! let mut sampler = Sampler::new(SamplingConfig::default());
//! let options = GenerateOptions { max_new_tokens: 32, ..GenerateOptions::default() };
//! let generation = engine.generate(&prompt, options, &mut sampler, |token| {
//!     print!("{} ", token.id);
//!     Ok(Step::Continue)
//! })?;
//! println!("\n{}", generation.stats);
//! # Ok(())
//! # }
//! ```

mod error;
mod hash;
mod manifest;
mod open;
#[cfg(test)]
mod tests;

pub use error::ArtifactError;
pub use hash::{sha256_file, HashingFile};
pub use manifest::{
    FunctionSignature, Manifest, NpuRecord, Target, FORMAT_VERSION, KERNELS_AOT, MANIFEST_FILE,
    MODULE_FILE, NPU_DIR, PARAMS_FILE, VM_FILE,
};
pub use open::{is_artifact, verify_artifact, Artifact, GraphBackend, LoadedEngine};

/// The compiled function that packs a model's weights for its kernels, run once when
/// weights load. An artifact's weights have been through it at compile time, so
/// [`Artifact::open`] retires it (frees its arena) instead of running it.
pub const WEIGHT_TRANSFORM: &str = "transform_params";
