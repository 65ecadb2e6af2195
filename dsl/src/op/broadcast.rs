//! Numpy broadcasting of symbolic shapes: shapes align at their last dim; a dim
//! broadcasts when it is provably 1, and two dims agree when they are provably equal.

use super::ctx::Tensor;
use super::error::{ArgRef, Dims, InferError};
use crate::SymExpr;

/// Whether `dim` is provably 1.
pub(crate) fn is_one(dim: &SymExpr) -> bool {
    dim.prove_equal(&SymExpr::int(1))
}

/// The dim of `dims` at output position `pos` of a broadcast to rank `rank`, if `dims`
/// reaches that far left.
fn aligned(dims: &[SymExpr], pos: usize, rank: usize) -> Option<&SymExpr> {
    (pos + dims.len()).checked_sub(rank).map(|i| &dims[i])
}

/// Broadcasts the leading dims of each operand: all of a tensor's dims but the last
/// `skip_tail` (matmul broadcasts only its batch dims). Errors name the first operand
/// pair that conflicts.
pub(crate) fn broadcast(
    op: &'static str,
    operands: &[&Tensor],
    skip_tail: usize,
) -> Result<Vec<SymExpr>, InferError> {
    let leading: Vec<&[SymExpr]> = operands
        .iter()
        .map(|t| &t.dims[..t.rank().saturating_sub(skip_tail)])
        .collect();
    let rank = leading.iter().map(|d| d.len()).max().unwrap_or(0);
    (0..rank)
        .map(|pos| {
            let dims: Vec<(usize, &SymExpr)> = leading
                .iter()
                .enumerate()
                .filter_map(|(i, d)| Some((i, aligned(d, pos, rank)?)))
                .collect();
            merge_dims(op, operands, &dims)
        })
        .collect()
}

/// The broadcast of one output position's dims (`(operand, dim)` pairs, at least one).
fn merge_dims(
    op: &'static str,
    operands: &[&Tensor],
    dims: &[(usize, &SymExpr)],
) -> Result<SymExpr, InferError> {
    let Some(&(first, chosen)) = dims.iter().find(|(_, d)| !is_one(d)).or(dims.first()) else {
        return Ok(SymExpr::int(1));
    };
    for &(other, dim) in dims {
        if !is_one(dim) && !dim.prove_equal(chosen) {
            let (a, b) = (operands[first], operands[other]);
            return Err(conflict(
                op,
                (&a.arg, a.dims, chosen),
                (&b.arg, b.dims, dim),
            ));
        }
    }
    Ok(chosen.clone())
}

fn conflict(
    op: &'static str,
    (lhs, lhs_shape, lhs_dim): (&ArgRef, &[SymExpr], &SymExpr),
    (rhs, rhs_shape, rhs_dim): (&ArgRef, &[SymExpr], &SymExpr),
) -> InferError {
    InferError::Broadcast {
        op,
        lhs: lhs.clone(),
        lhs_shape: Dims::from(lhs_shape),
        lhs_dim: lhs_dim.clone(),
        rhs: rhs.clone(),
        rhs_shape: Dims::from(rhs_shape),
        rhs_dim: rhs_dim.clone(),
    }
}

/// Checks that `x` broadcasts to `target` (argument `target_arg`): no more dims, and each
/// of its dims is provably 1 or provably equal to the target's.
pub(crate) fn check_broadcast_to(
    op: &'static str,
    x: &Tensor,
    target: &[SymExpr],
    target_arg: &ArgRef,
) -> Result<(), InferError> {
    let rank = target.len();
    if x.rank() > rank {
        return Err(InferError::ShapeMismatch {
            op,
            what: "the target has fewer dims".into(),
            lhs: x.arg.clone(),
            lhs_shape: x.shape(),
            rhs: target_arg.clone(),
            rhs_shape: Dims::from(target),
        });
    }
    for (pos, want) in target.iter().enumerate() {
        match aligned(x.dims, pos, rank) {
            Some(have) if !is_one(have) && !have.prove_equal(want) => {
                return Err(conflict(
                    op,
                    (&x.arg, x.dims, have),
                    (target_arg, target, want),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}
