//! Codegen errors.

/// Why a primitive function could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    /// The host ISA could not be configured.
    #[error("cannot configure the target ISA: {0}")]
    Isa(String),
    /// The primitive function uses something codegen does not support.
    #[error("cannot compile primitive function `{func}`: {message}")]
    Unsupported {
        /// The primitive function.
        func: String,
        /// What is not supported.
        message: String,
    },
    /// A name in the body is not defined (a buffer or variable).
    #[error("primitive function `{func}` uses undefined {kind} `{name}`")]
    Undefined {
        /// The primitive function.
        func: String,
        /// `buffer` or `variable`.
        kind: &'static str,
        /// The undefined name.
        name: String,
    },
    /// Cranelift rejected the generated function.
    #[error("cranelift failed on `{func}`: {message}")]
    Cranelift {
        /// The primitive function.
        func: String,
        /// Cranelift's message.
        message: String,
    },
}
