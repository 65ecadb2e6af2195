//! Why an op call could not be legalized.

use crate::te::TeError;
use crate::DType;

/// A legalization error; every variant names the op.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LegalizeError {
    /// The callee is a primitive function or a builtin, not an op.
    #[error("legalize: `{callee}` is not an op call")]
    NotAnOp {
        /// The callee.
        callee: String,
    },
    /// The op has no legalizer.
    #[error("legalize: no legalizer for op `{op}`")]
    NoLegalizer {
        /// The op.
        op: String,
    },
    /// An argument is missing.
    #[error("{op}: expected an argument at position {index}, the call has {count}")]
    MissingArg {
        /// The op.
        op: String,
        /// The argument position.
        index: usize,
        /// How many arguments the call has.
        count: usize,
    },
    /// An argument is not what the op needs (e.g. a tensor of unknown shape).
    #[error("{op}: argument {index} must be {expected}, got {got}")]
    BadArg {
        /// The op.
        op: String,
        /// The argument position.
        index: usize,
        /// What it must be.
        expected: String,
        /// Its struct info (or value).
        got: String,
    },
    /// The call's result struct info is not what the op produces.
    #[error("{op}: result must be {expected}, the call declares {got}")]
    BadOutput {
        /// The op.
        op: String,
        /// What it must be.
        expected: String,
        /// The declared struct info.
        got: String,
    },
    /// A required attribute is missing.
    #[error("{op}: missing attribute `{attr}`")]
    MissingAttr {
        /// The op.
        op: String,
        /// The attribute.
        attr: String,
    },
    /// An attribute has the wrong kind or an invalid value.
    #[error("{op}: attribute `{attr}` must be {expected}, got {got}")]
    BadAttr {
        /// The op.
        op: String,
        /// The attribute.
        attr: String,
        /// What it must be.
        expected: String,
        /// Its value.
        got: String,
    },
    /// An axis outside `-ndim..ndim`.
    #[error("{op}: axis {axis} is out of range for rank {ndim}")]
    AxisOutOfRange {
        /// The op.
        op: String,
        /// The axis as given.
        axis: i64,
        /// The rank it counts in.
        ndim: usize,
    },
    /// An argument's dtype the op does not compute on.
    #[error("{op}: argument {index} has dtype {dtype}, expected {expected}")]
    UnsupportedDtype {
        /// The op.
        op: String,
        /// The argument position.
        index: usize,
        /// Its dtype.
        dtype: DType,
        /// What the op accepts.
        expected: String,
    },
    /// Argument shapes that do not fit together.
    #[error("{op}: {detail}")]
    Shape {
        /// The op.
        op: String,
        /// The shapes involved.
        detail: String,
    },
    /// A fill value that is not a constant (it cannot be baked into the kernel).
    #[error("{op}: the fill value must be a constant, got {value}")]
    NonConstantFill {
        /// The op.
        op: String,
        /// The value given.
        value: String,
    },
    /// The tensor expression failed to lower (a legalizer bug, reported with context).
    #[error("{op}: {source}")]
    Lower {
        /// The op.
        op: String,
        /// The lowering error.
        source: Box<TeError>,
    },
}
