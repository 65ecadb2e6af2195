//! Reductions over axes: `sum`, `max`, `mean` (with `keepdims`), and the axis bookkeeping
//! that softmax and the norms share.

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{compute_dtype, load, size_of, Kernel, OpPattern};
use crate::te::{self, Expr, ReduceAxis};
use crate::SymExpr;

/// The ops of this family.
pub(super) const OPS: &[&str] = &["sum", "max", "mean"];

/// Some axes of a tensor reduced by loops over [`ReduceAxis`]es.
pub(super) struct Reduction {
    /// The reduced axes, ascending.
    axes: Vec<usize>,
    /// One reduction axis per reduced axis.
    vars: Vec<ReduceAxis>,
    /// The tensor's shape.
    shape: Vec<SymExpr>,
}

impl Reduction {
    /// A reduction of `axes` (normalized) of a tensor of `shape`.
    pub(super) fn new(shape: &[SymExpr], mut axes: Vec<usize>) -> Self {
        axes.sort_unstable();
        let vars = axes
            .iter()
            .map(|&a| te::reduce_axis("k", shape[a].clone()))
            .collect();
        Reduction {
            axes,
            vars,
            shape: shape.to_vec(),
        }
    }

    /// The reduction axes.
    pub(super) fn vars(&self) -> &[ReduceAxis] {
        &self.vars
    }

    /// The shape without the reduced dims.
    pub(super) fn kept_shape(&self) -> Vec<SymExpr> {
        self.kept(&self.shape)
    }

    /// The entries of a full-rank list at the kept dims.
    pub(super) fn kept<T: Clone>(&self, full: &[T]) -> Vec<T> {
        (0..full.len())
            .filter(|d| !self.axes.contains(d))
            .map(|d| full[d].clone())
            .collect()
    }

    /// The entries of a full-rank list at the reduced dims.
    pub(super) fn reduced<T: Clone>(&self, full: &[T]) -> Vec<T> {
        self.axes.iter().map(|&d| full[d].clone()).collect()
    }

    /// The tensor's index from the kept dims' indices and the reduction variables.
    pub(super) fn index(&self, kept: &[Expr]) -> Vec<Expr> {
        let mut kept = kept.iter();
        let mut reduced = self.vars.iter();
        (0..self.shape.len())
            .map(|d| {
                let next = if self.axes.contains(&d) {
                    reduced.next().map(ReduceAxis::var)
                } else {
                    kept.next().cloned()
                };
                next.unwrap_or_else(|| Expr::int(0))
            })
            .collect()
    }

    /// The number of reduced elements, as a value of the compute dtype `like`.
    pub(super) fn count(&self, like: crate::DType) -> Expr {
        size_of(&self.reduced(&self.shape)).cast(like)
    }
}

/// `out[kept] = reduce_k x[kept, k]` (divided by the count for `mean`).
pub(super) fn legalize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["x"])?;
    let x = &inputs[0];
    let axes = match call.ints_attr("axis")? {
        Some(axes) => call.axes("axis", &axes, x.ndim())?,
        None => (0..x.ndim()).collect(),
    };
    let keepdims = call.bool_attr("keepdims", false)?;
    let reduction = Reduction::new(x.shape(), axes);
    let expected_rank = if keepdims {
        x.ndim()
    } else {
        reduction.kept_shape().len()
    };
    let (shape, dtype) = call.output_of_rank(expected_rank)?;
    let compute = compute_dtype(dtype);
    let out = te::compute("out", shape, |i| {
        let kept = if keepdims {
            reduction.kept(i)
        } else {
            i.to_vec()
        };
        let value = load(x, &reduction.index(&kept));
        let total = match call.op {
            "max" => te::max(value, reduction.vars()),
            _ => te::sum(value, reduction.vars()),
        };
        match call.op {
            "mean" => total / reduction.count(compute),
            _ => total,
        }
        .cast(dtype)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Reduction))
}
