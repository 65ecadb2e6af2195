//! Errors of packed-function registration and calls.

use crate::dtype::UnknownDType;
use crate::kv_cache::{KvBatchError, KvCacheError};
use crate::tensor::TensorError;

/// A packed-function lookup or call that failed; every variant names the function.
#[derive(Debug, thiserror::Error)]
pub enum BuiltinError {
    /// No function registered under this name.
    #[error("unknown packed function `{name}`")]
    Unknown {
        /// The name looked up.
        name: String,
    },
    /// A second registration under a taken name.
    #[error("packed function `{name}` is already registered")]
    Duplicate {
        /// The taken name.
        name: String,
    },
    /// A call with the wrong number of arguments.
    #[error("`{func}` takes {expected} argument(s) {signature}, got {got}")]
    ArgCount {
        /// The function.
        func: String,
        /// Its printed signature.
        signature: String,
        /// Parameters declared.
        expected: usize,
        /// Arguments given.
        got: usize,
    },
    /// An argument of the wrong type.
    #[error("`{func}` argument {index} (`{param}`): expected {expected}, got {got}")]
    ArgType {
        /// The function.
        func: String,
        /// The argument's position.
        index: usize,
        /// The parameter's name.
        param: String,
        /// What the parameter accepts.
        expected: String,
        /// What was given.
        got: String,
    },
    /// The function ran and failed.
    #[error("`{func}` failed: {source}")]
    Failed {
        /// The function.
        func: String,
        /// Why.
        #[source]
        source: BuiltinFailure,
    },
}

/// Why a packed function's body failed.
#[derive(Debug, thiserror::Error)]
pub enum BuiltinFailure {
    /// A KV cache operation failed.
    #[error(transparent)]
    KvCache(#[from] KvCacheError),
    /// A batch of KV caches could not be appended to or attended over.
    #[error(transparent)]
    KvBatch(#[from] KvBatchError),
    /// A tensor operation failed.
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// A backend that runs graphs off the CPU failed.
    #[error(transparent)]
    Offload(#[from] OffloadFailure),
    /// A dtype name that does not exist.
    #[error(transparent)]
    DType(#[from] UnknownDType),
    /// An argument of the right type but an invalid value.
    #[error("argument {index} (`{param}`) = {value}: {reason}")]
    InvalidArgument {
        /// The argument's position.
        index: usize,
        /// The parameter's name.
        param: String,
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Why a backend that runs graphs off the CPU (an accelerator's, registered as builtins)
/// failed: its own error, shown as it is (its message and causes).
#[derive(Debug)]
pub struct OffloadFailure {
    /// The backend's error.
    pub error: Box<dyn std::error::Error + Send + Sync>,
}

impl OffloadFailure {
    /// A failure of `error`.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        OffloadFailure {
            error: Box::new(error),
        }
    }
}

impl std::fmt::Display for OffloadFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for OffloadFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}
