//! Reduction axes and the commutative reductions `sum`, `max`, `min`.

use super::expr::{Axis, Expr, Node};
use crate::SymExpr;
use std::sync::Arc;

/// How a reduction combines values; the identity is 0, `-inf` (or the dtype's minimum),
/// `+inf` (or the dtype's maximum).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    /// Addition.
    Sum,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
}

impl ReduceKind {
    /// The name used in messages (`sum`, `max`, `min`).
    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "sum",
            ReduceKind::Max => "max",
            ReduceKind::Min => "min",
        }
    }
}

/// An axis a reduction iterates over, `0..extent`. Cheap to clone; usable in several
/// reductions (each gets its own loop).
#[derive(Clone, Debug)]
pub struct ReduceAxis(pub(crate) Arc<Axis>);

impl ReduceAxis {
    /// The axis's index value inside the reduction body.
    pub fn var(&self) -> Expr {
        Expr::axis(&self.0)
    }

    /// The trip count.
    pub fn extent(&self) -> &SymExpr {
        &self.0.extent
    }

    /// The name (the prefix of its loop variable).
    pub fn name(&self) -> &str {
        &self.0.name
    }
}

/// A new reduction axis over `0..extent`.
pub fn reduce_axis(name: &str, extent: SymExpr) -> ReduceAxis {
    ReduceAxis(Axis::fresh(name, extent))
}

/// `kind`-reduction of `body` over `axes`; the result has `body`'s dtype.
pub fn reduce(kind: ReduceKind, body: Expr, axes: &[ReduceAxis]) -> Expr {
    let dtype = body.dtype();
    Expr::new(Node::Reduce(kind, body, axes.to_vec()), dtype)
}

/// The sum of `body` over `axes` (identity 0).
pub fn sum(body: Expr, axes: &[ReduceAxis]) -> Expr {
    reduce(ReduceKind::Sum, body, axes)
}

/// The maximum of `body` over `axes` (identity `-inf`).
pub fn max(body: Expr, axes: &[ReduceAxis]) -> Expr {
    reduce(ReduceKind::Max, body, axes)
}

/// The minimum of `body` over `axes` (identity `+inf`).
pub fn min(body: Expr, axes: &[ReduceAxis]) -> Expr {
    reduce(ReduceKind::Min, body, axes)
}
