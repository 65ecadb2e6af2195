//! Tensors: placeholders (inputs) and compute stages.

use super::expr::{Axis, Expr};
use crate::{DType, SymExpr};
use std::sync::Arc;

/// How a tensor gets its values.
#[derive(Debug)]
pub(crate) enum TensorOp {
    /// Given by the caller.
    Placeholder,
    /// `tensor[axes] = body`.
    Compute { axes: Vec<Arc<Axis>>, body: Expr },
}

#[derive(Debug)]
pub(crate) struct TensorNode {
    pub(crate) name: String,
    pub(crate) shape: Vec<SymExpr>,
    pub(crate) dtype: DType,
    pub(crate) op: TensorOp,
}

/// A tensor of a tensor-expression graph. Cheap to clone; identity is the node (two
/// clones are the same tensor, two tensors with one name are not).
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<TensorNode>);

impl Tensor {
    /// The name (the buffer name after lowering).
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The shape.
    pub fn shape(&self) -> &[SymExpr] {
        &self.0.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// The rank.
    pub fn ndim(&self) -> usize {
        self.0.shape.len()
    }

    /// Whether this is a placeholder (not computed).
    pub fn is_placeholder(&self) -> bool {
        matches!(self.0.op, TensorOp::Placeholder)
    }

    /// The element `self[indices]` (one `i64` index per dim; checked when lowering).
    pub fn at(&self, indices: &[Expr]) -> Expr {
        Expr::read(self, indices)
    }

    /// A key identifying this tensor (shared by its clones).
    pub(crate) fn key(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dims: Vec<String> = self.shape().iter().map(ToString::to_string).collect();
        write!(f, "{}[{}; {}]", self.name(), dims.join(", "), self.dtype())
    }
}

/// An input tensor.
pub fn placeholder(name: &str, shape: Vec<SymExpr>, dtype: DType) -> Tensor {
    Tensor(Arc::new(TensorNode {
        name: name.to_string(),
        shape,
        dtype,
        op: TensorOp::Placeholder,
    }))
}

/// The tensor `name[i0, i1, ...] = body(&[i0, i1, ...])` of `shape`; its dtype is the
/// body's.
pub fn compute(name: &str, shape: Vec<SymExpr>, body: impl FnOnce(&[Expr]) -> Expr) -> Tensor {
    let axes: Vec<Arc<Axis>> = shape.iter().map(|d| Axis::fresh("i", d.clone())).collect();
    let vars: Vec<Expr> = axes.iter().map(Expr::axis).collect();
    let body = body(&vars);
    Tensor(Arc::new(TensorNode {
        name: name.to_string(),
        shape,
        dtype: body.dtype(),
        op: TensorOp::Compute { axes, body },
    }))
}
