//! Errors of op struct-info inference: each names the op, the argument or attribute
//! involved, and the shapes or dtypes that disagree.

use super::attr::AttrKind;
use crate::{AttrValue, DType, StructInfo, SymExpr};
use std::fmt;

/// One argument of an op call: its position and its role (`lhs`, `x`, `tensors[1]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgRef {
    /// Position in the call's argument list.
    pub index: usize,
    /// What the argument is for; printed in messages.
    pub role: Box<str>,
}

impl fmt::Display for ArgRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.role)
    }
}

/// A shape as printed in messages: `(1, n, 64)`, `(n,)`, `()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dims(pub Box<[SymExpr]>);

impl From<&[SymExpr]> for Dims {
    fn from(dims: &[SymExpr]) -> Self {
        Dims(dims.into())
    }
}

impl fmt::Display for Dims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|d| d.to_string()).collect();
        let trailing = if parts.len() == 1 { "," } else { "" };
        write!(f, "({}{trailing})", parts.join(", "))
    }
}

/// Why an op call's struct info cannot be inferred.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum InferError {
    /// No op of this name is registered.
    #[error("unknown op `{op}`")]
    UnknownOp {
        /// The name asked for.
        op: String,
    },
    /// The call has the wrong number of arguments.
    #[error("{op}: expected {expected} argument(s) ({roles}), got {got}")]
    ArgCount {
        /// The op.
        op: &'static str,
        /// How many it takes.
        expected: usize,
        /// Their roles, comma-separated.
        roles: String,
        /// How many were given.
        got: usize,
    },
    /// An argument is not the kind of value the op takes (not a tensor, not a shape, ...).
    #[error("{op}: argument {} ({}) must be {expected}, got {got}", arg.index, arg.role)]
    ArgKind {
        /// The op.
        op: &'static str,
        /// The argument.
        arg: ArgRef,
        /// What it must be (`a tensor of known shape`, `a shape value`).
        expected: &'static str,
        /// What it is.
        got: StructInfo,
    },
    /// An argument's value is unusable (a negative dim, an empty tuple).
    #[error("{op}: invalid {arg}: {reason}")]
    InvalidArg {
        /// The op.
        op: &'static str,
        /// The argument.
        arg: ArgRef,
        /// What is wrong.
        reason: String,
    },
    /// Two arguments must share a dtype and do not.
    #[error("{op}: dtypes differ: {lhs} is {lhs_dtype}, {rhs} is {rhs_dtype}")]
    DTypeMismatch {
        /// The op.
        op: &'static str,
        /// The first argument.
        lhs: ArgRef,
        /// Its dtype.
        lhs_dtype: DType,
        /// The second argument.
        rhs: ArgRef,
        /// Its dtype.
        rhs_dtype: DType,
    },
    /// An argument's dtype is not one the op accepts.
    #[error("{op}: {arg} has dtype {dtype}, expected {expected}")]
    DTypeNotAllowed {
        /// The op.
        op: &'static str,
        /// The argument.
        arg: ArgRef,
        /// Its dtype.
        dtype: DType,
        /// What is accepted (`a float dtype`, `bool`).
        expected: &'static str,
    },
    /// Two shapes do not broadcast.
    #[error(
        "{op}: cannot broadcast {lhs} {lhs_shape} with {rhs} {rhs_shape}: dims {lhs_dim} and {rhs_dim} differ"
    )]
    Broadcast {
        /// The op.
        op: &'static str,
        /// The first argument.
        lhs: ArgRef,
        /// Its shape.
        lhs_shape: Dims,
        /// The dim of `lhs` that conflicts.
        lhs_dim: SymExpr,
        /// The second argument.
        rhs: ArgRef,
        /// Its shape.
        rhs_shape: Dims,
        /// The dim of `rhs` that conflicts.
        rhs_dim: SymExpr,
    },
    /// The reduction dims of a matmul differ.
    #[error(
        "{op}: reduction dims differ: {lhs} {lhs_shape} has K = {lhs_k}, {rhs} {rhs_shape} has K = {rhs_k}"
    )]
    MatmulReduction {
        /// The op.
        op: &'static str,
        /// The left operand.
        lhs: ArgRef,
        /// Its shape.
        lhs_shape: Dims,
        /// Its reduction dim.
        lhs_k: SymExpr,
        /// The right operand.
        rhs: ArgRef,
        /// Its shape.
        rhs_shape: Dims,
        /// Its reduction dim.
        rhs_k: SymExpr,
    },
    /// An argument has too few dims.
    #[error("{op}: {arg} {shape} has rank {}, expected at least {min}", shape.0.len())]
    RankTooLow {
        /// The op.
        op: &'static str,
        /// The argument.
        arg: ArgRef,
        /// Its shape.
        shape: Dims,
        /// The smallest rank accepted.
        min: usize,
    },
    /// Two shapes that must agree (in rank or in some dims) do not.
    #[error("{op}: {what}: {lhs} {lhs_shape} vs {rhs} {rhs_shape}")]
    ShapeMismatch {
        /// The op.
        op: &'static str,
        /// What must agree (`ranks differ`, `dims off axis 1 differ`).
        what: Box<str>,
        /// The first argument.
        lhs: ArgRef,
        /// Its shape.
        lhs_shape: Dims,
        /// The second argument.
        rhs: ArgRef,
        /// Its shape.
        rhs_shape: Dims,
    },
    /// An axis attribute lies outside `[-ndim, ndim)`.
    #[error("{op}: axis {axis} in `{attr}` is out of range for rank {ndim}")]
    AxisOutOfRange {
        /// The op.
        op: &'static str,
        /// The attribute holding the axis.
        attr: &'static str,
        /// The axis as given.
        axis: i64,
        /// The rank it indexes.
        ndim: usize,
    },
    /// An axis appears twice (after normalization) in an axes attribute.
    #[error("{op}: axis {axis} appears more than once in `{attr}`")]
    DuplicateAxis {
        /// The op.
        op: &'static str,
        /// The attribute.
        attr: &'static str,
        /// The repeated axis (normalized).
        axis: usize,
    },
    /// The call has an attribute the op does not take.
    #[error("{op}: unknown attribute `{attr}` (expected one of: {expected})")]
    UnknownAttr {
        /// The op.
        op: &'static str,
        /// The attribute given.
        attr: String,
        /// The op's attribute names, comma-separated (`none` when it takes none).
        expected: String,
    },
    /// An attribute has the wrong kind of value.
    #[error("{op}: attribute `{attr}` must be {expected}, got {got:?}")]
    AttrKind {
        /// The op.
        op: &'static str,
        /// The attribute.
        attr: &'static str,
        /// The kind it must have.
        expected: AttrKind,
        /// The value given.
        got: AttrValue,
    },
    /// A required attribute is missing.
    #[error("{op}: missing required attribute `{attr}`")]
    MissingAttr {
        /// The op.
        op: &'static str,
        /// The attribute.
        attr: &'static str,
    },
    /// An attribute's value is of the right kind but unusable.
    #[error("{op}: invalid attribute `{attr}`: {reason}")]
    InvalidAttr {
        /// The op.
        op: &'static str,
        /// The attribute.
        attr: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// `reshape` to a shape of a different size.
    #[error("{op}: cannot reshape {from} (size {from_size}) to {to} (size {to_size})")]
    ReshapeSize {
        /// The op.
        op: &'static str,
        /// The input shape.
        from: Dims,
        /// Its size.
        from_size: SymExpr,
        /// The requested shape.
        to: Dims,
        /// Its size.
        to_size: SymExpr,
    },
    /// `reshape`'s `-1` dim cannot be proven to divide exactly.
    #[error("{op}: cannot infer the -1 dim of {to} from {from}: size {from_size} is not provably a multiple of {known}")]
    ReshapeInfer {
        /// The op.
        op: &'static str,
        /// The input shape.
        from: Dims,
        /// Its size.
        from_size: SymExpr,
        /// The requested shape.
        to: Dims,
        /// The product of the requested dims other than `-1`.
        known: SymExpr,
    },
    /// `split` into sections that do not divide the axis.
    #[error("{op}: {arg} {shape} has {dim} on axis {axis}, not provably divisible into {sections} sections")]
    SplitNotDivisible {
        /// The op.
        op: &'static str,
        /// The argument.
        arg: ArgRef,
        /// Its shape.
        shape: Dims,
        /// The split axis (normalized).
        axis: usize,
        /// The dim on that axis.
        dim: SymExpr,
        /// The number of sections asked for.
        sections: i64,
    },
    /// `squeeze` of a dim that is not provably 1.
    #[error("{op}: cannot squeeze axis {axis} of {arg} {shape}: dim {dim} is not provably 1")]
    SqueezeNotOne {
        /// The op.
        op: &'static str,
        /// The argument.
        arg: ArgRef,
        /// Its shape.
        shape: Dims,
        /// The axis (normalized).
        axis: usize,
        /// The dim on that axis.
        dim: SymExpr,
    },
}
