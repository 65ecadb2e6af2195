//! Why an artifact could not be read, checked or loaded.

use crate::abi::SharedLibraryError;
use crate::chat::ChatError;
use crate::engine::EngineError;
use crate::vm::{ExecError, VmError};
use crate::weights::WeightError;
use std::path::PathBuf;

/// Why an artifact could not be read, checked or loaded. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// `oxrelax-model.json` is not valid JSON of the expected shape.
    #[error("{}: malformed manifest: {source}", path.display())]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What went wrong.
        source: serde_json::Error,
    },
    /// The artifact was written by another version of the format.
    #[error("{}: artifact format version {found}, this oxrelax reads version {expected} (recompile the model with `oxrelax compile`)", path.display())]
    FormatVersion {
        /// The manifest file.
        path: PathBuf,
        /// The version in the manifest (0 when it records none).
        found: u64,
        /// The version this build reads.
        expected: u32,
    },
    /// The artifact was compiled for another target.
    #[error("{}: the artifact was compiled for target `{artifact}`, but this host is `{host}` (recompile it on or for this target)", path.display())]
    WrongTarget {
        /// The manifest file.
        path: PathBuf,
        /// The artifact's target triple.
        artifact: String,
        /// The host's target triple.
        host: String,
    },
    /// The artifact's kernels use CPU features this machine lacks.
    #[error(
        "{}: the kernels were compiled for {triple} with {missing:?}, which this CPU lacks",
        path.display()
    )]
    MissingFeatures {
        /// The manifest.
        path: PathBuf,
        /// The artifact's triple.
        triple: String,
        /// The features the CPU lacks.
        missing: Vec<String>,
    },
    /// A file the manifest lists was modified.
    #[error("{}: SHA-256 mismatch (the file was modified or corrupted since compilation): expected {expected}, got {found}", path.display())]
    HashMismatch {
        /// The file.
        path: PathBuf,
        /// The hash in the manifest.
        expected: String,
        /// The hash of the file on disk.
        found: String,
    },
    /// A file the artifact needs is not listed in its manifest.
    #[error("{}: the manifest lists no hash for `{file}`", manifest.display())]
    Unlisted {
        /// The manifest file.
        manifest: PathBuf,
        /// The artifact-relative file name.
        file: String,
    },
    /// The manifest names a file outside the artifact (absolute, or with `..`).
    #[error(
        "{}: {file:?} is not a plain relative path inside the artifact",
        manifest.display()
    )]
    BadPath {
        /// The manifest.
        manifest: PathBuf,
        /// The path it names.
        file: String,
    },
    /// A file the manifest lists is missing or not a regular file (a directory, a
    /// symbolic link, a device).
    #[error("{}: not a regular file", path.display())]
    NotAFile {
        /// The file.
        path: PathBuf,
    },
    /// `vm.json` is malformed or invalid.
    #[error("{}: {source}", path.display())]
    Executable {
        /// The executable file.
        path: PathBuf,
        /// What went wrong.
        source: ExecError,
    },
    /// The executable lacks an exported function the manifest records, or takes other
    /// parameters.
    #[error("{}: exported function `{function}`: {reason}", path.display())]
    FunctionMismatch {
        /// The executable (`vm.json`).
        path: PathBuf,
        /// The function.
        function: String,
        /// What differs.
        reason: String,
    },
    /// The model config in the manifest lacks a value the runtime needs, or holds an
    /// impossible one.
    #[error("{}: {key}: {reason}", path.display())]
    Config {
        /// The manifest.
        path: PathBuf,
        /// The key.
        key: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The kernel library could not be opened, or lacks a kernel the bytecode calls.
    #[error(transparent)]
    Kernels(#[from] SharedLibraryError),
    /// The weights file is malformed or does not hold what the manifest records.
    #[error(transparent)]
    Weights(#[from] WeightError),
    /// The VM refused the executable (an unknown builtin, an invalid kernel call).
    #[error("{}: {source}", path.display())]
    Vm {
        /// The executable (`vm.json`).
        path: PathBuf,
        /// What the VM refused.
        source: Box<VmError>,
    },
    /// The tokenizer or generation config could not be read.
    #[error(transparent)]
    Tokenizer(#[from] ChatError),
    /// The engine refused the artifact's sizes.
    #[error(transparent)]
    Engine(#[from] Box<EngineError>),
    /// The artifact's functions call NPU graphs, and no NPU backend was asked for.
    #[error("{}: its prefill and decode call NPU graphs ({soc}, {backend}): load it with an NPU backend (`--npu htp`: Qualcomm's HTP library; `--npu sim`: the host reference backend)", path.display())]
    NeedsNpu {
        /// The artifact folder.
        path: PathBuf,
        /// The SoC the graphs are for.
        soc: String,
        /// Their backend.
        backend: String,
    },
    /// `--npu htp` was asked for an artifact compiled without Qualcomm's library.
    #[error("{}: has no context binary for {soc} (it holds {}: compile it with OXRELAX_QNN_LIB_DIR set and `--soc {soc}`, or run it with `--npu sim`)", path.display(), match stored.is_empty() { true => "none".to_string(), false => stored.join(", ") })]
    NoContextBinary {
        /// The artifact's `npu/` folder.
        path: PathBuf,
        /// The SoC asked for.
        soc: String,
        /// The SoCs it holds context binaries for.
        stored: Vec<String>,
    },
    /// An NPU backend was asked for an artifact without NPU graphs.
    #[error("{}: has no NPU graphs (compile it with `--npu qnn` to run it with `--npu sim`)", path.display())]
    NoNpu {
        /// The artifact folder.
        path: PathBuf,
    },
    /// The NPU graphs could not be loaded or bound.
    #[error("{}: its NPU graphs", path.display())]
    Npu {
        /// The `npu/` folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}
