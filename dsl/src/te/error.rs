//! Why a tensor-expression graph could not be lowered.

use crate::DType;

/// A lowering error; `func` is the primitive function being built and `stage` the
/// compute tensor whose body is at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TeError {
    /// A placeholder is read but is not among the inputs.
    #[error("lowering `{func}`: tensor `{tensor}` is used but is not listed as an input")]
    UnlistedInput {
        /// The function.
        func: String,
        /// The placeholder.
        tensor: String,
    },
    /// An output is a placeholder, so nothing computes it.
    #[error("lowering `{func}`: output `{tensor}` is a placeholder, not a computed tensor")]
    OutputNotComputed {
        /// The function.
        func: String,
        /// The output.
        tensor: String,
    },
    /// Two parameters share a buffer name, or one tensor is passed twice.
    #[error("lowering `{func}`: parameter name `{name}` is used twice")]
    DuplicateParam {
        /// The function.
        func: String,
        /// The name.
        name: String,
    },
    /// The operands of an operation have different dtypes.
    #[error("lowering `{func}`, stage `{stage}`: `{op}` of {lhs} and {rhs}")]
    DtypeMismatch {
        /// The function.
        func: String,
        /// The stage.
        stage: String,
        /// The operation.
        op: String,
        /// The first operand's dtype.
        lhs: DType,
        /// The other operand's dtype.
        rhs: DType,
    },
    /// An operand has a dtype the operation does not accept.
    #[error("lowering `{func}`, stage `{stage}`: `{op}` needs {expected}, got {got}")]
    BadDtype {
        /// The function.
        func: String,
        /// The stage.
        stage: String,
        /// The operation.
        op: String,
        /// What it needs (e.g. "a bool").
        expected: String,
        /// The dtype it got.
        got: DType,
    },
    /// A tensor read with the wrong number of indices.
    #[error("lowering `{func}`, stage `{stage}`: `{tensor}` has rank {expected}, read with {got} indices")]
    ReadRank {
        /// The function.
        func: String,
        /// The stage.
        stage: String,
        /// The tensor read.
        tensor: String,
        /// Its rank.
        expected: usize,
        /// How many indices were given.
        got: usize,
    },
    /// A reduction axis used outside its reduction, or a foreign compute axis.
    #[error("lowering `{func}`, stage `{stage}`: axis `{axis}` is used outside its loop")]
    UnboundAxis {
        /// The function.
        func: String,
        /// The stage.
        stage: String,
        /// The axis name.
        axis: String,
    },
    /// Stages lowered under shared outer loops whose leading dims differ from the first
    /// output's.
    #[error("lowering `{func}`: stage `{stage}` does not start with the {rank} shared dims of the output")]
    SharedDims {
        /// The function.
        func: String,
        /// The stage.
        stage: String,
        /// How many leading dims are shared.
        rank: usize,
    },
    /// Under shared outer loops, an intermediate read at other leading indices than the
    /// reading stage's own (it only holds the current outer iteration's elements).
    #[error("lowering `{func}`, stage `{stage}`: `{tensor}` is read outside the current element of the shared loops")]
    SharedRead {
        /// The function.
        func: String,
        /// The stage.
        stage: String,
        /// The intermediate read.
        tensor: String,
    },
    /// A symbolic dim that no parameter's shape mentions (the kernel could not know it).
    #[error(
        "lowering `{func}`, stage `{stage}`: symbolic dim `{dim}` is not in any parameter's shape"
    )]
    UnboundDim {
        /// The function.
        func: String,
        /// The stage.
        stage: String,
        /// The dim.
        dim: String,
    },
    /// An intrinsic called with the wrong number of arguments.
    #[error(
        "lowering `{func}`, stage `{stage}`: `{intrinsic}` takes {expected} arguments, got {got}"
    )]
    IntrinsicArity {
        /// The function.
        func: String,
        /// The stage.
        stage: String,
        /// The intrinsic.
        intrinsic: String,
        /// Its arity.
        expected: usize,
        /// The number of arguments given.
        got: usize,
    },
}
