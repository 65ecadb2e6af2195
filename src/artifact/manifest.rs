//! `oxrelax-model.json`: what an artifact holds and what it was compiled for.

use super::error::ArtifactError;
use crate::quantization::Quantization;
use oxrelax_dsl::IRModule;
use oxrelax_models::KvDtype;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The artifact format this build writes and reads.
pub const FORMAT_VERSION: u32 = 2;
/// The manifest's file name inside an artifact folder.
pub const MANIFEST_FILE: &str = "oxrelax-model.json";
/// The executable (bytecode and memory plan).
pub const VM_FILE: &str = "vm.json";
/// The compiled module's text form (its primitive functions are JIT-compiled at load).
pub const MODULE_FILE: &str = "module.txt";
/// The converted weights.
pub const PARAMS_FILE: &str = "params/model.safetensors";
/// How the kernels are shipped: compiled from `module.txt` for the loading host.
pub const KERNELS_JIT: &str = "jit-at-load";

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
    /// The weight quantization scheme (`q0f32`, `q0f16`, `q8f32`; see
    /// [`Quantization`]).
    pub quantization: String,
    /// How the KV cache stores K and V (`f32`, `f16` or `q8`); a manifest written before
    /// it was recorded has none, which means `f32`.
    #[serde(default = "f32_kv_dtype")]
    pub kv_dtype: String,
    /// The tokenizer files copied from the model folder.
    pub tokenizer_files: Vec<String>,
    /// What the artifact was compiled for.
    pub target: Target,
    /// SHA-256 (hex) of every other file, by artifact-relative path.
    pub files: BTreeMap<String, String>,
}

/// The KV cache dtype of a manifest that records none.
fn f32_kv_dtype() -> String {
    KvDtype::F32.name().to_string()
}

/// The target an artifact was compiled for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// The target triple (`x86_64-unknown-linux-gnu`).
    pub triple: String,
    /// The CPU features of the compiling host. With [`KERNELS_JIT`] the kernels are
    /// compiled for the loading host's features, so these are informational.
    pub cpu_features: Vec<String>,
    /// How the kernels are shipped ([`KERNELS_JIT`]).
    pub kernels: String,
}

/// An exported function's parameters and result, as struct info text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionSignature {
    /// `(name, struct info)` of each parameter, in order.
    pub params: Vec<(String, String)>,
    /// The result's struct info.
    pub ret: String,
}

impl Target {
    /// The host: its triple and the CPU features detected at run time.
    pub fn host() -> Target {
        Target {
            triple: target_lexicon::HOST.to_string(),
            cpu_features: host_cpu_features(),
            kernels: KERNELS_JIT.to_string(),
        }
    }
}

/// The vector features of the host CPU that the kernels can use.
fn host_cpu_features() -> Vec<String> {
    #[cfg(target_arch = "x86_64")]
    let detected = [
        ("sse4.2", std::arch::is_x86_feature_detected!("sse4.2")),
        ("avx", std::arch::is_x86_feature_detected!("avx")),
        ("avx2", std::arch::is_x86_feature_detected!("avx2")),
        ("fma", std::arch::is_x86_feature_detected!("fma")),
        ("f16c", std::arch::is_x86_feature_detected!("f16c")),
        ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
    ];
    #[cfg(target_arch = "aarch64")]
    let detected = [
        ("neon", std::arch::is_aarch64_feature_detected!("neon")),
        (
            "dotprod",
            std::arch::is_aarch64_feature_detected!("dotprod"),
        ),
    ];
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let detected: [(&str, bool); 0] = [];
    detected
        .into_iter()
        .filter(|(_, on)| *on)
        .map(|(name, _)| name.to_string())
        .collect()
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

impl Manifest {
    /// Reads the manifest of the artifact in `dir` (no checks beyond its JSON shape).
    pub fn read(dir: &Path) -> Result<Manifest, ArtifactError> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| ArtifactError::Io {
            path: path.clone(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| ArtifactError::Manifest { path, source })
    }

    /// The weight quantization scheme (`quantization`) of the artifact in `dir`.
    pub fn quantization(&self, dir: &Path) -> Result<Quantization, ArtifactError> {
        Quantization::from_name(&self.quantization).ok_or_else(|| ArtifactError::Quantization {
            path: dir.join(MANIFEST_FILE),
            value: self.quantization.clone(),
        })
    }

    /// The element type the KV cache of the artifact in `dir` stores (`kv_dtype`).
    pub fn kv_dtype(&self, dir: &Path) -> Result<KvDtype, ArtifactError> {
        self.kv_dtype.parse().map_err(|_| ArtifactError::KvDtype {
            path: dir.join(MANIFEST_FILE),
            value: self.kv_dtype.clone(),
        })
    }

    /// Checks that the artifact in `dir` stores its KV cache as `requested`, when given
    /// (its KV cache dtype is compiled in: another cannot be chosen at load).
    pub fn check_kv_dtype(
        &self,
        dir: &Path,
        requested: Option<KvDtype>,
    ) -> Result<(), ArtifactError> {
        let compiled = self.kv_dtype(dir)?;
        match requested {
            Some(requested) if requested != compiled => Err(ArtifactError::KvDtypeMismatch {
                path: dir.join(MANIFEST_FILE),
                compiled,
                requested,
            }),
            _ => Ok(()),
        }
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

    /// Checks the format version and that the artifact targets `host`.
    pub fn check_compatible(&self, dir: &Path, host: &Target) -> Result<(), ArtifactError> {
        let path = dir.join(MANIFEST_FILE);
        if self.format_version != FORMAT_VERSION {
            return Err(ArtifactError::FormatVersion {
                path,
                found: self.format_version,
                expected: FORMAT_VERSION,
            });
        }
        if self.target.triple != host.triple {
            return Err(ArtifactError::WrongTarget {
                path,
                artifact: self.target.triple.clone(),
                host: host.triple.clone(),
            });
        }
        Ok(())
    }

    /// Checks that every listed file has its recorded hash and that `required` files
    /// are listed.
    pub fn check_files(&self, dir: &Path, required: &[&str]) -> Result<(), ArtifactError> {
        if let Some(file) = required.iter().find(|f| !self.files.contains_key(**f)) {
            return Err(ArtifactError::Unlisted {
                manifest: dir.join(MANIFEST_FILE),
                file: file.to_string(),
            });
        }
        self.files.iter().try_for_each(|(file, expected)| {
            let path = dir.join(file);
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
}
