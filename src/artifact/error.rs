//! Why an artifact could not be written or loaded.

use std::path::PathBuf;

/// Why an artifact could not be written or loaded.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// `oxrelax-model.json` is not valid JSON of the expected shape.
    #[error("{path}: malformed manifest: {source}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What went wrong.
        source: serde_json::Error,
    },
    /// The artifact was written by another version of the format.
    #[error("{path}: artifact format version {found}, this oxrelax reads version {expected} (recompile the model with `oxrelax compile`)")]
    FormatVersion {
        /// The manifest file.
        path: PathBuf,
        /// The version in the manifest.
        found: u32,
        /// The version this build reads.
        expected: u32,
    },
    /// The artifact was compiled for another target.
    #[error("{path}: the artifact was compiled for target `{artifact}`, but this host is `{host}` (recompile it on or for this target)")]
    WrongTarget {
        /// The manifest file.
        path: PathBuf,
        /// The artifact's target triple.
        artifact: String,
        /// The host's target triple.
        host: String,
    },
    /// A file the manifest lists is missing or was modified.
    #[error("{path}: SHA-256 mismatch (the file was modified or corrupted since compilation): expected {expected}, got {found}")]
    HashMismatch {
        /// The file.
        path: PathBuf,
        /// The hash in the manifest.
        expected: String,
        /// The hash of the file on disk.
        found: String,
    },
    /// A file the artifact needs is not listed in its manifest.
    #[error("{manifest}: the manifest lists no hash for `{file}`")]
    Unlisted {
        /// The manifest file.
        manifest: PathBuf,
        /// The artifact-relative file name.
        file: String,
    },
    /// `module.txt` does not parse.
    #[error("{path}: {source}")]
    Module {
        /// The module file.
        path: PathBuf,
        /// The parse error.
        source: oxrelax_dsl::text::ParseError,
    },
    /// `vm.json` is malformed or invalid.
    #[error("{path}: {source}")]
    Executable {
        /// The executable file.
        path: PathBuf,
        /// What went wrong.
        source: oxrelax_runtime::vm::ExecError,
    },
    /// Writing the converted weights failed.
    #[error("{path}: cannot write weights: {reason}")]
    WriteWeights {
        /// The weights file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The manifest names a KV cache dtype this runtime does not load.
    #[error("{}: kv_dtype {value:?} is not one of f32, f16, q8", path.display())]
    KvDtype {
        /// The manifest.
        path: PathBuf,
        /// The dtype it names.
        value: String,
    },
    /// A KV cache dtype was asked for an artifact compiled with another.
    #[error("{}: the artifact stores its KV cache as {compiled}, not {requested} (the KV cache dtype is compiled in: drop --kv-dtype, or compile the Hugging Face folder with --kv-dtype {requested})", path.display())]
    KvDtypeMismatch {
        /// The manifest.
        path: PathBuf,
        /// The dtype the artifact was compiled with.
        compiled: oxrelax_models::KvDtype,
        /// The dtype asked for.
        requested: oxrelax_models::KvDtype,
    },
    /// The manifest names a weight quantization scheme this build does not know.
    #[error("{}: quantization {value:?} is not a known scheme", path.display())]
    Quantization {
        /// The manifest.
        path: PathBuf,
        /// The scheme it names.
        value: String,
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
    /// The output folder holds something other than an artifact.
    #[error(
        "{}: exists and is not an artifact or an empty folder; not writing over it",
        path.display()
    )]
    Destination {
        /// The folder.
        path: PathBuf,
    },
    /// The kernels could not be compiled into an object file or linked.
    #[error("{}: {reason}", path.display())]
    Link {
        /// The object file or library being written.
        path: PathBuf,
        /// What went wrong.
        reason: String,
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
    /// The kernel library could not be opened, or lacks a kernel the bytecode calls.
    #[error(transparent)]
    Kernels(#[from] oxrelax_runtime::abi::SharedLibraryError),
}
