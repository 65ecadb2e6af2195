//! The scalar expression type of tensor expressions and its leaf constructors.

use super::reduce::{ReduceAxis, ReduceKind};
use super::tensor::Tensor;
use crate::tir::{BinOp, Intrinsic, PrimCmp};
use crate::{DType, SymExpr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// An iteration variable: a spatial axis of a compute stage or a reduction axis.
/// Identified by a process-unique id; `name` is the prefix of its loop variable.
#[derive(Debug)]
pub(crate) struct Axis {
    pub(crate) id: u64,
    pub(crate) name: String,
    pub(crate) extent: SymExpr,
}

impl Axis {
    /// A new axis, distinct from every other.
    pub(crate) fn fresh(name: &str, extent: SymExpr) -> Arc<Axis> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Arc::new(Axis {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name: name.to_string(),
            extent,
        })
    }
}

/// The node of an expression; the expression's dtype is stored next to it.
#[derive(Debug)]
pub(crate) enum Node {
    Int(i64),
    Float(f64),
    Axis(Arc<Axis>),
    Dim(SymExpr),
    Read(Tensor, Vec<Expr>),
    Binary(BinOp, Expr, Expr),
    Cmp(PrimCmp, Expr, Expr),
    Not(Expr),
    Cast(Expr),
    Select(Expr, Expr, Expr),
    Call(Intrinsic, Vec<Expr>),
    Reduce(ReduceKind, Expr, Vec<ReduceAxis>),
}

/// A scalar expression of a tensor-expression body: immediates, axis variables,
/// symbolic dims, tensor reads, arithmetic, comparisons, casts, selects, intrinsics and
/// reductions. Cheap to clone (shared).
///
/// Operators `+ - * /` and unary `-` build arithmetic (`/` on integers is floor
/// division); an `f64` or `i64` operand becomes an immediate of the other side's dtype.
#[derive(Clone, Debug)]
pub struct Expr {
    node: Arc<Node>,
    dtype: DType,
}

impl Expr {
    pub(crate) fn new(node: Node, dtype: DType) -> Self {
        Expr {
            node: Arc::new(node),
            dtype,
        }
    }

    pub(crate) fn node(&self) -> &Node {
        &self.node
    }

    /// The type of the value.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// An `i64` immediate (the index type).
    pub fn int(value: i64) -> Self {
        Expr::new(Node::Int(value), DType::I64)
    }

    /// An integer (or bool) immediate of `dtype`.
    pub fn int_of(value: i64, dtype: DType) -> Self {
        Expr::new(Node::Int(value), dtype)
    }

    /// A float immediate of a float `dtype`.
    pub fn float(value: f64, dtype: DType) -> Self {
        Expr::new(Node::Float(value), dtype)
    }

    /// An `f32` immediate.
    pub fn f32(value: f64) -> Self {
        Expr::float(value, DType::F32)
    }

    /// A bool immediate.
    pub fn bool(value: bool) -> Self {
        Expr::int_of(i64::from(value), DType::Bool)
    }

    /// `+inf` of a float `dtype`.
    pub fn inf(dtype: DType) -> Self {
        Expr::float(f64::INFINITY, dtype)
    }

    /// `-inf` of a float `dtype`.
    pub fn neg_inf(dtype: DType) -> Self {
        Expr::float(f64::NEG_INFINITY, dtype)
    }

    /// `value` as an immediate of any `dtype`: a float for float types, truncated toward
    /// zero for integer types, `value != 0` for bool.
    pub fn constant(value: f64, dtype: DType) -> Self {
        match dtype {
            d if d.is_float() => Expr::float(value, d),
            DType::Bool => Expr::bool(value != 0.0),
            d => Expr::int_of(value as i64, d),
        }
    }

    /// The value if this is an integer immediate.
    pub fn as_int(&self) -> Option<i64> {
        match self.node() {
            Node::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// `tensor[indices]`.
    pub(crate) fn read(tensor: &Tensor, indices: &[Expr]) -> Self {
        Expr::new(Node::Read(tensor.clone(), indices.to_vec()), tensor.dtype())
    }

    /// The operands of this expression (indices of a read, the body of a reduction).
    pub(crate) fn children(&self) -> Vec<&Expr> {
        match self.node() {
            Node::Int(_) | Node::Float(_) | Node::Axis(_) | Node::Dim(_) => Vec::new(),
            Node::Read(_, items) | Node::Call(_, items) => items.iter().collect(),
            Node::Binary(_, a, b) | Node::Cmp(_, a, b) => vec![a, b],
            Node::Not(a) | Node::Cast(a) | Node::Reduce(_, a, _) => vec![a],
            Node::Select(c, a, b) => vec![c, a, b],
        }
    }

    pub(crate) fn axis(axis: &Arc<Axis>) -> Self {
        Expr::new(Node::Axis(axis.clone()), DType::I64)
    }
}

impl From<&SymExpr> for Expr {
    /// The `i64` value of a symbolic expression over the dims (an immediate when constant).
    fn from(dim: &SymExpr) -> Self {
        match dim.as_const() {
            Some(v) => Expr::int(v),
            None => Expr::new(Node::Dim(dim.clone()), DType::I64),
        }
    }
}

impl From<SymExpr> for Expr {
    fn from(dim: SymExpr) -> Self {
        Expr::from(&dim)
    }
}

impl From<i64> for Expr {
    fn from(value: i64) -> Self {
        Expr::int(value)
    }
}

impl From<f64> for Expr {
    fn from(value: f64) -> Self {
        Expr::f32(value)
    }
}

impl From<bool> for Expr {
    fn from(value: bool) -> Self {
        Expr::bool(value)
    }
}

impl From<&ReduceAxis> for Expr {
    fn from(axis: &ReduceAxis) -> Self {
        axis.var()
    }
}

impl From<&Expr> for Expr {
    fn from(expr: &Expr) -> Self {
        expr.clone()
    }
}
