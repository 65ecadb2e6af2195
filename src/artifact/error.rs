//! Why an artifact could not be written, or failed the compiler's checks when loading.

use oxrelax_models::KvDtype;
use std::path::PathBuf;

/// Why an artifact could not be written, or failed the compiler's checks when loading
/// (the runtime's own checks are [`Runtime`](ArtifactError::Runtime)).
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
    /// A model folder's JSON file (`config.json`) does not parse.
    #[error("{}: malformed JSON: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: serde_json::Error,
    },
    /// Writing the converted weights failed.
    #[error("{}: cannot write weights: {reason}", path.display())]
    WriteWeights {
        /// The weights file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The manifest names a KV cache dtype this build does not know.
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
        compiled: KvDtype,
        /// The dtype asked for.
        requested: KvDtype,
    },
    /// The manifest names a weight quantization scheme this build does not know.
    #[error("{}: quantization {value:?} is not a known scheme", path.display())]
    Quantization {
        /// The manifest.
        path: PathBuf,
        /// The scheme it names.
        value: String,
    },
    /// The output folder cannot take an artifact: it holds something other than an
    /// earlier artifact, or is no folder.
    #[error("{}: {reason}", path.display())]
    Destination {
        /// The folder.
        path: PathBuf,
        /// What is in the way.
        reason: String,
    },
    /// The kernels could not be compiled into an object file or linked.
    #[error("{}: {reason}", path.display())]
    Link {
        /// The object file or library being written.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The artifact format's own errors: reading or writing the manifest, and every
    /// check the runtime makes when it opens an artifact.
    #[error(transparent)]
    Runtime(#[from] oxrelax_runtime::artifact::ArtifactError),
}
