//! `oxrelax-model.json`: what an artifact holds, what it was compiled for, and the checks
//! made before anything of it is used.

use super::error::ArtifactError;
use crate::vm::Executable;
use crate::weights::ExpectedTensor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The artifact format this build writes and reads (4: kernels in a shared library, the
/// weights' names, shapes and dtypes recorded; 5: the 4-bit decode GEMV's calls span 256
/// columns, which a runtime reading 4 would cut to 64; 6: an attention call takes the
/// query rows sharing a kv head, a scalar older kernels do not pass).
pub const FORMAT_VERSION: u32 = 6;
/// The manifest's file name inside an artifact folder.
pub const MANIFEST_FILE: &str = "oxrelax-model.json";
/// The executable (bytecode and memory plan).
pub const VM_FILE: &str = "vm.json";
/// The compiled module's text form: a readable record of what the kernels were compiled
/// from (never compiled at load).
pub const MODULE_FILE: &str = "module.txt";
/// The converted weights.
pub const PARAMS_FILE: &str = "params/model.safetensors";
/// The NPU graphs' folder (what the `qnn` module reads, behind the `npu` feature).
pub const NPU_DIR: &str = "npu";
/// How [`Target::kernels`] records kernels compiled ahead of time into a shared library.
pub const KERNELS_AOT: &str = "aot";

/// An artifact's manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Must equal [`FORMAT_VERSION`].
    pub format_version: u32,
    /// The model's `config.json`, as given.
    pub model_config: serde_json::Value,
    /// The exported functions' signatures by name.
    pub functions: BTreeMap<String, FunctionSignature>,
    /// Positions the KV cache holds.
    pub context_window: i64,
    /// Tokens per `prefill` call at most.
    pub prefill_chunk: i64,
    /// The weight quantization scheme (`q0f32`, `q4f16_1`, `w4a8`, ...), as the compiler
    /// names it.
    pub quantization: String,
    /// How the KV cache stores K and V (`f32`, `f16` or `q8`); a manifest written before
    /// it was recorded has none, which means `f32`.
    #[serde(default = "f32_kv_dtype")]
    pub kv_dtype: String,
    /// Sequences per `batch_decode` call at most; 0 (and a manifest written before it
    /// was recorded): the artifact exports no `batch_decode`.
    #[serde(default)]
    pub max_batch: i64,
    /// The weights every weighted function takes after its inputs, in order, as
    /// `params/model.safetensors` stores them (packed at compile time).
    pub weights: Vec<ExpectedTensor>,
    /// The tokenizer files copied from the model folder.
    pub tokenizer_files: Vec<String>,
    /// What the artifact was compiled for.
    pub target: Target,
    /// SHA-256 (hex) of every other file, by artifact-relative path.
    pub files: BTreeMap<String, String>,
    /// The NPU graphs `prefill`, `prefill_all` and `decode` call, when the artifact was
    /// compiled with an NPU partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub npu: Option<NpuRecord>,
}

/// What an artifact's `npu/` folder holds: which NPU, and how its graphs were made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NpuRecord {
    /// The backend (`qnn-htp`).
    pub backend: String,
    /// The SoC the graphs are for (`SM8650`).
    pub soc: String,
    /// Tokens per prefill graph call.
    pub chunk: i64,
    /// The fewer tokens per call the prefill graphs have variants for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunk_variants: Vec<i64>,
    /// The quantization recipe (`w4a16`).
    pub recipe: String,
    /// When the recipe was chosen automatically: each recipe tried and the share of the
    /// calibration text's positions where its graphs predicted the float graphs' next
    /// token.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub recipe_agreement: BTreeMap<String, f64>,
    /// The graphs' files, by artifact-relative path (listed in `files` too).
    pub files: Vec<String>,
    /// Each SoC's context binary (artifact-relative; among `files`), when the compiler
    /// had Qualcomm's QNN library to build them: what `--npu htp` runs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub context_binaries: BTreeMap<String, String>,
}

/// The KV cache dtype of a manifest that records none.
fn f32_kv_dtype() -> String {
    "f32".to_string()
}

/// The target an artifact was compiled for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// The target triple (`x86_64-unknown-linux-gnu`).
    pub triple: String,
    /// The CPU features the kernels and schedules use: loading needs a CPU with all of
    /// them.
    pub cpu_features: Vec<String>,
    /// How the kernels are shipped ([`KERNELS_AOT`]).
    pub kernels: String,
    /// The kernel library's file name in the artifact (`kernels.so`, `kernels.dylib`).
    pub library: String,
}

/// An exported function's parameters and result, as struct info text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionSignature {
    /// `(name, struct info)` of each parameter, in order.
    pub params: Vec<(String, String)>,
    /// The result's struct info.
    pub ret: String,
}

impl Manifest {
    /// Reads the manifest of the artifact in `dir`, checking its format version first.
    pub fn read(dir: &Path) -> Result<Manifest, ArtifactError> {
        let path = dir.join(MANIFEST_FILE);
        let text = crate::files::read_text(&path).map_err(|source| ArtifactError::Io {
            path: path.clone(),
            source,
        })?;
        Manifest::parse(&text, &path)
    }

