//! Errors of opening safetensors files and loading weights from them.

use crate::dtype::DType;
use crate::tensor::TensorError;
use std::path::PathBuf;

/// Why weights could not be opened or loaded. Every variant names the file and, where
/// one is involved, the tensor.
#[derive(Debug, thiserror::Error)]
pub enum WeightError {
    /// A file could not be opened, read or mapped.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS reported.
        source: std::io::Error,
    },
    /// A safetensors file whose header or layout is invalid (truncated, bad JSON,
    /// offsets that do not match the shapes, data that does not cover the file, ...).
    #[error("{}: not a valid safetensors file ({len} bytes): {reason}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The file's length in bytes.
        len: usize,
        /// What is wrong, as the safetensors parser reports it.
        reason: String,
    },
    /// A sharded checkpoint's index (`model.safetensors.index.json`) that cannot be used.
    #[error("{}: invalid safetensors index: {reason}", path.display())]
    Index {
        /// The index file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A folder with neither `model.safetensors` nor `model.safetensors.index.json`.
    #[error("{}: no model.safetensors or model.safetensors.index.json", dir.display())]
    NoWeights {
        /// The folder searched.
        dir: PathBuf,
    },
    /// A tensor stored in two files of one checkpoint.
    #[error("tensor `{tensor}` is stored in both {} and {}", first.display(), second.display())]
    Duplicate {
        /// The tensor.
        tensor: String,
        /// The file seen first.
        first: PathBuf,
        /// The file seen second.
        second: PathBuf,
    },
    /// A tensor the index puts in a shard that does not hold it.
    #[error("{}: the index lists tensor `{tensor}` in this shard, which does not hold it", file.display())]
    NotInShard {
        /// The tensor.
        tensor: String,
        /// The shard.
        file: PathBuf,
    },
    /// A tensor stored with an element type the runtime has no dtype for.
    #[error("{}: tensor `{tensor}` is stored as {stored}, which is not supported", file.display())]
    UnsupportedDtype {
        /// The tensor.
        tensor: String,
        /// The file.
        file: PathBuf,
        /// The stored safetensors dtype.
        stored: String,
    },
    /// A stored dtype that cannot be converted to the one asked for.
    #[error("{}: tensor `{tensor}` is stored as {stored} and cannot be loaded as {wanted}", file.display())]
    Conversion {
        /// The tensor.
        tensor: String,
        /// The file.
        file: PathBuf,
        /// The stored dtype.
        stored: DType,
        /// The dtype asked for.
        wanted: DType,
    },
    /// A stored value outside the range of the dtype asked for.
    #[error("{}: tensor `{tensor}` element {index} is {value}, outside the range of {wanted}", file.display())]
    OutOfRange {
        /// The tensor.
        tensor: String,
        /// The file.
        file: PathBuf,
        /// The element's flat index.
        index: usize,
        /// Its stored value.
        value: f32,
        /// The dtype asked for.
        wanted: DType,
    },
    /// A float weight holding NaN or infinity.
    #[error("{}: tensor `{tensor}` element {index} is {value}: a checkpoint's weights must be finite", file.display())]
    NonFinite {
        /// The tensor.
        tensor: String,
        /// The file.
        file: PathBuf,
        /// The element's flat index.
        index: usize,
        /// Its value.
        value: f32,
    },
    /// A tensor the model needs that the checkpoint does not have.
    #[error("{}: missing tensor `{tensor}` (expected shape {expected:?}){}", source_name.display(), more_note(*more))]
    Missing {
        /// The tensor.
        tensor: String,
        /// The file (or index) searched.
        source_name: PathBuf,
        /// Its expected shape.
        expected: Vec<i64>,
        /// How many other expected tensors are missing too.
        more: usize,
    },
    /// A tensor in the checkpoint that the model has no parameter for.
    #[error("{}: unexpected tensor `{tensor}` with shape {shape:?} (the model has no such parameter){}", file.display(), more_note(*more))]
    Unexpected {
        /// The tensor.
        tensor: String,
        /// The file holding it.
        file: PathBuf,
        /// Its stored shape.
        shape: Vec<i64>,
        /// How many other stored tensors are unexpected too.
        more: usize,
    },
    /// A tensor whose stored shape differs from the model's.
    #[error("{}: tensor `{tensor}` has shape {got:?}, the model expects {expected:?}", file.display())]
    Shape {
        /// The tensor.
        tensor: String,
        /// The file holding it.
        file: PathBuf,
        /// The model's shape.
        expected: Vec<i64>,
        /// The stored shape.
        got: Vec<i64>,
    },
    /// A tensor name that no opened file holds.
    #[error("{}: no tensor `{tensor}`", source_name.display())]
    NotFound {
        /// The tensor.
        tensor: String,
        /// The file (or index) searched.
        source_name: PathBuf,
    },
    /// The runtime tensor could not be made.
    #[error("{}: tensor `{tensor}`: {source}", file.display())]
    Tensor {
        /// The tensor.
        tensor: String,
        /// The file holding it.
        file: PathBuf,
        /// What the tensor layer reported.
        source: TensorError,
    },
    /// A GGUF model file that cannot be read or used.
    #[error(transparent)]
    Gguf(Box<crate::gguf::GgufError>),
}

impl From<crate::gguf::GgufError> for WeightError {
    fn from(error: crate::gguf::GgufError) -> Self {
        WeightError::Gguf(Box::new(error))
    }
}

/// ` (and N more)` when `more > 0`.
fn more_note(more: usize) -> String {
    if more == 0 {
        String::new()
    } else {
        format!(" (and {more} more)")
    }
}
