//! Errors of loading executables and of running functions in the VM.

use crate::packed::BuiltinError;
use crate::tensor::TensorError;
use std::path::PathBuf;

/// An executable that cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The JSON does not describe an executable.
    #[error("malformed executable: {0}")]
    Json(#[from] serde_json::Error),
    /// Written by an incompatible compiler.
    #[error("executable format version {found} is not supported (this runtime reads {expected})")]
    Version {
        /// The file's version.
        found: u32,
        /// The version this runtime reads.
        expected: u32,
    },
    /// Inconsistent contents (an index out of range, a slot outside the arena, ...).
    #[error("invalid executable: function `{func}`: {reason}")]
    Invalid {
        /// The function (or `kernel <name>` for a kernel declaration).
        func: String,
        /// What is wrong.
        reason: String,
    },
}

/// A failure while setting up or running a VM function. Variants name the function.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// The executable is invalid.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// A kernel the executable declares is not in the kernel library.
    #[error("kernel `{name}` is not in the kernel library")]
    MissingKernel {
        /// The kernel's name.
        name: String,
    },
    /// A builtin the function calls is not registered.
    #[error("function `{func}` calls builtin `{name}`, which is not registered")]
    MissingBuiltin {
        /// The calling function.
        func: String,
        /// The builtin's name.
        name: String,
    },
    /// No function of this name.
    #[error("unknown function `{name}` (the executable has: {available})")]
    UnknownFunction {
        /// The name asked for.
        name: String,
        /// The function names, comma-separated.
        available: String,
    },
    /// A call with the wrong number of arguments.
    #[error("function `{func}` takes {expected} argument(s) ({params}), got {got}")]
    ArgCount {
        /// The function.
        func: String,
        /// Parameters it declares.
        expected: usize,
        /// Their names, comma-separated.
        params: String,
        /// Arguments given.
        got: usize,
    },
    /// A value of the wrong kind (e.g. an int where a tensor is needed).
    #[error("function `{func}`: {what} must be {expected}, got {got}")]
    Kind {
        /// The function.
        func: String,
        /// The value (e.g. "argument `ids`", "register %4", "kernel `add` argument 1").
        what: String,
        /// What it must be.
        expected: String,
        /// What it is.
        got: String,
    },
    /// A tensor whose dtype or shape differs from what is expected.
    #[error("function `{func}`: {what} expected {expected}, got {got}: {reason}")]
    ShapeMismatch {
        /// The function.
        func: String,
        /// The tensor (as in [`VmError::Kind`]).
        what: String,
        /// The expected symbolic shape and dtype, e.g. `[1, n] i32`.
        expected: String,
        /// The actual shape and dtype.
        got: String,
        /// Which part differs.
        reason: String,
    },
    /// A dim bound to a value above its upper bound.
    #[error("function `{func}`: {what} binds `{dim}` = {value}, above its upper bound {bound}")]
    DimOutOfBounds {
        /// The function.
        func: String,
        /// The tensor that bound it.
        what: String,
        /// The dim's name.
        dim: String,
        /// The value it got.
        value: i64,
        /// Its upper bound.
        bound: i64,
    },
    /// A dim used before any `MatchShape` bound it.
    #[error("function `{func}`: dim `{dim}` is used by {context} before it is bound")]
    UnboundDim {
        /// The function.
        func: String,
        /// The dim's name.
        dim: String,
        /// Where it was used.
        context: String,
    },
    /// A shape expression that overflows, divides by zero, or gives a negative extent.
    #[error("function `{func}`: {context}: `{expr}` {reason}")]
    ShapeArith {
        /// The function.
        func: String,
        /// Where it was evaluated.
        context: String,
        /// The expression.
        expr: String,
        /// What went wrong.
        reason: String,
    },
    /// A planned tensor larger than its memory-plan slot.
    #[error("function `{func}`: tensor of {needed} bytes does not fit memory-plan slot {slot} ({size} bytes)")]
    SlotTooSmall {
        /// The function.
        func: String,
        /// The slot.
        slot: u32,
        /// Bytes the tensor needs.
        needed: usize,
        /// Bytes the slot has.
        size: u64,
    },
    /// A register read before anything was written to it.
    #[error("function `{func}`: register %{reg} is read before it is written")]
    UninitializedRegister {
        /// The function.
        func: String,
        /// The register.
        reg: u32,
    },
    /// A tuple field that does not exist.
    #[error("function `{func}`: tuple in register %{reg} has {len} fields, no field {index}")]
    TupleIndex {
        /// The function.
        func: String,
        /// The register holding the tuple.
        reg: u32,
        /// Its number of fields.
        len: usize,
        /// The field asked for.
        index: u32,
    },
    /// A kernel returned a nonzero status.
    #[error("function `{func}`: kernel `{kernel}` failed with status {code}")]
    KernelFailed {
        /// The function.
        func: String,
        /// The kernel.
        kernel: String,
        /// Its status.
        code: i32,
    },
    /// A builtin call failed.
    #[error("function `{func}`: {source}")]
    Builtin {
        /// The calling function.
        func: String,
        /// The builtin's error (names the builtin).
        #[source]
        source: Box<BuiltinError>,
    },
    /// A builtin kept a view of the arena, which later kernels overwrite.
    #[error("function `{func}`: builtin `{builtin}` kept a view of the arena past its call (copy it with `Tensor::deep_copy`)")]
    ArenaViewRetained {
        /// The calling function.
        func: String,
        /// The builtin.
        builtin: String,
    },
    /// Allocating or copying a tensor failed.
    #[error("function `{func}`: {source}")]
    Tensor {
        /// The function.
        func: String,
        /// Why.
        #[source]
        source: TensorError,
    },
}