    /// Parses manifest `text`, checking its format version first; `path` names it in
    /// errors. What [`Manifest::read`] does once it has read the file.
    pub fn parse(text: &str, path: &Path) -> Result<Manifest, ArtifactError> {
        let malformed = |source| ArtifactError::Manifest {
            path: path.to_path_buf(),
            source,
        };
        let json: serde_json::Value = serde_json::from_str(text).map_err(malformed)?;
        // The version first: another version's manifest may lack fields or hold others.
        let found = json["format_version"].as_u64().unwrap_or(0);
        if found != u64::from(FORMAT_VERSION) {
            return Err(ArtifactError::FormatVersion {
                path: path.to_path_buf(),
                found,
                expected: FORMAT_VERSION,
            });
        }
        serde_json::from_value(json).map_err(malformed)
    }

    /// Checks that `executable` (the artifact's `vm.json` in `dir`) has every exported
    /// function the manifest records, taking the recorded parameters in order: an app
    /// calls what the manifest promises.
    pub fn check_functions(
        &self,
        dir: &Path,
        executable: &Executable,
    ) -> Result<(), ArtifactError> {
        let mismatch = |function: &str, reason: String| ArtifactError::FunctionMismatch {
            path: dir.join(VM_FILE),
            function: function.to_string(),
            reason,
        };
        for (name, signature) in &self.functions {
            let function = executable
                .functions
                .get(name)
                .ok_or_else(|| mismatch(name, "the executable has no such function".into()))?;
            let recorded: Vec<&str> = signature.params.iter().map(|(p, _)| p.as_str()).collect();
            if function.params != recorded {
                let reason = format!(
                    "it takes {:?}, the manifest records {recorded:?}",
                    function.params
                );
                return Err(mismatch(name, reason));
            }
        }
        Ok(())
    }

    /// Writes the manifest into the artifact folder `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), ArtifactError> {
        let path = dir.join(MANIFEST_FILE);
        let text =
            serde_json::to_string_pretty(self).map_err(|source| ArtifactError::Manifest {
                path: path.clone(),
                source,
            })?;
        std::fs::write(&path, text).map_err(|source| ArtifactError::Io { path, source })
    }

    /// Checks that the artifact targets this host's triple and that this CPU has every
    /// feature its kernels use.
    pub fn check_compatible(&self, dir: &Path) -> Result<(), ArtifactError> {
        let path = dir.join(MANIFEST_FILE);
        let host = crate::host::host_triple();
        if self.target.triple != host {
            return Err(ArtifactError::WrongTarget {
                path,
                artifact: self.target.triple.clone(),
                host,
            });
        }
        let missing: Vec<String> = self
            .target
            .cpu_features
            .iter()
            .filter(|f| !crate::host::has_feature(f.as_str()))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(ArtifactError::MissingFeatures {
                path,
                triple: self.target.triple.clone(),
                missing,
            });
        }
        Ok(())
    }

    /// Checks that every file the manifest names (`required` among them, which it may
    /// name too) is a plain relative path inside the artifact (no `..`, no absolute
    /// path) of a regular file, that every listed file has its recorded hash, and that
    /// `required` files and the tokenizer files are listed.
    pub fn check_files(&self, dir: &Path, required: &[&str]) -> Result<(), ArtifactError> {
        self.check_listing(dir, required)?;
        self.files.iter().try_for_each(|(file, expected)| {
            let path = dir.join(file);
            let regular = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file());
            if !regular {
                return Err(ArtifactError::NotAFile { path });
            }
            let found = super::hash::sha256_file(&path)?;
            if &found != expected {
                return Err(ArtifactError::HashMismatch {
                    path,
                    expected: expected.clone(),
                    found,
                });
            }
            Ok(())
        })
    }

    /// The checks of [`Manifest::check_files`] that read no file: every file the
    /// manifest names (`required` among them) is a plain relative path, and `required`
    /// files and the tokenizer files are listed. `dir` is the artifact folder, named in
    /// errors.
    pub fn check_listing(&self, dir: &Path, required: &[&str]) -> Result<(), ArtifactError> {
        let manifest = dir.join(MANIFEST_FILE);
        let listed = self.files.keys().chain(&self.tokenizer_files);
        let mut named = listed.map(String::as_str).chain(required.iter().copied());
        if let Some(bad) = named.find(|f| !is_plain_relative(f)) {
            return Err(ArtifactError::BadPath {
                manifest,
                file: bad.to_string(),
            });
        }
        let mut required = required
            .iter()
            .copied()
            .chain(self.tokenizer_files.iter().map(String::as_str));
        if let Some(file) = required.find(|f| !self.files.contains_key(*f)) {
            return Err(ArtifactError::Unlisted {
                manifest,
                file: file.to_string(),
            });
        }
        Ok(())
    }
}

/// Whether `name` is a relative path of plain components (`params/model.safetensors`):
/// no root, no `.` or `..`, nothing empty.
fn is_plain_relative(name: &str) -> bool {
    let path = Path::new(name);
    !name.is_empty()
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}
