//! `matmul`: `[..., M, K] x [..., K, N] -> [..., M, N]` with broadcast batch dims; a rank-1
//! operand is a vector, as in numpy (its M or N dim is dropped from the result). f32
//! activations times f16 weights compute in f32.

use super::broadcast::broadcast;
use super::ctx::{InferCtx, Tensor};
use super::{call, InferError, OpDef};
use crate::{Attrs, Expr, StructInfo, SymExpr};

/// The matmul op.
pub(super) const OPS: &[OpDef] = &[OpDef {
    name: "matmul",
    args: &["lhs", "rhs"],
    attrs: &[],
    infer: infer_matmul,
}];

/// `t`'s dim `from_end` places before its last (0 = the last), if it has one.
fn dim_from_end<'a>(t: &Tensor<'a>, from_end: usize) -> Option<&'a SymExpr> {
    t.rank()
        .checked_sub(from_end + 1)
        .and_then(|i| t.dims.get(i))
}

/// The reduction dim: the last of `lhs`; the second to last of `rhs` (or its only one).
fn reduction_dim<'a>(
    ctx: &InferCtx<'_>,
    t: &Tensor<'a>,
    is_rhs: bool,
) -> Result<&'a SymExpr, InferError> {
    let from_end = usize::from(is_rhs && t.rank() >= 2);
    dim_from_end(t, from_end).ok_or_else(|| InferError::RankTooLow {
        op: ctx.op(),
        arg: t.arg.clone(),
        shape: t.shape(),
        min: 1,
    })
}

fn infer_matmul(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (a, b) = (ctx.tensor(0)?, ctx.tensor(1)?);
    let (a_k, b_k) = (
        reduction_dim(ctx, &a, false)?,
        reduction_dim(ctx, &b, true)?,
    );
    let dtype = ctx.weighted_dtype(&a, &b)?;
    if !a_k.prove_equal(b_k) {
        return Err(InferError::MatmulReduction {
            op: ctx.op(),
            lhs: a.arg.clone(),
            lhs_shape: a.shape(),
            lhs_k: a_k.clone(),
            rhs: b.arg.clone(),
            rhs_shape: b.shape(),
            rhs_k: b_k.clone(),
        });
    }
    let mut shape = broadcast(ctx.op(), &[&a, &b], 2)?;
    let rows = (a.rank() >= 2).then(|| dim_from_end(&a, 1)).flatten();
    let cols = (b.rank() >= 2).then(|| dim_from_end(&b, 0)).flatten();
    shape.extend(rows.into_iter().chain(cols).cloned());
    Ok(StructInfo::tensor(shape, dtype))
}

/// The matrix product `a @ b` (numpy semantics, batch dims broadcast).
pub fn matmul(a: &Expr, b: &Expr) -> Result<Expr, InferError> {
    call("matmul", vec![a.clone(), b.clone()], Attrs::new())
}
