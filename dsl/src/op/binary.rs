//! Elementwise binary ops with numpy broadcasting, and `where`.

use super::broadcast::broadcast;
use super::ctx::InferCtx;
use super::{call, InferError, OpDef};
use crate::{Attrs, DType, Expr, StructInfo};

macro_rules! binary_ops {
    ($($(#[$doc:meta])* $name:ident;)*) => {
        /// The binary ops and `where`.
        pub(super) const OPS: &[OpDef] = &[
            $(OpDef { name: stringify!($name), args: &["lhs", "rhs"], attrs: &[], infer: infer_binary },)*
            OpDef { name: "where", args: &["cond", "lhs", "rhs"], attrs: &[], infer: infer_where },
        ];

        $(
            $(#[$doc])*
            pub fn $name(a: &Expr, b: &Expr) -> Result<Expr, InferError> {
                call(stringify!($name), vec![a.clone(), b.clone()], Attrs::new())
            }
        )*
    };
}

binary_ops! {
    /// `a + b`, elementwise with broadcasting.
    add;
    /// `a - b`, elementwise with broadcasting.
    subtract;
    /// `a * b`, elementwise with broadcasting.
    multiply;
    /// `a / b`, elementwise with broadcasting.
    divide;
    /// The larger of `a` and `b`, elementwise with broadcasting.
    maximum;
    /// The smaller of `a` and `b`, elementwise with broadcasting.
    minimum;
}

/// Both operands of one dtype; the shape is the broadcast of theirs.
fn infer_binary(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (a, b) = (ctx.tensor(0)?, ctx.tensor(1)?);
    let dtype = ctx.same_dtype(&a, &b)?;
    Ok(StructInfo::tensor(
        broadcast(ctx.op(), &[&a, &b], 0)?,
        dtype,
    ))
}

/// A bool condition and two branches of one dtype, all three broadcast together.
fn infer_where(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (cond, a, b) = (ctx.tensor(0)?, ctx.tensor(1)?, ctx.tensor(2)?);
    ctx.check_dtype(cond.arg.clone(), cond.dtype, |d| d == DType::Bool, "bool")?;
    let dtype = ctx.same_dtype(&a, &b)?;
    Ok(StructInfo::tensor(
        broadcast(ctx.op(), &[&cond, &a, &b], 0)?,
        dtype,
    ))
}

/// `a` where `cond` holds, else `b`, elementwise with broadcasting.
pub fn r#where(cond: &Expr, a: &Expr, b: &Expr) -> Result<Expr, InferError> {
    call(
        "where",
        vec![cond.clone(), a.clone(), b.clone()],
        Attrs::new(),
    )
}
